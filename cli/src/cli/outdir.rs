//! `-o OUT` as a folder, one rule for every command that writes files: OUT is a folder the
//! outputs go in (created if missing) when it ends in '/' or is an existing folder, and always
//! for a run over several inputs or a folder (mirrored in it); otherwise OUT is the output file.

use super::is_stdio;
use anyhow::{bail, Context, Result};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Whether `-o out`, given with one input file, names the folder to write its output in.
pub fn is_folder(out: &Path) -> bool {
    !is_stdio(out) && (out.as_os_str().as_bytes().ends_with(b"/") || out.is_dir())
}

/// The path in the folder `dir` (created if missing) for the output of `input`: the file name
/// of its default output, which `default` gives.
pub fn inside(
    dir: &Path,
    input: &Path,
    default: impl Fn(&Path) -> Result<PathBuf>,
) -> Result<PathBuf> {
    if is_stdio(input) {
        bail!(
            "-o {} is a folder, and stdin has no name for a file in it: give -o a file name",
            dir.display()
        );
    }
    let name = default(input)?;
    let Some(file) = name.file_name() else {
        bail!(
            "{} has no file name to write in -o {}",
            input.display(),
            dir.display()
        );
    };
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(dir.join(file))
}
