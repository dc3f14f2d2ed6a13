//! Plane transforms: how a block's bytes are split into byte planes before entropy coding.
//!
//! A float's sign and exponent bits are highly predictable while its low mantissa bits are
//! close to random; coding them as separate planes lets each coder see one distribution.
//! Integers are split into byte planes, most significant first, so that the high bytes of
//! small values (ids, counts) become constant planes.
//!
//! The delta transforms (`xor8`, `xor16`, `sub16`, `xor32`, `sub32`) code a block against the
//! bytes it is paired with in a base (a fine-tune's base checkpoint, or an earlier copy of a
//! repeated tensor): a fine-tune moves each weight by a few units in the last place, so the
//! difference is small where the values themselves are not.

pub mod ggml;
mod kernels;

pub use kernels::{
    order16, order32, unorder16, unorder32, unzigzag16, unzigzag32, zigzag16, zigzag32,
};

use crate::error::CodecError;
use kernels::{
    merge16, merge32, merge8, merge_with, split16, split32, split8, split_with, unsub16,
};

/// Most planes any transform produces.
pub const MAX_PLANES: usize = 8;

/// How a block is split into planes; stored per block in the container.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
#[allow(non_camel_case_types)]
pub enum Transform {
    /// One plane: the bytes as they are (8-bit data, gaps, non-safetensors input).
    Bytes = 0,
    /// Byte planes of 16-bit little-endian elements, most significant first.
    Split16 = 1,
    /// Two planes from 16-bit floats, exponent-aligned: plane 0 holds bits 7..=14 (the whole
    /// BF16 exponent; for F16 the exponent and top 3 mantissa bits), plane 1 the sign bit
    /// moved down to bit 7 above bits 0..=6. The sign is a coin flip, so taking it out of the
    /// predictable plane and putting the exponent's last bit in makes that plane cheaper.
    Exp16 = 2,
    /// Four planes from F32, exponent-aligned: the exponent (bits 23..=30), the sign above
    /// mantissa bits 16..=22 (the layout of `Exp16`'s plane 1), then bytes 1 and 0.
    Exp32 = 3,
    /// Eight planes from F64: exponent bits 52..=59, then sign (bit 7), exponent bits 60..=62
    /// (bits 4..=6) and mantissa bits 48..=51, then bytes 5 down to 0.
    Exp64 = 4,
    /// Byte planes of 32-bit little-endian elements, most significant first.
    Split32 = 5,
    /// Byte planes of 64-bit little-endian elements, most significant first.
    Split64 = 6,
    /// Byte planes of the differences (wrapping) between consecutive 32-bit elements, the
    /// first taken against 0: sequences such as position ids become constant planes.
    Delta32 = 7,
    /// The same for 64-bit elements.
    Delta64 = 8,
    /// One plane: each byte XOR the base's byte (repeated tensors, and base tensors of dtypes
    /// without a float delta).
    Xor8 = 9,
    /// Byte planes, most significant first, of each 16-bit word XOR the base's word.
    Xor16 = 10,
    /// Byte planes, most significant first, of the difference of 16-bit floats taken in
    /// sign-magnitude order ([`order16`]) from the base's, zigzag-coded: a value that moved
    /// by `k` units in the last place gives `2k` or `2k - 1`, whatever its sign or exponent.
    Sub16 = 11,
    /// [`Transform::Xor16`] for 32-bit words.
    Xor32 = 12,
    /// [`Transform::Sub16`] for 32-bit floats.
    Sub32 = 13,
    /// ggml's `Q4_0` blocks in planes of their fields ([`ggml::LAYOUTS`]).
    Q4_0 = 14,
    /// ggml's `Q4_1` blocks in planes of their fields ([`ggml::LAYOUTS`]).
    Q4_1 = 15,
    /// ggml's `Q5_0` blocks in planes of their fields ([`ggml::LAYOUTS`]).
    Q5_0 = 16,
    /// ggml's `Q5_1` blocks in planes of their fields ([`ggml::LAYOUTS`]).
    Q5_1 = 17,
    /// ggml's `Q8_0` blocks in planes of their fields ([`ggml::LAYOUTS`]).
    Q8_0 = 18,
    /// ggml's `Q8_1` blocks in planes of their fields ([`ggml::LAYOUTS`]).
    Q8_1 = 19,
    /// ggml's `Q2_K` blocks in planes of their fields ([`ggml::LAYOUTS`]).
    Q2_K = 20,
    /// ggml's `Q3_K` blocks in planes of their fields ([`ggml::LAYOUTS`]).
    Q3_K = 21,
    /// ggml's `Q4_K` blocks in planes of their fields ([`ggml::LAYOUTS`]).
    Q4_K = 22,
    /// ggml's `Q5_K` blocks in planes of their fields ([`ggml::LAYOUTS`]).
    Q5_K = 23,
    /// ggml's `Q6_K` blocks in planes of their fields ([`ggml::LAYOUTS`]).
    Q6_K = 24,
    /// ggml's `Q8_K` blocks in planes of their fields ([`ggml::LAYOUTS`]).
    Q8_K = 25,
}

