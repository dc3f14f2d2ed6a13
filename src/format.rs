//! The file formats sc knows as such (safetensors, GGUF) and the generic rest: what each is
//! called, how a file of it is recognised, and which files a folder run codes. The front ends
//! ask [`Kind`] rather than matching the formats themselves, so that a format is added here
//! (and in the readers it needs: `safetensors`, `gguf/`).

use crate::container::Kind;
use crate::error::{Error, Result};
use crate::safetensors;
use crate::tensor::TensorInfo;
use std::collections::BTreeMap;

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

    /// The tensors of a header of this kind kept whole in `prefix` (an archive's original
    /// from its start to its tensor data), ordered by data offset; none for a generic file. The
    /// encoder keeps a header only if it parsed, so one that does not is corruption.
    pub(crate) fn kept_tensors(self, prefix: &[u8]) -> Result<Vec<TensorInfo>> {
        Ok(match self {
            Kind::Safetensors => {
                safetensors::Header::parse(&prefix[8..], None)
                    .map_err(Error::KeptHeader)?
                    .tensors
            }
            Kind::Gguf => crate::gguf::kept_tensors(prefix)
                .map_err(|e| Error::Corrupt(format!("kept GGUF header: {e}")))?,
            Kind::Generic => Vec::new(),
        })
    }

    /// The JSON text of a kept safetensors header (`prefix` as for
    /// [`Kind::kept_tensors`]); `None` for the other kinds.
    pub(crate) fn kept_json(self, prefix: &[u8]) -> Option<&str> {
        match self {
            Kind::Safetensors => std::str::from_utf8(&prefix[8..]).ok(),
            Kind::Generic | Kind::Gguf => None,
        }
    }

    /// The metadata of a kept header (`prefix` as for [`Kind::kept_tensors`]): a safetensors
    /// header's `__metadata__` (string values as they are, others as their JSON text), a GGUF
    /// header's key-values ([`crate::gguf::Value::to_text`]); `None` for a generic file and a
    /// safetensors header without `__metadata__`.
    pub(crate) fn kept_metadata(self, prefix: &[u8]) -> Result<Option<BTreeMap<String, String>>> {
        let meta = match self {
            Kind::Generic => return Ok(None),
            Kind::Gguf => {
                let text = crate::gguf::metadata_text(prefix)
                    .map_err(|e| Error::Corrupt(format!("kept GGUF header: {e}")))?;
                return Ok(Some(text));
            }
            Kind::Safetensors => safetensors::metadata(&prefix[8..]).map_err(Error::KeptHeader)?,
        };
        let Some(meta) = meta else {
            return Ok(None);
        };
        let entries = match meta.as_object() {
            Some(o) => o
                .iter()
                .map(|(k, v)| {
                    let text = match v {
                        serde_json::Value::String(s) => s.clone(),
                        v => v.to_string(),
                    };
                    (k.clone(), text)
                })
                .collect(),
            None => BTreeMap::from([(String::new(), meta.to_string())]),
        };
        Ok(Some(entries))
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
