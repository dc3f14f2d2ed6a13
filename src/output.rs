//! Writing an output file without losing data: a filesystem helper, apart from the codec, that
//! the `sc` command line and the Python package both write their outputs with.
//!
//! [`OutputFile::create`] decides how a destination is written:
//!
//! - a regular file (or none yet) through a temporary file beside it, renamed over the
//!   destination by [`OutputFile::commit`] only once everything was written, so that a failed
//!   or interrupted run leaves the destination as it was. The temporary file gets the mode a
//!   new file gets (0666 less the umask) unless [`OutputFile::set_permissions`] says otherwise;
//! - an existing FIFO or character device, and a block device when replacing is allowed, in
//!   place: renaming over one would replace the node, not feed it;
//! - a symbolic link through its target: the file the link names is replaced, the link kept.
//!   A link to nothing is refused rather than followed.
//!
//! Temporary files are named `.NAME.PID.HOST.RANDOM.sc-tmp` (`NAME` cut to 200 bytes, `PID`
//! the writing process, `HOST` a tag of the machine and PID namespace). A process killed
//! before it could remove its own (SIGKILL, SIGBUS, an allocation failure) leaves it behind;
//! the first [`OutputFile::create`] of a later process in that folder removes such files whose
//! tag is its own and whose process no longer runs (on Linux, where `/proc` tells). Files of
//! other machines sharing the folder, and of processes still running, are left alone.

use std::collections::HashSet;
use std::fmt;
use std::fs::{self, File, FileTimes, Metadata, OpenOptions, Permissions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};

/// Suffix of every temporary file.
const SUFFIX: &str = ".sc-tmp";

/// The longest destination name kept in a temporary file's name: the rest (pid, tag, random
/// part, suffix) must fit the 255 bytes file systems allow for a name.
const NAME_KEPT: usize = 200;

/// Temporary files not yet renamed or removed, for [`remove_unfinished`].
static PENDING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn pending() -> MutexGuard<'static, Vec<PathBuf>> {
    PENDING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Deletes the temporary file of every [`OutputFile`] not yet committed or dropped, for a
/// process about to exit on a signal. Commits wait forever afterwards, so that no output is
/// renamed into place once this ran.
pub fn remove_unfinished() {
    let paths = pending();
    for p in paths.iter() {
        let _ = fs::remove_file(p);
    }
    std::mem::forget(paths);
}

/// An output file being written; see the [module documentation](self). Dropped without
/// [`OutputFile::commit`], its temporary file is deleted and the destination left as it was.
///
/// Write errors name the destination (not the temporary file).
pub struct OutputFile {
    /// The destination as given.
    dest: PathBuf,
    target: Target,
}

enum Target {
    /// An existing FIFO or device, written in place.
    InPlace(File),
    /// A temporary file that replaces `path` (the destination, or the file its symbolic link
    /// names) on commit. It is `None` only inside [`OutputFile::commit`], which takes it and
    /// consumes the `OutputFile`: the `expect("uncommitted")` on it elsewhere cannot fail.
    Temp {
        tmp: Option<tempfile::NamedTempFile>,
        path: PathBuf,
        overwrite: bool,
    },
}

