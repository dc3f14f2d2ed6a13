//! The `.sc` container: file header, block records, index and trailer (see `docs/FORMAT.md`).
//!
//! Every structure carries its own checksum and every field is range-checked on read, against
//! the format's limits and, where known, the archive's real length, before anything is
//! allocated from it.

pub mod checksum;

use crate::error::{Error, Result};
use crate::safetensors::MAX_HEADER_LEN;
use crate::split::{Transform, MAX_PLANES};
use std::hash::Hasher;
use std::io::{self, Read, Write};

/// First bytes of every archive.
pub const MAGIC: [u8; 4] = [0x89, b'S', b'C', b'W'];
/// Last bytes of every archive.
pub const END_MAGIC: [u8; 4] = *b"SCWE";
/// Format version written and read by this build.
pub const VERSION: u16 = 1;
/// Smallest block size.
pub const MIN_BLOCK_SIZE: u32 = 4 << 10;
/// Largest block size.
pub const MAX_BLOCK_SIZE: u32 = 64 << 20;
/// Default block size.
pub const DEFAULT_BLOCK_SIZE: u32 = 1 << 20;
/// Length of the fixed part of the file header.
pub const HEADER_FIXED_LEN: usize = 24;
/// Length of one index entry.
pub const INDEX_ENTRY_LEN: usize = 24;
/// Length of the trailer.
pub const TRAILER_LEN: usize = 52;

const TAG_BLOCK: u8 = 0xB1;
const TAG_END: u8 = 0xE0;
const RECORD_FIXED_LEN: usize = 16;
const PLANE_ENTRY_LEN: usize = 8;

/// Compression mode; informational in the header, the codec of each plane is what decodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum)]
#[repr(u8)]
pub enum Mode {
    /// Huffman on predictable planes, raw near-random planes: decodes at copy speed.
    Fast = 0,
    /// Range coder on every plane: smallest output.
    Best = 1,
}

impl Mode {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Fast => "fast",
            Mode::Best => "best",
        }
    }
}

/// What the original file was taken to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Any bytes; no header kept.
    Generic = 0,
    /// A valid safetensors file; its header is kept verbatim.
    Safetensors = 1,
}

/// How one plane is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Codec {
    /// The plane's bytes as they are.
    Stored = 0,
    /// Every byte of the plane is the one byte stored.
    Const = 1,
    /// Canonical Huffman ([`crate::entropy::huffman`]).
    Huffman = 2,
    /// Range coder with a static model ([`crate::entropy::range`]).
    Range = 3,
    /// Range coder with an adaptive order-0 model ([`crate::entropy::adaptive`]).
    Adaptive = 4,
    /// Sign/mantissa plane range-coded with the exponent plane as context
    /// ([`crate::entropy::adaptive`]); only plane 1 of an exponent-aligned block.
    Context = 5,
    /// Exponent byte and mantissa bits 6..5 range-coded as one adaptive symbol
    /// ([`crate::entropy::adaptive`]); only plane 0 of an exponent-aligned block, whose plane 1
    /// is then [`Codec::Raw6`].
    Joint = 6,
    /// The other 6 bits of each sign/mantissa byte (sign, bits 4..0), packed raw; only plane 1
    /// of an exponent-aligned block whose plane 0 is [`Codec::Joint`] or [`Codec::HuffJoint`].
    Raw6 = 7,
    /// The symbols of [`Codec::Joint`] Huffman-coded ([`crate::entropy::joint`]), for FAST;
    /// only plane 0 of an `exp16` block, whose plane 1 is then [`Codec::Raw6`].
    HuffJoint = 8,
}

impl Codec {
    fn from_id(id: u8) -> Option<Codec> {
        Some(match id {
            0 => Codec::Stored,
            1 => Codec::Const,
            2 => Codec::Huffman,
            3 => Codec::Range,
            4 => Codec::Adaptive,
            5 => Codec::Context,
            6 => Codec::Joint,
            7 => Codec::Raw6,
            8 => Codec::HuffJoint,
            _ => return None,
        })
    }

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Codec::Stored => "stored",
            Codec::Const => "const",
            Codec::Huffman => "huffman",
            Codec::Range => "range",
            Codec::Adaptive => "adaptive",
            Codec::Context => "context",
            Codec::Joint => "joint",
            Codec::Raw6 => "raw6",
            Codec::HuffJoint => "huffjoint",
        }
    }
}

/// Reads exactly `buf.len()` bytes, reporting a short read as truncation of `what`.
pub fn read_exact_or(r: &mut impl Read, buf: &mut [u8], what: &'static str) -> Result<()> {
    r.read_exact(buf).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => Error::Truncated(what),
        _ => Error::Io(e),
    })
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// Bytes of the [`Codec::Raw6`] payload of a plane of `plane_len` bytes: 6 bits each.
fn raw6_len(plane_len: u32) -> u64 {
    crate::entropy::joint::raw6_len(plane_len as usize) as u64
}

