//! Parsing and validation of the safetensors header (8-byte little-endian length, then JSON).
//!
//! The codec never needs the header to be right: every block records its own transform, so a
//! header that fails validation only sends the file down the generic path. Validation is still
//! strict, because a wrong tensor map would split data along the wrong element boundaries.

use crate::container::read_exact_or;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};

/// Largest JSON header accepted, as in the reference implementation.
pub const MAX_HEADER_LEN: u64 = 100 << 20;

/// Element types defined by the safetensors format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[allow(missing_docs)]
pub enum Dtype {
    Bool,
    U8,
    I8,
    F8E5M2,
    F8E4M3,
    I16,
    U16,
    F16,
    BF16,
    I32,
    U32,
    F32,
    I64,
    U64,
    F64,
}

impl Dtype {
    /// Parses the header's dtype string.
    pub fn parse(s: &str) -> Option<Dtype> {
        use Dtype::*;
        Some(match s {
            "BOOL" => Bool,
            "U8" => U8,
            "I8" => I8,
            "F8_E5M2" => F8E5M2,
            "F8_E4M3" => F8E4M3,
            "I16" => I16,
            "U16" => U16,
            "F16" => F16,
            "BF16" => BF16,
            "I32" => I32,
            "U32" => U32,
            "F32" => F32,
            "I64" => I64,
            "U64" => U64,
            "F64" => F64,
            _ => return None,
        })
    }

    /// Bytes per element.
    pub fn width(self) -> u64 {
        use Dtype::*;
        match self {
            Bool | U8 | I8 | F8E5M2 | F8E4M3 => 1,
            I16 | U16 | F16 | BF16 => 2,
            I32 | U32 | F32 => 4,
            I64 | U64 | F64 => 8,
        }
    }
}

/// One tensor entry of the header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    /// Tensor name as in the JSON.
    pub name: String,
    /// The dtype string as written (kept for unknown dtypes).
    pub dtype_name: String,
    /// Parsed dtype, `None` if the string is not a known safetensors dtype.
    pub dtype: Option<Dtype>,
    /// Shape.
    pub shape: Vec<u64>,
    /// Start of the data, relative to the end of the header.
    pub begin: u64,
    /// End of the data (exclusive), relative to the end of the header.
    pub end: u64,
}

/// A validated safetensors header.
#[derive(Clone, Debug, Default)]
pub struct Header {
    /// Length of the JSON text (the value of the 8-byte prefix).
    pub json_len: u64,
    /// Tensors ordered by their data offset; their byte ranges do not overlap.
    pub tensors: Vec<TensorInfo>,
}

impl Header {
    /// Bytes before the tensor data: the 8-byte length and the JSON text.
    pub fn prefix_len(&self) -> u64 {
        8 + self.json_len
    }

    /// Parses and validates the JSON text of a header.
    ///
    /// `payload_len` is the number of bytes after the header when known (a file), `None` for a
    /// stream; with it, every tensor must lie inside the payload.
    pub fn parse(json: &[u8], payload_len: Option<u64>) -> Result<Header, String> {
        let value: Value =
            serde_json::from_slice(json).map_err(|e| format!("header is not valid JSON: {e}"))?;
        let obj = value.as_object().ok_or("header JSON is not an object")?;
        let mut tensors = Vec::with_capacity(obj.len());
        for (name, entry) in obj {
            if name == "__metadata__" {
                continue;
            }
            tensors.push(parse_entry(name, entry)?);
        }
        tensors.sort_by_key(|t| (t.begin, t.end));
        for pair in tensors.windows(2) {
            if pair[0].end > pair[1].begin {
                return Err(format!(
                    "tensors {:?} and {:?} overlap",
                    pair[0].name, pair[1].name
                ));
            }
        }
        if let (Some(len), Some(last)) = (payload_len, tensors.last()) {
            if last.end > len {
                return Err(format!(
                    "tensor {:?} ends at {} but the payload has {} bytes",
                    last.name, last.end, len
                ));
            }
        }
        Ok(Header {
            json_len: json.len() as u64,
            tensors,
        })
    }

