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

pub mod quant;
pub mod types;
pub mod write;

use crate::safetensors::TensorInfo;
use std::fmt;
use std::ops::Range;
use types::GgmlType;

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

/// A metadata value. Arrays of fixed-size numbers keep their bytes as stored.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// Type 0.
    U8(u8),
    /// Type 1.
    I8(i8),
    /// Type 2.
    U16(u16),
    /// Type 3.
    I16(i16),
    /// Type 4.
    U32(u32),
    /// Type 5.
    I32(i32),
    /// Type 6.
    F32(f32),
    /// Type 7.
    Bool(bool),
    /// Type 8.
    String(String),
    /// Type 9: an array of numbers or booleans (element type, count, little-endian bytes).
    Numbers(u32, u64, Vec<u8>),
    /// Type 9: an array of strings.
    Strings(Vec<String>),
    /// Type 9: an array of arrays.
    Arrays(Vec<Value>),
    /// Type 10.
    U64(u64),
    /// Type 11.
    I64(i64),
    /// Type 12.
    F64(f64),
}

impl Value {
    /// The value as JSON: numbers, booleans and strings as themselves (floats that are not
    /// finite as `null`), arrays as arrays.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::{json, Value as J};
        match self {
            Value::U8(x) => json!(x),
            Value::I8(x) => json!(x),
            Value::U16(x) => json!(x),
            Value::I16(x) => json!(x),
            Value::U32(x) => json!(x),
            Value::I32(x) => json!(x),
            Value::F32(x) => json!(x),
            Value::Bool(x) => json!(x),
            Value::String(x) => json!(x),
            Value::U64(x) => json!(x),
            Value::I64(x) => json!(x),
            Value::F64(x) => json!(x),
            Value::Numbers(elem, _, bytes) => {
                let size = fixed_size(*elem).unwrap_or(1) as usize;
                J::Array(
                    bytes
                        .chunks_exact(size)
                        .map(|b| number(*elem, b).to_json())
                        .collect(),
                )
            }
            Value::Strings(v) => json!(v),
            Value::Arrays(v) => J::Array(v.iter().map(Value::to_json).collect()),
        }
    }

    /// The value as text: a string as it is, anything else as its JSON text (what
    /// [`Value::to_json`] prints), written element by element into a string of exactly its
    /// length: an array's text takes the text's bytes and no more (no tree of JSON values, no
    /// slack from growing).
    pub fn to_text(&self) -> String {
        match self {
            Value::String(s) => s.clone(),
            v => {
                let mut len = Counter(0);
                v.write_json(&mut len);
                let mut out = Vec::with_capacity(len.0);
                v.write_json(&mut out);
                // serde_json writes UTF-8 only.
                String::from_utf8(out).unwrap_or_default()
            }
        }
    }

    /// Writes the JSON text of the value to `out`, arrays one element at a time.
    fn write_json(&self, out: &mut impl std::io::Write) {
        // The writers here (a Vec, a counter) never fail.
        match self {
            Value::Numbers(elem, _, bytes) => {
                let size = fixed_size(*elem).unwrap_or(1) as usize;
                json_items(out, bytes.chunks_exact(size), |out, b| {
                    number(*elem, b).write_json(out)
                });
            }
            Value::Strings(v) => json_items(out, v, |out, s| {
                let _ = serde_json::to_writer(&mut *out, s);
            }),
            Value::Arrays(v) => json_items(out, v, |out, a| a.write_json(out)),
            Value::String(s) => {
                let _ = serde_json::to_writer(&mut *out, s);
            }
            // A scalar's JSON value holds nothing on the heap.
            v => {
                let _ = serde_json::to_writer(&mut *out, &v.to_json());
            }
        }
    }
}

/// A writer that counts the bytes written to it.
struct Counter(usize);

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Writes a JSON array of `items` to `out`, each written by `write`.
fn json_items<W: std::io::Write, T>(
    out: &mut W,
    items: impl IntoIterator<Item = T>,
    mut write: impl FnMut(&mut W, T),
) {
    let _ = out.write_all(b"[");
    for (k, item) in items.into_iter().enumerate() {
        if k > 0 {
            let _ = out.write_all(b",");
        }
        write(out, item);
    }
    let _ = out.write_all(b"]");
}

