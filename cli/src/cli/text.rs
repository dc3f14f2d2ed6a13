//! Text from files (tensor names, dtypes, metadata, file names) made safe to print: control
//! characters would otherwise reach the terminal and drive it (escape sequences, carriage
//! returns rewriting a line).

use std::borrow::Cow;
use std::fmt::{self, Write as _};
use std::io::{self, Write};

/// How `c` is printed when it is a control character.
fn escape(c: char, out: &mut String) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
}

/// `s` with every control character (C0, DEL, C1) written as an escape such as `\u{1b}`.
pub fn printable(s: &str) -> Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c.is_control() {
            true => escape(c, &mut out),
            false => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Writes `s` as [`printable`] gives it, without a copy of the whole text.
pub fn write_printable<W: Write + ?Sized>(w: &mut W, s: &str) -> io::Result<()> {
    let mut rest = s;
    while let Some(at) = rest.find(char::is_control) {
        w.write_all(&rest.as_bytes()[..at])?;
        let c = rest[at..].chars().next().unwrap_or_default();
        let mut e = String::new();
        escape(c, &mut e);
        w.write_all(e.as_bytes())?;
        rest = &rest[at + c.len_utf8()..];
    }
    w.write_all(rest.as_bytes())
}

/// `n` and `noun`, plural unless `n` is 1: "1 block", "7 blocks".
pub fn count(n: impl Into<u64>, noun: &str) -> String {
    match n.into() {
        1 => format!("1 {noun}"),
        n => format!("{n} {noun}s"),
    }
}

/// Text padded with spaces to a width in characters, for tables: `format!`'s own widths
/// (`{:<w$}`) panic past 65,535, and a name in a file may be longer.
pub struct Padded<'a> {
    text: &'a str,
    width: usize,
    right: bool,
}

/// `text` followed by spaces up to `width` characters.
pub fn left(text: &str, width: usize) -> Padded<'_> {
    Padded {
        text,
        width,
        right: false,
    }
}

/// `text` after spaces up to `width` characters.
pub fn right(text: &str, width: usize) -> Padded<'_> {
    Padded {
        text,
        width,
        right: true,
    }
}

impl fmt::Display for Padded<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SPACES: &str = "                                ";
        let mut fill = self.width.saturating_sub(self.text.chars().count());
        if !self.right {
            f.write_str(self.text)?;
        }
        while fill > 0 {
            let n = fill.min(SPACES.len());
            f.write_str(&SPACES[..n])?;
            fill -= n;
        }
        if self.right {
            f.write_str(self.text)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        let s = "a\u{1b}[31mb\r\n\u{9b}c\u{7f}é";
        let want = "a\\u{1b}[31mb\\r\\n\\u{9b}c\\u{7f}é";
        assert_eq!(printable(s), want);
        let mut w = Vec::new();
        write_printable(&mut w, s).unwrap();
        assert_eq!(String::from_utf8(w).unwrap(), want);
        assert!(matches!(printable("plain é"), Cow::Borrowed(_)));
    }

    #[test]
    fn padding_takes_any_width() {
        assert_eq!(format!("[{}]", left("é", 3)), "[é  ]");
        assert_eq!(format!("[{}]", right("ab", 4)), "[  ab]");
        assert_eq!(format!("[{}]", left("abc", 2)), "[abc]");
        let wide = format!("{}|", right("x", 70_000));
        assert_eq!(wide.len(), 70_001);
        assert!(wide.ends_with("x|"));
    }
}