    /// Bytes of tensor data per dtype name.
    pub fn dtype_bytes(&self) -> BTreeMap<String, u64> {
        let mut m = BTreeMap::new();
        for t in &self.tensors {
            *m.entry(t.dtype_name.clone()).or_insert(0) += t.end - t.begin;
        }
        m
    }
}

fn parse_entry(name: &str, entry: &Value) -> Result<TensorInfo, String> {
    let bad = |what: &str| format!("tensor {name:?}: {what}");
    let dtype_name = entry
        .get("dtype")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("missing dtype"))?
        .to_string();
    let shape = entry
        .get("shape")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("missing shape"))?
        .iter()
        .map(|d| {
            d.as_u64()
                .ok_or_else(|| bad("shape is not a list of integers"))
        })
        .collect::<Result<Vec<u64>, String>>()?;
    let offsets = entry
        .get("data_offsets")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("missing data_offsets"))?;
    let (begin, end) = match offsets.as_slice() {
        [b, e] => (
            b.as_u64().ok_or_else(|| bad("data_offsets not integers"))?,
            e.as_u64().ok_or_else(|| bad("data_offsets not integers"))?,
        ),
        _ => return Err(bad("data_offsets must have two entries")),
    };
    if begin > end {
        return Err(bad("data_offsets are reversed"));
    }
    let dtype = Dtype::parse(&dtype_name);
    if let Some(dt) = dtype {
        let expected = shape
            .iter()
            .try_fold(dt.width(), |acc, &d| acc.checked_mul(d))
            .ok_or_else(|| bad("shape overflows"))?;
        if expected != end - begin {
            return Err(bad(&format!(
                "shape x dtype is {expected} bytes but data_offsets span {}",
                end - begin
            )));
        }
    }
    Ok(TensorInfo {
        name: name.to_string(),
        dtype_name,
        dtype,
        shape,
        begin,
        end,
    })
}

/// Reads the JSON length from the first 8 bytes of a file.
pub fn json_len(first8: &[u8; 8]) -> u64 {
    u64::from_le_bytes(*first8)
}

/// Reads and validates the header of the safetensors file `r` (from its start); returns it with
/// the file's length. Anything else is [`crate::Error::InvalidArgument`] saying why the file is
/// not safetensors, so a command can name the problem in one line.
pub fn read_file_header<R: Read + Seek>(r: &mut R) -> crate::Result<(Header, u64)> {
    let file_len = r.seek(SeekFrom::End(0))?;
    r.seek(SeekFrom::Start(0))?;
    let not_st =
        |why: String| crate::Error::InvalidArgument(format!("not a safetensors file: {why}"));
    let mut first = [0u8; 8];
    read_exact_or(r, &mut first, "safetensors header").map_err(|_| not_st("too short".into()))?;
    let n = json_len(&first);
    if n > MAX_HEADER_LEN || n + 8 > file_len {
        return Err(not_st(format!("header length {n} is implausible")));
    }
    let mut json = vec![0u8; n as usize];
    read_exact_or(r, &mut json, "safetensors header")?;
    let header = Header::parse(&json, Some(file_len - 8 - n)).map_err(not_st)?;
    Ok((header, file_len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_size_mismatch_and_overlap() {
        let j = br#"{"a":{"dtype":"BF16","shape":[3],"data_offsets":[0,4]}}"#;
        assert!(Header::parse(j, None)
            .unwrap_err()
            .contains("shape x dtype"));
        let j = br#"{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},
                     "b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}}"#;
        assert!(Header::parse(j, None).unwrap_err().contains("overlap"));
        let j = br#"{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}"#;
        assert!(Header::parse(j, Some(3)).unwrap_err().contains("payload"));
        assert_eq!(Header::parse(j, Some(4)).unwrap().tensors.len(), 1);
    }
}