fn corrupt(msg: impl Into<String>) -> Error {
    Error::Corrupt(msg.into())
}

/// The file header: mode, kind, block size and the original safetensors header verbatim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileHeader {
    /// Mode the archive was made with.
    pub mode: Mode,
    /// Safetensors or generic.
    pub kind: Kind,
    /// Largest block, in original bytes.
    pub block_size: u32,
    /// The original file's first bytes (8-byte length and JSON), empty for generic input.
    pub prefix: Vec<u8>,
    /// Whether the trailer records the MD5 of the original file.
    pub md5: bool,
}

/// Header flag: the trailer's MD5 field is not recorded (all zero). Archives of format 1
/// written before the flag existed have flags 0 and always record it.
const FLAG_NO_MD5: u32 = 1;

impl FileHeader {
    /// Serialised length.
    pub fn encoded_len(&self) -> u64 {
        (HEADER_FIXED_LEN + self.prefix.len() + 8) as u64
    }

    /// Writes the header.
    pub fn write(&self, w: &mut impl Write) -> io::Result<()> {
        let mut b = Vec::with_capacity(self.encoded_len() as usize);
        b.extend_from_slice(&MAGIC);
        b.extend_from_slice(&VERSION.to_le_bytes());
        b.push(self.mode as u8);
        b.push(self.kind as u8);
        b.extend_from_slice(&self.block_size.to_le_bytes());
        let flags = if self.md5 { 0 } else { FLAG_NO_MD5 };
        b.extend_from_slice(&flags.to_le_bytes());
        b.extend_from_slice(&(self.prefix.len() as u64).to_le_bytes());
        b.extend_from_slice(&self.prefix);
        let sum = checksum::xxh3(&b);
        b.extend_from_slice(&sum.to_le_bytes());
        w.write_all(&b)
    }

    /// Reads and validates a header; `archive_len` bounds the prefix when the length is known.
    pub fn read(r: &mut impl Read, archive_len: Option<u64>) -> Result<FileHeader> {
        let mut fixed = [0u8; HEADER_FIXED_LEN];
        let got = read_up_to(r, &mut fixed)?;
        if got < MAGIC.len() && fixed[..got] == MAGIC[..got] {
            return Err(Error::Truncated("file header"));
        }
        if got < MAGIC.len() || fixed[..4] != MAGIC {
            return Err(Error::BadMagic);
        }
        if got < HEADER_FIXED_LEN {
            return Err(Error::Truncated("file header"));
        }
        let version = u16_at(&fixed, 4);
        if version != VERSION {
            return Err(Error::UnsupportedVersion {
                found: version,
                supported: VERSION,
            });
        }
        let mode = match fixed[6] {
            0 => Mode::Fast,
            1 => Mode::Best,
            m => return Err(corrupt(format!("unknown mode {m} in file header"))),
        };
        let kind = match fixed[7] {
            0 => Kind::Generic,
            1 => Kind::Safetensors,
            k => return Err(corrupt(format!("unknown input kind {k} in file header"))),
        };
        let block_size = u32_at(&fixed, 8);
        check_block_size(block_size).map_err(|e| corrupt(format!("file header: {e}")))?;
        let flags = u32_at(&fixed, 12);
        if flags & !FLAG_NO_MD5 != 0 {
            return Err(corrupt("file header has unknown flags set"));
        }
        let prefix_len = u64_at(&fixed, 16);
        let prefix_ok = match kind {
            Kind::Generic => prefix_len == 0,
            Kind::Safetensors => (8..=MAX_HEADER_LEN + 8).contains(&prefix_len),
        };
        if !prefix_ok {
            return Err(corrupt(format!(
                "file header: kept-header length {prefix_len} is impossible"
            )));
        }
        let after_fixed = (HEADER_FIXED_LEN + 8) as u64;
        if archive_len.is_some_and(|len| prefix_len.saturating_add(after_fixed) > len) {
            return Err(Error::Truncated("kept safetensors header"));
        }
        let mut prefix = vec![0u8; prefix_len as usize];
        read_exact_or(r, &mut prefix, "kept safetensors header")?;
        let mut sum = [0u8; 8];
        read_exact_or(r, &mut sum, "file header checksum")?;
        let mut h = twox_hash::XxHash3_64::new();
        h.write(&fixed);
        h.write(&prefix);
        if h.finish() != u64::from_le_bytes(sum) {
            return Err(corrupt("file header checksum mismatch"));
        }
        if kind == Kind::Safetensors && u64_at(&prefix, 0) != prefix_len - 8 {
            return Err(corrupt("kept safetensors header has the wrong length"));
        }
        Ok(FileHeader {
            mode,
            kind,
            block_size,
            prefix,
            md5: flags & FLAG_NO_MD5 == 0,
        })
    }

