//! Plane transforms: how a block's bytes are split into byte planes before entropy coding.
//!
//! A 16-bit float's high byte (sign and top exponent bits) is highly predictable while its low
//! byte is close to random; coding them as separate planes lets each coder see one distribution.

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
}

impl Transform {
    /// Parses the container's transform id.
    pub fn from_id(id: u8) -> Option<Transform> {
        match id {
            0 => Some(Transform::Bytes),
            1 => Some(Transform::Split16),
            _ => None,
        }
    }

    /// Bytes per element; block lengths must be a multiple of it.
    pub fn width(self) -> usize {
        match self {
            Transform::Bytes => 1,
            Transform::Split16 => 2,
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
            Transform::Split16 => {
                let (hi, rest) = planes.split_at_mut(1);
                let (hi, lo) = (&mut hi[0][..n], &mut rest[0][..n]);
                // Aligned input (the usual case) takes the u16 path, which vectorises well.
                match bytemuck::try_cast_slice::<u8, u16>(&raw[..n * 2]) {
                    Ok(words) => {
                        for ((&w, h), l) in words.iter().zip(hi.iter_mut()).zip(lo.iter_mut()) {
                            let w = u16::from_le(w);
                            *h = (w >> 8) as u8;
                            *l = w as u8;
                        }
                    }
                    Err(_) => {
                        let pairs: &[[u8; 2]] = bytemuck::cast_slice(&raw[..n * 2]);
                        for ((p, h), l) in pairs.iter().zip(hi.iter_mut()).zip(lo.iter_mut()) {
                            *h = p[1];
                            *l = p[0];
                        }
                    }
                }
            }
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
                match bytemuck::try_cast_slice_mut::<u8, u16>(&mut out[..n * 2]) {
                    Ok(words) => {
                        for ((w, &h), &l) in words.iter_mut().zip(planes[0]).zip(planes[1]) {
                            *w = u16::to_le((h as u16) << 8 | l as u16);
                        }
                    }
                    Err(_) => {
                        let pairs: &mut [[u8; 2]] = bytemuck::cast_slice_mut(&mut out[..n * 2]);
                        for ((p, &h), &l) in pairs.iter_mut().zip(planes[0]).zip(planes[1]) {
                            *p = [l, h];
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split16_puts_high_bytes_first() {
        let raw = [0x11u8, 0xAA, 0x22, 0xBB];
        let mut planes = vec![Vec::new(), Vec::new()];
        Transform::Split16.split(&raw, &mut planes);
        assert_eq!(planes[0], [0xAA, 0xBB]);
        assert_eq!(planes[1], [0x11, 0x22]);
        let mut out = [0u8; 4];
        Transform::Split16
            .merge(&[&planes[0], &planes[1]], &mut out)
            .unwrap();
        assert_eq!(out, raw);
    }
}
