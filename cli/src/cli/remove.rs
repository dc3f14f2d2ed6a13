//! `--rm`: an input is deleted only once its own output is in place, synced to disk and
//! verified by reading it back, and only if the input is still the file that was read.

use super::output::FileId;
use super::{is_stdio, name};
use anyhow::{bail, Context, Result};
use std::fs::{self, File, Metadata};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// What `--rm` compares to know the input is the file that was read, unchanged: device,
/// inode, size and modification time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Snapshot {
    id: FileId,
    size: u64,
    mtime: (i64, i64),
}

impl Snapshot {
    /// The snapshot of the file `m` describes.
    pub fn of(m: &Metadata) -> Snapshot {
        Snapshot {
            id: FileId::of(m),
            size: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
        }
    }
}

/// `--rm` (`rm`) deletes a local input once its local output is read back: a remote input
/// cannot be deleted, nor a remote output read back from disk, so either is refused before
/// anything runs.
pub fn local_only(
    rm: bool,
    inputs: &[PathBuf],
    output: Option<&Path>,
) -> std::result::Result<(), String> {
    let remote = inputs.iter().map(PathBuf::as_path).chain(output);
    match remote.filter(|_| rm).find_map(super::url_of) {
        Some(url) => Err(format!(
            "--rm works on local files only: {url} is remote (remove it with the store's own tools)"
        )),
        None => Ok(()),
    }
}

/// `--rm` needs a file input to delete and a regular output file to read back.
pub fn check(input: &Path, dest: Option<&Path>) -> Result<()> {
    let Some(dest) = dest.filter(|_| !is_stdio(input)) else {
        bail!("--rm needs a file input and a file output (not stdin or stdout)");
    };
    if fs::metadata(dest).is_ok_and(|m| !m.is_file()) {
        bail!(
            "--rm needs a regular output file to read back; {} is not one",
            dest.display()
        );
    }
    Ok(())
}

/// The output file `dest` written as `id` from `input` (`meta`), all there is for `--rm` to
/// check; anything missing (an output that turned out not to be a regular file) keeps the
/// input.
pub fn written<'a>(
    input: &Path,
    dest: Option<&'a Path>,
    id: Option<FileId>,
    meta: Option<&'a Metadata>,
) -> Result<(&'a Path, FileId, &'a Metadata)> {
    match (dest, id, meta) {
        (Some(dest), Some(id), Some(meta)) => Ok((dest, id, meta)),
        _ => bail!(
            "the output is not a regular file to read back; keeping {}",
            name(input)
        ),
    }
}

/// Opens the output `dest` just written, checking it is that file (`id`), for verification.
/// Its cached pages are dropped first (they are synced), so the check reads the disk.
pub fn reopen(dest: &Path, id: FileId) -> Result<File> {
    let f = File::open(dest).with_context(|| format!("cannot open {}", dest.display()))?;
    let m = f
        .metadata()
        .with_context(|| format!("cannot read {}", dest.display()))?;
    if FileId::of(&m) != id {
        bail!("{} was replaced after it was written", dest.display());
    }
    // SAFETY: advice on an open descriptor; failing to drop the cache only means the check
    // reads the page cache.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    Ok(f)
}

/// Deletes `input` once its output `dest` (`id`) `verified`, checking first that `dest` is
/// still that file and that `input` is still `read` (the file opened, of which `consumed`
/// bytes were read). Anything else keeps the input and fails.
pub fn remove_input(
    input: &Path,
    read: Snapshot,
    consumed: u64,
    dest: &Path,
    id: FileId,
    verified: bool,
) -> Result<()> {
    let keeping = || format!("keeping {}", name(input));
    if !verified {
        bail!("{} does not verify; {}", dest.display(), keeping());
    }
    let out = fs::metadata(dest).map(|m| FileId::of(&m)).ok();
    if out != Some(id) {
        bail!(
            "{} was replaced after it was verified; {}",
            dest.display(),
            keeping()
        );
    }
    let now = fs::metadata(input).map(|m| Snapshot::of(&m)).ok();
    if now != Some(read) || consumed != read.size {
        bail!(
            "{} changed while it was being read (file, size or modification time); {}",
            name(input),
            keeping()
        );
    }
    fs::remove_file(input).with_context(|| format!("cannot remove {}", input.display()))
}
