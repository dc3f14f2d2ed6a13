//! Writing GGUF files: a header from metadata and tensor infos, laid out as ggml lays them
//! (each tensor at the next multiple of the alignment after the one before, the data after
//! the header padded to the alignment), and a new file holding some tensors of a read one.
//!
//! What [`GgufHeader::parse`] reads, [`header`] writes back byte for byte: the metadata keeps
//! its value types (arrays their element types, numbers their stored bytes), so a header
//! rewritten with the same tensors is the original one.

use super::types::GgmlType;
use super::{GgufHeader, Value, DEFAULT_ALIGNMENT, MAGIC};

/// One tensor of a header to write.
#[derive(Clone, Copy, Debug)]
pub struct NewTensor<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its dimensions, innermost first, as GGUF stores them.
    pub dims: &'a [u64],
    /// Its ggml type.
    pub ggml_type: &'a GgmlType,
    /// Bytes of its data.
    pub len: u64,
}

/// The id GGUF stores for the type of `v`.
pub fn value_type(v: &Value) -> u32 {
    match v {
        Value::U8(_) => 0,
        Value::I8(_) => 1,
        Value::U16(_) => 2,
        Value::I16(_) => 3,
        Value::U32(_) => 4,
        Value::I32(_) => 5,
        Value::F32(_) => 6,
        Value::Bool(_) => 7,
        Value::String(_) => 8,
        Value::Numbers(..) | Value::Strings(_) | Value::Arrays(_) => 9,
        Value::U64(_) => 10,
        Value::I64(_) => 11,
        Value::F64(_) => 12,
    }
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// Appends `v`'s bytes (without its type id) to `out`.
fn put_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::U8(x) => out.push(*x),
        Value::I8(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::Bool(x) => out.push(u8::from(*x)),
        Value::String(s) => put_string(out, s),
        Value::Numbers(elem, n, bytes) => {
            out.extend_from_slice(&elem.to_le_bytes());
            out.extend_from_slice(&n.to_le_bytes());
            out.extend_from_slice(bytes);
        }
        Value::Strings(v) => {
            out.extend_from_slice(&8u32.to_le_bytes());
            out.extend_from_slice(&(v.len() as u64).to_le_bytes());
            for s in v {
                put_string(out, s);
            }
        }
        Value::Arrays(v) => {
            out.extend_from_slice(&9u32.to_le_bytes());
            out.extend_from_slice(&(v.len() as u64).to_le_bytes());
            for a in v {
                put_value(out, a);
            }
        }
        Value::U64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F64(x) => out.extend_from_slice(&x.to_le_bytes()),
    }
}

/// The alignment `metadata` asks for: its `general.alignment` when that is a power of two
/// held as a u32 (what the reader accepts), else the default.
pub fn alignment_of<'a>(metadata: impl IntoIterator<Item = &'a (String, Value)>) -> u64 {
    match metadata.into_iter().find(|(k, _)| k == "general.alignment") {
        Some((_, Value::U32(a))) if a.is_power_of_two() => u64::from(*a),
        _ => DEFAULT_ALIGNMENT,
    }
}

/// A GGUF header of `version` with `metadata` and `tensors`, padded with zeros to the
/// alignment `metadata` gives ([`alignment_of`]), and where each tensor's data starts,
/// relative to the end of the header: one after the other in the order given, each at the
/// next multiple of the alignment. For tests: files are otherwise written through
/// [`GgufHeader::header_for`].
#[cfg(any(test, feature = "internals"))]
pub fn header(
    version: u32,
    metadata: &[(String, Value)],
    tensors: &[NewTensor<'_>],
) -> (Vec<u8>, Vec<u64>) {
    header_of(version, metadata.iter(), tensors)
}

/// [`header`] of the key-values `metadata` yields.
fn header_of<'a>(
    version: u32,
    metadata: impl ExactSizeIterator<Item = &'a (String, Value)> + Clone,
    tensors: &[NewTensor<'_>],
) -> (Vec<u8>, Vec<u64>) {
    let alignment = alignment_of(metadata.clone());
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&(tensors.len() as u64).to_le_bytes());
    out.extend_from_slice(&(metadata.len() as u64).to_le_bytes());
    for (key, v) in metadata {
        put_string(&mut out, key);
        out.extend_from_slice(&value_type(v).to_le_bytes());
        put_value(&mut out, v);
    }
    let mut offsets = Vec::with_capacity(tensors.len());
    let mut offset = 0u64;
    for t in tensors {
        put_string(&mut out, t.name);
        out.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
        for d in t.dims {
            out.extend_from_slice(&d.to_le_bytes());
        }
        out.extend_from_slice(&t.ggml_type.id.to_le_bytes());
        out.extend_from_slice(&offset.to_le_bytes());
        offsets.push(offset);
        offset = (offset + t.len).next_multiple_of(alignment);
    }
    out.resize((out.len() as u64).next_multiple_of(alignment) as usize, 0);
    (out, offsets)
}

/// A whole GGUF file of `version` with `metadata` and the tensors (name, dims innermost first,
/// type, data), laid out as [`header`] says, each tensor's data padded with zeros to the
/// alignment (as ggml writes them). For tests: files are otherwise written through
/// [`GgufHeader::header_for`].
#[cfg(any(test, feature = "internals"))]
pub fn file(
    version: u32,
    metadata: &[(String, Value)],
    tensors: &[(&str, &[u64], &GgmlType, &[u8])],
) -> Vec<u8> {
    let infos: Vec<NewTensor> = tensors
        .iter()
        .map(|&(name, dims, ggml_type, data)| NewTensor {
            name,
            dims,
            ggml_type,
            len: data.len() as u64,
        })
        .collect();
    let (mut out, offsets) = header(version, metadata, &infos);
    let start = out.len();
    for ((_, _, _, data), offset) in tensors.iter().zip(offsets) {
        out.resize(start + offset as usize, 0);
        out.extend_from_slice(data);
    }
    let alignment = alignment_of(metadata);
    out.resize((out.len() as u64).next_multiple_of(alignment) as usize, 0);
    out
}

impl GgufHeader {
    /// The header of a new GGUF file holding the tensors `chosen` (positions in
    /// [`GgufHeader::tensors`], in the order they are to be written) and this header's version
    /// and metadata (its alignment honoured) but for the keys that say the file is one shard
    /// of a split checkpoint ([`claims_a_split`]: the new file is whole), and where each
    /// tensor's data starts relative to the end of the new header ([`header`]).
    pub fn header_for(&self, chosen: &[usize]) -> (Vec<u8>, Vec<u64>) {
        let infos: Vec<NewTensor> = chosen
            .iter()
            .map(|&k| {
                let t = &self.tensors[k];
                NewTensor {
                    name: &t.name,
                    dims: &t.dims,
                    ggml_type: t.ggml_type,
                    len: t.range.end - t.range.start,
                }
            })
            .collect();
        let kept: Vec<&(String, Value)> = self
            .metadata
            .iter()
            .filter(|(k, _)| !claims_a_split(k))
            .collect();
        header_of(self.version, kept.into_iter(), &infos)
    }
}

/// Whether the metadata key `key` says its file is one shard of a split checkpoint:
/// llama.cpp's `gguf-split` writes `split.no`, `split.count` and `split.tensors.count`, and
/// its loader reads every key under `split.` as such.
pub fn claims_a_split(key: &str) -> bool {
    key.starts_with("split.")
}
