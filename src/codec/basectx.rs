//! `basectx` (id 11): BEST's coder of the low byte of a fine-tune's differences from its base
//! (plane 1 of a `sub16` block), with the base's magnitude as context.
//!
//! A fine-tune moves a weight by about the same absolute amount whatever its size, so the
//! difference counted in units in the last place shrinks as the weight's exponent grows: each
//! step of the base value's exponent halves it. Modelled on the base's exponent, the low byte
//! of MiniLM's 150-step fine-tune measures 2.03 bits per value against 2.61 order-0.
//!
//! For element `i` with base word `b` and high byte `h` (plane 0, decoded first):
//! - context: 16 when `h != 0` (a difference of 256 or more: the low byte is coded as 8 raw
//!   bits); otherwise `clamp(((b & 0x7FFF) >> shift) + 15 - top, 0, 15)`, `shift` and `top`
//!   from the payload (the exponent field, 7 for BF16, 10 for F16, and its largest value in the
//!   block).
//! - the low byte `x`'s length class `k` (0 for 0, else its bit length, 1..=8) in unary: for
//!   `j = 0, 1, ...`, the bit `k > j` with the adaptive binary model `unary[ctx][j]`, stopping
//!   at the first 0 or at `j = 8`;
//! - for `k >= 2`, the bits of `x` below its leading one, highest first: bit `k - 2` with model
//!   `first[ctx][k]`, for `k >= 3` bit `k - 3` with `second[ctx][k][bit k - 2]`, and the `k - 3`
//!   lower bits as one uniform symbol.
//!
//! Payload: `u8 shift` (at most 15), `u8 top`, then one range-coded stream (the coder and
//! binary models of [`crate::entropy::rc`]) that the decoder must consume exactly.

use super::spec::{Decode, Slot, Spec};
use crate::entropy::rc::{Decoder, Encoder, BIT_HALF, PROB_BITS};
use crate::error::CodecError;
use crate::transform::Transform;

/// The `basectx` codec: plane 1 of a `sub16` block, given plane 0 and the base.
pub static SPEC: Spec = Spec {
    id: 11,
    name: "basectx",
    fits: |at: Slot, coded_len| at.plane == 1 && at.transform == Transform::Sub16 && coded_len >= 2,
    partner: None,
    decode: Decode::GivenBase(decode),
};

/// Contexts of base magnitude (the 16 exponents below and at the block's largest).
const LEVELS: usize = 16;
/// The context of elements whose difference has a non-zero high byte.
const ESCAPE: usize = LEVELS;

/// The adaptive binary models of every context.
struct Model {
    unary: [[u16; 8]; LEVELS],
    first: [[u16; 9]; LEVELS],
    second: [[[u16; 2]; 9]; LEVELS],
}

impl Model {
    fn new() -> Box<Model> {
        Box::new(Model {
            unary: [[BIT_HALF; 8]; LEVELS],
            first: [[BIT_HALF; 9]; LEVELS],
            second: [[[BIT_HALF; 2]; 9]; LEVELS],
        })
    }
}

/// The context of an element whose base word is `b` and high byte `h`.
#[inline(always)]
fn context(b: u16, h: u8, shift: u32, top: u32) -> usize {
    if h != 0 {
        return ESCAPE;
    }
    let field = ((b & 0x7FFF) as u32) >> shift;
    (field + LEVELS as u32 - 1)
        .saturating_sub(top)
        .min(LEVELS as u32 - 1) as usize
}

/// Codes `n` (at most 15) bits `v` as one uniform symbol.
#[inline(always)]
fn encode_raw(enc: &mut Encoder, v: u32, n: u32) {
    let unit = 1 << (PROB_BITS - n);
    enc.encode(v * unit, unit);
}

/// Decodes `n` (at most 15) uniform bits.
#[inline(always)]
fn decode_raw(dec: &mut Decoder, data: &[u8], n: u32) -> u32 {
    let (r, slot) = dec.slot();
    let unit = 1 << (PROB_BITS - n);
    let v = (slot >> (PROB_BITS - n)).min((1 << n) - 1);
    dec.consume(data, r, v * unit, unit);
    v
}

/// The base word of element `i` of `base` (little-endian 16-bit words).
#[inline(always)]
fn word(base: &[u8], i: usize) -> u16 {
    u16::from_le_bytes([base[2 * i], base[2 * i + 1]])
}

/// The exponent field's shift that suits the block: BF16's (7) or F16's (10), whichever
/// separates the low bytes better, judged by their lengths' entropy within each context on a
/// sample.
pub fn choose_shift(low: &[u8], high: &[u8], base: &[u8]) -> u8 {
    let n = low.len().min(high.len()).min(base.len() / 2);
    let step = (n / 16384).max(1);
    let cost = |shift: u32| {
        let top = top_field(base, shift);
        let mut counts = [[0u32; 9]; LEVELS + 1];
        for i in (0..n).step_by(step) {
            let k = 8 - low[i].leading_zeros() as usize;
            counts[context(word(base, i), high[i], shift, top)][k] += 1;
        }
        counts
            .iter()
            .map(|c| crate::stats::entropy_bits(c) * c.iter().sum::<u32>() as f64)
            .sum::<f64>()
    };
    if cost(10) < cost(7) {
        10
    } else {
        7
    }
}

