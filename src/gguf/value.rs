//! GGUF metadata values, and their text and JSON forms.

use super::GgufError;

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
    scalar(elem, b).unwrap_or(Value::Arrays(Vec::new()))
}

/// The value of fixed-size type `elem` ([`fixed_size`]) whose little-endian bytes are `b`,
/// exactly as many as the type takes; a boolean other than 0 or 1 is an error.
pub(super) fn scalar(elem: u32, b: &[u8]) -> Result<Value, GgufError> {
    fn le<const N: usize>(b: &[u8]) -> [u8; N] {
        let mut a = [0u8; N];
        a.copy_from_slice(&b[..N]);
        a
    }
    Ok(match elem {
        0 => Value::U8(b[0]),
        1 => Value::I8(b[0] as i8),
        2 => Value::U16(u16::from_le_bytes(le(b))),
        3 => Value::I16(i16::from_le_bytes(le(b))),
        4 => Value::U32(u32::from_le_bytes(le(b))),
        5 => Value::I32(i32::from_le_bytes(le(b))),
        6 => Value::F32(f32::from_le_bytes(le(b))),
        7 => match b[0] {
            x @ 0..=1 => Value::Bool(x == 1),
            x => return Err(GgufError::Bool(x)),
        },
        10 => Value::U64(u64::from_le_bytes(le(b))),
        11 => Value::I64(i64::from_le_bytes(le(b))),
        12 => Value::F64(f64::from_le_bytes(le(b))),
        t => return Err(GgufError::ValueType(t)),
    })
}

/// Bytes of one value of a fixed-size type, or `None` for strings and arrays.
pub(super) fn fixed_size(value_type: u32) -> Option<u64> {
    match value_type {
        0 | 1 | 7 => Some(1),
        2 | 3 => Some(2),
        4..=6 => Some(4),
        10..=12 => Some(8),
        _ => None,
    }
}
