//! The reference section: where the base bytes of a delta-coded archive's tensors come from
//! (see `docs/FORMAT.md`, "Reference section").
//!
//! A tensor is coded against either the tensor of the same name in a base checkpoint, which
//! the section identifies by length and XXH3-128 digest (so any file holding those bytes under
//! that name serves, re-sharded or re-encoded), or an earlier tensor of the same file with the
//! same bytes (a repeated tensor, stored once).

use super::checksum;
use crate::error::{Error, Result};
use crate::gguf::quant;
use crate::gguf::types::GgmlType;
use crate::read::read_exact_or;
use crate::safetensors::TensorInfo;
use std::collections::HashMap;
use std::io::Read;

/// Tag that opens the section.
pub const TAG: [u8; 4] = *b"SCRF";
/// Longest section body: far above what any header's tensor names need.
pub const MAX_LEN: u64 = 256 << 20;
/// Longest name the section holds (tensor names and the base's name).
const MAX_NAME: usize = u16::MAX as usize;

/// Where one tensor's base bytes come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// The tensor of the same name in the base: its length and the XXH3-128 of its bytes.
    Base {
        /// Bytes of the base tensor (the tensor's own length).
        len: u64,
        /// XXH3-128 (seed 0) of the base tensor's bytes.
        digest: u128,
    },
    /// An earlier tensor of this file holding the same bytes.
    Tensor(String),
    /// The seed's tensor of the same name, converted to f32 and quantized to this tensor's ggml
    /// type by the quantizer named (format version 7): a quant coded against its seed.
    Derived(Derived),
}

/// A tensor re-derived from its seed: the seed tensor's identity, the types on both sides,
/// the quantizer, and how many of the tensor's ggml blocks re-derived exactly at encode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Derived {
    /// Bytes of the seed tensor.
    pub len: u64,
    /// XXH3-128 (seed 0) of the seed tensor's bytes.
    pub digest: u128,
    /// ggml type id of the seed tensor (F32, F16 or BF16).
    pub seed_type: u32,
    /// ggml type id of this tensor, as the kept header gives it.
    pub quant_type: u32,
    /// The quantizer that makes the prediction ([`crate::gguf::quant::QUANTIZERS`]).
    pub quantizer: String,
    /// ggml blocks of this tensor equal to their prediction, counted at encode.
    pub exact: u64,
}

impl Derived {
    /// The seed and quant types of a derived entry, or why they cannot be.
    pub(crate) fn types(
        &self,
    ) -> std::result::Result<(&'static GgmlType, &'static GgmlType), String> {
        if !quant::QUANTIZERS.contains(&self.quantizer.as_str()) {
            return Err(format!(
                "quantizer {:?} is unknown to this build (it knows {:?})",
                self.quantizer,
                quant::QUANTIZERS
            ));
        }
        let seed = GgmlType::from_id(self.seed_type)
            .filter(|t| quant::is_seed_type(t))
            .ok_or_else(|| format!("seed type {} is not F32, F16 or BF16", self.seed_type))?;
        let made = GgmlType::from_id(self.quant_type)
            .filter(|t| quant::can_quantize(t) && t.id != seed.id)
            .ok_or_else(|| format!("type {} is not one the quantizer makes", self.quant_type))?;
        Ok((seed, made))
    }

    /// The ggml blocks of a derived entry's tensor: the seed's values over the quant's block.
    pub(crate) fn blocks(&self) -> u64 {
        match self.types() {
            Ok((seed, quant)) => {
                self.len / u64::from(seed.block_bytes) / u64::from(quant.block_values)
            }
            Err(_) => 0,
        }
    }
}

/// One tensor coded against other bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reference {
    /// The tensor of this file.
    pub tensor: String,
    /// What it is coded against.
    pub source: Source,
}

/// The section: the base's name (a hint for the user) and every reference.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct References {
    /// File or folder name of the base the archive was coded against; empty when no tensor
    /// refers to a base.
    pub base_name: String,
    /// The references, in the order of the tensors in the file.
    pub entries: Vec<Reference>,
}