impl OutputFile {
    /// Opens `dest` for writing. Fails (before anything is written) where `dest` is a
    /// directory (`IsADirectory`), a symbolic link to nothing (`NotFound`), or an existing
    /// file or block device while `overwrite` is off (`AlreadyExists`). FIFOs and character
    /// devices are written in place whatever `overwrite` says.
    pub fn create(dest: impl AsRef<Path>, overwrite: bool) -> io::Result<OutputFile> {
        let dest = dest.as_ref();
        let path = match fs::metadata(dest) {
            Ok(m) if m.is_dir() => return Err(io::ErrorKind::IsADirectory.into()),
            Ok(m) if !m.is_file() => return OutputFile::open_in_place(dest, &m, overwrite),
            Ok(_) if !overwrite => return Err(io::ErrorKind::AlreadyExists.into()),
            Ok(_) => link_target(dest)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if fs::symlink_metadata(dest).is_ok() {
                    return Err(io::Error::new(
                        io::ErrorKind::NotFound,
                        "a symbolic link to a missing file (not written through)",
                    ));
                }
                dest.to_path_buf()
            }
            Err(e) => return Err(e),
        };
        let dir = parent(&path);
        sweep(dir);
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut cut = name.len().min(NAME_KEPT);
        while !name.is_char_boundary(cut) {
            cut -= 1;
        }
        let prefix = format!(".{}.{}.{}.", &name[..cut], std::process::id(), tag());
        let mut builder = tempfile::Builder::new();
        builder.prefix(&prefix).suffix(SUFFIX);
        #[cfg(unix)]
        builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
        let tmp = builder.tempfile_in(dir).map_err(without_path)?;
        pending().push(tmp.path().to_path_buf());
        Ok(OutputFile {
            dest: dest.to_path_buf(),
            target: Target::Temp {
                tmp: Some(tmp),
                path,
                overwrite,
            },
        })
    }

    /// Opens the existing FIFO or device `dest` (`m`) to write into it.
    fn open_in_place(dest: &Path, m: &Metadata, overwrite: bool) -> io::Result<OutputFile> {
        #[cfg(unix)]
        if !overwrite && std::os::unix::fs::FileTypeExt::is_block_device(&m.file_type()) {
            return Err(io::ErrorKind::AlreadyExists.into());
        }
        #[cfg(not(unix))]
        let _ = (m, overwrite);
        let f = OpenOptions::new().write(true).open(dest)?;
        Ok(OutputFile {
            dest: dest.to_path_buf(),
            target: Target::InPlace(f),
        })
    }

    /// The destination, as given to [`OutputFile::create`].
    pub fn path(&self) -> &Path {
        &self.dest
    }

    /// Whether the destination is written in place (a FIFO or a device) rather than replaced.
    pub fn in_place(&self) -> bool {
        matches!(self.target, Target::InPlace(_))
    }

    /// The file written to: the destination itself when [in place](OutputFile::in_place),
    /// else the temporary file.
    pub fn file(&self) -> &File {
        match &self.target {
            Target::InPlace(f) => f,
            // Only `commit` empties it, and it consumes the file (see `Target::Temp`).
            Target::Temp { tmp, .. } => tmp.as_ref().expect("uncommitted").as_file(),
        }
    }

    /// Gives the file these permission bits instead of the umask's (a temporary file only: a
    /// FIFO or device keeps its own).
    pub fn set_permissions(&self, permissions: Permissions) -> io::Result<()> {
        match self.in_place() {
            true => Ok(()),
            false => self.file().set_permissions(permissions),
        }
    }

    /// Gives the file these access and modification times (a temporary file only).
    pub fn set_times(&self, times: FileTimes) -> io::Result<()> {
        match self.in_place() {
            true => Ok(()),
            false => self.file().set_times(times),
        }
    }

    /// Renames the temporary file over the destination (without `overwrite`, only if nothing
    /// has appeared there meanwhile); with `durable`, the file is synced to disk before and
    /// its directory after. Returns the metadata of the file renamed into place (`None` for a
    /// destination written in place). Flush any buffer around the file first.
    pub fn commit(mut self, durable: bool) -> io::Result<Option<Metadata>> {
        let Target::Temp {
            tmp,
            path,
            overwrite,
        } = &mut self.target
        else {
            return Ok(None);
        };
        // Full until this call, which consumes the file: it runs once.
        let tmp = tmp.take().expect("uncommitted");
        if durable {
            tmp.as_file().sync_all()?;
        }
        let meta = tmp.as_file().metadata()?;
        let mut pending = pending();
        let name = tmp.path().to_path_buf();
        let result = match overwrite {
            true => tmp.persist(&*path).map(drop),
            false => tmp.persist_noclobber(&*path).map(drop),
        };
        pending.retain(|p| p != &name);
        drop(pending);
        result.map_err(|e| e.error)?;
        if durable {
            File::open(parent(path))?.sync_all()?;
        }
        Ok(Some(meta))
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        if let Target::Temp { tmp, .. } = &mut self.target {
            if let Some(t) = tmp.take() {
                let name = t.path().to_path_buf();
                drop(t);
                pending().retain(|p| p != &name);
            }
        }
    }
}

impl Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let r = match &mut self.target {
            Target::InPlace(f) => f.write(buf),
            // Only `commit` empties it, and it consumes the file (see `Target::Temp`).
            Target::Temp { tmp, .. } => tmp.as_mut().expect("uncommitted").as_file_mut().write(buf),
        };
        r.map_err(|e| writing(&self.dest, e))
    }

    fn flush(&mut self) -> io::Result<()> {
        let r = match &mut self.target {
            Target::InPlace(f) => f.flush(),
            // Only `commit` empties it, and it consumes the file (see `Target::Temp`).
            Target::Temp { tmp, .. } => tmp.as_mut().expect("uncommitted").as_file_mut().flush(),
        };
        r.map_err(|e| writing(&self.dest, e))
    }
}

/// A write error, naming the destination.
#[derive(Debug)]
struct Writing {
    dest: PathBuf,
    error: io::Error,
}

impl fmt::Display for Writing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "writing {}: {}", self.dest.display(), self.error)
    }
}

