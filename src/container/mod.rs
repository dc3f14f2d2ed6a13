//! The `.sc` container: file header, block records, index and trailer (see `docs/FORMAT.md`).
//!
//! Every structure carries its own checksum and every field is range-checked on read, against
//! the format's limits and, where known, the archive's real length, before anything is
//! allocated from it.

mod block;
pub mod checksum;
mod index;
pub mod kept;
pub mod refs;

pub use block::{BlockRecord, PlaneEntry};
pub use index::{Footer, IndexEntry};

use crate::error::{Error, Result};
use crate::read::{read_exact_or, read_up_to};
use crate::tensor::TensorInfo;
use refs::References;
use std::hash::Hasher;
use std::io::{self, Read, Write};

/// First bytes of every archive.
pub const MAGIC: [u8; 4] = [0x89, b'S', b'C', b'W'];
/// Last bytes of every archive.
pub const END_MAGIC: [u8; 4] = *b"SCWE";
/// Newest format version this build writes and reads. Each archive is written with the lowest
/// version that holds what its encoder may use (see [`FileHeader::new`] and [`SIGNS_VERSION`]).
pub const VERSION: u16 = 7;
/// The format version of an archive coded with sign models (the `ctxsigns` and `signs`
/// codecs), which its encoder asks for (see `EncodeOptions::sign_models`).
pub const SIGNS_VERSION: u16 = 5;
/// The format version of an archive of a GGUF file (kind [`Kind::Gguf`] and the ggml block
/// transforms).
pub const GGUF_VERSION: u16 = 6;
/// The format version of an archive with quant tensors re-derived from their seed (reference
/// kind 2).
pub const DERIVED_VERSION: u16 = 7;
/// Oldest format version this build reads: version 2 added the `ctxjoint` codec, the
/// reference section and the delta transforms, so version 1 archives read as they always did.
pub const OLDEST_VERSION: u16 = 1;
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
/// Longest JSON text of a kept safetensors header (the reference reader's limit).
pub const MAX_KEPT_JSON: u64 = 100 << 20;
/// Longest kept GGUF header (magic to tensor data): real ones take megabytes, most of them the
/// tokenizer's vocabulary; a longer one sends the file down the generic path.
pub const MAX_KEPT_GGUF: u64 = 256 << 20;
/// Shortest kept GGUF header: magic, version and the two counts.
pub const MIN_KEPT_GGUF: u64 = 24;

const TAG_BLOCK: u8 = 0xB1;
const TAG_END: u8 = 0xE0;
const RECORD_FIXED_LEN: usize = 16;
const PLANE_ENTRY_LEN: usize = 8;

/// Compression mode: FAST or BEST. Recorded in the header for information; what decodes a
/// plane is the codec recorded for it, so any decoder reads both.
///
/// Parses from and prints as `"fast"` and `"best"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Mode {
    /// Huffman-coded predictable bits, raw near-random ones: encodes and decodes fastest.
    Fast = 0,
    /// Range coding with adaptive models on every plane: the smallest archives.
    Best = 1,
}

impl Mode {
    /// Lower-case name, as [`std::str::FromStr`] takes it.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Fast => "fast",
            Mode::Best => "best",
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Mode {
    type Err = Error;

    /// `"fast"` or `"best"`, in any case.
    fn from_str(s: &str) -> Result<Mode> {
        match s.to_ascii_lowercase().as_str() {
            "fast" => Ok(Mode::Fast),
            "best" => Ok(Mode::Best),
            _ => Err(Error::InvalidArgument(format!(
                "unknown mode {s:?} (fast or best)"
            ))),
        }
    }
}

/// What the original file was taken to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Kind {
    /// Any bytes; no header kept.
    Generic = 0,
    /// A valid safetensors file; its header is kept verbatim.
    Safetensors = 1,
    /// A valid GGUF file (llama.cpp's format, format version 6); its header, metadata and tensor
    /// infos are kept verbatim, up to the start of the tensor data.
    Gguf = 2,
}