    /// The MD5 of the original recorded in `footer`, if this archive records one. An archive
    /// without one must leave the field zero: anything else is corruption.
    pub fn recorded_md5(&self, footer: &Footer) -> Result<Option<[u8; 16]>> {
        match (self.md5, footer.md5) {
            (true, m) => Ok(Some(m)),
            (false, m) if m == [0; 16] => Ok(None),
            (false, _) => Err(corrupt(
                "trailer holds an MD5 although the header says none was recorded",
            )),
        }
    }
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
pub fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Checks a block size against the format's limits.
pub fn check_block_size(size: u32) -> std::result::Result<(), String> {
    if !(MIN_BLOCK_SIZE..=MAX_BLOCK_SIZE).contains(&size) || !size.is_multiple_of(2) {
        return Err(format!(
            "block size {size} must be even and between {MIN_BLOCK_SIZE} and {MAX_BLOCK_SIZE} bytes"
        ));
    }
    Ok(())
}

/// Codec and coded length of one plane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlaneEntry {
    /// How the plane is stored.
    pub codec: Codec,
    /// Bytes of the plane's payload.
    pub coded_len: u32,
}

/// The record that precedes each block's plane payloads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockRecord {
    /// How the block was split into planes.
    pub transform: Transform,
    /// Original bytes in the block.
    pub raw_len: u32,
    /// XXH3-64 of the original bytes.
    pub checksum: u64,
    /// One entry per plane, in plane order.
    pub planes: Vec<PlaneEntry>,
}

impl BlockRecord {
    /// Serialised length of the record itself.
    pub fn encoded_len(&self) -> usize {
        RECORD_FIXED_LEN + PLANE_ENTRY_LEN * self.planes.len() + 4
    }

    /// Bytes of all plane payloads after the record.
    pub fn payload_len(&self) -> u64 {
        self.planes.iter().map(|p| p.coded_len as u64).sum()
    }

    /// Bytes the block takes in the archive: record plus payloads (its index entry's stored
    /// length).
    pub fn stored_len(&self) -> u64 {
        self.encoded_len() as u64 + self.payload_len()
    }

    /// Appends the record.
    pub fn write(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.push(TAG_BLOCK);
        out.push(self.transform as u8);
        out.push(self.planes.len() as u8);
        out.push(0);
        out.extend_from_slice(&self.raw_len.to_le_bytes());
        out.extend_from_slice(&self.checksum.to_le_bytes());
        for p in &self.planes {
            out.extend_from_slice(&[p.codec as u8, 0, 0, 0]);
            out.extend_from_slice(&p.coded_len.to_le_bytes());
        }
        let check = checksum::structure(&out[start..]);
        out.extend_from_slice(&check.to_le_bytes());
    }

