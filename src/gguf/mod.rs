//! GGUF, llama.cpp's weight format: reading and validating a file's header (versions 2 and 3,
//! little-endian).
//!
//! A GGUF file is a header (magic, version, counts, the metadata key-values, one info per
//! tensor: name, shape, ggml type, offset), padding to `general.alignment` (32 by default),
//! then the tensor data, each tensor at an aligned offset from the data's start.
//!
//! The reader checks every count and length against the bytes that are really there before it
//! allocates anything sized by them, and every tensor's type, shape, size, alignment and place
//! (inside the file, overlapping no other) before a caller relies on them; a file that does not
//! validate is a [`GgufError`] naming why, never a panic. The GGUF crates on crates.io that were
//! looked at size their tables by the header's counts and unwrap on overflowing sizes, so the
//! reader is this crate's own, as small as the format allows.

mod cursor;
mod listed;
pub mod quant;
pub mod types;
mod value;
pub mod write;

use crate::tensor::TensorInfo;
use cursor::{Cursor, Values};
use listed::{apart, in_data_order, validate, Listed};
use std::fmt;
use std::ops::Range;
use types::GgmlType;
pub use value::Value;

/// The magic bytes every GGUF file starts with.
pub const MAGIC: [u8; 4] = *b"GGUF";
/// The alignment of tensor data when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// Most dimensions a ggml tensor has.
pub const MAX_DIMS: u32 = 4;
/// Most bytes a header may take when read from a file (the tokenizer's vocabulary makes it
/// megabytes; an archive keeps no more).
pub const MAX_HEADER_LEN: u64 = 256 << 20;
/// Header bytes read first by [`read_header_at`]; doubled until the header fits.
const FIRST_READ: u64 = 1 << 20;
/// Deepest nesting of arrays the reader follows (ggml writes none deeper than 1).
const MAX_ARRAY_DEPTH: u32 = 8;

/// Why bytes are not a GGUF file this build reads.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GgufError {
    /// Not the GGUF magic.
    NotGguf,
    /// A version other than 2 and 3.
    Version(u32),
    /// The bytes end inside the header; `what` was being read.
    Truncated(&'static str),
    /// A count or length larger than the bytes that follow could hold.
    Implausible(&'static str, u64),
    /// A metadata value type this build does not know, or an array nested too deep.
    ValueType(u32),
    /// A string that is not UTF-8.
    Utf8(&'static str),
    /// A boolean other than 0 or 1.
    Bool(u8),
    /// `general.alignment` is not a power of two held as a u32.
    Alignment,
    /// A key that appears twice.
    DuplicateKey(String),
    /// A tensor whose info does not validate.
    Tensor {
        /// The tensor's name.
        name: String,
        /// What is wrong with it.
        problem: String,
    },
}

impl fmt::Display for GgufError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GgufError::NotGguf => write!(f, "no GGUF magic"),
            GgufError::Version(v) => write!(f, "GGUF version {v} (this build reads 2 and 3)"),
            GgufError::Truncated(what) => write!(f, "ends inside the GGUF header ({what})"),
            GgufError::Implausible(what, n) => write!(f, "implausible {what} {n}"),
            GgufError::ValueType(t) => write!(f, "unknown metadata value type {t}"),
            GgufError::Utf8(what) => write!(f, "{what} is not UTF-8"),
            GgufError::Bool(b) => write!(f, "boolean value {b}"),
            GgufError::Alignment => write!(f, "general.alignment is not a power of two (u32)"),
            GgufError::DuplicateKey(k) => write!(f, "metadata key {k:?} appears twice"),
            GgufError::Tensor { name, problem } => write!(f, "tensor {name:?}: {problem}"),
        }
    }
}

impl std::error::Error for GgufError {}
/// One tensor of a GGUF file, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GgufTensor {
    /// Its name.
    pub name: String,
    /// Its dimensions, innermost (contiguous) first, as GGUF stores them.
    pub dims: Vec<u64>,
    /// Its ggml type (one this build knows: the reader refuses others).
    pub ggml_type: &'static GgmlType,
    /// Where its bytes are in the file (absolute offsets).
    pub range: Range<u64>,
}

impl GgufTensor {
    /// Number of values.
    pub fn values(&self) -> u64 {
        self.dims.iter().product()
    }
}

/// A GGUF file's header, validated against the file's length.
#[derive(Clone, Debug, PartialEq)]
pub struct GgufHeader {
    /// 2 or 3.
    pub version: u32,
    /// Alignment of the tensor data.
    pub alignment: u64,
    /// The metadata key-values, in file order.
    pub metadata: Vec<(String, Value)>,
    /// The tensors, in file order.
    pub tensors: Vec<GgufTensor>,
    /// Where the header (the last tensor info) ends.
    pub header_len: u64,
    /// Where the tensor data starts: `header_len` rounded up to the alignment.
    pub data_start: u64,
}
impl GgufHeader {
    /// Parses the header at the start of `buf`, a prefix of a file of `file_len` bytes (the
    /// whole header must be in it), and validates every tensor against `file_len`.
    pub fn parse(buf: &[u8], file_len: u64) -> Result<GgufHeader, GgufError> {
        Self::parse_values(buf, file_len, Values::Keep, file_len)
    }

