//! Where results go: stdout; an existing FIFO or device, written in place; or a temporary file
//! beside the destination, renamed over it only once everything succeeded.

use super::IO_BUFFER;
use anyhow::{bail, Context, Result};
use std::fs::{self, File, FileTimes, Metadata, OpenOptions, Permissions};
use std::io::{self, BufWriter, IsTerminal, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

/// Temporary files to delete if the process is killed by a signal.
static PENDING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn pending() -> MutexGuard<'static, Vec<PathBuf>> {
    PENDING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Deletes every unfinished temporary output, for a process about to exit on a signal. The
/// list stays locked, so no output is renamed into place afterwards.
pub fn remove_pending() {
    let paths = pending();
    for p in paths.iter() {
        let _ = fs::remove_file(p);
    }
    std::mem::forget(paths);
}

/// The identity of a file: device and inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileId {
    dev: u64,
    ino: u64,
}

impl FileId {
    /// The identity of the file `m` describes.
    pub fn of(m: &Metadata) -> FileId {
        FileId {
            dev: m.dev(),
            ino: m.ino(),
        }
    }
}

/// How an output is written.
#[derive(Clone, Copy, Default)]
pub struct Settings<'a> {
    /// Replace an existing file.
    pub force: bool,
    /// Binary data: refused on a terminal unless forced.
    pub binary: bool,
    /// The input whose permission bits and times the output takes (else: the umask's).
    pub like: Option<&'a Metadata>,
    /// Flush the file and then its directory to disk before the commit returns.
    pub durable: bool,
}

/// The longest destination name kept in a temporary file's name: the rest (a dot, a random
/// part and `.sc-tmp`) must fit the 255 bytes file systems allow for a name.
const TMP_NAME_KEPT: usize = 200;

/// An output being written.
pub enum Output {
    /// Standard output.
    Stdout(BufWriter<io::Stdout>),
    /// An existing FIFO or device, written in place (renaming over it would replace it).
    Special(BufWriter<File>),
    /// A temporary file that becomes `dest` on [`Output::commit`].
    File {
        /// The temporary file.
        tmp: BufWriter<tempfile::NamedTempFile>,
        /// Final path.
        dest: PathBuf,
        /// Replace an existing `dest`.
        force: bool,
        /// Permission bits and times to give the file before it is renamed.
        like: Option<(Permissions, FileTimes)>,
        /// Sync the file and its directory.
        durable: bool,
    },
}

impl Output {
    /// Opens `dest` (`None` = stdout). Fails early if `dest` exists and `force` is off, or if
    /// binary data would go to a terminal.
    pub fn open(dest: Option<&Path>, s: &Settings) -> Result<Output> {
        let Some(dest) = dest else {
            if super::process::stdout_closed() {
                bail!("standard output is closed");
            }
            if s.binary && !s.force && io::stdout().is_terminal() {
                bail!("refusing to write binary data to a terminal (use -o FILE, or -f to force)");
            }
            return Ok(Output::Stdout(BufWriter::with_capacity(
                IO_BUFFER,
                io::stdout(),
            )));
        };
        match fs::metadata(dest) {
            Ok(m) if m.is_dir() => bail!("{} is a directory", dest.display()),
            Ok(m) if !m.is_file() => return Output::special(dest, &m, s),
            Ok(_) if !s.force => {
                bail!("{} already exists (use -f to overwrite)", dest.display())
            }
            _ => {}
        }
        let dir = parent(dest);
        let name = dest
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut cut = name.len().min(TMP_NAME_KEPT);
        while !name.is_char_boundary(cut) {
            cut -= 1;
        }
        let tmp = tempfile::Builder::new()
            .prefix(&format!(".{}.", &name[..cut]))
            .suffix(".sc-tmp")
            .permissions(Permissions::from_mode(0o666))
            .tempfile_in(dir)
            .map_err(without_path)
            .with_context(|| format!("cannot create {}", dest.display()))?;
        pending().push(tmp.path().to_path_buf());
        let like = s.like.map(|m| {
            let times = FileTimes::new();
            let times = match m.accessed() {
                Ok(t) => times.set_accessed(t),
                Err(_) => times,
            };
            let times = match m.modified() {
                Ok(t) => times.set_modified(t),
                Err(_) => times,
            };
            (Permissions::from_mode(m.mode() & 0o777), times)
        });
        Ok(Output::File {
            tmp: BufWriter::with_capacity(IO_BUFFER, tmp),
            dest: dest.to_path_buf(),
            force: s.force,
            like,
            durable: s.durable,
        })
    }