    /// Reads the next record, or `None` at the end tag. `index` names the block in errors.
    pub fn read(r: &mut impl Read, block_size: u32, index: u64) -> Result<Option<BlockRecord>> {
        let bad = |reason: String| Error::CorruptBlock { index, reason };
        let mut fixed = [0u8; RECORD_FIXED_LEN + PLANE_ENTRY_LEN * MAX_PLANES + 4];
        read_exact_or(r, &mut fixed[..1], "block record")?;
        match fixed[0] {
            TAG_END => return Ok(None),
            TAG_BLOCK => {}
            t => return Err(bad(format!("bad record tag 0x{t:02x}"))),
        }
        read_exact_or(r, &mut fixed[1..RECORD_FIXED_LEN], "block record")?;
        let count = fixed[2] as usize;
        if count == 0 || count > MAX_PLANES {
            return Err(bad(format!("impossible plane count {count}")));
        }
        let end = RECORD_FIXED_LEN + PLANE_ENTRY_LEN * count;
        read_exact_or(r, &mut fixed[RECORD_FIXED_LEN..end + 4], "block record")?;
        if checksum::structure(&fixed[..end]) != u32_at(&fixed, end) {
            return Err(bad("record checksum mismatch".into()));
        }
        let transform = Transform::from_id(fixed[1])
            .ok_or_else(|| bad(format!("unknown transform {}", fixed[1])))?;
        if count != transform.planes() || fixed[3] != 0 {
            return Err(bad("record fields inconsistent with its transform".into()));
        }
        let raw_len = u32_at(&fixed, 4);
        if raw_len == 0
            || raw_len > block_size
            || !(raw_len as usize).is_multiple_of(transform.width())
        {
            return Err(bad(format!("impossible block length {raw_len}")));
        }
        let plane_len = transform.plane_len(raw_len as usize) as u32;
        let mut planes = Vec::with_capacity(count);
        for k in 0..count {
            let at = RECORD_FIXED_LEN + PLANE_ENTRY_LEN * k;
            let codec = Codec::from_id(fixed[at])
                .ok_or_else(|| bad(format!("plane {k}: unknown codec {}", fixed[at])))?;
            let coded_len = u32_at(&fixed, at + 4);
            let ok = fixed[at + 1..at + 4] == [0, 0, 0]
                && match codec {
                    Codec::Stored => coded_len == plane_len,
                    Codec::Const => coded_len == 1,
                    Codec::Huffman | Codec::Range | Codec::Adaptive => {
                        coded_len > 0 && coded_len < plane_len
                    }
                    Codec::Context => {
                        k == 1 && transform.exponent_aligned() && coded_len < plane_len
                    }
                    // The joint payload carries 10 of 16 bits; the pair is smaller than the
                    // two planes stored.
                    Codec::Joint | Codec::HuffJoint => {
                        k == 0
                            && transform.exponent_aligned()
                            && (codec == Codec::Joint || transform == Transform::Exp16)
                            && coded_len > 0
                            && (coded_len as u64) + raw6_len(plane_len) < 2 * plane_len as u64
                    }
                    Codec::Raw6 => {
                        k == 1
                            && transform.exponent_aligned()
                            && coded_len as u64 == raw6_len(plane_len)
                    }
                };
            if !ok {
                return Err(bad(format!(
                    "plane {k}: {} length {coded_len} impossible for {plane_len} bytes",
                    codec.name()
                )));
            }
            planes.push(PlaneEntry { codec, coded_len });
        }
        let joint = matches!(planes[0].codec, Codec::Joint | Codec::HuffJoint);
        if joint != planes.get(1).is_some_and(|p| p.codec == Codec::Raw6) {
            return Err(bad("joint and raw6 planes must come as a pair".into()));
        }
        Ok(Some(BlockRecord {
            transform,
            raw_len,
            checksum: u64_at(&fixed, 8),
            planes,
        }))
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_roundtrip_and_checksum() {
        let rec = BlockRecord {
            transform: Transform::Split16,
            raw_len: 4096,
            checksum: 42,
            planes: vec![
                PlaneEntry {
                    codec: Codec::Huffman,
                    coded_len: 700,
                },
                PlaneEntry {
                    codec: Codec::Stored,
                    coded_len: 2048,
                },
            ],
        };
        let mut b = Vec::new();
        rec.write(&mut b);
        assert_eq!(b.len(), rec.encoded_len());
        let got = BlockRecord::read(&mut &b[..], 1 << 20, 0).unwrap().unwrap();
        assert_eq!(got, rec);
        b[5] ^= 1;
        assert!(BlockRecord::read(&mut &b[..], 1 << 20, 0).is_err());
    }

    #[test]
    fn huffjoint_only_heads_an_exp16_block_beside_raw6() {
        let record = |transform: Transform, codecs: [Codec; 2], lens: [u32; 2]| {
            let n = transform.planes();
            let mut planes: Vec<PlaneEntry> = (0..n)
                .map(|_| PlaneEntry {
                    codec: Codec::Stored,
                    coded_len: 4096 / n as u32,
                })
                .collect();
            for k in 0..2 {
                planes[k] = PlaneEntry {
                    codec: codecs[k],
                    coded_len: lens[k],
                };
            }
            let rec = BlockRecord {
                transform,
                raw_len: 4096,
                checksum: 7,
                planes,
            };
            let mut b = Vec::new();
            rec.write(&mut b);
            BlockRecord::read(&mut &b[..], 1 << 20, 0)
        };
        let (hj, raw6) = (Codec::HuffJoint, Codec::Raw6);
        // exp16: 2048 elements, raw6 = 1536 bytes.
        assert!(record(Transform::Exp16, [hj, raw6], [900, 1536]).is_ok());
        assert!(record(Transform::Exp16, [hj, raw6], [2560, 1536]).is_err());
        assert!(record(Transform::Exp16, [hj, raw6], [900, 1535]).is_err());
        assert!(record(Transform::Exp16, [hj, Codec::Stored], [900, 2048]).is_err());
        assert!(record(Transform::Exp16, [Codec::Stored, hj], [2048, 900]).is_err());
        assert!(record(Transform::Split16, [hj, raw6], [900, 1536]).is_err());
        // exp32 and exp64 take BEST's joint codec, not FAST's.
        assert!(record(Transform::Exp32, [hj, raw6], [500, 768]).is_err());
        assert!(record(Transform::Exp32, [Codec::Joint, raw6], [500, 768]).is_ok());
        assert!(record(Transform::Exp64, [hj, raw6], [300, 384]).is_err());
    }
}
