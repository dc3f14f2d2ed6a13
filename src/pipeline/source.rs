//! Where a decoder reads an archive's bytes from: records through [`Read`], block payloads as
//! [`Payload`]s that a stream reads into pooled buffers, an archive in memory lends, and an
//! archive file's maps ([`super::mapped`]) share.

use super::pool::Pool;
use crate::error::{Error, Result};
use crate::read::read_exact_or;
use std::io::{self, Read};
use std::sync::Arc;

/// A block's payload: read into a pooled buffer, or where the archive lies in memory.
pub(crate) enum Payload<'a> {
    /// Read from a stream; goes back to the pool once decoded.
    Read(Vec<u8>),
    /// Part of an archive in memory.
    Borrowed(&'a [u8]),
    /// Part of a map of the archive file, unmapped when its last payload is dropped.
    Mapped(Arc<memmap2::Mmap>, std::ops::Range<usize>),
}

impl std::ops::Deref for Payload<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Payload::Read(v) => v,
            Payload::Borrowed(s) => s,
            Payload::Mapped(m, r) => &m[r.clone()],
        }
    }
}

/// Where an archive's bytes come from: records through [`Read`], payloads as [`Payload`]s.
pub(crate) trait Source<'a>: Read {
    /// The next `len` bytes, as a payload.
    fn payload(&mut self, len: usize, buffers: &Pool<Vec<u8>>) -> Result<Payload<'a>>;
}

/// A stream's payloads, read into pooled buffers.
pub(crate) struct Stream<R>(pub(crate) R);

impl<R: Read> Read for Stream<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}

impl<R: Read> Source<'_> for Stream<R> {
    fn payload(&mut self, len: usize, buffers: &Pool<Vec<u8>>) -> Result<Payload<'static>> {
        let mut payload = buffers.buffer(len);
        read_exact_or(self, &mut payload, "block payload")?;
        Ok(Payload::Read(payload))
    }
}

/// An archive in memory: its payloads borrowed.
impl<'a> Source<'a> for &'a [u8] {
    fn payload(&mut self, len: usize, _: &Pool<Vec<u8>>) -> Result<Payload<'a>> {
        if len > self.len() {
            return Err(Error::Truncated("block payload"));
        }
        let (payload, rest) = self.split_at(len);
        *self = rest;
        Ok(Payload::Borrowed(payload))
    }
}
