//! Where results go: stdout, or a temporary file in the target directory that is renamed over
//! the destination only once everything succeeded.

use super::IO_BUFFER;
use anyhow::{bail, Context, Result};
use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Temporary files to delete if the process is interrupted.
static PENDING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Installs a Ctrl-C / SIGTERM handler that removes unfinished outputs and exits with 130.
pub fn install_interrupt_cleanup() {
    // Failing to install only loses the cleanup; compression still works.
    let _ = ctrlc::set_handler(|| {
        if let Ok(paths) = PENDING.lock() {
            for p in paths.iter() {
                let _ = std::fs::remove_file(p);
            }
        }
        let _ = writeln!(io::stderr(), "sc: interrupted");
        std::process::exit(130);
    });
}

fn forget_pending(path: &Path) {
    if let Ok(mut paths) = PENDING.lock() {
        paths.retain(|p| p != path);
    }
}

/// An output being written.
pub enum Output {
    /// Standard output.
    Stdout(BufWriter<io::Stdout>),
    /// A temporary file that becomes `dest` on [`Output::commit`].
    File {
        /// The temporary file.
        tmp: BufWriter<tempfile::NamedTempFile>,
        /// Final path.
        dest: PathBuf,
        /// Replace an existing `dest`.
        force: bool,
    },
}

impl Output {
    /// Opens `dest` (`None` = stdout). Fails early if `dest` exists and `force` is off, or if
    /// binary data would go to a terminal.
    pub fn open(dest: Option<&Path>, force: bool, binary: bool) -> Result<Output> {
        let Some(dest) = dest else {
            if binary && !force && io::stdout().is_terminal() {
                bail!("refusing to write binary data to a terminal (use -o FILE, or -f to force)");
            }
            return Ok(Output::Stdout(BufWriter::with_capacity(
                IO_BUFFER,
                io::stdout(),
            )));
        };
        if dest.exists() && !force {
            bail!("{} already exists (use -f to overwrite)", dest.display());
        }
        if dest.is_dir() {
            bail!("{} is a directory", dest.display());
        }
        let dir = match dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let name = dest
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".sc-tmp")
            .tempfile_in(dir)
            .with_context(|| format!("cannot create a temporary file in {}", dir.display()))?;
        if let Ok(mut paths) = PENDING.lock() {
            paths.push(tmp.path().to_path_buf());
        }
        Ok(Output::File {
            tmp: BufWriter::with_capacity(IO_BUFFER, tmp),
            dest: dest.to_path_buf(),
            force,
        })
    }

    /// Flushes and, for files, renames the temporary file over the destination.
    pub fn commit(self) -> Result<()> {
        match self {
            Output::Stdout(mut w) => w.flush().context("writing to stdout"),
            Output::File { tmp, dest, force } => {
                let tmp = tmp
                    .into_inner()
                    .map_err(|e| e.into_error())
                    .with_context(|| format!("writing {}", dest.display()))?;
                let path = tmp.path().to_path_buf();
                let result = if force {
                    tmp.persist(&dest).map(|_| ())
                } else {
                    tmp.persist_noclobber(&dest).map(|_| ())
                };
                forget_pending(&path);
                result.with_context(|| format!("cannot create {}", dest.display()))
            }
        }
    }

    /// Drops an unfinished output; a temporary file is deleted.
    pub fn abandon(self) {
        if let Output::File { tmp, .. } = self {
            if let Ok(t) = tmp.into_inner() {
                forget_pending(t.path());
                drop(t);
            }
        }
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Output::Stdout(w) => w.write(buf),
            Output::File { tmp, .. } => tmp.write(buf),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            Output::Stdout(w) => w.write_all(buf),
            Output::File { tmp, .. } => tmp.write_all(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Output::Stdout(w) => w.flush(),
            Output::File { tmp, .. } => tmp.flush(),
        }
    }
}
