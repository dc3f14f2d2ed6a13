//! `sparse` (id 10): a plane that holds one byte almost everywhere, stored as that byte and the
//! positions and values of the others. The high byte of a fine-tune's differences from its base
//! is 0 for all but a few values in a thousand: a Huffman code spends at least a bit on each,
//! this a few bytes on each exception, and decodes as a fill and a scatter.
//!
//! Payload:
//! ```text
//! u8     the fill byte
//! then, per exception in increasing position: LEB128 gap (positions skipped since the end of
//!        the previous exception, or since the start), then the exception's byte
//! ```

use super::spec::Spec;
use crate::error::CodecError;

/// The `sparse` codec.
pub static SPEC: Spec = Spec::plane_coder(10, "sparse", decode);

/// Bytes of a LEB128 code of `v`.
fn leb_len(v: u32) -> usize {
    (32 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// The size of `plane`'s sparse payload with `fill` (its most common byte, from the caller's
/// histogram), without writing it; stops counting once it passes `limit`.
pub fn size(plane: &[u8], fill: u8, limit: usize) -> usize {
    let mut size = 1;
    let mut last = 0usize;
    for (i, &b) in plane.iter().enumerate() {
        if b != fill {
            size += leb_len((i - last) as u32) + 1;
            last = i + 1;
            if size > limit {
                break;
            }
        }
    }
    size
}

/// Codes `plane` around its byte `fill` into `out`.
pub fn encode(plane: &[u8], fill: u8, out: &mut Vec<u8>) {
    out.clear();
    out.push(fill);
    let mut last = 0usize;
    for (i, &b) in plane.iter().enumerate() {
        if b != fill {
            let mut gap = (i - last) as u32;
            while gap >= 0x80 {
                out.push(gap as u8 | 0x80);
                gap >>= 7;
            }
            out.push(gap as u8);
            out.push(b);
            last = i + 1;
        }
    }
}

/// Decodes a sparse payload into `out`.
pub fn decode(payload: &[u8], out: &mut [u8]) -> Result<(), CodecError> {
    let (&fill, mut rest) = payload
        .split_first()
        .ok_or(CodecError("empty sparse plane"))?;
    out.fill(fill);
    let mut pos = 0usize;
    while !rest.is_empty() {
        let mut gap = 0usize;
        let mut shift = 0;
        loop {
            let (&b, tail) = rest
                .split_first()
                .ok_or(CodecError("sparse plane ends inside a gap"))?;
            rest = tail;
            if shift > 28 {
                return Err(CodecError("sparse gap too long"));
            }
            gap |= ((b & 0x7F) as usize) << shift;
            shift += 7;
            if b & 0x80 == 0 {
                break;
            }
        }
        let (&b, tail) = rest
            .split_first()
            .ok_or(CodecError("sparse plane ends before an exception's byte"))?;
        rest = tail;
        pos = pos
            .checked_add(gap)
            .filter(|&p| p < out.len())
            .ok_or(CodecError("sparse exception past the end of the plane"))?;
        out[pos] = b;
        pos += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_size() {
        let mut plane = vec![0u8; 100_000];
        for (k, i) in [0usize, 1, 127, 128, 129, 5000, 99_999].iter().enumerate() {
            plane[*i] = k as u8 + 1;
        }
        let mut coded = Vec::new();
        encode(&plane, 0, &mut coded);
        assert_eq!(coded.len(), size(&plane, 0, usize::MAX));
        let mut out = vec![7u8; plane.len()];
        decode(&coded, &mut out).unwrap();
        assert_eq!(out, plane);
        // Around another fill byte, every position is an exception.
        encode(&plane[..300], 9, &mut coded);
        decode(&coded, &mut out[..300]).unwrap();
        assert_eq!(out[..300], plane[..300]);
        assert!(size(&plane, 9, 1000) > 1000);
    }

    #[test]
    fn bad_payloads_are_errors() {
        let mut out = [0u8; 10];
        assert!(decode(&[], &mut out).is_err());
        assert!(decode(&[0, 0x80], &mut out).is_err());
        assert!(decode(&[0, 3], &mut out).is_err());
        assert!(decode(&[0, 10, 1], &mut out).is_err());
        assert!(decode(&[0, 9, 1, 0, 1], &mut out).is_err());
        assert!(decode(&[0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01, 1], &mut out).is_err());
        decode(&[0, 9, 1], &mut out).unwrap();
        assert_eq!(out[9], 1);
    }
}
