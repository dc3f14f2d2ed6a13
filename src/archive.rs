//! Reading an archive's metadata without decoding it: what `sc info` shows.

use crate::container::{BlockRecord, FileHeader, Footer, Kind};
use crate::error::{Error, Result};
use crate::safetensors::Header;
use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};

/// Metadata of an archive.
#[derive(Clone, Debug)]
pub struct ArchiveInfo {
    /// The file header.
    pub header: FileHeader,
    /// Index and trailer.
    pub footer: Footer,
    /// Length of the archive.
    pub archive_len: u64,
    /// The kept safetensors header, parsed (safetensors archives only).
    pub tensors: Option<Header>,
    /// Per codec: planes using it, their original bytes, their coded bytes.
    pub codecs: BTreeMap<&'static str, (u64, u64, u64)>,
    /// Per transform: blocks using it, their original bytes.
    pub transforms: BTreeMap<&'static str, (u64, u64)>,
}

impl ArchiveInfo {
    /// The kept safetensors header's JSON text.
    pub fn header_json(&self) -> Option<&str> {
        match self.header.kind {
            Kind::Safetensors => std::str::from_utf8(&self.header.prefix[8..]).ok(),
            Kind::Generic => None,
        }
    }
}

/// Reads header, index, trailer and every block record of a seekable archive.
pub fn inspect<R: Read + Seek>(r: &mut R) -> Result<ArchiveInfo> {
    let archive_len = r.seek(SeekFrom::End(0))?;
    r.seek(SeekFrom::Start(0))?;
    let header = FileHeader::read(r, Some(archive_len))?;
    let footer = Footer::read_from_end(r, archive_len)?;
    let mut codecs: BTreeMap<&'static str, (u64, u64, u64)> = BTreeMap::new();
    let mut transforms: BTreeMap<&'static str, (u64, u64)> = BTreeMap::new();
    for (n, e) in footer.index.iter().enumerate() {
        if e.offset >= footer.end_offset {
            return Err(Error::Corrupt(format!(
                "index entry {n} points past the blocks"
            )));
        }
        r.seek(SeekFrom::Start(e.offset))?;
        let rec = BlockRecord::read(r, header.block_size, n as u64)?
            .ok_or_else(|| Error::Corrupt(format!("index entry {n} points at the end tag")))?;
        let plane_len = rec.transform.plane_len(rec.raw_len as usize) as u64;
        let t = transforms.entry(rec.transform.name()).or_default();
        t.0 += 1;
        t.1 += rec.raw_len as u64;
        for p in &rec.planes {
            let c = codecs.entry(p.codec.name()).or_default();
            c.0 += 1;
            c.1 += plane_len;
            c.2 += p.coded_len as u64;
        }
    }
    let tensors = match header.kind {
        Kind::Safetensors => Header::parse(&header.prefix[8..], None).ok(),
        Kind::Generic => None,
    };
    Ok(ArchiveInfo {
        header,
        footer,
        archive_len,
        tensors,
        codecs,
        transforms,
    })
}
