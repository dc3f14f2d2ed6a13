//! An archive described without decoding it ([`inspect`], [`ArchiveInfo`]), and what its
//! reference section says of each tensor ([`Reference`]).

use crate::container::refs::{References, Source as RefSource};
use crate::container::{BlockRecord, FileHeader, Footer, Kind, Mode};
use crate::error::{Error, Result};
use crate::tensor::TensorInfo;
use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};

/// The accessors of the parsed file header and footer that the `internals` feature gives tests.
macro_rules! container_parts {
    () => {
        /// The archive's file header (mode, kind, block size, kept safetensors header).
        #[cfg(feature = "internals")]
        #[doc(hidden)]
        pub fn header(&self) -> &FileHeader {
            &self.header
        }

        /// The archive's index and trailer.
        #[cfg(feature = "internals")]
        #[doc(hidden)]
        pub fn footer(&self) -> &Footer {
            &self.footer
        }
    };
}
pub(crate) use container_parts;

/// What a tensor of an archive is coded against, as [`Archive::reference`](crate::Archive::reference) reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reference<'a> {
    /// The tensor of the same name in the base (named as the archive records it), which
    /// reading it needs ([`Archive::open_with_base`](crate::Archive::open_with_base)).
    Base(&'a str),
    /// An earlier tensor of the same file holding the same bytes: stored once.
    Repeats(&'a str),
    /// A quant tensor re-derived from the seed's tensor of the same name (the seed named as
    /// the archive records it), which reading it needs, as the base of [`Reference::Base`].
    Derived {
        /// The seed's name as recorded.
        seed: &'a str,
        /// The quantizer that re-derives it ([`crate::derive::QUANTIZER`]).
        quantizer: &'a str,
        /// The tensor's ggml blocks.
        blocks: u64,
        /// Those equal to their re-derived bytes (the rest coded as residuals).
        exact: u64,
    },
}

/// What the tensor `name` of an archive with `header` is coded against.
pub(crate) fn reference<'h>(header: &'h FileHeader, name: &str) -> Option<Reference<'h>> {
    let refs = header.refs.as_ref()?;
    let e = refs.entries.iter().find(|e| e.tensor == name)?;
    Some(match &e.source {
        RefSource::Base { .. } => Reference::Base(&refs.base_name),
        RefSource::Tensor(from) => Reference::Repeats(from),
        RefSource::Derived(d) => Reference::Derived {
            seed: &refs.base_name,
            quantizer: &d.quantizer,
            blocks: d.blocks(),
            exact: d.exact,
        },
    })
}

/// The derived entries of an archive with `header`.
fn derived_entries(header: &FileHeader) -> impl Iterator<Item = &crate::container::refs::Derived> {
    let entries = header.refs.as_ref().map_or(&[][..], |r| &r.entries[..]);
    entries.iter().filter_map(|e| match &e.source {
        RefSource::Derived(d) => Some(d),
        _ => None,
    })
}

/// The ggml blocks of an archive's derived tensors, and those that re-derived exactly.
fn derived_blocks(header: &FileHeader) -> (u64, u64) {
    derived_entries(header).fold((0, 0), |(b, e), d| (b + d.blocks(), e + d.exact))
}

/// The quantizers an archive's derived tensors name, each once.
fn quantizers(header: &FileHeader) -> Vec<String> {
    let mut q: Vec<String> = derived_entries(header)
        .map(|d| d.quantizer.clone())
        .collect();
    q.sort();
    q.dedup();
    q
}

/// The kept safetensors header's JSON text of an archive with this header.
pub(crate) fn header_json(header: &FileHeader) -> Option<&str> {
    header.kind.kept_json(&header.prefix)
}

/// The kept header's metadata of an archive with `header`: a safetensors header's
/// `__metadata__` (string values as they are, others as their JSON text), a GGUF header's
/// key-values ([`crate::gguf::Value::to_text`]); `None` for a generic archive and a
/// safetensors header without `__metadata__`.
pub(crate) fn kept_metadata(header: &FileHeader) -> Result<Option<BTreeMap<String, String>>> {
    header.kind.kept_metadata(&header.prefix)
}

/// How much of an archive one codec stores, as [`ArchiveInfo::codecs`] reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CodecUse {
    /// Planes stored with it.
    pub planes: u64,
    /// Their bytes once decoded (the planes' lengths: the joined quants of the ggml transforms
    /// make planes longer than the original bytes they hold).
    pub original: u64,
    /// Their payload bytes.
    pub coded: u64,
}

/// How many blocks one transform splits, as [`ArchiveInfo::transforms`] reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TransformUse {
    /// Blocks split with it.
    pub blocks: u64,
    /// Their original bytes.
    pub original: u64,
}