    /// [`GgufHeader::parse`] without the metadata (`metadata` is empty): the values are
    /// checked as strictly, but neither copied nor allocated (the vocabulary's hundreds of
    /// thousands of strings take a full parse tens of milliseconds). The tensors are judged by
    /// the header alone: one whose bytes run past `file_len` is accepted (a file cut short is
    /// coded as GGUF whether it is read from a file or a stream, where the length is not known
    /// until the end), but the padding after the header must be within `file_len`.
    pub fn parse_tensors(buf: &[u8], file_len: u64) -> Result<GgufHeader, GgufError> {
        Self::parse_values(buf, file_len, Values::Check, u64::MAX)
    }

    /// Where the header at the start of `buf` ends ([`GgufHeader::header_len`]), from the
    /// lengths in it alone; `Truncated` if it runs past `buf`. A header this accepts may still
    /// not parse.
    pub fn len_in(buf: &[u8], file_len: u64) -> Result<u64, GgufError> {
        Self::parse_values(buf, file_len, Values::Skip, u64::MAX).map(|h| h.header_len)
    }

    /// The parse, keeping `values`, with every tensor's bytes required to end by `data_end`.
    fn parse_values(
        buf: &[u8],
        file_len: u64,
        values: Values,
        data_end: u64,
    ) -> Result<GgufHeader, GgufError> {
        let mut metadata = Vec::new();
        let keep = |k: &str, v| {
            if values == Values::Keep {
                metadata.push((k.to_string(), v));
            }
        };
        let (mut h, tensors) = Self::parse_with(buf, file_len, values, Some(data_end), keep)?;
        h.metadata = metadata;
        h.tensors = tensors;
        Ok(h)
    }

    /// The parse: each key-value is handed to `each` (in [`Values::Keep`]; else the values
    /// are read as `values` says and `each` sees stand-ins), and the header returned without
    /// its metadata or tensors, with the tensors as `T`. The tensors are read and validated,
    /// their bytes required to end by `data_end`, unless that is `None`: then the parse ends
    /// after the key-values, with no tensors.
    ///
    /// The tensor infos are read twice: once for where the header ends (which places the
    /// data), then again to make each tensor, so nothing but the tensors made is held for them.
    fn parse_with<'a, T: Listed>(
        buf: &'a [u8],
        file_len: u64,
        values: Values,
        data_end: Option<u64>,
        mut each: impl FnMut(&'a str, Value),
    ) -> Result<(GgufHeader, Vec<T>), GgufError> {
        let mut c = Cursor {
            buf,
            at: 0,
            file_len,
            values,
        };
        if c.array::<4>("magic").map_err(|_| GgufError::NotGguf)? != MAGIC {
            return Err(GgufError::NotGguf);
        }
        let version = c.u32("version")?;
        if !(2..=3).contains(&version) {
            return Err(GgufError::Version(version));
        }
        // A tensor info takes at least 28 bytes (name length, dimension count, type, offset);
        // a key-value 13 (key length, type, a one-byte value).
        let tensor_count = c.u64("tensor count")?;
        let kv_count = c.count(13, "metadata count")?;
        let mut alignment = DEFAULT_ALIGNMENT;
        // Keys and names are borrowed from `buf` to be checked unique: no copies.
        let mut keys = std::collections::HashSet::new();
        for _ in 0..kv_count {
            let key = c.str("metadata key")?;
            let value_type = c.u32("metadata value type")?;
            let value = c.value(value_type, 0)?;
            if key == "general.alignment" {
                alignment = match value {
                    Value::U32(a) if a.is_power_of_two() => u64::from(a),
                    _ => return Err(GgufError::Alignment),
                };
            }
            if !keys.insert(key) {
                return Err(GgufError::DuplicateKey(key.to_string()));
            }
            each(key, value);
        }
        drop(keys);
        let header = |header_len, data_start| GgufHeader {
            version,
            alignment,
            metadata: Vec::new(),
            tensors: Vec::new(),
            header_len,
            data_start,
        };
        let Some(data_end) = data_end else {
            return Ok((header(c.at as u64, c.at as u64), Vec::new()));
        };
        if tensor_count.saturating_mul(28) > c.left_in_file() {
            return Err(GgufError::Implausible("tensor count", tensor_count));
        }
        let infos_at = c.at;
        for _ in 0..tensor_count {
            c.tensor_info()?;
        }
        let header_len = c.at as u64;
        let data_start = header_len
            .checked_next_multiple_of(alignment)
            .filter(|&s| s <= file_len)
            .ok_or(GgufError::Truncated("padding before the tensor data"))?;
        c.at = infos_at;
        // Every info was read whole from `buf` (24 bytes at least): the count is that small.
        let mut tensors = Vec::with_capacity(tensor_count as usize);
        for _ in 0..tensor_count {
            let (name, dims, type_id, offset) = c.tensor_info()?;
            let t = validate(name, dims, type_id, offset, alignment, data_start, data_end)?;
            tensors.push(T::make(t, data_start));
        }
        apart(&tensors)?;
        Ok((header(header_len, data_start), tensors))
    }

