//! Where results go: stdout, or a file written through the library's [`sc::output`] (an
//! existing FIFO or device in place; anything else through a temporary file beside the
//! destination, renamed over it only once everything succeeded).

use super::IO_BUFFER;
use anyhow::{bail, Context, Result};
use std::fs::{self, FileTimes, Metadata, Permissions};
use std::io::{self, BufWriter, IsTerminal, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::Path;

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

/// An output being written.
pub enum Output {
    /// Standard output.
    Stdout(BufWriter<io::Stdout>),
    /// A file, or a remote location written as a multipart upload (visible only once
    /// committed).
    To {
        /// The file, written in place or through a temporary file, or the upload.
        out: BufWriter<sc::Output>,
        /// Permission bits and times to give a file before it is renamed.
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
        let at = sc::Location::parse(dest);
        let out = sc::Output::create(&at, s.force, &super::open_options())
            .map_err(|e| refused(dest, e))?;
        let file = out.file();
        if file.is_some_and(|f| f.in_place() && f.file().is_terminal()) && s.binary && !s.force {
            bail!("refusing to write binary data to a terminal (use -f to force)");
        }
        let like = s.like.filter(|_| file.is_some()).map(|m| {
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
        Ok(Output::To {
            out: BufWriter::with_capacity(IO_BUFFER, out),
            like,
            durable: s.durable,
        })
    }

    /// Flushes and, for a temporary file, gives it its permissions and times, syncs it if
    /// asked, and renames it over the destination. Returns the identity of the file renamed
    /// into place (none for stdout and files written in place).
    pub fn commit(self) -> Result<Option<FileId>> {
        let (out, like, durable) = match self {
            Output::Stdout(mut w) => return w.flush().context("writing to stdout").map(|_| None),
            Output::To { out, like, durable } => (out, like, durable),
        };
        // Write errors name the destination already.
        let out = out.into_inner().map_err(|e| e.into_error())?;
        if let (Some((mode, times)), Some(f)) = (like, out.file()) {
            let writing = || format!("writing {}", f.path().display());
            f.set_permissions(mode).with_context(writing)?;
            f.set_times(times).with_context(writing)?;
        }
        match out.commit(durable)? {
            sc::Committed::File(written) => Ok(written.as_ref().map(FileId::of)),
            _ => Ok(None),
        }
    }

    /// Drops an unfinished output; a temporary file is deleted.
    pub fn abandon(self) {
        if let Output::To { out, .. } = self {
            // The buffer's bytes are not wanted: the file goes without them.
            drop(out.into_parts());
        }
    }

    fn writer(&mut self) -> &mut dyn Write {
        match self {
            Output::Stdout(w) => w,
            Output::To { out, .. } => out,
        }
    }
}

/// The error for a destination `dest` that cannot be opened (`e`).
fn refused(dest: &Path, e: sc::Error) -> anyhow::Error {
    let sc::Error::File { source: e, .. } = e else {
        return e.into();
    };
    let shown = dest.display();
    match e.kind() {
        io::ErrorKind::IsADirectory => anyhow::anyhow!("{shown} is a directory"),
        io::ErrorKind::AlreadyExists
            if fs::metadata(dest).is_ok_and(|m| m.file_type().is_block_device()) =>
        {
            anyhow::anyhow!(
                "{shown} is a block device: writing replaces its contents (use -f to do so)"
            )
        }
        io::ErrorKind::AlreadyExists => {
            anyhow::anyhow!("{shown} already exists (use -f to overwrite)")
        }
        _ => anyhow::Error::new(e).context(format!("cannot create {shown}")),
    }
}

/// The error of a write after the host asked the run to stop ([`super::process::stopped`]).
fn unless_stopped() -> io::Result<()> {
    match super::process::stopped() {
        // Not `ErrorKind::Interrupted`, which writers retry.
        true => Err(io::Error::other("interrupted")),
        false => Ok(()),
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        unless_stopped()?;
        self.writer().write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        unless_stopped()?;
        self.writer().write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.writer().flush()
    }
}
