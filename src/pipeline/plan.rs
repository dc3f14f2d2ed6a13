//! Block planning: where blocks start and which transform each uses.
//!
//! Blocks never mix transforms. Consecutive regions with the same transform share a block while
//! they fit whole, so runs of small tensors (norms, biases) do not each pay block framing, and a
//! region that does not fit starts a fresh block, so a tensor spans `ceil(len / block_size)`
//! blocks at most plus one. A region of `SHARE_LIMIT` (16 KiB) or more does not join a block
//! that already holds that much, so two such regions never share a block, except in BEST's
//! blocks of 16-bit floats: BEST codes each tensor of such a block in its own rows with models
//! shared across them, and fills them whatever their tensors' sizes. Tensors coded against a
//! base, tensors coded against an earlier tensor and everything else never share a block
//! either, so a block is coded against its base bytes all through, or not at all.

use super::refs::{From, Spans};
pub use crate::entropy::rows::TensorRows;
use crate::safetensors::{Dtype, Header, TensorInfo};
use crate::transform::Transform;
use crate::{Kind, Mode};

/// Size from which two regions do not share a FAST block: each tensor has statistics of its
/// own, and FAST's code tables fit one tensor far better than a mix (pocketnet BF16, many
/// tensors of 30-70 KB: 66.55% of the file in mixed 1 MiB blocks, 66.1% when cut at tensors).
/// Smaller regions (biases, norms) still join their neighbours, saving the framing. BEST's
/// models of 16-bit floats learn across the tensors of a block, and it shares those without a
/// limit (pocketnet BF16: 65.24% of the file cut at tensors, 64.97% in filled 1 MiB blocks);
/// its F32 blocks code 0.007% larger so (MiniLM F32), and keep the limit.
const SHARE_LIMIT: u64 = 16 << 10;

/// One planned block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockSpec {
    /// Offset of the block in the original file.
    pub offset: u64,
    /// Planned length; the last block of a stream may come up shorter.
    pub len: u64,
    /// Planned transform.
    pub transform: Transform,
    /// The rows of each tensor in the block, in order (none for a block outside tensors).
    pub rows: Vec<TensorRows>,
    /// Whether the block holds referenced tensors, to be coded against their base bytes.
    pub based: bool,
}

/// What a region's bytes are coded against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Against {
    Nothing,
    Base,
    Earlier,
}

#[derive(Clone, Copy, Debug)]
struct Region {
    start: u64,
    /// `None`: runs to the end of the input, whatever its length.
    end: Option<u64>,
    transform: Transform,
    /// Row lengths of the region's tensor ([`TensorRows::lens`]); `None` for bytes outside
    /// tensors.
    rows: Option<[u64; 2]>,
    /// What the region's bytes are coded against.
    against: Against,
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

/// Transform planned for tensor `t` of an input of `kind`: by its dtype ([`transform_for`]), or
/// for a GGUF tensor of a quantized ggml type, by that type ([`Transform::for_ggml`]).
pub fn transform_of(t: &TensorInfo, kind: Kind) -> Transform {
    match (t.dtype, kind) {
        (None, Kind::Gguf) => Transform::for_ggml(&t.dtype_name),
        (dtype, _) => transform_for(dtype),
    }
}

/// Yields the blocks covering everything after the file's first `prefix_len` bytes.
pub struct Planner {
    regions: Vec<Region>,
    next_region: usize,
    pos: u64,
    block_size: u64,
    /// The mode the blocks are for (see [`Planner::share_limit`]).
    mode: Mode,
}

impl Planner {
    /// Plans FAST blocks for a file whose tensors are described by `header` (none: generic
    /// input).
    #[cfg(any(test, feature = "lab"))]
    pub fn new(header: Option<&Header>, prefix_len: u64, block_size: u32) -> Planner {
        Planner::with_refs(
            header,
            prefix_len,
            block_size,
            &Spans::default(),
            Mode::Fast,
            Kind::Safetensors,
        )
    }

    /// Plans blocks in `mode` for a file of `kind` whose referenced tensors are `spans`.
    pub fn with_refs(
        header: Option<&Header>,
        prefix_len: u64,
        block_size: u32,
        spans: &Spans,
        mode: Mode,
        kind: Kind,
    ) -> Planner {
        let mut regions = Vec::new();
        let mut pos = prefix_len;
        let mut refs = spans.spans().iter().peekable();
        for t in header.map(|h| h.tensors.as_slice()).unwrap_or(&[]) {
            let (start, end) = (prefix_len + t.begin, prefix_len + t.end);
            if start > pos {
                regions.push(Region {
                    start: pos,
                    end: Some(start),
                    transform: Transform::Bytes,
                    rows: None,
                    against: Against::Nothing,
                });
            }
            while refs.next_if(|s| s.range.start < start).is_some() {}
            let against = match refs.next_if(|s| s.range == (start..end)) {
                Some(s) if matches!(s.from, From::Base { .. }) => Against::Base,
                Some(_) => Against::Earlier,
                None => Against::Nothing,
            };
            if end > start {
                let transform = transform_of(t, kind);
                let elements = (end - start) / transform.width() as u64;
                regions.push(Region {
                    start,
                    end: Some(end),
                    transform,
                    rows: Some(TensorRows::lens(&t.shape, elements)),
                    against,
                });
            }
            pos = pos.max(end);
        }
        regions.push(Region {
            start: pos,
            end: None,
            transform: Transform::Bytes,
            rows: None,
            against: Against::Nothing,
        });
        Planner {
            pos: prefix_len,
            regions,
            next_region: 0,
            block_size: block_size as u64,
            mode,
        }
    }

