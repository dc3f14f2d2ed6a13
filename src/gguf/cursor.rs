//! The cursor the header parse reads with: bounded reads of numbers, strings, tensor infos and
//! metadata values.

use super::value::{fixed_size, scalar, Value};
use super::{tensor_error, GgufError, MAX_ARRAY_DEPTH, MAX_DIMS};

/// How much of the metadata's values a parse reads. Keys and tensor infos are always read
/// whole.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Values {
    /// Their lengths only: where the header ends, and whether it is all there.
    Skip,
    /// Everything checked (types, lengths, UTF-8, booleans), nothing kept.
    Check,
    /// Checked and kept.
    Keep,
}

/// A cursor over the header's bytes that never reads past them. `buf` may be a prefix of the
/// file: counts are judged against the file's length, reads against `buf`'s.
pub(super) struct Cursor<'a> {
    pub(super) buf: &'a [u8],
    pub(super) at: usize,
    pub(super) file_len: u64,
    pub(super) values: Values,
}

impl<'a> Cursor<'a> {
    pub(super) fn left(&self) -> u64 {
        (self.buf.len() - self.at) as u64
    }

    pub(super) fn take(&mut self, n: u64, what: &'static str) -> Result<&'a [u8], GgufError> {
        if n > self.left() {
            return Err(GgufError::Truncated(what));
        }
        let s = &self.buf[self.at..self.at + n as usize];
        self.at += n as usize;
        Ok(s)
    }

    pub(super) fn array<const N: usize>(
        &mut self,
        what: &'static str,
    ) -> Result<[u8; N], GgufError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N as u64, what)?);
        Ok(a)
    }

    pub(super) fn u32(&mut self, what: &'static str) -> Result<u32, GgufError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    pub(super) fn u64(&mut self, what: &'static str) -> Result<u64, GgufError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// Bytes of the file after the cursor.
    pub(super) fn left_in_file(&self) -> u64 {
        self.file_len.saturating_sub(self.at as u64)
    }

    /// A count of items of at least `min_size` bytes each, checked against the file's bytes
    /// left.
    pub(super) fn count(&mut self, min_size: u64, what: &'static str) -> Result<u64, GgufError> {
        let n = self.u64(what)?;
        if n.saturating_mul(min_size) > self.left_in_file() {
            return Err(GgufError::Implausible(what, n));
        }
        Ok(n)
    }

    /// A string, borrowed from the header's bytes.
    pub(super) fn str(&mut self, what: &'static str) -> Result<&'a str, GgufError> {
        let n = self.u64(what)?;
        let bytes = self.take(n, what)?;
        std::str::from_utf8(bytes).map_err(|_| GgufError::Utf8(what))
    }

    /// A tensor info: name, dimensions, type id, offset.
    pub(super) fn tensor_info(&mut self) -> Result<(&'a str, Vec<u64>, u32, u64), GgufError> {
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
    pub(super) fn value_string(&mut self) -> Result<Option<String>, GgufError> {
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

    pub(super) fn value(&mut self, value_type: u32, depth: u32) -> Result<Value, GgufError> {
        if let Some(size) = fixed_size(value_type) {
            return scalar(value_type, self.take(size, "metadata value")?);
        }
        Ok(match value_type {
            // A string not kept reads as an empty one: the header drops such values.
            8 => Value::String(self.value_string()?.unwrap_or_default()),
            9 if depth < MAX_ARRAY_DEPTH => self.array_value(depth + 1)?,
            t => return Err(GgufError::ValueType(t)),
        })
    }

    pub(super) fn array_value(&mut self, depth: u32) -> Result<Value, GgufError> {
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