/// The number (or boolean) of fixed-size type `elem` whose little-endian bytes are `b`, as
/// [`Value::Numbers`] holds them (`b` is as long as the type); an empty array where the bytes
/// are no such value (a boolean other than 0 or 1, which the reader refuses).
fn number(elem: u32, b: &[u8]) -> Value {
    let mut c = Cursor {
        buf: b,
        at: 0,
        file_len: b.len() as u64,
        values: Values::Keep,
    };
    c.value(elem, MAX_ARRAY_DEPTH)
        .unwrap_or(Value::Arrays(Vec::new()))
}

/// Bytes of one value of a fixed-size type, or `None` for strings and arrays.
fn fixed_size(value_type: u32) -> Option<u64> {
    match value_type {
        0 | 1 | 7 => Some(1),
        2 | 3 => Some(2),
        4..=6 => Some(4),
        10..=12 => Some(8),
        _ => None,
    }
}

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

/// How much of the metadata's values a parse reads. Keys and tensor infos are always read
/// whole.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Values {
    /// Their lengths only: where the header ends, and whether it is all there.
    Skip,
    /// Everything checked (types, lengths, UTF-8, booleans), nothing kept.
    Check,
    /// Checked and kept.
    Keep,
}

/// A cursor over the header's bytes that never reads past them. `buf` may be a prefix of the
/// file: counts are judged against the file's length, reads against `buf`'s.
struct Cursor<'a> {
    buf: &'a [u8],
    at: usize,
    file_len: u64,
    values: Values,
}

impl<'a> Cursor<'a> {
    fn left(&self) -> u64 {
        (self.buf.len() - self.at) as u64
    }

