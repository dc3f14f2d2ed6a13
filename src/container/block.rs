//! Block records: the record before each block's plane payloads, and the rules its planes obey.

use super::{checksum, u32_at, u64_at, PLANE_ENTRY_LEN, RECORD_FIXED_LEN, TAG_BLOCK, TAG_END};
use crate::codec::{Codec, Decode, Slot};
use crate::error::{Error, Result};
use crate::read::read_exact_or;
use crate::transform::{Transform, MAX_PLANES};
use std::io::Read;

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
            out.extend_from_slice(&[p.codec.id(), 0, 0, 0]);
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
            || raw_len as usize > transform.block_cap(block_size as usize)
            || !(raw_len as usize).is_multiple_of(transform.width())
        {
            return Err(bad(format!("impossible block length {raw_len}")));
        }
        let mut planes = Vec::with_capacity(count);
        for k in 0..count {
            let at = RECORD_FIXED_LEN + PLANE_ENTRY_LEN * k;
            let codec = Codec::from_id(fixed[at])
                .ok_or_else(|| bad(format!("plane {k}: unknown codec {}", fixed[at])))?;
            if fixed[at + 1..at + 4] != [0, 0, 0] {
                return Err(bad(format!("plane {k}: reserved bytes are not zero")));
            }
            let coded_len = u32_at(&fixed, at + 4);
            planes.push(PlaneEntry { codec, coded_len });
        }
        check_planes(transform, raw_len as usize, &planes).map_err(bad)?;
        Ok(Some(BlockRecord {
            transform,
            raw_len,
            checksum: u64_at(&fixed, 8),
            planes,
        }))
    }
}

/// Checks the planes of a block record of `raw_len` bytes against each codec's rules and the
/// pairing rules; `Err` says what is wrong.
fn check_planes(
    transform: Transform,
    raw_len: usize,
    planes: &[PlaneEntry],
) -> std::result::Result<(), String> {
    for (k, p) in planes.iter().enumerate() {
        let plane_len = transform.plane_len(k, raw_len) as u32;
        let slot = Slot {
            plane: k,
            transform,
            plane_len,
        };
        if !(p.codec.spec().fits)(slot, p.coded_len) {
            return Err(format!(
                "plane {k}: {} length {} impossible for {plane_len} bytes",
                p.codec.name(),
                p.coded_len
            ));
        }
    }
    let head = planes[0].codec;
    let second = planes.get(1).map(|p| p.codec);
    let partnered = second.is_some_and(|c| matches!(c.spec().decode, Decode::Partner));
    match head.spec().partner {
        Some(partner) if second != Some(partner) => Err(format!(
            "{} and {} planes must come as a pair",
            head.name(),
            partner.name()
        )),
        None if partnered => Err(format!(
            "{} plane without the codec it pairs with",
            second.map_or("", Codec::name)
        )),
        _ => Ok(()),
    }
}
