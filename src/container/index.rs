//! The end of an archive: the block index and the trailer.

use super::{checksum, corrupt, u32_at, u64_at, END_MAGIC, INDEX_ENTRY_LEN, TAG_END, TRAILER_LEN};
use crate::error::{Error, Result};
use crate::read::read_exact_or;
use std::io::{self, Read, Write};

/// Where one block lives, in the archive and in the original file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    /// Archive offset of the block's record.
    pub offset: u64,
    /// Offset of the block's first byte in the original file.
    pub raw_offset: u64,
    /// Original bytes in the block.
    pub raw_len: u32,
    /// Archive bytes of record and payloads together.
    pub stored_len: u32,
}

impl IndexEntry {
    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&self.raw_offset.to_le_bytes());
        out.extend_from_slice(&self.raw_len.to_le_bytes());
        out.extend_from_slice(&self.stored_len.to_le_bytes());
    }

    fn parse(b: &[u8]) -> IndexEntry {
        IndexEntry {
            offset: u64_at(b, 0),
            raw_offset: u64_at(b, 8),
            raw_len: u32_at(b, 16),
            stored_len: u32_at(b, 20),
        }
    }
}

/// The end of an archive: block index and trailer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Footer {
    /// Archive offset of the end tag (the index follows it).
    pub end_offset: u64,
    /// One entry per block, in order.
    pub index: Vec<IndexEntry>,
    /// Length of the original file.
    pub original_len: u64,
    /// MD5 of the original file; zero when the header says it is not recorded.
    pub md5: [u8; 16],
}

impl Footer {
    /// Writes end tag, index and trailer.
    pub fn write(&self, w: &mut impl Write) -> io::Result<()> {
        let mut b = Vec::with_capacity(1 + self.index.len() * INDEX_ENTRY_LEN + TRAILER_LEN);
        b.push(TAG_END);
        for e in &self.index {
            e.write(&mut b);
        }
        b.extend_from_slice(&self.end_offset.to_le_bytes());
        b.extend_from_slice(&(self.index.len() as u64).to_le_bytes());
        b.extend_from_slice(&self.original_len.to_le_bytes());
        b.extend_from_slice(&self.md5);
        let sum = checksum::xxh3(&b[1..]);
        b.extend_from_slice(&sum.to_le_bytes());
        b.extend_from_slice(&END_MAGIC);
        w.write_all(&b)
    }

    /// Total serialised length including the end tag.
    pub fn encoded_len(blocks: u64) -> u64 {
        1 + blocks * INDEX_ENTRY_LEN as u64 + TRAILER_LEN as u64
    }

    /// Reads index and trailer after the end tag, when `blocks` blocks were seen.
    pub fn read_after_tag(r: &mut impl Read, blocks: u64) -> Result<Footer> {
        let len = blocks as usize * INDEX_ENTRY_LEN + TRAILER_LEN;
        let mut b = vec![0u8; len];
        read_exact_or(r, &mut b, "block index and trailer")?;
        Footer::parse(&b, blocks)
    }

    /// Parses index and trailer bytes (everything after the end tag).
    pub fn parse(b: &[u8], blocks: u64) -> Result<Footer> {
        let n = blocks as usize;
        if b.len() != n * INDEX_ENTRY_LEN + TRAILER_LEN {
            return Err(corrupt("index length does not match its block count"));
        }
        let t = &b[n * INDEX_ENTRY_LEN..];
        if t[48..52] != END_MAGIC {
            return Err(corrupt("trailer magic missing"));
        }
        if checksum::xxh3(&b[..b.len() - 12]) != u64_at(t, 40) {
            return Err(corrupt("index or trailer checksum mismatch"));
        }
        if u64_at(t, 8) != blocks {
            return Err(corrupt(format!(
                "trailer says {} blocks, archive holds {blocks}",
                u64_at(t, 8)
            )));
        }
        let index: Vec<IndexEntry> = b[..n * INDEX_ENTRY_LEN]
            .chunks_exact(INDEX_ENTRY_LEN)
            .map(IndexEntry::parse)
            .collect();
        let mut md5 = [0u8; 16];
        md5.copy_from_slice(&t[24..40]);
        Ok(Footer {
            end_offset: u64_at(t, 0),
            index,
            original_len: u64_at(t, 16),
            md5,
        })
    }

    /// Reads the footer of a seekable archive of `archive_len` bytes from its end.
    pub fn read_from_end<R: Read + io::Seek>(r: &mut R, archive_len: u64) -> Result<Footer> {
        if archive_len < TRAILER_LEN as u64 + 1 {
            return Err(Error::Truncated("trailer"));
        }
        r.seek(io::SeekFrom::Start(archive_len - TRAILER_LEN as u64))?;
        let mut t = [0u8; TRAILER_LEN];
        read_exact_or(r, &mut t, "trailer")?;
        if t[48..52] != END_MAGIC {
            return Err(Error::Truncated("trailer (end magic missing)"));
        }
        let end_offset = u64_at(&t, 0);
        let blocks = u64_at(&t, 8);
        let room = archive_len - TRAILER_LEN as u64;
        let index_end = blocks
            .checked_mul(INDEX_ENTRY_LEN as u64)
            .and_then(|l| l.checked_add(end_offset))
            .and_then(|l| l.checked_add(1));
        if index_end != Some(room) {
            return Err(corrupt("trailer's block count and index position disagree"));
        }
        r.seek(io::SeekFrom::Start(end_offset))?;
        let mut tag = [0u8; 1];
        read_exact_or(r, &mut tag, "end tag")?;
        if tag[0] != TAG_END {
            return Err(corrupt("end tag missing where the trailer points"));
        }
        Footer::read_after_tag(r, blocks)
    }
}