impl Kind {
    /// Whether the archive keeps a header that lists tensors (safetensors or GGUF).
    pub fn has_tensors(self) -> bool {
        self != Kind::Generic
    }

    /// What errors call the kept header of an archive of this kind.
    fn kept_name(self) -> &'static str {
        match self {
            Kind::Gguf => "kept GGUF header",
            _ => "kept safetensors header",
        }
    }
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le(bytemuck::pod_read_unaligned(&b[at..at + 2]))
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le(bytemuck::pod_read_unaligned(&b[at..at + 4]))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le(bytemuck::pod_read_unaligned(&b[at..at + 8]))
}

fn corrupt(msg: impl Into<String>) -> Error {
    Error::Corrupt(msg.into())
}

/// The file header: mode, kind, block size and the original safetensors header verbatim,
/// followed by the reference section when the archive has one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileHeader {
    /// Format version of the archive: the lowest that holds what it uses when written by
    /// [`FileHeader::new`].
    pub version: u16,
    /// Mode the archive was made with.
    pub mode: Mode,
    /// Safetensors or generic.
    pub kind: Kind,
    /// Largest block, in original bytes.
    pub block_size: u32,
    /// The original file's first bytes (8-byte length and JSON), empty for generic input.
    pub prefix: Vec<u8>,
    /// `prefix` deflated, as the archive stores it (version 3, flag bit 2), or `None` when the
    /// archive stores `prefix` as it is.
    pub packed: Option<Vec<u8>>,
    /// Whether the trailer records the MD5 of the original file.
    pub md5: bool,
    /// What tensors are coded against (version 2 on): a base, or earlier tensors.
    pub refs: Option<References>,
}

/// The fixed part of a file header, checked on its own.
struct Fixed {
    bytes: [u8; HEADER_FIXED_LEN],
    version: u16,
    mode: Mode,
    kind: Kind,
    block_size: u32,
    flags: u32,
    prefix_len: u64,
}

/// Header flag: the trailer's MD5 field is not recorded (all zero). Archives of format 1
/// written before the flag existed have flags 0 and always record it.
const FLAG_NO_MD5: u32 = 1;
/// Header flag (version 2 on): a reference section follows the header.
const FLAG_REFS: u32 = 2;
/// Header flag (version 3 on): the kept safetensors header is stored deflated.
const FLAG_PACKED: u32 = 4;

impl FileHeader {
    /// The header of a new archive: the kept header `prefix` stored as it is (see
    /// [`FileHeader::set_packed`]), and the lowest format version that holds the archive, coded
    /// with sign models if `sign_models` ([`FileHeader::lowest_version`]).
    pub fn new(
        mode: Mode,
        kind: Kind,
        block_size: u32,
        prefix: Vec<u8>,
        md5: bool,
        refs: Option<References>,
        sign_models: bool,
    ) -> FileHeader {
        let mut header = FileHeader {
            version: VERSION,
            mode,
            kind,
            block_size,
            packed: None,
            prefix,
            md5,
            refs,
        };
        header.version = header.lowest_version(sign_models);
        header
    }

    /// Stores the kept header as `packed`, its deflated form from [`kept::pack`] (`None` to
    /// store it as it is), raising the version to one that reads it.
    pub fn set_packed(&mut self, packed: Option<Vec<u8>>) {
        self.packed = packed;
        // The versions rise with every feature, so the higher of the two holds both.
        self.version = self.version.max(self.lowest_version(false));
    }