    /// Size from which two regions of transform `t` do not share a block.
    fn share_limit(&self, t: Transform) -> u64 {
        match (self.mode, t) {
            (Mode::Best, Transform::Exp16) => u64::MAX,
            _ => SHARE_LIMIT,
        }
    }
}

impl Iterator for Planner {
    type Item = BlockSpec;

    fn next(&mut self) -> Option<BlockSpec> {
        let mut block: Option<BlockSpec> = None;
        let mut against = Against::Nothing;
        while let Some(region) = self.regions.get(self.next_region).copied() {
            let left = region
                .end
                .map_or(u64::MAX, |e| e - self.pos.max(region.start));
            if left == 0 {
                self.next_region += 1;
                continue;
            }
            let width = region.transform.width() as u64;
            let cap = region.transform.block_cap(self.block_size as usize) as u64;
            match &mut block {
                None => {
                    let take = left.min(cap);
                    let into = (self.pos.saturating_sub(region.start) / width) as i64;
                    block = Some(BlockSpec {
                        offset: self.pos,
                        len: take,
                        transform: region.transform,
                        rows: Vec::from_iter(
                            region.rows.map(|lens| TensorRows { lens, first: into }),
                        ),
                        based: region.against != Against::Nothing,
                    });
                    against = region.against;
                    self.pos += take;
                    if take < left {
                        break;
                    }
                }
                Some(b)
                    if b.transform == region.transform
                        && against == region.against
                        && left <= cap - b.len
                        && (left < self.share_limit(region.transform)
                            || b.len < self.share_limit(region.transform)) =>
                {
                    let before = (b.len / width) as i64;
                    b.rows.extend(region.rows.map(|lens| TensorRows {
                        lens,
                        first: -before,
                    }));
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

    #[test]
    fn best_fills_blocks_of_16_bit_floats_whatever_the_tensors_sizes() {
        // Three 20 KiB tensors: FAST gives each a block, BEST packs two into a 48 KiB block.
        let kib = 20 * 1024u64;
        let json = format!(
            r#"{{"a":{{"dtype":"BF16","shape":[10,1024],"data_offsets":[0,{kib}]}},
            "b":{{"dtype":"BF16","shape":[20,512],"data_offsets":[{kib},{}]}},
            "c":{{"dtype":"BF16","shape":[10240],"data_offsets":[{},{}]}}}}"#,
            2 * kib,
            2 * kib,
            3 * kib
        );
        let h = Header::parse(json.as_bytes(), Some(3 * kib)).unwrap();
        // The same bytes as F32 tensors: BEST keeps the limit for them.
        let f32s = json.replace("BF16", "F32").replace("[20,512]", "[10,512]");
        let f32s = f32s
            .replace("[10,1024]", "[5,1024]")
            .replace("[10240]", "[5120]");
        let h32 = Header::parse(f32s.as_bytes(), Some(3 * kib)).unwrap();
        let spans = Spans::default();
        let best32 = Planner::with_refs(
            Some(&h32),
            0,
            48 << 10,
            &spans,
            Mode::Best,
            Kind::Safetensors,
        );
        let offsets: Vec<u64> = best32.take(3).map(|b| b.offset).collect();
        assert_eq!(offsets, [0, kib, 2 * kib]);
        // The tensors' blocks, before the block of whatever follows the tensors.
        let plan = |mode, blocks| -> Vec<(u64, u64, Vec<TensorRows>)> {
            Planner::with_refs(Some(&h), 0, 48 << 10, &spans, mode, Kind::Safetensors)
                .take(blocks)
                .map(|b| (b.offset, b.len, b.rows))
                .collect()
        };
        let at = |lens, first| TensorRows { lens, first };
        let offsets: Vec<u64> = plan(Mode::Fast, 3).iter().map(|b| b.0).collect();
        assert_eq!(offsets, [0, kib, 2 * kib]);
        assert_eq!(
            plan(Mode::Best, 2),
            [
                (
                    0,
                    2 * kib,
                    vec![at([1024, 1024], 0), at([512, 512], -10240)]
                ),
                (2 * kib, kib, vec![at([10240, 10240], 0)]),
            ]
        );
    }

    #[test]
    fn blocks_know_the_rows_of_their_tensors() {
        // A bias, a [64, 3, 5] tensor (1920 bytes of BF16), then a 1-D tensor.
        let json = br#"{"b":{"dtype":"BF16","shape":[8],"data_offsets":[0,16]},
            "w":{"dtype":"BF16","shape":[64,3,5],"data_offsets":[16,1936]},
            "v":{"dtype":"BF16","shape":[1,300],"data_offsets":[1936,2536]}}"#;
        let h = Header::parse(json, Some(2536)).unwrap();
        let rows = |block: u32| -> Vec<Vec<TensorRows>> {
            Planner::new(Some(&h), 0, block)
                .take(3)
                .map(|b| b.rows)
                .collect()
        };
        let at = |lens, first| TensorRows { lens, first };
        // 2 KiB blocks: the bias and w share a block, where w starts at element 8.
        assert_eq!(
            rows(2048),
            [
                vec![at([8, 8], 0), at([5, 15], -8)],
                vec![at([300, 300], 0)],
                vec![]
            ]
        );
        // 1 KiB blocks: w does not fit beside the bias, and its second block starts at its
        // element 512.
        assert_eq!(
            rows(1024),
            [
                vec![at([8, 8], 0)],
                vec![at([5, 15], 0)],
                vec![at([5, 15], 512)]
            ]
        );
    }
}