/// The description of an archive that [`inspect`] reads: what `sc info` shows.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ArchiveInfo {
    /// The container format version.
    pub format_version: u16,
    /// The mode it was made with.
    pub mode: Mode,
    /// Whether the original was a safetensors file or other bytes.
    pub kind: Kind,
    /// Largest block, in original bytes.
    pub block_size: u32,
    /// Length of the original file.
    pub original_len: u64,
    /// Length of the archive.
    pub archive_len: u64,
    /// Number of blocks.
    pub blocks: u64,
    /// The MD5 of the original file, when recorded.
    pub md5: Option<[u8; 16]>,
    /// Bytes of the original safetensors header kept verbatim (the 8-byte length and the
    /// JSON); 0 for a generic archive.
    pub kept_header_len: u64,
    /// Bytes the kept header takes in the archive: `kept_header_len`, or less when it is stored
    /// deflated (format version 3).
    pub kept_header_stored: u64,
    /// The tensors of a safetensors or GGUF archive, by data offset (`None` for a generic
    /// archive, or a kept safetensors header that does not parse; a kept GGUF header that
    /// does not parse fails [`inspect`]).
    pub tensors: Option<Vec<TensorInfo>>,
    /// Per codec name: the planes it stores.
    pub codecs: BTreeMap<&'static str, CodecUse>,
    /// Per transform name: the blocks it splits.
    pub transforms: BTreeMap<&'static str, TransformUse>,
    /// The name of the base the archive is coded against, as recorded, when it needs one.
    pub base_name: Option<String>,
    /// Tensors coded against the base (those re-derived from it included).
    pub based_tensors: usize,
    /// Of those, quant tensors re-derived from the base, their seed ([`Reference::Derived`]).
    pub derived_tensors: usize,
    /// The ggml blocks of the derived tensors, and those of them that re-derived exactly
    /// (counted at encode); the rest are coded as residuals.
    pub derived_blocks: (u64, u64),
    /// The quantizers the derived tensors are re-derived with (none without any).
    pub quantizers: Vec<String>,
    /// Tensors stored as a reference to an earlier, identical one.
    pub repeated_tensors: usize,
    header: FileHeader,
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    footer: Footer,
}

impl ArchiveInfo {
    /// The kept safetensors header's JSON text.
    pub fn header_json(&self) -> Option<&str> {
        header_json(&self.header)
    }

    /// What the tensor `name` is coded against, if anything but itself.
    pub fn reference(&self, name: &str) -> Option<Reference<'_>> {
        reference(&self.header, name)
    }

    /// The kept header's metadata, as [`Archive::metadata`](crate::Archive::metadata) gives
    /// it (`None` also when the kept header does not parse).
    pub fn metadata(&self) -> Option<BTreeMap<String, String>> {
        kept_metadata(&self.header).ok().flatten()
    }

    /// Bytes of tensor data per dtype name, as the header writes it.
    pub fn dtype_bytes(&self) -> BTreeMap<String, u64> {
        let mut m = BTreeMap::new();
        for t in self.tensors.iter().flatten() {
            *m.entry(t.dtype_name.clone()).or_insert(0) += t.len();
        }
        m
    }

    container_parts!();
}

/// Reads the header, index, trailer and every block record of a seekable archive, without
/// decoding any block.
pub fn inspect<R: Read + Seek>(r: &mut R) -> Result<ArchiveInfo> {
    inspect_with(r, true)
}

/// [`inspect`]; without `records`, the block records are not read, and the transforms and
/// codecs are left empty (a remote archive is described from its header and index alone).
pub(crate) fn inspect_with<R: Read + Seek>(r: &mut R, records: bool) -> Result<ArchiveInfo> {
    let archive_len = r.seek(SeekFrom::End(0))?;
    r.seek(SeekFrom::Start(0))?;
    let header = FileHeader::read(r, Some(archive_len))?;
    let footer = Footer::read_from_end(r, archive_len)?;
    let mut codecs: BTreeMap<&'static str, CodecUse> = BTreeMap::new();
    let mut transforms: BTreeMap<&'static str, TransformUse> = BTreeMap::new();
    for (n, e) in footer.index.iter().enumerate().filter(|_| records) {
        if e.offset >= footer.end_offset {
            return Err(Error::Corrupt(format!(
                "index entry {n} points past the blocks"
            )));
        }
        r.seek(SeekFrom::Start(e.offset))?;
        let rec = BlockRecord::read(r, header.block_size, n as u64)?
            .ok_or_else(|| Error::Corrupt(format!("index entry {n} points at the end tag")))?;

        let t = transforms.entry(rec.transform.name()).or_default();
        t.blocks += 1;
        t.original += rec.raw_len as u64;
        for (k, p) in rec.planes.iter().enumerate() {
            let c = codecs.entry(p.codec.name()).or_default();
            c.planes += 1;
            c.original += rec.transform.plane_len(k, rec.raw_len as usize) as u64;
            c.coded += p.coded_len as u64;
        }
    }
    // A kept GGUF header that does not parse is corruption here as it is to `Archive::open`
    // (FORMAT.md): the encoder keeps only headers that parsed.
    let tensors = match header.kind {
        Kind::Generic => None,
        Kind::Gguf => Some(header.tensors()?),
        Kind::Safetensors => header.tensors().ok(),
    };
    let (based_tensors, repeated_tensors) = header.refs.as_ref().map_or((0, 0), References::counts);
    let base_name = header
        .refs
        .as_ref()
        .filter(|_| based_tensors > 0)
        .map(|r| r.base_name.clone());
    Ok(ArchiveInfo {
        format_version: header.version,
        base_name,
        based_tensors,
        derived_tensors: header.refs.as_ref().map_or(0, References::derived),
        derived_blocks: derived_blocks(&header),
        quantizers: quantizers(&header),
        repeated_tensors,
        mode: header.mode,
        kind: header.kind,
        block_size: header.block_size,
        original_len: footer.original_len,
        archive_len,
        blocks: footer.index.len() as u64,
        md5: header.md5.then_some(footer.md5),
        kept_header_len: header.prefix.len() as u64,
        kept_header_stored: header.kept_stored_len(),
        tensors,
        codecs,
        transforms,
        header,
        footer,
    })
}