    /// The lowest format version that holds an archive with this header, coded with sign
    /// models if `sign_models`, so that older readers read what they can: [`SIGNS_VERSION`] for
    /// BEST mode on safetensors input with sign models (codecs `ctxsigns` and `signs`); else 4
    /// for BEST mode on safetensors input (whose blocks of several tensors use the
    /// `ctxtensors` codec of version 4); else 3 for a deflated kept header; else 2 for a
    /// reference section or BEST mode (whose `ctxjoint` codec is version 2); else 1 (FAST codes
    /// with version 1's transforms and codecs alone unless it has references).
    pub fn lowest_version(&self, sign_models: bool) -> u16 {
        let tensors = self.mode == Mode::Best && self.kind == Kind::Safetensors;
        if self.refs.as_ref().is_some_and(|r| r.derived() > 0) {
            DERIVED_VERSION
        } else if self.kind == Kind::Gguf {
            GGUF_VERSION
        } else if tensors && sign_models {
            SIGNS_VERSION
        } else if tensors {
            4
        } else if self.packed.is_some() {
            3
        } else if self.refs.is_some() || self.mode == Mode::Best {
            2
        } else {
            1
        }
    }

    /// Bytes the kept header takes in the archive: the prefix, or its deflated form and that
    /// form's length field.
    pub fn kept_stored_len(&self) -> u64 {
        match &self.packed {
            Some(p) => (kept::PACKED_LEN_FIELD + p.len()) as u64,
            None => self.prefix.len() as u64,
        }
    }

    /// Serialised length, reference section included: where block 0 starts.
    pub fn encoded_len(&self) -> u64 {
        let refs = self.refs.as_ref().map_or(0, References::encoded_len);
        HEADER_FIXED_LEN as u64 + self.kept_stored_len() + 8 + refs
    }

    /// Writes the header (and the reference section, if any).
    pub fn write(&self, w: &mut impl Write) -> io::Result<()> {
        let mut b = Vec::with_capacity(HEADER_FIXED_LEN + self.kept_stored_len() as usize + 8);
        b.extend_from_slice(&MAGIC);
        b.extend_from_slice(&self.version.to_le_bytes());
        b.push(self.mode as u8);
        b.push(self.kind as u8);
        b.extend_from_slice(&self.block_size.to_le_bytes());
        let mut flags = if self.md5 { 0 } else { FLAG_NO_MD5 };
        if self.refs.is_some() {
            flags |= FLAG_REFS;
        }
        if self.packed.is_some() {
            flags |= FLAG_PACKED;
        }
        b.extend_from_slice(&flags.to_le_bytes());
        b.extend_from_slice(&(self.prefix.len() as u64).to_le_bytes());
        match &self.packed {
            Some(p) => {
                b.extend_from_slice(&(p.len() as u32).to_le_bytes());
                b.extend_from_slice(p);
            }
            None => b.extend_from_slice(&self.prefix),
        }
        let sum = checksum::xxh3(&b);
        b.extend_from_slice(&sum.to_le_bytes());
        if let Some(refs) = &self.refs {
            b.extend_from_slice(&refs.to_bytes());
        }
        w.write_all(&b)
    }