impl Transform {
    /// Every transform, in id order.
    pub const ALL: [Transform; 26] = [
        Transform::Bytes,
        Transform::Split16,
        Transform::Exp16,
        Transform::Exp32,
        Transform::Exp64,
        Transform::Split32,
        Transform::Split64,
        Transform::Delta32,
        Transform::Delta64,
        Transform::Xor8,
        Transform::Xor16,
        Transform::Sub16,
        Transform::Xor32,
        Transform::Sub32,
        Transform::Q4_0,
        Transform::Q4_1,
        Transform::Q5_0,
        Transform::Q5_1,
        Transform::Q8_0,
        Transform::Q8_1,
        Transform::Q2_K,
        Transform::Q3_K,
        Transform::Q4_K,
        Transform::Q5_K,
        Transform::Q6_K,
        Transform::Q8_K,
    ];

    /// Transform planned for a tensor of the quantized ggml type named `name` (a GGUF tensor):
    /// its block layout's, or [`Transform::Bytes`] for a type without one.
    pub fn for_ggml(name: &str) -> Transform {
        let k = ggml::LAYOUTS.iter().position(|l| l.ggml().name == name);
        k.and_then(|k| Transform::from_id(ggml::FIRST_ID + k as u8))
            .unwrap_or(Transform::Bytes)
    }

