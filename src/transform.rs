//! Plane transforms: how a block's bytes are split into byte planes before entropy coding.
//!
//! A float's sign and exponent bits are highly predictable while its low mantissa bits are
//! close to random; coding them as separate planes lets each coder see one distribution.
//! Integers are split into byte planes, most significant first, so that the high bytes of
//! small values (ids, counts) become constant planes.

use crate::codec::CodecError;

/// Most planes any transform produces.
pub const MAX_PLANES: usize = 8;

/// How a block is split into planes; stored per block in the container.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
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
}

impl Transform {
    /// Every transform, in id order.
    pub const ALL: [Transform; 9] = [
        Transform::Bytes,
        Transform::Split16,
        Transform::Exp16,
        Transform::Exp32,
        Transform::Exp64,
        Transform::Split32,
        Transform::Split64,
        Transform::Delta32,
        Transform::Delta64,
    ];

    /// Parses the container's transform id.
    pub fn from_id(id: u8) -> Option<Transform> {
        Transform::ALL.get(id as usize).copied()
    }

    /// Bytes per element; block lengths must be a multiple of it.
    pub fn width(self) -> usize {
        match self {
            Transform::Bytes => 1,
            Transform::Split16 | Transform::Exp16 => 2,
            Transform::Exp32 | Transform::Split32 | Transform::Delta32 => 4,
            Transform::Exp64 | Transform::Split64 | Transform::Delta64 => 8,
        }
    }

    /// Number of planes: one per byte of the element.
    pub fn planes(self) -> usize {
        self.width()
    }

    /// Whether plane 0 holds a float exponent and plane 1 the sign and top mantissa bits, the
    /// pair the context codec models together.
    pub fn exponent_aligned(self) -> bool {
        matches!(self, Transform::Exp16 | Transform::Exp32 | Transform::Exp64)
    }

    /// Length of each plane of a block of `raw_len` bytes (a multiple of the width).
    pub fn plane_len(self, raw_len: usize) -> usize {
        raw_len / self.width()
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
        }
    }

    /// Splits `raw` into the first [`Transform::planes`] of `planes` (each resized to the
    /// plane length).
    ///
    /// `raw.len()` must be a multiple of [`Transform::width`]; the pipeline guarantees it.
    pub fn split(self, raw: &[u8], planes: &mut [Vec<u8>]) {
        let n = self.plane_len(raw.len());
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
        }
    }

    /// Interleaves decoded `planes` back into `out`, the inverse of [`Transform::split`].
    pub fn merge(self, planes: &[&[u8]], out: &mut [u8]) -> Result<(), CodecError> {
        let n = self.plane_len(out.len());
        if planes.len() != self.planes()
            || planes.iter().any(|p| p.len() != n)
            || out.len() != n * self.width()
        {
            return Err(CodecError("plane lengths do not match the block"));
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
        }
        Ok(())
    }
}

/// Splits `W`-byte little-endian elements into `W` planes with `f(element) -> plane bytes`.
///
/// The plane slices are cut to exactly `n` first so the compiler can drop the bounds checks
/// in the loop.
#[inline(always)]
fn split_with<const W: usize>(
    raw: &[u8],
    planes: &mut [Vec<u8>],
    mut f: impl FnMut([u8; W]) -> [u8; W],
) {
    let n = raw.len() / W;
    let mut it = planes.iter_mut();
    let outs: [&mut [u8]; W] = std::array::from_fn(|_| match it.next() {
        Some(p) => &mut p[..n],
        None => unreachable!("every transform gets MAX_PLANES planes"),
    });
    for (i, c) in raw.chunks_exact(W).enumerate().take(n) {
        // chunks_exact(W) yields W-byte chunks only: the else branch is never taken.
        let Ok(elem) = <[u8; W]>::try_from(c) else {
            continue;
        };
        let v = f(elem);
        for k in 0..W {
            outs[k][i] = v[k];
        }
    }
}

/// Rebuilds `W`-byte little-endian elements from `W` planes with `f(plane bytes) -> element`.
#[inline(always)]
fn merge_with<const W: usize>(
    planes: &[&[u8]],
    out: &mut [u8],
    mut f: impl FnMut([u8; W]) -> [u8; W],
) {
    let n = out.len() / W;
    let ins: [&[u8]; W] = std::array::from_fn(|k| &planes[k][..n]);
    for (i, c) in out.chunks_exact_mut(W).enumerate().take(n) {
        c.copy_from_slice(&f(std::array::from_fn(|k| ins[k][i])));
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
                roundtrip(t, data);
                roundtrip(t, &data[1..1 + (data.len() - 8) / t.width() * t.width()]);
            }
        }
        assert_eq!(Transform::from_id(9), None);
    }
}