// The cause is part of the message: a `source` would print it twice in error chains.
impl std::error::Error for Writing {}

/// `e`, of the same kind, saying it happened writing `dest`.
fn writing(dest: &Path, e: io::Error) -> io::Error {
    if e.kind() == io::ErrorKind::Interrupted {
        return e;
    }
    io::Error::new(
        e.kind(),
        Writing {
            dest: dest.to_path_buf(),
            error: e,
        },
    )
}

/// The file `dest` names: itself, or the file its symbolic links lead to. The link is opened
/// for writing first, so that the kernel's rules for following links (`protected_symlinks`
/// in shared folders) decide as they would for any program writing through it.
fn link_target(dest: &Path) -> io::Result<PathBuf> {
    if !fs::symlink_metadata(dest)?.is_symlink() {
        return Ok(dest.to_path_buf());
    }
    drop(OpenOptions::new().write(true).open(dest)?);
    fs::canonicalize(dest)
}

/// The directory `path` lies in.
fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// An I/O error without the temporary path the `tempfile` crate adds to it: callers name the
/// destination instead.
fn without_path(e: io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(code) => io::Error::from_raw_os_error(code),
        None => io::Error::new(e.kind(), e.kind().to_string()),
    }
}

/// This machine and PID namespace, as 8 hex digits: a hash of the host name and the PID
/// namespace's identity. `None` where `/proc` does not tell them; no temporary file is then
/// ever taken for stale.
fn host_tag() -> Option<&'static str> {
    static TAG: OnceLock<Option<String>> = OnceLock::new();
    TAG.get_or_init(|| {
        let host = fs::read("/proc/sys/kernel/hostname").ok()?;
        let ns = fs::read_link("/proc/self/ns/pid").ok()?;
        let mut key = host;
        key.push(0);
        key.extend_from_slice(ns.as_os_str().as_encoded_bytes());
        let h = twox_hash::XxHash3_64::oneshot(&key);
        Some(format!("{:08x}", h as u32))
    })
    .as_deref()
}

/// The tag in this process's temporary file names.
fn tag() -> &'static str {
    host_tag().unwrap_or("0")
}

/// The process that wrote the temporary file `name`, if `name` is one of ours made on this
/// machine and PID namespace (`tag`).
fn writer_of(name: &str, tag: &str) -> Option<u32> {
    let inner = name.strip_prefix('.')?.strip_suffix(SUFFIX)?;
    let mut parts = inner.rsplitn(4, '.');
    let random = parts.next()?;
    let (file_tag, pid, _name) = (parts.next()?, parts.next()?, parts.next()?);
    let ours = !random.is_empty()
        && random.bytes().all(|b| b.is_ascii_alphanumeric())
        && file_tag == tag
        && !pid.is_empty()
        && pid.bytes().all(|b| b.is_ascii_digit());
    ours.then(|| pid.parse().ok()).flatten()
}

/// Removes, once per folder and process, the temporary files in `dir` that processes of this
/// machine left when they died (see the [module documentation](self)).
fn sweep(dir: &Path) {
    static SWEPT: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);
    let Some(tag) = host_tag() else { return };
    {
        let mut swept = SWEPT.lock().unwrap_or_else(|e| e.into_inner());
        if !swept
            .get_or_insert_with(HashSet::new)
            .insert(dir.to_path_buf())
        {
            return;
        }
    }
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let me = std::process::id();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| writer_of(n, tag)) else {
            continue;
        };
        let gone = pid != me
            && fs::symlink_metadata(format!("/proc/{pid}"))
                .is_err_and(|e| e.kind() == io::ErrorKind::NotFound);
        if gone && entry.file_type().is_ok_and(|t| t.is_file()) {
            let _ = fs::remove_file(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_names_are_parsed_back() {
        assert_eq!(
            writer_of(".a.b.sc.1234.0abc12ef.Xy9AbC.sc-tmp", "0abc12ef"),
            Some(1234)
        );
        assert_eq!(writer_of("..1.t.r.sc-tmp", "t"), Some(1));
        // Another machine's, another pattern, or not ours at all.
        assert_eq!(
            writer_of(".a.1234.0abc12ef.Xy9AbC.sc-tmp", "ffffffff"),
            None
        );
        assert_eq!(writer_of(".a.b.Xy9AbC.sc-tmp", "b"), None);
        assert_eq!(writer_of(".a.12x.t.Xy9AbC.sc-tmp", "t"), None);
        assert_eq!(writer_of(".a.12.t.Xy-AbC.sc-tmp", "t"), None);
        assert_eq!(writer_of("a.12.t.XyAbC.sc-tmp", "t"), None);
        assert_eq!(writer_of(".a.12.t.XyAbC.tmp", "t"), None);
    }
}