    /// The ggml block layout of a ggml transform.
    pub fn ggml(self) -> Option<&'static ggml::Layout> {
        (self as u8)
            .checked_sub(ggml::FIRST_ID)
            .and_then(|k| ggml::LAYOUTS.get(k as usize))
    }

    /// Parses the container's transform id.
    pub fn from_id(id: u8) -> Option<Transform> {
        Transform::ALL.get(id as usize).copied()
    }

    /// Bytes per element (a ggml block for the ggml transforms); block lengths must be a
    /// multiple of it.
    pub fn width(self) -> usize {
        match self {
            Transform::Bytes | Transform::Xor8 => 1,
            Transform::Split16 | Transform::Exp16 | Transform::Xor16 | Transform::Sub16 => 2,
            Transform::Exp32
            | Transform::Split32
            | Transform::Delta32
            | Transform::Xor32
            | Transform::Sub32 => 4,
            Transform::Exp64 | Transform::Split64 | Transform::Delta64 => 8,
            t => t.ggml().map_or(1, |l| l.ggml().block_bytes as usize),
        }
    }

    /// Number of planes: one per byte of the element, or per piece of a ggml layout.
    pub fn planes(self) -> usize {
        match self.ggml() {
            Some(l) => l.planes.len(),
            None => self.width(),
        }
    }

    /// The longest block of this transform whose planes fit `block_size` bytes together: whole
    /// elements only, and for the ggml transforms whose joined quants make planes longer than
    /// their block, fewer of them, so that no block's planes take more memory than a block.
    pub fn block_cap(self, block_size: usize) -> usize {
        let planes: usize = (0..self.planes()).map(|k| self.unit_bytes(k)).sum();
        block_size / planes.max(self.width()) * self.width()
    }

    /// Bytes plane `k` takes per element: 1, or a ggml layout's piece's bytes.
    pub fn unit_bytes(self, k: usize) -> usize {
        self.ggml().map_or(1, |l| l.bytes(k))
    }

    /// Whether plane 0 holds a float exponent and plane 1 the sign and top mantissa bits, the
    /// pair the context codec models together.
    pub fn exponent_aligned(self) -> bool {
        matches!(self, Transform::Exp16 | Transform::Exp32 | Transform::Exp64)
    }

    /// Whether the block is coded against base bytes, which decoding needs.
    pub fn is_delta(self) -> bool {
        matches!(
            self,
            Transform::Xor8
                | Transform::Xor16
                | Transform::Sub16
                | Transform::Xor32
                | Transform::Sub32
        )
    }

    /// Length of plane `k` of a block of `raw_len` bytes (a multiple of the width): its bytes
    /// per element times the elements.
    pub fn plane_len(self, k: usize, raw_len: usize) -> usize {
        raw_len / self.width() * self.unit_bytes(k)
    }

    /// Short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Transform::Bytes => "bytes",
            Transform::Split16 => "split16",
            Transform::Exp16 => "exp16",
            Transform::Exp32 => "exp32",
            Transform::Exp64 => "exp64",
            Transform::Split32 => "split32",
            Transform::Split64 => "split64",
            Transform::Delta32 => "delta32",
            Transform::Delta64 => "delta64",
            Transform::Xor8 => "xor8",
            Transform::Xor16 => "xor16",
            Transform::Sub16 => "sub16",
            Transform::Xor32 => "xor32",
            Transform::Sub32 => "sub32",
            Transform::Q4_0 => "q4_0",
            Transform::Q4_1 => "q4_1",
            Transform::Q5_0 => "q5_0",
            Transform::Q5_1 => "q5_1",
            Transform::Q8_0 => "q8_0",
            Transform::Q8_1 => "q8_1",
            Transform::Q2_K => "q2_k",
            Transform::Q3_K => "q3_k",
            Transform::Q4_K => "q4_k",
            Transform::Q5_K => "q5_k",
            Transform::Q6_K => "q6_k",
            Transform::Q8_K => "q8_k",
        }
    }

    /// Splits `raw` into the first [`Transform::planes`] of `planes` (each resized to the
    /// plane length); a delta transform takes its base to be zeros.
    ///
    /// `raw.len()` must be a multiple of [`Transform::width`]; the pipeline guarantees it.
    pub fn split(self, raw: &[u8], planes: &mut [Vec<u8>]) {
        self.split_against(raw, &[], planes)
    }

    /// [`Transform::split`] of `raw` coded against `base`, its paired bytes (as long as `raw`;
    /// empty: zeros). Transforms other than the delta ones ignore `base`.
    pub fn split_against(self, raw: &[u8], base: &[u8], planes: &mut [Vec<u8>]) {
        if let Some(l) = self.ggml() {
            let whole = raw.len() - raw.len() % self.width();
            return l.split(&raw[..whole], planes);
        }
        let n = raw.len() / self.width();
        // Every byte is overwritten below, so a reused plane keeps its old bytes (resizing
        // after a clear would zero megabytes per block for nothing).
        for p in planes.iter_mut().take(self.planes()) {
            p.resize(n, 0);
        }
        let raw = &raw[..n * self.width()];
        match self {
            Transform::Bytes => planes[0].copy_from_slice(raw),
            Transform::Split16 => split_with(raw, planes, |[b0, b1]| [b1, b0]),
            Transform::Exp16 => split_with(raw, planes, |b| {
                let w = u16::from_le_bytes(b);
                [(w >> 7) as u8, ((w >> 8) as u8 & 0x80) | (w as u8 & 0x7F)]
            }),
            Transform::Exp32 => split_with(raw, planes, |b| {
                let w = u32::from_le_bytes(b);
                let sm = ((w >> 24) as u8 & 0x80) | ((w >> 16) as u8 & 0x7F);
                [(w >> 23) as u8, sm, b[1], b[0]]
            }),
            Transform::Exp64 => split_with(raw, planes, |b| {
                let w = u64::from_le_bytes(b);
                let top = (b[7] & 0xF0) | (b[6] & 0x0F);
                [(w >> 52) as u8, top, b[5], b[4], b[3], b[2], b[1], b[0]]
            }),
            Transform::Split32 => split_with(raw, planes, |[b0, b1, b2, b3]| [b3, b2, b1, b0]),
            Transform::Split64 => split_with(raw, planes, |mut b: [u8; 8]| {
                b.reverse();
                b
            }),
            Transform::Delta32 => {
                let mut prev = 0u32;
                split_with(raw, planes, |b| {
                    let w = u32::from_le_bytes(b);
                    let d = w.wrapping_sub(prev);
                    prev = w;
                    d.to_be_bytes()
                })
            }
            Transform::Delta64 => {
                let mut prev = 0u64;
                split_with(raw, planes, |b| {
                    let w = u64::from_le_bytes(b);
                    let d = w.wrapping_sub(prev);
                    prev = w;
                    d.to_be_bytes()
                })
            }
            Transform::Xor8 => split8(raw, base, &mut planes[0], |w, b| w ^ b),
            Transform::Xor16 => split16(raw, base, planes, |w, b| w ^ b),
            Transform::Sub16 => split16(raw, base, planes, |w, b| {
                zigzag16(order16(w).wrapping_sub(order16(b)))
            }),
            Transform::Xor32 => split32(raw, base, planes, |w, b| w ^ b),
            Transform::Sub32 => split32(raw, base, planes, |w, b| {
                zigzag32(order32(w).wrapping_sub(order32(b)))
            }),
            _ => unreachable!("the ggml transforms split above"),
        }
    }

    /// Interleaves decoded `planes` back into `out`, the inverse of [`Transform::split`].
    #[cfg(any(test, feature = "lab"))]
    pub fn merge(self, planes: &[&[u8]], out: &mut [u8]) -> Result<(), CodecError> {
        self.merge_against(planes, &[], out)
    }

    /// The inverse of [`Transform::split_against`]: `base` must be what the block was split
    /// against (as long as `out`, or empty for zeros).
    pub fn merge_against(
        self,
        planes: &[&[u8]],
        base: &[u8],
        out: &mut [u8],
    ) -> Result<(), CodecError> {
        let n = out.len() / self.width();
        if planes.len() != self.planes()
            || (0..planes.len()).any(|k| planes[k].len() != self.plane_len(k, out.len()))
            || out.len() != n * self.width()
        {
            return Err(CodecError("plane lengths do not match the block"));
        }
        if let Some(l) = self.ggml() {
            l.merge(planes, out);
            return Ok(());
        }
        if !base.is_empty() && base.len() != out.len() {
            return Err(CodecError("base bytes do not match the block"));
        }
        match self {
            Transform::Bytes => out.copy_from_slice(planes[0]),
            Transform::Split16 => merge_with(planes, out, |[p0, p1]| [p1, p0]),
            Transform::Exp16 => merge_with(planes, out, |[e, sm]| {
                let w = ((sm as u16 & 0x80) << 8) | (e as u16) << 7 | (sm as u16 & 0x7F);
                w.to_le_bytes()
            }),
            Transform::Exp32 => merge_with(planes, out, |[e, sm, b1, b0]| {
                let w = ((sm as u32 & 0x80) << 24) | (e as u32) << 23 | (sm as u32 & 0x7F) << 16;
                (w | (b1 as u32) << 8 | b0 as u32).to_le_bytes()
            }),
            Transform::Exp64 => merge_with(planes, out, |p: [u8; 8]| {
                let (e, top) = (p[0] as u64, p[1] as u64);
                let hi = (top & 0xF0) << 56 | e << 52 | (top & 0x0F) << 48;
                let lo = u64::from_be_bytes([0, 0, p[2], p[3], p[4], p[5], p[6], p[7]]);
                (hi | lo).to_le_bytes()
            }),
            Transform::Split32 => merge_with(planes, out, |[p0, p1, p2, p3]| [p3, p2, p1, p0]),
            Transform::Split64 => merge_with(planes, out, |mut p: [u8; 8]| {
                p.reverse();
                p
            }),
            Transform::Delta32 => {
                let mut prev = 0u32;
                merge_with(planes, out, |p| {
                    prev = prev.wrapping_add(u32::from_be_bytes(p));
                    prev.to_le_bytes()
                })
            }
            Transform::Delta64 => {
                let mut prev = 0u64;
                merge_with(planes, out, |p| {
                    prev = prev.wrapping_add(u64::from_be_bytes(p));
                    prev.to_le_bytes()
                })
            }
            Transform::Xor8 => merge8(planes[0], base, out, |d, b| d ^ b),
            Transform::Xor16 => merge16(planes, base, out, |d, b| d ^ b),
            Transform::Sub16 => merge16(planes, base, out, unsub16),
            Transform::Xor32 => merge32(planes, base, out, |d, b| d ^ b),
            Transform::Sub32 => merge32(planes, base, out, |d, b| {
                unorder32(order32(b).wrapping_add(unzigzag32(d)))
            }),
            _ => unreachable!("the ggml transforms merged above"),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(t: Transform, raw: &[u8]) -> Vec<Vec<u8>> {
        let mut planes = vec![Vec::new(); MAX_PLANES];
        t.split(raw, &mut planes);
        let mut out = vec![0u8; raw.len()];
        let views: Vec<&[u8]> = planes.iter().take(t.planes()).map(|p| &p[..]).collect();
        t.merge(&views, &mut out).unwrap();
        assert_eq!(out, raw, "{t:?}");
        planes.truncate(t.planes());
        planes
    }

    #[test]
    fn split16_puts_high_bytes_first() {
        let planes = roundtrip(Transform::Split16, &[0x11, 0xAA, 0x22, 0xBB]);
        assert_eq!(planes[0], [0xAA, 0xBB]);
        assert_eq!(planes[1], [0x11, 0x22]);
    }

    #[test]
    fn exp16_isolates_the_bf16_exponent() {
        // -1.5 in BF16 is 0xBFC0: sign 1, exponent 0x7F, mantissa 0x40.
        let planes = roundtrip(Transform::Exp16, &0xBFC0u16.to_le_bytes());
        assert_eq!(planes[0], [0x7F]);
        assert_eq!(planes[1], [0x80 | 0x40]);
    }

    #[test]
    fn exp32_isolates_the_f32_exponent() {
        let planes = roundtrip(Transform::Exp32, &(-1.5f32 - 2f32.powi(-20)).to_le_bytes());
        // Sign 1, exponent 0x7F, mantissa 0x400008: top 7 bits 0x40, then 0x00, 0x08.
        assert_eq!(planes, [[0x7F], [0xC0], [0x00], [0x08]]);
    }

    #[test]
    fn exp64_isolates_the_low_exponent_byte() {
        // -1.5: sign 1, exponent 0x3FF (low 8 bits 0xFF, top 3 bits 0b011), mantissa 0x8...
        let planes = roundtrip(Transform::Exp64, &(-1.5f64).to_le_bytes());
        assert_eq!(planes[0], [0xFF]);
        assert_eq!(planes[1], [0x80 | 0x30 | 0x08]);
        assert!(planes[2..].iter().all(|p| p == &[0]));
    }

    #[test]
    fn integer_splits_put_the_most_significant_byte_first() {
        let planes = roundtrip(Transform::Split32, &0x0403_0201u32.to_le_bytes());
        assert_eq!(planes, [[4], [3], [2], [1]]);
        let planes = roundtrip(Transform::Split64, &0x0807_0605_0403_0201u64.to_le_bytes());
        assert_eq!(planes, [[8], [7], [6], [5], [4], [3], [2], [1]]);
    }

    #[test]
    fn delta_makes_sequences_constant() {
        let ids: Vec<u8> = (1000..1300u64).flat_map(u64::to_le_bytes).collect();
        let planes = roundtrip(Transform::Delta64, &ids);
        assert_eq!(planes[7][0], 0xE8); // 1000 = 0x3E8, taken against 0
        assert!(planes[7][1..].iter().all(|&b| b == 1));
        assert!(planes[..7].iter().all(|p| p[1..].iter().all(|&b| b == 0)));
    }

    #[test]
    fn every_transform_round_trips_any_bytes_aligned_or_not() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let noise: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let all16: Vec<u8> = (0..=u16::MAX).flat_map(u16::to_le_bytes).collect();
        for t in Transform::ALL {
            assert_eq!(Transform::from_id(t as u8), Some(t));
            for data in [&noise[..], &all16[..]] {
                roundtrip(t, &data[..data.len() / t.width() * t.width()]);
                roundtrip(t, &data[1..1 + (data.len() - 8) / t.width() * t.width()]);
            }
        }
        assert_eq!(Transform::from_id(Transform::ALL.len() as u8), None);
    }

    fn roundtrip_against(t: Transform, raw: &[u8], base: &[u8]) -> Vec<Vec<u8>> {
        let mut planes = vec![Vec::new(); MAX_PLANES];
        t.split_against(raw, base, &mut planes);
        let mut out = vec![0u8; raw.len()];
        let views: Vec<&[u8]> = planes.iter().take(t.planes()).map(|p| &p[..]).collect();
        t.merge_against(&views, base, &mut out).unwrap();
        assert_eq!(out, raw, "{t:?}");
        planes.truncate(t.planes());
        planes
    }

    #[test]
    fn order_maps_are_monotone_bijections() {
        let mut seen = vec![false; 1 << 16];
        let mut prev: Option<(f32, u16)> = None;
        // Every non-NaN BF16 value in increasing order maps to increasing integers.
        let mut values: Vec<u16> = (0..=u16::MAX)
            .filter(|&w| !f32::from_bits((w as u32) << 16).is_nan())
            .collect();
        values.sort_by(|a, b| {
            let (x, y) = (
                f32::from_bits((*a as u32) << 16),
                f32::from_bits((*b as u32) << 16),
            );
            x.partial_cmp(&y)
                .unwrap()
                .then((a >> 15).cmp(&(b >> 15)).reverse())
        });
        for &w in &values {
            let m = order16(w);
            assert_eq!(unorder16(m), w);
            assert!(!seen[m as usize]);
            seen[m as usize] = true;
            if let Some((_, pm)) = prev {
                assert!(m > pm, "{w:#06x}");
            }
            prev = Some((0.0, m));
        }
        for w in 0..=u16::MAX {
            assert_eq!(unorder16(order16(w)), w);
            assert_eq!(unzigzag16(zigzag16(w)), w);
        }
        // -0 and +0 are neighbours; one unit up from 1.0 is 2 in zigzag.
        assert_eq!(order16(0x0000).wrapping_sub(order16(0x8000)), 1);
        assert_eq!(zigzag16(order16(0x3F81).wrapping_sub(order16(0x3F80))), 2);
        assert_eq!(zigzag16(order16(0x3F7F).wrapping_sub(order16(0x3F80))), 1);
        for x in [
            0u32,
            1,
            0x7FFF_FFFF,
            0x8000_0000,
            0xFFFF_FFFF,
            0x3F80_0000,
            0xBF80_0001,
        ] {
            assert_eq!(unorder32(order32(x)), x);
            assert_eq!(unzigzag32(zigzag32(x)), x);
        }
        assert!(order32((-1.0f32).to_bits()) < order32((-0.5f32).to_bits()));
        assert!(order32((-0.0f32).to_bits()) < order32(0.0f32.to_bits()));
        assert!(order32(0.5f32.to_bits()) < order32(1.0f32.to_bits()));
    }

    #[test]
    fn delta_transforms_code_small_moves_as_small_numbers() {
        // 1.0 and -1.0 in BF16, each moved by one unit in the last place (away from zero).
        let base: Vec<u8> = [0x3F80u16, 0xBF80]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        let tune: Vec<u8> = [0x3F81u16, 0xBF81]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        let planes = roundtrip_against(Transform::Sub16, &tune, &base);
        assert_eq!(planes, [vec![0, 0], vec![2, 1]]);
        let planes = roundtrip_against(Transform::Xor16, &tune, &base);
        assert_eq!(planes, [vec![0, 0], vec![1, 1]]);
        let planes = roundtrip_against(Transform::Xor8, &tune, &tune);
        assert_eq!(planes, [vec![0; 4]]);
        let b32: Vec<u8> = [1.0f32, -2.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let t32: Vec<u8> = [f32::from_bits(1.0f32.to_bits() - 3), -2.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let planes = roundtrip_against(Transform::Sub32, &t32, &b32);
        assert_eq!(planes, [vec![0, 0], vec![0, 0], vec![0, 0], vec![5, 0]]);
        roundtrip_against(Transform::Xor32, &t32, &b32);
    }

    #[test]
    fn delta_transforms_round_trip_any_words_against_any_base() {
        let mut next = crate::test_rng(0x2545_F491);
        let mut noise = |n: usize| -> Vec<u8> { (0..n).map(|_| next() as u8).collect() };
        let (raw, base) = (noise(4096), noise(4096));
        for t in Transform::ALL.into_iter().filter(|t| t.is_delta()) {
            roundtrip_against(t, &raw, &base);
            roundtrip_against(t, &raw, &raw);
            roundtrip_against(t, &raw, &[]);
        }
    }
}