fn corrupt(msg: impl Into<String>) -> Error {
    Error::Corrupt(format!("reference section: {}", msg.into()))
}

fn put_name(out: &mut Vec<u8>, name: &str) {
    out.extend_from_slice(&(name.len() as u16).to_le_bytes());
    out.extend_from_slice(name.as_bytes());
}

/// Reads the section body field by field, every length checked against what remains.
struct Fields<'a>(&'a [u8]);

impl Fields<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8]> {
        if n > self.0.len() {
            return Err(corrupt("ends inside an entry"));
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }

    fn int<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut b = [0u8; N];
        b.copy_from_slice(self.take(N)?);
        Ok(b)
    }

    fn name(&mut self) -> Result<String> {
        let n = u16::from_le_bytes(self.int()?) as usize;
        let bytes = self.take(n)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| corrupt("a name is not UTF-8"))
    }
}

impl References {
    /// The serialised section: tag, body length, body, XXH3 of all before it.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut body = Vec::new();
        put_name(&mut body, &self.base_name);
        body.extend_from_slice(&(self.entries.len() as u32).to_le_bytes());
        for e in &self.entries {
            match &e.source {
                Source::Base { len, digest } => {
                    body.push(0);
                    put_name(&mut body, &e.tensor);
                    body.extend_from_slice(&len.to_le_bytes());
                    body.extend_from_slice(&digest.to_le_bytes());
                }
                Source::Tensor(from) => {
                    body.push(1);
                    put_name(&mut body, &e.tensor);
                    put_name(&mut body, from);
                }
                Source::Derived(d) => {
                    body.push(2);
                    put_name(&mut body, &e.tensor);
                    body.extend_from_slice(&d.len.to_le_bytes());
                    body.extend_from_slice(&d.digest.to_le_bytes());
                    body.extend_from_slice(&d.seed_type.to_le_bytes());
                    body.extend_from_slice(&d.quant_type.to_le_bytes());
                    put_name(&mut body, &d.quantizer);
                    body.extend_from_slice(&d.exact.to_le_bytes());
                }
            }
        }
        let mut b = Vec::with_capacity(body.len() + 20);
        b.extend_from_slice(&TAG);
        b.extend_from_slice(&(body.len() as u64).to_le_bytes());
        b.extend_from_slice(&body);
        let sum = checksum::xxh3(&b);
        b.extend_from_slice(&sum.to_le_bytes());
        b
    }

    /// Length of [`References::to_bytes`]: tag, length, body and checksum.
    pub fn encoded_len(&self) -> u64 {
        let name = |s: &str| 2 + s.len() as u64;
        let entries: u64 = (self.entries.iter())
            .map(|e| {
                1 + name(&e.tensor)
                    + match &e.source {
                        Source::Base { .. } => 8 + 16,
                        Source::Tensor(from) => name(from),
                        Source::Derived(d) => 8 + 16 + 4 + 4 + name(&d.quantizer) + 8,
                    }
            })
            .sum();
        12 + name(&self.base_name) + 4 + entries + 8
    }

    /// Tensors coded against the base (its tensors as they are, or re-derived from them), and
    /// tensors coded against an earlier one.
    pub fn counts(&self) -> (usize, usize) {
        let repeated = (self.entries.iter())
            .filter(|e| matches!(e.source, Source::Tensor(_)))
            .count();
        (self.entries.len() - repeated, repeated)
    }

    /// Tensors re-derived from the seed.
    pub fn derived(&self) -> usize {
        (self.entries.iter())
            .filter(|e| matches!(e.source, Source::Derived(_)))
            .count()
    }

    /// Whether the names fit the section's 16-bit length fields.
    pub fn fits(&self) -> bool {
        let ok = |s: &str| s.len() <= MAX_NAME;
        ok(&self.base_name)
            && self.entries.iter().all(|e| {
                ok(&e.tensor)
                    && match &e.source {
                        Source::Tensor(from) => ok(from),
                        Source::Derived(d) => ok(&d.quantizer),
                        Source::Base { .. } => true,
                    }
            })
    }

    /// Reads and checks a section; `room` bounds it when the archive's length is known.
    pub fn read(r: &mut impl Read, room: Option<u64>) -> Result<References> {
        let mut head = [0u8; 12];
        read_exact_or(r, &mut head, "reference section")?;
        if head[..4] != TAG {
            return Err(corrupt("tag missing"));
        }
        let len = u64::from_le_bytes(head[4..].try_into().unwrap_or_default());
        if len > MAX_LEN {
            return Err(Error::Truncated("reference section"));
        }
        let room = room.map(|room| room.saturating_sub(head.len() as u64));
        let body = super::read_checked(r, len, room, "reference section")?;
        let mut sum = [0u8; 8];
        read_exact_or(r, &mut sum, "reference section checksum")?;
        let mut h = twox_hash::XxHash3_64::new();
        std::hash::Hasher::write(&mut h, &head);
        std::hash::Hasher::write(&mut h, &body);
        if std::hash::Hasher::finish(&h) != u64::from_le_bytes(sum) {
            return Err(corrupt("checksum mismatch"));
        }
        let mut f = Fields(&body);
        let base_name = f.name()?;
        let count = u32::from_le_bytes(f.int()?) as usize;
        // Each entry takes at least 5 bytes: a count beyond that is corrupt, not an allocation.
        if count > body.len() / 5 {
            return Err(corrupt("more entries than bytes"));
        }
        let mut entries = Vec::with_capacity(count);
        for _ in 0..count {
            let [kind] = f.int()?;
            let tensor = f.name()?;
            let source = match kind {
                0 => Source::Base {
                    len: u64::from_le_bytes(f.int()?),
                    digest: u128::from_le_bytes(f.int()?),
                },
                1 => Source::Tensor(f.name()?),
                2 => Source::Derived(Derived {
                    len: u64::from_le_bytes(f.int()?),
                    digest: u128::from_le_bytes(f.int()?),
                    seed_type: u32::from_le_bytes(f.int()?),
                    quant_type: u32::from_le_bytes(f.int()?),
                    quantizer: f.name()?,
                    exact: u64::from_le_bytes(f.int()?),
                }),
                k => return Err(corrupt(format!("unknown reference kind {k}"))),
            };
            entries.push(Reference { tensor, source });
        }
        if !f.0.is_empty() {
            return Err(corrupt("bytes after the last entry"));
        }
        Ok(References { base_name, entries })
    }

    /// Checks the references against the archive's tensors (by data offset): every name a
    /// tensor with bytes, referred to once; a base tensor as long as the tensor; a repeated
    /// tensor's source an earlier tensor as long, ending before it starts, and not itself
    /// repeated, so resolving a source never needs another.
    pub fn check(&self, tensors: &[TensorInfo]) -> Result<()> {
        let by_name: HashMap<&str, &TensorInfo> =
            tensors.iter().map(|t| (t.name.as_str(), t)).collect();
        let find = |name: &str| {
            by_name
                .get(name)
                .copied()
                .filter(|t| !t.is_empty())
                .ok_or_else(|| corrupt(format!("no tensor with bytes named {name:?}")))
        };
        let mut seen = std::collections::HashSet::new();
        let repeated: std::collections::HashSet<&str> = self
            .entries
            .iter()
            .filter(|e| matches!(e.source, Source::Tensor(_)))
            .map(|e| e.tensor.as_str())
            .collect();
        for e in &self.entries {
            let t = find(&e.tensor)?;
            if !seen.insert(e.tensor.as_str()) {
                return Err(corrupt(format!("{:?} is referred to twice", e.tensor)));
            }
            match &e.source {
                Source::Base { len, .. } if *len != t.len() => {
                    return Err(corrupt(format!(
                        "base tensor {:?} has {len} bytes, the tensor {}",
                        e.tensor,
                        t.len()
                    )))
                }
                Source::Base { .. } => {}
                Source::Derived(d) => check_derived(&e.tensor, t, d)?,
                Source::Tensor(from) => {
                    let s = find(from)?;
                    if s.len() != t.len() || s.end > t.begin || repeated.contains(from.as_str()) {
                        return Err(corrupt(format!("{:?} cannot repeat {from:?}", e.tensor)));
                    }
                }
            }
        }
        Ok(())
    }
}

