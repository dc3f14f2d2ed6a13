//! Folder runs never let two files meet: before anything is written, a run in which two
//! sources would be written to one path, or a file would be written over a file the run reads,
//! is refused with both sources named.

use crate::error::{Error, Result};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// `path` with its directory resolved (links, `..`) as far as it exists, and its last
/// component kept as it is: renaming a file over `path` replaces that entry, whatever it is.
fn resolved(path: &Path) -> PathBuf {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return path.to_path_buf();
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let mut resolved = match dir.canonicalize() {
        Ok(d) => d,
        Err(_) => resolved(dir),
    };
    resolved.push(name);
    resolved
}

/// Checks the `(source, destination)` pairs of a folder run: [`Error::Folder`] naming both
/// sources when two meet.
pub fn check<'a>(jobs: impl Iterator<Item = (&'a Path, &'a Path)>) -> Result<()> {
    let jobs: Vec<(&Path, &Path, PathBuf)> = jobs.map(|(s, d)| (s, d, resolved(d))).collect();
    let sources: HashMap<PathBuf, &Path> = jobs.iter().map(|(s, _, _)| (resolved(s), *s)).collect();
    let mut targets: HashMap<&Path, &Path> = HashMap::new();
    for (src, dest, at) in &jobs {
        if let Some(other) = targets.insert(at, src) {
            return Err(Error::Folder(format!(
                "{} and {} would both be written to {}; nothing was written",
                other.display(),
                src.display(),
                dest.display()
            )));
        }
        if let Some(read) = sources.get(at) {
            let what = match read == src {
                true => "itself".to_string(),
                false => format!("{}, which this run reads", read.display()),
            };
            return Err(Error::Folder(format!(
                "{} would be written to {} over {what}; nothing was written",
                src.display(),
                dest.display()
            )));
        }
    }
    Ok(())
}