    fn take(&mut self, n: u64, what: &'static str) -> Result<&'a [u8], GgufError> {
        if n > self.left() {
            return Err(GgufError::Truncated(what));
        }
        let s = &self.buf[self.at..self.at + n as usize];
        self.at += n as usize;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], GgufError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N as u64, what)?);
        Ok(a)
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, GgufError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &'static str) -> Result<u64, GgufError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// Bytes of the file after the cursor.
    fn left_in_file(&self) -> u64 {
        self.file_len.saturating_sub(self.at as u64)
    }

    /// A count of items of at least `min_size` bytes each, checked against the file's bytes
    /// left.
    fn count(&mut self, min_size: u64, what: &'static str) -> Result<u64, GgufError> {
        let n = self.u64(what)?;
        if n.saturating_mul(min_size) > self.left_in_file() {
            return Err(GgufError::Implausible(what, n));
        }
        Ok(n)
    }

    /// A string, borrowed from the header's bytes.
    fn str(&mut self, what: &'static str) -> Result<&'a str, GgufError> {
        let n = self.u64(what)?;
        let bytes = self.take(n, what)?;
        std::str::from_utf8(bytes).map_err(|_| GgufError::Utf8(what))
    }

    /// A tensor info: name, dimensions, type id, offset.
    fn tensor_info(&mut self) -> Result<(&'a str, Vec<u64>, u32, u64), GgufError> {
        let name = self.str("tensor name")?;
        let n_dims = self.u32("tensor dimensions")?;
        if n_dims > MAX_DIMS {
            return Err(tensor_error(
                name,
                format!("{n_dims} dimensions (at most 4)"),
            ));
        }
        let dims = (0..n_dims)
            .map(|_| self.u64("tensor shape"))
            .collect::<Result<Vec<_>, _>>()?;
        let type_id = self.u32("tensor type")?;
        let offset = self.u64("tensor offset")?;
        Ok((name, dims, type_id, offset))
    }

    /// A metadata string, as far as [`Values`] asks: `None` unless kept.
    fn value_string(&mut self) -> Result<Option<String>, GgufError> {
        const W: &str = "metadata string";
        let n = self.u64(W)?;
        let bytes = self.take(n, W)?;
        match self.values {
            Values::Skip => Ok(None),
            Values::Check => std::str::from_utf8(bytes)
                .map(|_| None)
                .map_err(|_| GgufError::Utf8(W)),
            Values::Keep => String::from_utf8(bytes.to_vec())
                .map(Some)
                .map_err(|_| GgufError::Utf8(W)),
        }
    }

    fn value(&mut self, value_type: u32, depth: u32) -> Result<Value, GgufError> {
        const W: &str = "metadata value";
        Ok(match value_type {
            0 => Value::U8(self.array::<1>(W)?[0]),
            1 => Value::I8(self.array::<1>(W)?[0] as i8),
            2 => Value::U16(u16::from_le_bytes(self.array(W)?)),
            3 => Value::I16(i16::from_le_bytes(self.array(W)?)),
            4 => Value::U32(self.u32(W)?),
            5 => Value::I32(i32::from_le_bytes(self.array(W)?)),
            6 => Value::F32(f32::from_le_bytes(self.array(W)?)),
            7 => match self.array::<1>(W)?[0] {
                b @ 0..=1 => Value::Bool(b == 1),
                b => return Err(GgufError::Bool(b)),
            },
            // A string not kept reads as an empty one: the header drops such values.
            8 => Value::String(self.value_string()?.unwrap_or_default()),
            9 if depth < MAX_ARRAY_DEPTH => self.array_value(depth + 1)?,
            10 => Value::U64(self.u64(W)?),
            11 => Value::I64(i64::from_le_bytes(self.array(W)?)),
            12 => Value::F64(f64::from_le_bytes(self.array(W)?)),
            t => return Err(GgufError::ValueType(t)),
        })
    }

    fn array_value(&mut self, depth: u32) -> Result<Value, GgufError> {
        let elem = self.u32("array type")?;
        if let Some(size) = fixed_size(elem) {
            let n = self.count(size, "array length")?;
            let bytes = self.take(n * size, "array")?;
            if elem == 7 && self.values != Values::Skip {
                if let Some(&b) = bytes.iter().find(|&&b| b > 1) {
                    return Err(GgufError::Bool(b));
                }
            }
            let kept = match self.values {
                Values::Keep => bytes.to_vec(),
                _ => Vec::new(),
            };
            return Ok(Value::Numbers(elem, n, kept));
        }
        // A string takes at least 8 bytes (its length), an array 12 (its type and count);
        // the elements are kept only when the values are, in a list sized once (the count is
        // checked against the bytes of `buf` first: the file's length may be unknown).
        let n = self.count(8, "array length")?;
        let min = if elem == 8 { 8 } else { 12 };
        let room = self.values == Values::Keep && n.saturating_mul(min) <= self.left();
        let cap = if room { n as usize } else { 0 };
        match elem {
            8 => {
                let mut kept = Vec::with_capacity(cap);
                for _ in 0..n {
                    kept.extend(self.value_string()?);
                }
                Ok(Value::Strings(kept))
            }
            9 => {
                let mut kept = Vec::with_capacity(cap);
                for _ in 0..n {
                    let v = self.value(9, depth)?;
                    if self.values == Values::Keep {
                        kept.push(v);
                    }
                }
                Ok(Value::Arrays(kept))
            }
            t => Err(GgufError::ValueType(t)),
        }
    }
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

/// `infos` in the order of their bytes; already in order, as writers put them, they are not
/// sorted (a stable sort's scratch would hold half of them again).
fn in_data_order(mut infos: Vec<TensorInfo>) -> Vec<TensorInfo> {
    if !infos.is_sorted_by_key(|t| (t.begin, t.end)) {
        infos.sort_by_key(|t| (t.begin, t.end));
    }
    infos
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

/// A tensor of a parse, as the caller wants it listed: its name and its bytes (relative to
/// any fixed start) are all the checks over every tensor need.
trait Listed: Sized {
    /// The tensor `t` of a header whose data starts at `data_start`.
    fn make(t: GgufTensor, data_start: u64) -> Self;
    /// Its name.
    fn name(&self) -> &str;
    /// Where its bytes start and end.
    fn span(&self) -> (u64, u64);
}

impl Listed for GgufTensor {
    fn make(t: GgufTensor, _: u64) -> Self {
        t
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn span(&self) -> (u64, u64) {
        (self.range.start, self.range.end)
    }
}

impl Listed for TensorInfo {
    fn make(t: GgufTensor, data_start: u64) -> Self {
        let mut shape = t.dims;
        shape.reverse();
        TensorInfo {
            name: t.name,
            dtype_name: t.ggml_type.name.to_string(),
            dtype: t.ggml_type.dtype(),
            shape,
            begin: t.range.start - data_start,
            end: t.range.end - data_start,
        }
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn span(&self) -> (u64, u64) {
        (self.begin, self.end)
    }
}

/// Checks a tensor's type, size, alignment and place (its bytes must end by `file_len`).
fn validate(
    name: &str,
    dims: Vec<u64>,
    type_id: u32,
    offset: u64,
    alignment: u64,
    data_start: u64,
    file_len: u64,
) -> Result<GgufTensor, GgufError> {
    let err = |p: String| tensor_error(name, p);
    let t = GgmlType::from_id(type_id).ok_or_else(|| err(format!("unknown type {type_id}")))?;
    let values = dims
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d))
        .filter(|&n| n < 1 << 62)
        .ok_or_else(|| err(format!("shape {dims:?} overflows")))?;
    let row = dims.first().copied().unwrap_or(1);
    let len = t
        .row_bytes(row)
        .and_then(|r| r.checked_mul(values.checked_div(row).unwrap_or(0)))
        .ok_or_else(|| {
            err(format!(
                "shape {dims:?}: a row of {row} is not whole blocks of {} {}",
                t.block_values, t.name
            ))
        })?;
    if !offset.is_multiple_of(alignment) {
        return Err(err(format!(
            "offset {offset} is not aligned to {alignment}"
        )));
    }
    let range = data_start
        .checked_add(offset)
        .and_then(|s| Some(s..s.checked_add(len)?))
        .filter(|r| r.end <= file_len)
        .ok_or_else(|| {
            err(format!(
                "{len} bytes at {offset} run past the end of the file"
            ))
        })?;
    Ok(GgufTensor {
        name: name.to_string(),
        dims,
        ggml_type: t,
        range,
    })
}

/// Checks that no two of `tensors` share a name or bytes, through one index of 4 bytes a
/// tensor (the tensors in order of their bytes, as writers put them, need none for the
/// second).
fn apart<T: Listed>(tensors: &[T]) -> Result<(), GgufError> {
    let mut order: Vec<u32> = (0..tensors.len() as u32).collect();
    let at = |k: &u32| &tensors[*k as usize];
    order.sort_unstable_by(|a, b| at(a).name().cmp(at(b).name()));
    if let Some(w) = order
        .windows(2)
        .find(|w| at(&w[0]).name() == at(&w[1]).name())
    {
        let name = at(&w[0].max(w[1])).name();
        return Err(tensor_error(name, "appears twice".to_string()));
    }
    let overlap = |a: &T, b: &T| {
        let (start, _) = b.span();
        let (_, end) = a.span();
        (start < end)
            .then(|| tensor_error(b.name(), format!("overlaps the bytes of {:?}", a.name())))
    };
    if tensors.is_sorted_by_key(T::span) {
        return tensors
            .windows(2)
            .find_map(|w| overlap(&w[0], &w[1]))
            .map_or(Ok(()), Err);
    }
    // In file order again, so that tensors of equal spans keep it.
    order
        .iter_mut()
        .enumerate()
        .for_each(|(i, k)| *k = i as u32);
    order.sort_by_key(|k| at(k).span());
    order
        .windows(2)
        .find_map(|w| overlap(at(&w[0]), at(&w[1])))
        .map_or(Ok(()), Err)
}

#[cfg(test)]
pub(crate) mod tests;
