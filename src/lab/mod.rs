//! Measurements behind sc's experiment commands (`sc models`, `sc analyze`, `sc shuffle`), for
//! the command line's research side: enabled by the `lab` feature, and not a stable API.

pub mod gguf;
pub mod models;
pub mod shuffle;

use crate::error::{Error, HeaderError};
use crate::read::read_exact_or;
use crate::safetensors::{json_len, MAX_HEADER_LEN};
use std::io::{Read, Seek, SeekFrom};

pub use crate::safetensors::Header;
pub use crate::stats::entropy_bits;

/// Reads and validates the header of the safetensors file `r` (from its start); returns it with
/// the file's length. Anything else is [`Error::NotSafetensors`] saying why, so a command can
/// name the problem in one line.
pub fn read_file_header<R: Read + Seek>(r: &mut R) -> crate::Result<(Header, u64)> {
    let file_len = r.seek(SeekFrom::End(0))?;
    r.seek(SeekFrom::Start(0))?;
    let mut first = [0u8; 8];
    read_exact_or(r, &mut first, "safetensors header")
        .map_err(|_| Error::NotSafetensors(HeaderError::TooShort))?;
    let n = json_len(&first);
    if n > MAX_HEADER_LEN || n + 8 > file_len {
        return Err(Error::NotSafetensors(HeaderError::ImplausibleLength(n)));
    }
    let mut json = vec![0u8; n as usize];
    read_exact_or(r, &mut json, "safetensors header")?;
    let header = Header::parse(&json, Some(file_len - 8 - n)).map_err(Error::NotSafetensors)?;
    Ok((header, file_len))
}
