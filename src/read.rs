//! Reading helpers shared by the container, the safetensors header and the pipeline.

use crate::error::{Error, Result};
use std::io::{self, Read};

/// Reads exactly `buf.len()` bytes, reporting a short read as truncation of `what`.
pub fn read_exact_or(r: &mut impl Read, buf: &mut [u8], what: &'static str) -> Result<()> {
    r.read_exact(buf).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => Error::Truncated(what),
        _ => Error::Io(e),
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