    /// Opens the existing non-regular file `dest` (`m`) to write into it.
    fn special(dest: &Path, m: &Metadata, s: &Settings) -> Result<Output> {
        if m.file_type().is_block_device() && !s.force {
            bail!(
                "{} is a block device: writing replaces its contents (use -f to do so)",
                dest.display()
            );
        }
        let f = OpenOptions::new()
            .write(true)
            .open(dest)
            .with_context(|| format!("cannot open {}", dest.display()))?;
        if s.binary && !s.force && f.is_terminal() {
            bail!("refusing to write binary data to a terminal (use -f to force)");
        }
        Ok(Output::Special(BufWriter::with_capacity(IO_BUFFER, f)))
    }

    /// Flushes and, for a temporary file, gives it its permissions and times, syncs it if
    /// asked, and renames it over the destination. Returns the identity of the file renamed
    /// into place (none for stdout and files written in place).
    pub fn commit(self) -> Result<Option<FileId>> {
        let (tmp, dest, force, like, durable) = match self {
            Output::Stdout(mut w) => return w.flush().context("writing to stdout").map(|_| None),
            Output::Special(mut w) => return w.flush().context("writing").map(|_| None),
            Output::File {
                tmp,
                dest,
                force,
                like,
                durable,
            } => (tmp, dest, force, like, durable),
        };
        let writing = || format!("writing {}", dest.display());
        let tmp = tmp
            .into_inner()
            .map_err(|e| e.into_error())
            .with_context(writing)?;
        let f = tmp.as_file();
        if let Some((mode, times)) = like {
            f.set_permissions(mode).with_context(writing)?;
            f.set_times(times).with_context(writing)?;
        }
        if durable {
            f.sync_all().with_context(writing)?;
        }
        let id = FileId::of(&f.metadata().with_context(writing)?);
        let mut pending = pending();
        let path = tmp.path().to_path_buf();
        let result = match force {
            true => tmp.persist(&dest).map(drop),
            false => tmp.persist_noclobber(&dest).map(drop),
        };
        pending.retain(|p| p != &path);
        drop(pending);
        result
            .map_err(|e| e.error)
            .with_context(|| format!("cannot create {}", dest.display()))?;
        if durable {
            let dir = parent(&dest);
            File::open(dir)
                .and_then(|d| d.sync_all())
                .with_context(|| format!("syncing directory {}", dir.display()))?;
        }
        Ok(Some(id))
    }

    /// Drops an unfinished output; a temporary file is deleted.
    pub fn abandon(self) {
        if let Output::File { tmp, .. } = self {
            if let Ok(t) = tmp.into_inner() {
                let path = t.path().to_path_buf();
                drop(t);
                pending().retain(|p| p != &path);
            }
        }
    }

    fn writer(&mut self) -> &mut dyn Write {
        match self {
            Output::Stdout(w) => w,
            Output::Special(w) => w,
            Output::File { tmp, .. } => tmp,
        }
    }
}

/// The directory `path` lies in.
fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// An I/O error without the temporary path the `tempfile` crate adds to it: the error names
/// the destination the user asked for instead.
fn without_path(e: io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(code) => io::Error::from_raw_os_error(code),
        None => io::Error::new(e.kind(), e.kind().to_string()),
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.writer().write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.writer().write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.writer().flush()
    }
}
