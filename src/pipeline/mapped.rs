//! Reading an archive file through memory maps of a few megabytes at a time.
//!
//! Decoding blocks where the page cache holds them saves copying every payload out first (on
//! MiniLM BF16 that copy was 9% of decoding's CPU time). Mapping the whole file instead would
//! count all of it in the process's resident set by the end; windows are unmapped as soon as
//! the last block decoded from them is, so residency stays at a few windows whatever the size
//! of the archive.
//!
//! Like every reader of mapped files (ripgrep, git), a decode can be killed by SIGBUS if another
//! process truncates the archive while it runs; an archive changed in place fails its
//! checksums.

use super::pool::Pool;
use super::source::{Payload, Source};
use crate::error::{Error, Result};
use memmap2::{Mmap, MmapOptions};
use std::fs::File;
use std::io::{self, Read};
use std::sync::Arc;

/// Bytes mapped at a time (more when one block's payload is longer, less at the end of the
/// file).
const WINDOW: u64 = 8 << 20;
/// Windows start at multiples of this: a multiple of the page size on every platform.
const ALIGN: u64 = 64 << 10;

/// One mapped part of the file.
struct Window {
    map: Arc<Mmap>,
    /// File offset of the map's first byte.
    start: u64,
}

impl Window {
    fn end(&self) -> u64 {
        self.start + self.map.len() as u64
    }
}

/// An archive file read through a sliding window of maps.
pub(crate) struct MappedFile<'f> {
    file: &'f File,
    len: u64,
    pos: u64,
    window: Option<Window>,
}

impl<'f> MappedFile<'f> {
    /// A reader of the `len` bytes of `file`, or `None` where the file is empty or cannot be
    /// mapped (then it is read as a stream instead).
    pub(crate) fn new(file: &'f File, len: u64) -> Option<MappedFile<'f>> {
        let mut f = MappedFile {
            file,
            len,
            pos: 0,
            window: None,
        };
        (len > 0 && f.cover(0, 1).is_ok()).then_some(f)
    }

    /// Makes the window hold `need` bytes from `at` (which lie inside the file); returns its
    /// map and the offset of `at` in it.
    // Mapping a file is unsafe in Rust whatever the use: the one `unsafe` outside the coders'
    // kernels.
    #[allow(unsafe_code)]
    fn cover(&mut self, at: u64, need: u64) -> io::Result<(Arc<Mmap>, usize)> {
        let fits = |w: &Window| w.start <= at && at + need <= w.end();
        let w = match self.window.take().filter(fits) {
            Some(w) => w,
            None => {
                let start = at / ALIGN * ALIGN;
                let len = (at + need - start).max(WINDOW).min(self.len - start);
                // SAFETY: the map is only read, and sc does not write the archive while
                // decoding it; see the module comment for other processes.
                let map = unsafe {
                    MmapOptions::new()
                        .populate()
                        .offset(start)
                        .len(len as usize)
                        .map(self.file)?
                };
                let _ = map.advise(memmap2::Advice::Sequential);
                Window {
                    map: Arc::new(map),
                    start,
                }
            }
        };
        let found = (Arc::clone(&w.map), (at - w.start) as usize);
        self.window = Some(w);
        Ok(found)
    }
}

impl Read for MappedFile<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.pos >= self.len || buf.is_empty() {
            return Ok(0);
        }
        let (map, off) = self.cover(self.pos, 1)?;
        let n = buf.len().min(map.len() - off);
        buf[..n].copy_from_slice(&map[off..off + n]);
        self.pos += n as u64;
        Ok(n)
    }
}

impl Source<'static> for MappedFile<'_> {
    fn payload(&mut self, len: usize, _: &Pool<Vec<u8>>) -> Result<Payload<'static>> {
        if len as u64 > self.len - self.pos.min(self.len) {
            return Err(Error::Truncated("block payload"));
        }
        if len == 0 {
            return Ok(Payload::Borrowed(&[]));
        }
        let (map, off) = self.cover(self.pos, len as u64)?;
        self.pos += len as u64;
        Ok(Payload::Mapped(map, off..off + len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// Reads and payloads across window boundaries give the file's bytes.
    #[test]
    fn windows_cover_reads_and_payloads() {
        let data: Vec<u8> = (0..(3 * WINDOW + 12345))
            .map(|i| (i * 7 % 251) as u8)
            .collect();
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&data).unwrap();
        let mut m = MappedFile::new(&f, data.len() as u64).unwrap();
        let pool = Pool::new(1);
        let mut at = 0usize;
        // Payloads of awkward sizes straddle window ends; reads fill in between.
        for (k, len) in [3usize, 5 << 20, 4 << 20, 100, 9 << 20, 1]
            .iter()
            .enumerate()
        {
            let p = m.payload(*len, &pool).unwrap();
            assert_eq!(&p[..], &data[at..at + len], "payload {k}");
            at += len;
            let mut buf = vec![0u8; 777];
            m.read_exact(&mut buf).unwrap();
            assert_eq!(buf, data[at..at + 777]);
            at += 777;
        }
        let mut rest = Vec::new();
        m.read_to_end(&mut rest).unwrap();
        assert_eq!(rest, data[at..]);
        assert!(matches!(m.payload(1, &pool), Err(Error::Truncated(_))));
        assert!(MappedFile::new(&tempfile::tempfile().unwrap(), 0).is_none());
    }
}