/// The largest exponent field (`(b & 0x7FFF) >> shift`) of the block's base words.
fn top_field(base: &[u8], shift: u32) -> u32 {
    base.chunks_exact(2)
        .map(|w| (u16::from_le_bytes([w[0], w[1]]) & 0x7FFF) as u32 >> shift)
        .max()
        .unwrap_or(0)
        .min(255)
}

/// Codes the low bytes `low` given the high bytes `high` and the base words `base` (all of
/// one block), with the exponent field at `shift`; appends the payload to `out`.
pub fn encode(low: &[u8], high: &[u8], base: &[u8], shift: u8, out: &mut Vec<u8>) {
    let n = low.len();
    let (high, base) = (&high[..n], &base[..2 * n]);
    let shift = shift.min(15);
    let top = top_field(base, shift as u32);
    out.push(shift);
    out.push(top as u8);
    let mut m = Model::new();
    let mut enc = Encoder::with_capacity(n / 3 + 16);
    for i in 0..n {
        let x = low[i] as u32;
        let ctx = context(word(base, i), high[i], shift as u32, top);
        if ctx == ESCAPE {
            encode_raw(&mut enc, x, 8);
            continue;
        }
        let k = 32 - x.leading_zeros();
        for j in 0..k.min(8) {
            enc.encode_bit(&mut m.unary[ctx][j as usize], 1);
        }
        if k < 8 {
            enc.encode_bit(&mut m.unary[ctx][k as usize], 0);
        }
        if k >= 2 {
            let b1 = x >> (k - 2) & 1;
            enc.encode_bit(&mut m.first[ctx][k as usize], b1);
            if k >= 3 {
                let b2 = x >> (k - 3) & 1;
                enc.encode_bit(&mut m.second[ctx][k as usize][b1 as usize], b2);
                if k > 3 {
                    encode_raw(&mut enc, x & ((1 << (k - 3)) - 1), k - 3);
                }
            }
        }
    }
    enc.finish(out);
}

/// Decodes a payload into the low bytes `out`, given the high bytes `high` (plane 0) and the
/// block's base bytes `base`.
pub fn decode(payload: &[u8], high: &[u8], base: &[u8], out: &mut [u8]) -> Result<(), CodecError> {
    let n = out.len();
    if high.len() != n || base.len() != 2 * n {
        return Err(CodecError("basectx plane does not match its block"));
    }
    let [shift, top, ref data @ ..] = *payload else {
        return Err(CodecError("basectx payload too short"));
    };
    if shift > 15 {
        return Err(CodecError("basectx shift out of range"));
    }
    let (shift, top) = (shift as u32, top as u32);
    let mut m = Model::new();
    let mut dec = Decoder::new(data, 0);
    for i in 0..n {
        let ctx = context(word(base, i), high[i], shift, top);
        if ctx == ESCAPE {
            out[i] = decode_raw(&mut dec, data, 8) as u8;
            continue;
        }
        let unary = &mut m.unary[ctx];
        let mut k = 0u32;
        while k < 8 && dec.decode_bit(data, &mut unary[k as usize]) == 1 {
            k += 1;
        }
        let x = match k {
            0 | 1 => k,
            _ => {
                let b1 = dec.decode_bit(data, &mut m.first[ctx][k as usize]);
                let mut x = 2 | b1;
                if k >= 3 {
                    let b2 = dec.decode_bit(data, &mut m.second[ctx][k as usize][b1 as usize]);
                    x = x << 1 | b2;
                    if k > 3 {
                        x = x << (k - 3) | decode_raw(&mut dec, data, k - 3);
                    }
                }
                x
            }
        };
        out[i] = x as u8;
    }
    dec.finish(data.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_corrupt_payloads() {
        let mut next = crate::test_rng(0x2545_F491);
        let n = 5000;
        let base: Vec<u8> = (0..n)
            .flat_map(|_| (0x3A00u16 + (next() % 0x600) as u16).to_le_bytes())
            .collect();
        let high: Vec<u8> = (0..n).map(|_| next().is_multiple_of(50) as u8).collect();
        let low: Vec<u8> = (0..n)
            .map(|i| {
                let e = (word(&base, i) >> 7) as u32;
                (next() % (1 << (125u32.saturating_sub(e).min(8)))) as u8
            })
            .collect();
        for shift in [7, 10] {
            let mut coded = Vec::new();
            encode(&low, &high, &base, shift, &mut coded);
            assert!(coded.len() < n);
            let mut out = vec![0u8; n];
            decode(&coded, &high, &base, &mut out).unwrap();
            assert_eq!(out, low);
            assert!(decode(&coded[..coded.len() - 1], &high, &base, &mut out).is_err());
            assert!(decode(&coded, &high[1..], &base, &mut out).is_err());
        }
        assert_eq!(choose_shift(&low, &high, &base), 7);
        assert!(decode(&[16, 0, 0, 0, 0, 0], &high, &base, &mut vec![0; n]).is_err());
        assert!(decode(&[7], &high, &base, &mut vec![0; n]).is_err());
    }
}
