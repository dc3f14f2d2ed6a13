//! Parsing and validation of the safetensors header (8-byte little-endian length, then JSON).
//!
//! The codec never needs the header to be right: every block records its own transform, so a
//! header that fails validation only sends the file down the generic path. Validation is still
//! strict, because a wrong tensor map would split data along the wrong element boundaries.

use crate::error::{HeaderError, TensorProblem};
pub use crate::tensor::{Dtype, TensorInfo};
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;
use std::collections::HashMap;
use std::fmt;

/// Largest JSON header accepted, as in the reference implementation.
pub const MAX_HEADER_LEN: u64 = 100 << 20;

/// A validated safetensors header.
#[derive(Clone, Debug, Default)]
pub struct Header {
    /// Length of the JSON text (the value of the 8-byte prefix).
    #[cfg_attr(not(feature = "lab"), allow(dead_code))]
    pub json_len: u64,
    /// Tensors ordered by their data offset; their byte ranges do not overlap.
    pub tensors: Vec<TensorInfo>,
}

impl Header {
    /// Bytes before the tensor data: the 8-byte length and the JSON text.
    #[cfg(feature = "lab")]
    pub fn prefix_len(&self) -> u64 {
        8 + self.json_len
    }

    /// Parses and validates the JSON text of a header.
    ///
    /// `payload_len` is the number of bytes after the header when known (a file), `None` for a
    /// stream; with it, every tensor must lie inside the payload. The JSON is read entry by
    /// entry into the tensor list, never into one tree of JSON values, so memory stays within a
    /// small multiple of the text (see docs/FORMAT.md); a name given twice keeps its last
    /// entry, as JSON readers do.
    pub fn parse(json: &[u8], payload_len: Option<u64>) -> Result<Header, HeaderError> {
        let mut tensors = Vec::new();
        let mut problem = None;
        let mut de = serde_json::Deserializer::from_slice(json);
        let read = de
            .deserialize_map(Entries {
                tensors: &mut tensors,
                problem: &mut problem,
            })
            .and_then(|()| de.end());
        if let Err(e) = read {
            return Err(problem.unwrap_or_else(|| json_error(e)));
        }
        keep_last_of_each_name(&mut tensors);
        tensors.sort_unstable_by(|a, b| (a.begin, a.end, &a.name).cmp(&(b.begin, b.end, &b.name)));
        for pair in tensors.windows(2) {
            if pair[0].end > pair[1].begin {
                return Err(HeaderError::Overlap(
                    pair[0].name.clone(),
                    pair[1].name.clone(),
                ));
            }
        }
        if let (Some(len), Some(last)) = (payload_len, tensors.last()) {
            if last.end > len {
                return Err(HeaderError::PastEnd {
                    name: last.name.clone(),
                    end: last.end,
                    payload: len,
                });
            }
        }
        Ok(Header {
            json_len: json.len() as u64,
            tensors,
        })
    }
}

/// Reads a header's top-level object: every entry but `__metadata__` is a tensor, taken one
/// at a time as a small JSON value and checked by [`parse_entry`]. The first invalid entry
/// stops the reading, its problem left in `problem`.
struct Entries<'a> {
    tensors: &'a mut Vec<TensorInfo>,
    problem: &'a mut Option<HeaderError>,
}

impl<'de> Visitor<'de> for Entries<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(name) = map.next_key::<String>()? {
            if name == "__metadata__" {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            let entry: Value = map.next_value()?;
            match parse_entry(&name, &entry) {
                Ok(t) => self.tensors.push(t),
                Err(e) => {
                    *self.problem = Some(e);
                    return Err(de::Error::custom("invalid tensor entry"));
                }
            }
        }
        Ok(())
    }
}

/// Drops every entry whose name comes again later.
fn keep_last_of_each_name(tensors: &mut Vec<TensorInfo>) {
    let mut last: HashMap<&str, usize> = HashMap::with_capacity(tensors.len());
    for (k, t) in tensors.iter().enumerate() {
        last.insert(&t.name, k);
    }
    if last.len() == tensors.len() {
        return;
    }
    let keep: Vec<bool> = (0..tensors.len())
        .map(|k| last.get(tensors[k].name.as_str()) == Some(&k))
        .collect();
    drop(last);
    let mut k = 0;
    tensors.retain(|_| {
        k += 1;
        keep[k - 1]
    });
}