    /// The metadata value of `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The tensors as the archive lists them, ordered by data offset: offsets relative to the
    /// data's start, the ggml type's name as dtype name (and the safetensors dtype of the plain
    /// types that have one), and the shape outermost first (GGUF's dimensions reversed).
    pub fn tensor_infos(&self) -> Vec<TensorInfo> {
        let start = self.data_start;
        let infos = self.tensors.iter().cloned();
        in_data_order(infos.map(|t| TensorInfo::make(t, start)).collect())
    }

    /// [`GgufHeader::tensor_infos`], the names and shapes moved rather than copied (a header
    /// of a million tensors holds them once).
    pub fn into_tensor_infos(self) -> Vec<TensorInfo> {
        let start = self.data_start;
        in_data_order(
            self.tensors
                .into_iter()
                .map(|t| TensorInfo::make(t, start))
                .collect(),
        )
    }
}
/// The tensors of a GGUF header kept whole in `prefix` (the file from its magic to the start of
/// its tensor data), as [`GgufHeader::tensor_infos`] lists them. The header is judged on its
/// own, its tensors' ends against no file length; a prefix that is not exactly such a header is
/// an error.
pub fn kept_tensors(prefix: &[u8]) -> Result<Vec<TensorInfo>, GgufError> {
    let (h, tensors) = listed_tensors(prefix, u64::MAX)?;
    if h.data_start != prefix.len() as u64 {
        return Err(GgufError::Implausible(
            "kept header length",
            prefix.len() as u64,
        ));
    }
    Ok(tensors)
}

/// [`GgufHeader::parse_tensors`] with the tensors as [`GgufHeader::tensor_infos`] lists them
/// (the header's `tensors` left empty), made from the header's bytes with nothing between:
/// what reading a header of many tensors holds is that list.
pub fn listed_tensors(
    buf: &[u8],
    file_len: u64,
) -> Result<(GgufHeader, Vec<TensorInfo>), GgufError> {
    let (h, tensors) =
        GgufHeader::parse_with(buf, file_len, Values::Check, Some(u64::MAX), |_, _| {})?;
    Ok((h, in_data_order(tensors)))
}

/// The metadata of the GGUF header at the start of `buf` (magic to tensor infos, the tensors
/// not read) as text: each key with its value's [`Value::to_text`]. Each value is made into
/// text as soon as it is read and dropped, so the parse holds the text and one value: the
/// text of a value is at most 6 times its bytes in the header (`false,` for a one-byte
/// boolean, `\u0001` for a control character), plus 2.
pub fn metadata_text(buf: &[u8]) -> Result<std::collections::BTreeMap<String, String>, GgufError> {
    let mut text = std::collections::BTreeMap::new();
    let each = |k: &str, v: Value| {
        text.insert(k.to_string(), v.to_text());
    };
    GgufHeader::parse_with::<GgufTensor>(buf, u64::MAX, Values::Keep, None, each)?;
    Ok(text)
}

/// Reads and validates the header of a GGUF file of `len` bytes through `read_at` (which
/// fills a buffer from an offset), reading a megabyte first and twice as much each time the
/// header runs past what was read, up to [`MAX_HEADER_LEN`]. Returns the header and its bytes
/// (`header_len` of them); bytes that are not a GGUF file are `Ok(Err(why))`, a failed read
/// `Err`.
pub fn read_header_at(
    len: u64,
    mut read_at: impl FnMut(&mut [u8], u64) -> std::io::Result<()>,
) -> std::io::Result<Result<(GgufHeader, Vec<u8>), GgufError>> {
    let mut want = FIRST_READ.min(len);
    loop {
        let mut buf = vec![0u8; want as usize];
        read_at(&mut buf, 0)?;
        match GgufHeader::len_in(&buf, len) {
            Ok(header_len) => {
                buf.truncate(header_len as usize);
                return Ok(GgufHeader::parse(&buf, len).map(|h| (h, buf)));
            }
            Err(GgufError::Truncated(_)) if want < len.min(MAX_HEADER_LEN) => {
                want = want.saturating_mul(2).min(len).min(MAX_HEADER_LEN);
            }
            Err(GgufError::Truncated(_)) if want < len => {
                return Ok(Err(GgufError::Implausible("header length over", want)));
            }
            Err(e) => return Ok(Err(e)),
        }
    }
}
fn tensor_error(name: &str, problem: String) -> GgufError {
    GgufError::Tensor {
        name: name.to_string(),
        problem,
    }
}
#[cfg(test)]
pub(crate) mod tests;
