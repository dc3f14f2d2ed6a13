//! Reading helpers shared by the container, the safetensors header and the pipeline.

use crate::error::{Error, Result};
use std::io::{self, Read};

/// Reads exactly `buf.len()` bytes, reporting a short read as truncation of `what`.
pub fn read_exact_or(r: &mut impl Read, buf: &mut [u8], what: &'static str) -> Result<()> {
    r.read_exact(buf).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => Error::Truncated(what),
        _ => Error::from(e),
    })
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
pub fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Reading at an offset, without a cursor shared between readers: what lets several threads
/// read one file or buffer at once (a base's tensors, an input's repeated tensors).
pub trait ReadAt: Sync {
    /// Fills `buf` with the bytes from `offset`; a read past the end is an error.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
}

impl ReadAt for &[u8] {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let src = usize::try_from(offset)
            .ok()
            .and_then(|at| self.get(at..at.checked_add(buf.len())?))
            .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

/// What a read past the end of a file means here: every file is read within the length it had
/// when it was opened, so it has shrunk since (another process truncated or rewrote it).
fn shrank(e: io::Error) -> io::Error {
    match e.kind() {
        io::ErrorKind::UnexpectedEof => io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the file shrank while it was being read",
        ),
        _ => e,
    }
}

impl ReadAt for std::fs::File {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        file_read_exact_at(self, buf, offset).map_err(shrank)
    }
}

/// [`ReadAt::read_exact_at`] on a file, as the platform does it.
#[cfg(unix)]
fn file_read_exact_at(file: &std::fs::File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

/// [`ReadAt::read_exact_at`] on a file, as the platform does it.
#[cfg(windows)]
fn file_read_exact_at(file: &std::fs::File, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match std::os::windows::fs::FileExt::seek_read(file, buf, offset) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// [`ReadAt::read_exact_at`] on a file, as the platform does it.
#[cfg(not(any(unix, windows)))]
fn file_read_exact_at(_: &std::fs::File, _: &mut [u8], _: u64) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "positioned reads are not supported on this platform",
    ))
}

/// A reader and seeker of a shared file at a position of its own (positioned reads), so that
/// several can read one file at once.
pub struct At<F> {
    file: F,
    pos: u64,
    len: u64,
}

impl<F: std::ops::Deref<Target = std::fs::File>> At<F> {
    /// A reader of `file` from its start.
    pub fn new(file: F) -> io::Result<At<F>> {
        let len = file.metadata()?.len();
        Ok(At { file, pos: 0, len })
    }
}

impl<F: std::ops::Deref<Target = std::fs::File>> Read for At<F> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = (self.len.saturating_sub(self.pos)).min(buf.len() as u64) as usize;
        self.file.read_exact_at(&mut buf[..n], self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl<F> io::Seek for At<F> {
    fn seek(&mut self, to: io::SeekFrom) -> io::Result<u64> {
        self.pos = seek_position(self.pos, self.len, to)?;
        Ok(self.pos)
    }
}

/// The position `to` names for a reader at `pos` of a source of `len` bytes, as `Seek` takes
/// it; a position before 0 or past `u64::MAX` is an error.
pub fn seek_position(pos: u64, len: u64, to: io::SeekFrom) -> io::Result<u64> {
    let at = match to {
        io::SeekFrom::Start(p) => Some(p),
        io::SeekFrom::End(d) => len.checked_add_signed(d),
        io::SeekFrom::Current(d) => pos.checked_add_signed(d),
    };
    at.ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))
}

/// `ranges` in their order, each that starts where the one before ends joined to it.
pub fn join_adjacent(
    ranges: impl IntoIterator<Item = std::ops::Range<u64>>,
) -> Vec<std::ops::Range<u64>> {
    let mut runs: Vec<std::ops::Range<u64>> = Vec::new();
    for r in ranges {
        match runs.last_mut() {
            Some(run) if run.end == r.start => run.end = r.end,
            _ => runs.push(r),
        }
    }
    runs
}

/// A source whose bytes come from far away (a remote archive): told which byte ranges a
/// reader is about to read, in order, so that it fetches them ahead and in parallel, and asked
/// once more for bytes that failed their checks.
pub trait Prefetch: Send + Sync {
    /// The reader will now read `ranges`, in this order; ranges planned before and not yet
    /// read are forgotten.
    fn will_read(&self, ranges: &[std::ops::Range<u64>]);
    /// Bytes `range` fetched anew, whatever was fetched before.
    fn read_again(&self, range: std::ops::Range<u64>) -> io::Result<Vec<u8>>;
}