/// The `__metadata__` entry of a header's JSON text, if it has one, read without building the
/// rest of the header as JSON values.
pub fn metadata(json: &[u8]) -> Result<Option<Value>, HeaderError> {
    struct Metadata;
    impl<'de> Visitor<'de> for Metadata {
        type Value = Option<Value>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut found = None;
            while let Some(key) = map.next_key::<String>()? {
                match key == "__metadata__" {
                    true => found = Some(map.next_value()?),
                    false => {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
            Ok(found)
        }
    }
    let mut de = serde_json::Deserializer::from_slice(json);
    de.deserialize_map(Metadata)
        .and_then(|m| de.end().map(|()| m))
        .map_err(json_error)
}

/// A JSON reading error as a header error: the text does not parse, or is not an object.
fn json_error(e: serde_json::Error) -> HeaderError {
    match e.classify() {
        serde_json::error::Category::Data => HeaderError::NotAnObject,
        _ => HeaderError::Json(e.to_string()),
    }
}

fn parse_entry(name: &str, entry: &Value) -> Result<TensorInfo, HeaderError> {
    let bad = |problem: TensorProblem| HeaderError::Tensor {
        name: name.to_string(),
        problem,
    };
    let dtype_name = entry
        .get("dtype")
        .and_then(Value::as_str)
        .ok_or_else(|| bad(TensorProblem::MissingDtype))?
        .to_string();
    let shape = entry
        .get("shape")
        .and_then(Value::as_array)
        .ok_or_else(|| bad(TensorProblem::MissingShape))?
        .iter()
        .map(|d| d.as_u64().ok_or_else(|| bad(TensorProblem::BadShape)))
        .collect::<Result<Vec<u64>, HeaderError>>()?;
    let offsets = entry
        .get("data_offsets")
        .and_then(Value::as_array)
        .ok_or_else(|| bad(TensorProblem::MissingOffsets))?;
    let offset = |v: &Value| v.as_u64().ok_or_else(|| bad(TensorProblem::BadOffsets));
    let (begin, end) = match offsets.as_slice() {
        [b, e] => (offset(b)?, offset(e)?),
        _ => return Err(bad(TensorProblem::OffsetsNotPair)),
    };
    if begin > end {
        return Err(bad(TensorProblem::ReversedOffsets));
    }
    let dtype = Dtype::parse(&dtype_name);
    if let Some(dt) = dtype {
        let expected = shape
            .iter()
            .try_fold(dt.width(), |acc, &d| acc.checked_mul(d))
            .ok_or_else(|| bad(TensorProblem::ShapeOverflow))?;
        if expected != end - begin {
            return Err(bad(TensorProblem::SizeMismatch {
                expected,
                span: end - begin,
            }));
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

/// Reads and validates the header of a safetensors file of `len` bytes through `read_at`
/// (which fills a buffer from an offset): the header and the length of its JSON text. Bytes
/// that are not a safetensors file are `Ok(Err(why))`; a failed read is `Err`.
pub fn read_header_at(
    len: u64,
    mut read_at: impl FnMut(&mut [u8], u64) -> std::io::Result<()>,
) -> std::io::Result<Result<(Header, u64), HeaderError>> {
    if len < 8 {
        return Ok(Err(HeaderError::TooShort));
    }
    let mut first = [0u8; 8];
    read_at(&mut first, 0)?;
    let n = json_len(&first);
    if n > MAX_HEADER_LEN || n.saturating_add(8) > len {
        return Ok(Err(HeaderError::ImplausibleLength(n)));
    }
    let mut json = vec![0u8; n as usize];
    read_at(&mut json, 8)?;
    Ok(Header::parse(&json, Some(len - 8 - n)).map(|h| (h, n)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_size_mismatch_and_overlap() {
        let j = br#"{"a":{"dtype":"BF16","shape":[3],"data_offsets":[0,4]}}"#;
        assert!(Header::parse(j, None)
            .unwrap_err()
            .to_string()
            .contains("shape x dtype"));
        let j = br#"{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},
                     "b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}}"#;
        assert!(matches!(
            Header::parse(j, None),
            Err(HeaderError::Overlap(..))
        ));
        let j = br#"{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}"#;
        assert!(matches!(
            Header::parse(j, Some(3)),
            Err(HeaderError::PastEnd { end: 4, .. })
        ));
        assert_eq!(Header::parse(j, Some(4)).unwrap().tensors.len(), 1);
    }
}
