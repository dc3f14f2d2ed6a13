//! JSON documents for scripts (`sc info --json`, `sc list --json`), written as they are
//! serialized, so a header of a million tensors never becomes a million values at once.
//!
//! JSON escapes C0 control characters in strings but allows DEL and the C1 controls as they
//! are; those are escaped as well (`\u009b`), so text from a file cannot drive a terminal here
//! either. The document means the same to any JSON parser.

use serde::Serialize;
use std::io::{self, Write};

/// The lead byte of UTF-8's two-byte sequences for U+0080 to U+00BF, the C1 controls among
/// them.
const LEAD_C2: u8 = 0xC2;

/// A writer that escapes DEL and the C1 controls of the UTF-8 JSON text written through it.
/// Outside strings, JSON text is ASCII without DEL, so only strings are changed.
struct Escaping<W> {
    inner: W,
    /// A `0xC2` byte whose next byte decides what it starts.
    held: bool,
}

impl<W: Write> Escaping<W> {
    /// Writes the byte after a held `0xC2`.
    fn after_lead(&mut self, b: u8) -> io::Result<()> {
        match b {
            0x80..=0x9F => write!(self.inner, "\\u{:04x}", b as u32),
            _ => self.inner.write_all(&[LEAD_C2, b]),
        }
    }

    fn finish(mut self) -> io::Result<W> {
        if self.held {
            self.inner.write_all(&[LEAD_C2])?;
        }
        self.inner.flush()?;
        Ok(self.inner)
    }
}

impl<W: Write> Write for Escaping<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut plain = 0;
        for (k, &b) in buf.iter().enumerate() {
            if self.held {
                self.held = false;
                self.after_lead(b)?;
                plain = k + 1;
            } else if b == LEAD_C2 || b == 0x7F {
                self.inner.write_all(&buf[plain..k])?;
                match b {
                    LEAD_C2 => self.held = true,
                    _ => self.inner.write_all(b"\\u007f")?,
                }
                plain = k + 1;
            }
        }
        self.inner.write_all(&buf[plain..])?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Writes `value` to `w` as one pretty-printed JSON document and a newline.
pub fn write_document<W: Write + ?Sized>(w: &mut W, value: &impl Serialize) -> io::Result<()> {
    let mut out = Escaping {
        inner: &mut *w,
        held: false,
    };
    serde_json::to_writer_pretty(&mut out, value)?;
    out.finish()?.write_all(b"\n")
}

/// A sequence serialized from an iterator as it goes, never gathered.
pub struct Lazy<F>(pub F);

impl<F, I> Serialize for Lazy<F>
where
    F: Fn() -> I,
    I: IntoIterator,
    I::Item: Serialize,
{
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq((self.0)())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_the_value_kept() {
        let text = "a\u{1b}b\u{9b}c\u{7f}d\u{85}é\u{a0}";
        let mut out = Vec::new();
        write_document(&mut out, &serde_json::json!({ "k": text })).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert!(!s.chars().any(|c| c.is_control() && c != '\n'), "{s}");
        assert!(s.contains("\\u009b") && s.contains("\\u007f") && s.contains("é\u{a0}"));
        let back: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(back["k"], text);
    }
}