/// Checks a derived tensor's entry against the tensor `t` of the kept header: its ggml type
/// the one recorded, a type the quantizer makes; the seed type F32, F16 or BF16, and the seed
/// tensor as many values long; the exact blocks no more than the tensor has.
fn check_derived(name: &str, t: &TensorInfo, d: &Derived) -> Result<()> {
    let bad = |what: &str| corrupt(format!("derived tensor {name:?}: {what}"));
    let (seed, quant) = d.types().map_err(|e| bad(&e))?;
    if quant.name != t.dtype_name {
        return Err(bad("its type is not the kept header's"));
    }
    let blocks = t.len() / u64::from(quant.block_bytes);
    if !t.len().is_multiple_of(u64::from(quant.block_bytes)) || d.exact > blocks {
        return Err(bad("more exact blocks than blocks"));
    }
    let values = blocks.checked_mul(u64::from(quant.block_values));
    if values.and_then(|v| v.checked_mul(u64::from(seed.block_bytes))) != Some(d.len) {
        return Err(bad("the seed tensor's length does not match"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::safetensors::Header;

    fn tensors() -> Vec<TensorInfo> {
        let json = br#"{"a":{"dtype":"BF16","shape":[4],"data_offsets":[0,8]},
            "b":{"dtype":"BF16","shape":[4],"data_offsets":[8,16]},
            "c":{"dtype":"U8","shape":[8],"data_offsets":[16,24]},
            "e":{"dtype":"U8","shape":[0],"data_offsets":[24,24]}}"#;
        Header::parse(json, Some(24)).unwrap().tensors
    }

    fn refs(entries: &[(&str, Source)]) -> References {
        References {
            base_name: "base.safetensors".into(),
            entries: entries
                .iter()
                .map(|(t, s)| Reference {
                    tensor: t.to_string(),
                    source: s.clone(),
                })
                .collect(),
        }
    }

    #[test]
    fn round_trip_and_checks() {
        let base = |len| Source::Base {
            len,
            digest: 0x0123_4567_89AB_CDEF_FEDC_BA98_7654_3210,
        };
        let own = |s: &str| Source::Tensor(s.into());
        let good = refs(&[("a", base(8)), ("b", own("a")), ("c", own("a"))]);
        let bytes = good.to_bytes();
        assert_eq!(good.encoded_len(), bytes.len() as u64);
        let back = References::read(&mut &bytes[..], Some(bytes.len() as u64)).unwrap();
        assert_eq!(back, good);
        back.check(&tensors()).unwrap();
        // Every byte matters.
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x40;
            assert!(References::read(&mut &bad[..], None).is_err(), "byte {i}");
        }
        assert!(References::read(&mut &bytes[..bytes.len() - 1], None).is_err());
        assert!(References::read(&mut &bytes[..], Some(bytes.len() as u64 - 1)).is_err());
        for bad in [
            refs(&[("a", base(7))]),
            refs(&[("x", base(8))]),
            refs(&[("e", base(0))]),
            refs(&[("a", base(8)), ("a", base(8))]),
            refs(&[("a", own("b"))]),
            refs(&[("b", own("c"))]),
            refs(&[("b", own("a")), ("c", own("b"))]),
            refs(&[("b", own("b"))]),
        ] {
            assert!(bad.check(&tensors()).is_err(), "{bad:?}");
        }
    }
}
