//! Block planning: where blocks start and which transform each uses.
//!
//! Blocks never mix transforms. Consecutive regions with the same transform share a block while
//! they fit whole, so runs of small tensors (norms, biases) do not each pay block framing, and a
//! region that does not fit starts a fresh block, so a tensor spans `ceil(len / block_size)`
//! blocks at most plus one. A region of `SHARE_LIMIT` (16 KiB) or more does not join a block that
//! already holds that much, so two such regions never share a block.

use crate::safetensors::{Dtype, Header};
use crate::transform::Transform;

/// Size from which two regions do not share a block: each tensor has statistics of its own,
/// and FAST's code tables fit one tensor far better than a mix (pocketnet BF16, many tensors
/// of 30-70 KB: 66.55% of the file in mixed 1 MiB blocks, 66.1% when cut at tensors).
/// Smaller regions (biases, norms) still join their neighbours, saving the framing.
const SHARE_LIMIT: u64 = 16 << 10;

/// One planned block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockSpec {
    /// Offset of the block in the original file.
    pub offset: u64,
    /// Planned length; the last block of a stream may come up shorter.
    pub len: u64,
    /// Planned transform.
    pub transform: Transform,
}

#[derive(Clone, Copy, Debug)]
struct Region {
    start: u64,
    /// `None`: runs to the end of the input, whatever its length.
    end: Option<u64>,
    transform: Transform,
}

/// Transform planned for a tensor of `dtype`: floats get exponent-aligned planes, integers
/// byte planes, 8-bit types and unknown dtypes one plane.
///
/// 16-bit floats are planned as [`Transform::Exp16`]; FAST then measures per block whether
/// [`Transform::Split16`] suits the block better (F16 data sometimes does).
pub fn transform_for(dtype: Option<Dtype>) -> Transform {
    use Dtype::*;
    match dtype {
        Some(BF16 | F16) => Transform::Exp16,
        Some(F32) => Transform::Exp32,
        Some(F64) => Transform::Exp64,
        Some(I16 | U16) => Transform::Split16,
        Some(I32 | U32) => Transform::Split32,
        Some(I64 | U64) => Transform::Split64,
        Some(Bool | U8 | I8 | F8E5M2 | F8E4M3) | None => Transform::Bytes,
    }
}

/// Yields the blocks covering everything after the file's first `prefix_len` bytes.
pub struct Planner {
    regions: Vec<Region>,
    next_region: usize,
    pos: u64,
    block_size: u64,
}

impl Planner {
    /// Plans blocks for a file whose tensors are described by `header` (none: generic input).
    pub fn new(header: Option<&Header>, prefix_len: u64, block_size: u32) -> Planner {
        let mut regions = Vec::new();
        let mut pos = prefix_len;
        for t in header.map(|h| h.tensors.as_slice()).unwrap_or(&[]) {
            let (start, end) = (prefix_len + t.begin, prefix_len + t.end);
            if start > pos {
                regions.push(Region {
                    start: pos,
                    end: Some(start),
                    transform: Transform::Bytes,
                });
            }
            if end > start {
                regions.push(Region {
                    start,
                    end: Some(end),
                    transform: transform_for(t.dtype),
                });
            }
            pos = pos.max(end);
        }
        regions.push(Region {
            start: pos,
            end: None,
            transform: Transform::Bytes,
        });
        Planner {
            pos: prefix_len,
            regions,
            next_region: 0,
            block_size: block_size as u64,
        }
    }
}

impl Iterator for Planner {
    type Item = BlockSpec;

    fn next(&mut self) -> Option<BlockSpec> {
        let mut block: Option<BlockSpec> = None;
        while let Some(region) = self.regions.get(self.next_region).copied() {
            let left = region
                .end
                .map_or(u64::MAX, |e| e - self.pos.max(region.start));
            if left == 0 {
                self.next_region += 1;
                continue;
            }
            let width = region.transform.width() as u64;
            let cap = self.block_size - self.block_size % width;
            match &mut block {
                None => {
                    let take = left.min(cap);
                    block = Some(BlockSpec {
                        offset: self.pos,
                        len: take,
                        transform: region.transform,
                    });
                    self.pos += take;
                    if take < left {
                        break;
                    }
                }
                Some(b)
                    if b.transform == region.transform
                        && left <= cap - b.len
                        && (left < SHARE_LIMIT || b.len < SHARE_LIMIT) =>
                {
                    b.len += left;
                    self.pos += left;
                }
                Some(_) => break,
            }
        }
        block
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_small_regions_and_cuts_large_ones() {
        let json = br#"{"a":{"dtype":"BF16","shape":[4],"data_offsets":[0,8]},
            "b":{"dtype":"BF16","shape":[4],"data_offsets":[8,16]},
            "c":{"dtype":"I64","shape":[1],"data_offsets":[16,24]},
            "d":{"dtype":"F16","shape":[10],"data_offsets":[24,44]}}"#;
        let h = Header::parse(json, Some(45)).unwrap();
        let plan: Vec<BlockSpec> = Planner::new(Some(&h), 100, 12).take(6).collect();
        let got: Vec<(u64, u64, Transform)> = plan
            .iter()
            .map(|b| (b.offset, b.len, b.transform))
            .collect();
        use Transform::*;
        assert_eq!(
            got[..5],
            [
                // b does not fit beside a, so it starts a new block rather than straddling two.
                (100, 8, Exp16),
                (108, 8, Exp16),
                (116, 8, Split64),
                (124, 12, Exp16),
                (136, 8, Exp16)
            ]
        );
        assert_eq!(got[5], (144, 12, Bytes));
    }

    #[test]
    fn sizable_tensors_get_blocks_of_their_own() {
        // Two 20 KiB tensors, each followed by a 256-byte bias: four regions in a 1 MiB block.
        let kib = 1024u64;
        let (w, b) = (20 * kib, 256);
        let json = format!(
            r#"{{"a":{{"dtype":"BF16","shape":[{}],"data_offsets":[0,{w}]}},
            "ab":{{"dtype":"BF16","shape":[128],"data_offsets":[{w},{}]}},
            "c":{{"dtype":"BF16","shape":[{}],"data_offsets":[{},{}]}},
            "cb":{{"dtype":"BF16","shape":[128],"data_offsets":[{},{}]}}}}"#,
            w / 2,
            w + b,
            w / 2,
            w + b,
            2 * w + b,
            2 * w + b,
            2 * (w + b)
        );
        let h = Header::parse(json.as_bytes(), Some(2 * (w + b))).unwrap();
        let plan: Vec<(u64, u64)> = Planner::new(Some(&h), 0, 1 << 20)
            .take(2)
            .map(|b| (b.offset, b.len))
            .collect();
        // Each bias joins its tensor; the second tensor starts a block of its own.
        assert_eq!(plan, [(0, w + b), (w + b, w + b)]);
    }
}