    /// Reads and checks the fixed part of a file header (all but the kept header, the
    /// reference section and the checksum, which covers the kept header too).
    fn read_fixed(r: &mut impl Read) -> Result<Fixed> {
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
        if !(OLDEST_VERSION..=VERSION).contains(&version) {
            return Err(Error::UnsupportedVersion {
                found: version,
                oldest: OLDEST_VERSION,
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
            2 if version >= GGUF_VERSION => Kind::Gguf,
            k => return Err(corrupt(format!("unknown input kind {k} in file header"))),
        };
        let block_size = u32_at(&fixed, 8);
        check_block_size(block_size).map_err(|e| corrupt(format!("file header: {e}")))?;
        let flags = u32_at(&fixed, 12);
        let known = match version {
            1 => FLAG_NO_MD5,
            2 => FLAG_NO_MD5 | FLAG_REFS,
            _ => FLAG_NO_MD5 | FLAG_REFS | FLAG_PACKED,
        };
        if flags & !known != 0 {
            return Err(corrupt("file header has unknown flags set"));
        }
        let prefix_len = u64_at(&fixed, 16);
        let prefix_ok = match kind {
            Kind::Generic => prefix_len == 0,
            Kind::Safetensors => (8..=MAX_KEPT_JSON + 8).contains(&prefix_len),
            Kind::Gguf => (MIN_KEPT_GGUF..=MAX_KEPT_GGUF).contains(&prefix_len),
        };
        if !prefix_ok {
            return Err(corrupt(format!(
                "file header: kept-header length {prefix_len} is impossible"
            )));
        }
        Ok(Fixed {
            bytes: fixed,
            version,
            mode,
            kind,
            block_size,
            flags,
            prefix_len,
        })
    }

    /// The block size of the archive that `r` starts with, and whether its header has a
    /// reference section, from the header's fixed part alone: its kept header, which takes a
    /// GGUF archive tens of milliseconds to inflate, is not read, nor the part checked against
    /// the header's checksum (which a decoder does).
    pub fn peek(r: &mut impl Read) -> Result<(u32, bool)> {
        let f = Self::read_fixed(r)?;
        Ok((f.block_size, f.flags & FLAG_REFS != 0))
    }

    /// Reads and validates a header; `archive_len` bounds the prefix when the length is known.
    pub fn read(r: &mut impl Read, archive_len: Option<u64>) -> Result<FileHeader> {
        let (mut header, kept) = Self::read_stored(r, archive_len)?;
        (header.prefix, header.packed) = kept.open()?;
        Ok(header)
    }

    /// Reads and validates a header as [`FileHeader::read`] does, but leaves its kept header
    /// as the archive stores it, unchecked: `prefix` and `packed` are empty, and the kept header
    /// comes back apart, for [`KeptHeader::open`] (a GGUF vocabulary takes tens of
    /// milliseconds to inflate, which a decoder spends on blocks meanwhile).
    pub fn read_stored(
        r: &mut impl Read,
        archive_len: Option<u64>,
    ) -> Result<(FileHeader, KeptHeader)> {
        let f = Self::read_fixed(r)?;
        let (fixed, kind, flags, prefix_len) = (f.bytes, f.kind, f.flags, f.prefix_len);
        let what = kind.kept_name();
        let mut h = twox_hash::XxHash3_64::new();
        h.write(&fixed);
        let room = archive_len.map(|len| len.saturating_sub(HEADER_FIXED_LEN as u64));
        let (stored, deflated, stored_len) = if flags & FLAG_PACKED == 0 {
            let prefix = read_checked(r, prefix_len, room, what)?;
            h.write(&prefix);
            (prefix, false, prefix_len)
        } else {
            if !kind.has_tensors() {
                return Err(corrupt("a generic archive with a deflated kept header"));
            }
            let mut field = [0u8; kept::PACKED_LEN_FIELD];
            read_exact_or(r, &mut field, what)?;
            h.write(&field);
            let packed_len = u32::from_le_bytes(field) as u64;
            if packed_len == 0 || packed_len > prefix_len {
                return Err(corrupt(format!(
                    "file header: deflated kept-header length {packed_len} is impossible"
                )));
            }
            let room = room.map(|len| len.saturating_sub(field.len() as u64));
            let packed = read_checked(r, packed_len, room, what)?;
            h.write(&packed);
            (packed, true, field.len() as u64 + packed_len)
        };
        let mut sum = [0u8; 8];
        read_exact_or(r, &mut sum, "file header checksum")?;
        if h.finish() != u64::from_le_bytes(sum) {
            return Err(corrupt("file header checksum mismatch"));
        }
        let refs = match flags & FLAG_REFS {
            0 => None,
            _ => {
                let after = HEADER_FIXED_LEN as u64 + stored_len + 8;
                let room = archive_len.map(|len| len.saturating_sub(after));
                let refs = References::read(r, room)?;
                if !kind.has_tensors() && !refs.entries.is_empty() {
                    return Err(corrupt("a generic archive with tensor references"));
                }
                if f.version < DERIVED_VERSION && refs.derived() > 0 {
                    return Err(corrupt("derived tensors before format version 7"));
                }
                Some(refs)
            }
        };
        let header = FileHeader {
            version: f.version,
            mode: f.mode,
            kind,
            block_size: f.block_size,
            prefix: Vec::new(),
            packed: None,
            md5: flags & FLAG_NO_MD5 == 0,
            refs,
        };
        let kept = KeptHeader {
            kind,
            len: prefix_len,
            stored,
            deflated,
        };
        Ok((header, kept))
    }

    /// The tensors of the kept header (none for a generic archive), ordered by data offset.
    /// The encoder keeps a header only if it parsed, so one that does not is corruption.
    pub fn tensors(&self) -> Result<Vec<TensorInfo>> {
        self.kind.kept_tensors(&self.prefix)
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

/// A kept header as the archive stores it, checked against the file header's checksum only:
/// what [`FileHeader::read_stored`] leaves for [`KeptHeader::open`].
#[derive(Debug)]
pub struct KeptHeader {
    kind: Kind,
    /// Its length in the original file.
    len: u64,
    /// Its bytes in the archive: deflated, or as they are.
    stored: Vec<u8>,
    deflated: bool,
}

impl KeptHeader {
    /// Its length in the original file, where block 0 starts.
    pub fn original_len(&self) -> u64 {
        self.len
    }

    /// Whether it is stored deflated, so that [`KeptHeader::open`] takes time.
    pub fn is_deflated(&self) -> bool {
        self.deflated
    }

    /// The kept header, inflated when stored deflated and checked against its kind, with its
    /// deflated form if it has one (a [`FileHeader`]'s `prefix` and `packed`).
    pub fn open(self) -> Result<(Vec<u8>, Option<Vec<u8>>)> {
        let what = self.kind.kept_name();
        let (prefix, packed) = match self.deflated {
            true => (
                kept::unpack(&self.stored, self.len as usize, what)?,
                Some(self.stored),
            ),
            false => (self.stored, None),
        };
        if self.kind == Kind::Safetensors && u64_at(&prefix, 0) != self.len - 8 {
            return Err(corrupt("kept safetensors header has the wrong length"));
        }
        if self.kind == Kind::Gguf && prefix[..4] != crate::gguf::MAGIC {
            return Err(corrupt(
                "kept GGUF header does not start with the GGUF magic",
            ));
        }
        Ok((prefix, packed))
    }
}

/// Reads `len` bytes of the file header's variable part (`what` names it), refused as
/// truncated before anything is allocated when they and the checksum after them cannot fit in
/// `room`, the archive's bytes from here on (when known).
fn read_checked(
    r: &mut impl Read,
    len: u64,
    room: Option<u64>,
    what: &'static str,
) -> Result<Vec<u8>> {
    if room.is_some_and(|room| len.saturating_add(8) > room) {
        return Err(Error::Truncated(what));
    }
    let mut b = vec![0u8; len as usize];
    read_exact_or(r, &mut b, what)?;
    Ok(b)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::Codec;
    use crate::transform::Transform;

    /// The fixed part alone gives what the whole header says of the block size and the
    /// references, and refuses what the whole one refuses for its fixed part.
    #[test]
    fn peek_agrees_with_the_whole_header() {
        let prefix = b"GGUF\x03\x00\x00\x00".repeat(4);
        for (block_size, refs) in [(1 << 20, None), (4 << 20, Some(References::default()))] {
            let mut h = FileHeader::new(
                Mode::Fast,
                Kind::Gguf,
                block_size,
                prefix.clone(),
                false,
                refs,
                false,
            );
            h.set_packed(kept::pack(&h.prefix, Mode::Fast));
            let mut b = Vec::new();
            h.write(&mut b).unwrap();
            let whole = FileHeader::read(&mut &b[..], Some(b.len() as u64)).unwrap();
            let peeked = FileHeader::peek(&mut &b[..]).unwrap();
            assert_eq!(peeked, (whole.block_size, whole.refs.is_some()));
            assert!(FileHeader::peek(&mut &b[..HEADER_FIXED_LEN - 1]).is_err());
            b[0] ^= 1;
            assert!(FileHeader::peek(&mut &b[..]).is_err());
        }
    }

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
