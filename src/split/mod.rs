//! Plane transforms: how a block's bytes are split into byte planes before entropy coding.
//!
//! A 16-bit float's sign and exponent bits are highly predictable while its low mantissa bits
//! are close to random; coding them as separate planes lets each coder see one distribution.

use crate::error::CodecError;

/// Most planes any transform produces.
pub const MAX_PLANES: usize = 2;

/// How a block is split into planes; stored per block in the container.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Transform {
    /// One plane: the bytes as they are (non-float data, gaps, non-safetensors input).
    Bytes = 0,
    /// Two planes from 16-bit little-endian elements: plane 0 the high bytes, plane 1 the low.
    Split16 = 1,
    /// Two planes from 16-bit elements, exponent-aligned: plane 0 holds bits 7..=14 (the whole
    /// BF16 exponent; for F16 the exponent and top 3 mantissa bits), plane 1 the sign bit
    /// moved down to bit 7 above bits 0..=6. The sign is a coin flip, so taking it out of the
    /// predictable plane and putting the exponent's last bit in makes that plane cheaper.
    Exp16 = 2,
}

impl Transform {
    /// Parses the container's transform id.
    pub fn from_id(id: u8) -> Option<Transform> {
        match id {
            0 => Some(Transform::Bytes),
            1 => Some(Transform::Split16),
            2 => Some(Transform::Exp16),
            _ => None,
        }
    }

    /// Bytes per element; block lengths must be a multiple of it.
    pub fn width(self) -> usize {
        match self {
            Transform::Bytes => 1,
            Transform::Split16 | Transform::Exp16 => 2,
        }
    }

    /// Number of planes.
    pub fn planes(self) -> usize {
        self.width()
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
        }
    }

    /// Splits `raw` into `planes` (each resized to the plane length).
    ///
    /// `raw.len()` must be a multiple of [`Transform::width`]; the pipeline guarantees it.
    pub fn split(self, raw: &[u8], planes: &mut [Vec<u8>]) {
        let n = self.plane_len(raw.len());
        for p in planes.iter_mut().take(self.planes()) {
            p.clear();
            p.resize(n, 0);
        }
        match self {
            Transform::Bytes => planes[0].copy_from_slice(raw),
            Transform::Split16 => split16(raw, planes, |w| ((w >> 8) as u8, w as u8)),
            Transform::Exp16 => split16(raw, planes, |w| {
                ((w >> 7) as u8, ((w >> 8) as u8 & 0x80) | (w as u8 & 0x7F))
            }),
        }
    }

    /// Interleaves decoded `planes` back into `out`, the inverse of [`Transform::split`].
    pub fn merge(self, planes: &[&[u8]], out: &mut [u8]) -> Result<(), CodecError> {
        let n = self.plane_len(out.len());
        if planes.len() != self.planes() || planes.iter().any(|p| p.len() != n) {
            return Err(CodecError("plane lengths do not match the block"));
        }
        match self {
            Transform::Bytes => out.copy_from_slice(planes[0]),
            Transform::Split16 => {
                merge16(planes[0], planes[1], out, |h, l| (h as u16) << 8 | l as u16)
            }
            Transform::Exp16 => merge16(planes[0], planes[1], out, |e, sm| {
                ((sm as u16 & 0x80) << 8) | (e as u16) << 7 | (sm as u16 & 0x7F)
            }),
        }
        Ok(())
    }
}

/// Picks the 16-bit split whose planes measure cheaper for the block `raw`.
///
/// Measures order-0 entropies on every 4th element: plane 0 alone when plane 1 will be stored
/// raw (`code_plane1` false, FAST), both planes otherwise. Real BF16 weights almost always
/// favour [`Transform::Exp16`]; F16 and unusual data may not, hence the measurement.
pub fn choose16(raw: &[u8], code_plane1: bool) -> Transform {
    let mut h = [[0u32; 256]; 4];
    for c in raw.chunks_exact(8) {
        let w = u16::from_le_bytes([c[0], c[1]]);
        h[0][(w >> 8) as usize] += 1;
        h[1][(w & 0xFF) as usize] += 1;
        h[2][((w >> 7) & 0xFF) as usize] += 1;
        h[3][(((w >> 8) & 0x80) | (w & 0x7F)) as usize] += 1;
    }
    let e = |k: usize| crate::entropy::entropy_bits(&h[k]);
    let (split, exp) = if code_plane1 {
        (e(0) + e(1), e(2) + e(3))
    } else {
        (e(0), e(2))
    };
    if exp <= split {
        Transform::Exp16
    } else {
        Transform::Split16
    }
}

/// Splits 16-bit little-endian elements into two planes with `f(element) -> (p0, p1)`.
#[inline(always)]
fn split16(raw: &[u8], planes: &mut [Vec<u8>], f: impl Fn(u16) -> (u8, u8)) {
    let n = raw.len() / 2;
    let (p0, rest) = planes.split_at_mut(1);
    let (p0, p1) = (&mut p0[0][..n], &mut rest[0][..n]);
    // Aligned input (the usual case) takes the u16 path, which vectorises well.
    match bytemuck::try_cast_slice::<u8, u16>(&raw[..n * 2]) {
        Ok(words) => {
            for ((&w, a), b) in words.iter().zip(p0.iter_mut()).zip(p1.iter_mut()) {
                (*a, *b) = f(u16::from_le(w));
            }
        }
        Err(_) => {
            let pairs: &[[u8; 2]] = bytemuck::cast_slice(&raw[..n * 2]);
            for ((p, a), b) in pairs.iter().zip(p0.iter_mut()).zip(p1.iter_mut()) {
                (*a, *b) = f(u16::from_le_bytes(*p));
            }
        }
    }
}

/// Rebuilds 16-bit little-endian elements from two planes with `f(p0, p1) -> element`.
#[inline(always)]
fn merge16(p0: &[u8], p1: &[u8], out: &mut [u8], f: impl Fn(u8, u8) -> u16) {
    let n = out.len() / 2;
    match bytemuck::try_cast_slice_mut::<u8, u16>(&mut out[..n * 2]) {
        Ok(words) => {
            for ((w, &a), &b) in words.iter_mut().zip(p0).zip(p1) {
                *w = u16::to_le(f(a, b));
            }
        }
        Err(_) => {
            let pairs: &mut [[u8; 2]] = bytemuck::cast_slice_mut(&mut out[..n * 2]);
            for ((p, &a), &b) in pairs.iter_mut().zip(p0).zip(p1) {
                *p = f(a, b).to_le_bytes();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(t: Transform, raw: &[u8]) -> Vec<Vec<u8>> {
        let mut planes = vec![Vec::new(), Vec::new()];
        t.split(raw, &mut planes);
        let mut out = vec![0u8; raw.len()];
        let views: Vec<&[u8]> = planes.iter().take(t.planes()).map(|p| &p[..]).collect();
        t.merge(&views, &mut out).unwrap();
        assert_eq!(out, raw, "{t:?}");
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
    fn every_16_bit_value_survives_both_ways_and_misaligned() {
        let all: Vec<u8> = (0..=u16::MAX).flat_map(u16::to_le_bytes).collect();
        let mut shifted = vec![0u8];
        shifted.extend_from_slice(&all);
        for t in [Transform::Split16, Transform::Exp16] {
            roundtrip(t, &all);
            roundtrip(t, &shifted[1..]);
        }
    }
}
