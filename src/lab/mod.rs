//! Measurements behind sc's experiment commands (`sc models`, `sc analyze`, `sc shuffle`), for
//! the command line's research side: enabled by the `lab` feature, and not a stable API.

pub mod gguf;
pub mod models;
pub mod models_gguf;
pub mod shuffle;

use crate::error::Error;
use crate::safetensors::read_header_at;
use std::io::{Read, Seek, SeekFrom};

pub use crate::safetensors::Header;
pub use crate::stats::entropy_bits;

/// Reads and validates the header of the safetensors file `r` (from its start); returns it with
/// the file's length. Anything else is [`Error::NotSafetensors`] saying why, so a command can
/// name the problem in one line.
pub fn read_file_header<R: Read + Seek>(r: &mut R) -> crate::Result<(Header, u64)> {
    let file_len = r.seek(SeekFrom::End(0))?;
    let read_at = |buf: &mut [u8], at: u64| {
        r.seek(SeekFrom::Start(at))?;
        r.read_exact(buf)
    };
    let (header, _) = read_header_at(file_len, read_at)?.map_err(Error::NotSafetensors)?;
    Ok((header, file_len))
}
