//! `raw6` (id 7): the six near-random bits of each sign/mantissa byte (the sign and bits 4..0),
//! packed, as plane 1 beside a [`super::joint`], [`super::ctxjoint`] or [`super::huffjoint`]
//! plane 0 that codes the rest. The [`super::context`] codec stores the same fields after its
//! streams.
//!
//! Payload: each element's 6 bits from the least significant bit up (the sign as the field's
//! bit 5), `ceil(6 * n / 8)` bytes, unused high bits of the last byte zero.

use super::spec::{Decode, Slot, Spec};
use crate::error::CodecError;

/// The `raw6` codec: plane 1 of an exponent-aligned block, beside the pair codec of plane 0
/// that decodes it.
pub static SPEC: Spec = Spec {
    id: 7,
    name: "raw6",
    fits: |at: Slot, coded_len| {
        at.plane == 1
            && at.transform.exponent_aligned()
            && coded_len as u64 == len(at.plane_len as usize) as u64
    },
    partner: None,
    decode: Decode::Partner,
};

/// Whether a pair codec's plane-0 payload of `coded_len` bytes beside the raw6 plane is
/// possible for planes of `plane_len` bytes: the pair carries 10 of 16 bits, so it is smaller
/// than the two planes stored.
pub fn pair_fits(coded_len: u32, plane_len: u32) -> bool {
    coded_len > 0 && (coded_len as u64) + (len(plane_len as usize) as u64) < 2 * plane_len as u64
}

/// Checks that `raw` is a raw6 payload of `n` elements: its length, and padding bits of zero
/// (so that every bit of an archive is significant).
pub(crate) fn check(raw: &[u8], n: usize) -> Result<(), CodecError> {
    if raw.len() != len(n) {
        return Err(CodecError("raw mantissa payload has the wrong length"));
    }
    let spare = raw.len() * 8 - n * 6;
    if raw.last().is_some_and(|&b| (b as u32) >> (8 - spare) != 0) {
        return Err(CodecError("raw mantissa payload has padding bits set"));
    }
    Ok(())
}

/// Bits of a sign/mantissa byte that are stored raw: the sign (bit 7) and bits 4..0.
#[inline(always)]
fn raw_bits(x: u8) -> u64 {
    (((x >> 2) & 0x20) | (x & 0x1F)) as u64
}

/// The raw fields of four elements, packed in the 3 bytes `b`, spread to one byte each (sign
/// to bit 7, bits 4..0 in place, bits 6 and 5 clear), as a little-endian word.
#[inline(always)]
pub(crate) fn spread4(b: &[u8]) -> u32 {
    let w = b[0] as u32 | (b[1] as u32) << 8 | (b[2] as u32) << 16;
    let t = (w & 0x3F) | (w & 0xFC0) << 2 | (w & 0x3_F000) << 4 | (w & 0xFC_0000) << 6;
    (t & 0x2020_2020) << 2 | (t & 0x1F1F_1F1F)
}

/// The spread fields of the last `n % 4` of `n` elements, which start right after the whole
/// groups of 3 bytes in `raw`.
pub(crate) fn tail_fields(raw: &[u8], n: usize) -> [u8; 4] {
    let mut b = [0u8; 3];
    for (d, &r) in b.iter_mut().zip(raw.iter().skip(n / 4 * 3)) {
        *d = r;
    }
    spread4(&b).to_le_bytes()
}

/// Fills `out` with the raw fields (sign to bit 7, bits 4..0), leaving bits 6 and 5 clear.
/// `raw` holds `ceil(6 * out.len() / 8)` bytes (checked by the caller); a separate pass keeps
/// bit unpacking out of the serial decode loop.
pub(crate) fn unpack(raw: &[u8], out: &mut [u8]) {
    let fields = tail_fields(raw, out.len());
    let (head, tail) = out.split_at_mut(out.len() / 4 * 4);
    for (q, b) in head.chunks_exact_mut(4).zip(raw.chunks_exact(3)) {
        q.copy_from_slice(&spread4(b).to_le_bytes());
    }
    tail.copy_from_slice(&fields[..tail.len()]);
}

/// The raw6 payload (plane 1) of a sign/mantissa plane, as the joint codecs and the context
/// codec store it: the raw fields of `plane` (see `raw_bits`), 6 bits per element from the
/// least significant bit up, `ceil(6 * plane.len() / 8)` bytes; the inverse of [`unpack`].
pub fn encode(plane: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    out.resize(start + len(plane.len()), 0);
    let dst = &mut out[start..];
    let whole = plane.len() / 4;
    let (head, tail) = plane.split_at(whole * 4);
    let (dst_head, dst_tail) = dst.split_at_mut(whole * 3);
    for (q, b) in head.chunks_exact(4).zip(dst_head.chunks_exact_mut(3)) {
        // Four fields a word: each byte's sign moved down to bit 5, then the 6-bit fields
        // packed together.
        let x = u32::from_le(bytemuck::pod_read_unaligned(q));
        let t = (x & 0x8080_8080) >> 2 | (x & 0x1F1F_1F1F);
        let w = (t & 0x3F) | (t >> 2 & 0xFC0) | (t >> 4 & 0x3_F000) | (t >> 6 & 0xFC_0000);
        b.copy_from_slice(&w.to_le_bytes()[..3]);
    }
    let mut w = 0u64;
    for (i, &x) in tail.iter().enumerate() {
        w |= raw_bits(x) << (6 * i);
    }
    let n = dst_tail.len();
    dst_tail.copy_from_slice(&w.to_le_bytes()[..n]);
}

/// Length of the raw payload of `n` sign/mantissa bytes.
pub fn len(n: usize) -> usize {
    (n * 6).div_ceil(8)
}
