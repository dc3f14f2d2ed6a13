//! The file formats sc knows as such (safetensors, GGUF) and the generic rest: what each is
//! called, how a file of it is recognised, and which files a folder run codes. The front ends
//! ask [`Kind`] rather than matching the formats themselves, so that a format is added here
//! (and in the readers it needs: `safetensors`, `gguf/`).

use crate::container::Kind;

impl Kind {
    /// Every kind, generic first.
    pub const ALL: [Kind; 3] = [Kind::Generic, Kind::Safetensors, Kind::Gguf];

    /// The kind's short name, as JSON output and Python give it: "safetensors", "gguf",
    /// "generic".
    pub fn name(self) -> &'static str {
        match self {
            Kind::Safetensors => "safetensors",
            Kind::Gguf => "gguf",
            Kind::Generic => "generic",
        }
    }

    /// The kind as a description of a file says it: "safetensors", "GGUF",
    /// "generic (not safetensors)".
    pub fn described(self) -> &'static str {
        match self {
            Kind::Safetensors => "safetensors",
            Kind::Gguf => "GGUF",
            Kind::Generic => "generic (not safetensors)",
        }
    }

    /// The file name extension of the format (none for generic files).
    pub fn extension(self) -> Option<&'static str> {
        match self {
            Kind::Safetensors => Some("safetensors"),
            Kind::Gguf => Some("gguf"),
            Kind::Generic => None,
        }
    }

    /// The format a file name says, by its extension; `None` for any other name.
    pub fn of_name(path: &std::path::Path) -> Option<Kind> {
        let ext = path.extension()?.to_str()?;
        Kind::ALL.into_iter().find(|k| k.extension() == Some(ext))
    }

    /// The format whose magic bytes `first` (a file's first bytes) start with: GGUF; `None`
    /// otherwise (a safetensors file has no magic: its header decides).
    pub fn by_magic(first: &[u8]) -> Option<Kind> {
        first.starts_with(&crate::gguf::MAGIC).then_some(Kind::Gguf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn names_and_extensions_round_trip() {
        for k in Kind::ALL {
            if let Some(ext) = k.extension() {
                assert_eq!(Kind::of_name(Path::new(&format!("a/b.{ext}"))), Some(k));
            }
        }
        assert_eq!(Kind::of_name(Path::new("model.safetensors.sc")), None);
        assert_eq!(Kind::of_name(Path::new("config.json")), None);
        assert_eq!(Kind::by_magic(b"GGUF\x03\0\0\0"), Some(Kind::Gguf));
        assert_eq!(Kind::by_magic(b"GGU"), None);
        let names: Vec<_> = Kind::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(names, ["generic", "safetensors", "gguf"]);
    }
}
