//! `context` (id 5): BEST's coder of the sign/mantissa plane of an exponent-aligned split,
//! given the exponent plane. Bits 6 and 5 (the top mantissa bits, whose distribution depends on
//! the exponent) go through adaptive binary models selected by the exponent byte; bit 7 (sign)
//! and bits 4..0 are close to uniform and are stored raw, 6 bits per value, costing no
//! range-coder work. [`super::joint`] replaced it for new archives; decoders keep reading it.
//!
//! Payload: two streams (see [`crate::entropy::streams`]) of the modelled bits, then the raw bits laid
//! out as a [`super::raw6`] payload.

use super::raw6;
use super::spec::{Codec, Decode, Slot, Spec};
use crate::entropy::model::AdaptiveModel;
use crate::entropy::rc::{Decoder, Encoder, BIT_HALF};
use crate::entropy::streams::{finish_two, two_streams, Streams};
use crate::error::CodecError;

/// The `context` codec: plane 1 of an exponent-aligned block, after its exponent plane.
pub static SPEC: Spec = Spec {
    id: 5,
    name: "context",
    fits: |at: Slot, coded_len| {
        at.plane == 1 && at.transform.exponent_aligned() && coded_len < at.plane_len
    },
    partner: None,
    decode: Decode::GivenPlane0 {
        decode: decode_context,
        fused: Some((Codec::Adaptive, decode_pair)),
    },
};

/// Adaptive binary models of the two top mantissa bits, one tree per exponent byte.
struct MantissaModel {
    probs: Box<[[u16; 4]; 256]>,
}

impl MantissaModel {
    fn new() -> Self {
        MantissaModel {
            probs: Box::new([[BIT_HALF; 4]; 256]),
        }
    }

    #[inline(always)]
    fn encode(&mut self, enc: &mut Encoder, x: u8, ctx: u8) {
        let p = &mut self.probs[ctx as usize];
        let b6 = (x >> 6 & 1) as u32;
        enc.encode_bit(&mut p[1], b6);
        enc.encode_bit(&mut p[2 + b6 as usize], (x >> 5 & 1) as u32);
    }

    /// The two modelled bits, in place (bits 6 and 5).
    #[inline(always)]
    fn decode(&mut self, data: &[u8], dec: &mut Decoder, ctx: u8) -> u8 {
        let p = &mut self.probs[ctx as usize];
        let b6 = dec.decode_bit(data, &mut p[1]);
        let b5 = dec.decode_bit(data, &mut p[(2 + b6 as usize) & 3]);
        ((b6 * 2 + b5) << 5) as u8
    }

    /// Ors the modelled bits of elements `0..out.len()` (even ones from stream 0, odd ones
    /// from stream 1) into `out`, given their exponents `ctx` (as long as `out`).
    fn decode_into(&mut self, st: &mut Streams, ctx: &[u8], out: &mut [u8]) {
        let data = st.data;
        let [mut d0, mut d1] = st.decs;
        let ctx = &ctx[..out.len().min(ctx.len())];
        let mut pairs = out.chunks_exact_mut(2);
        let mut ctx_pairs = ctx.chunks_exact(2);
        for (o, c) in (&mut pairs).zip(&mut ctx_pairs) {
            o[0] |= self.decode(data, &mut d0, c[0]);
            o[1] |= self.decode(data, &mut d1, c[1]);
        }
        for (o, &c) in pairs.into_remainder().iter_mut().zip(ctx_pairs.remainder()) {
            *o |= self.decode(data, &mut d0, c);
        }
        st.decs = [d0, d1];
    }
}

/// Context coding of `plane` (sign/mantissa bytes) given `ctx` (the exponent byte of each
/// element), appended to `out`. `ctx` must be as long as `plane`.
pub fn encode_context(plane: &[u8], ctx: &[u8], out: &mut Vec<u8>) {
    let mut model = MantissaModel::new();
    let ctx = &ctx[..plane.len().min(ctx.len())];
    let mut e0 = Encoder::with_capacity(plane.len() / 8 + 16);
    let mut e1 = Encoder::with_capacity(plane.len() / 8 + 16);
    let mut pairs = plane.chunks_exact(2);
    let mut ctx_pairs = ctx.chunks_exact(2);
    for (p, c) in (&mut pairs).zip(&mut ctx_pairs) {
        model.encode(&mut e0, p[0], c[0]);
        model.encode(&mut e1, p[1], c[1]);
    }
    if let ([x], [c]) = (pairs.remainder(), ctx_pairs.remainder()) {
        model.encode(&mut e0, *x, *c);
    }
    finish_two(out, e0, e1);
    raw6::encode(plane, out);
}

/// Splits a context payload into its two range-coded streams and unpacks its raw bits
/// into `out`.
fn context_parts<'a>(payload: &'a [u8], out: &mut [u8]) -> Result<Streams<'a>, CodecError> {
    let raw_len = raw6::len(out.len());
    let st = two_streams(payload, raw_len)?;
    raw6::unpack(&payload[payload.len() - raw_len..], out);
    Ok(st)
}

/// Decodes a payload made by [`encode_context`]; `ctx` is the decoded exponent plane.
pub fn decode_context(payload: &[u8], ctx: &[u8], out: &mut [u8]) -> Result<(), CodecError> {
    if ctx.len() != out.len() {
        return Err(CodecError("context plane length differs"));
    }
    let mut st = context_parts(payload, out)?;
    MantissaModel::new().decode_into(&mut st, ctx, out);
    st.finish()
}

/// Decodes an [`encode`] exponent payload and an [`encode_context`] mantissa payload,
/// alternating between the two planes in chunks that stay in the L1 cache. One loop over all
/// four decoders was measured slower: it needs more registers than there are, while each
/// plane's loop keeps its two decoders in registers (the exponent loop is bound by the latency
/// of its division, the mantissa loop by its instruction count).
pub fn decode_pair(
    exp_payload: &[u8],
    man_payload: &[u8],
    exps: &mut [u8],
    mans: &mut [u8],
) -> Result<(), CodecError> {
    /// Elements per chunk; even, so every chunk starts on an even element.
    const CHUNK: usize = 8192;
    if exps.len() != mans.len() {
        return Err(CodecError("context plane length differs"));
    }
    let (mut model, coded) = AdaptiveModel::read(exp_payload)?;
    let mut e = two_streams(coded, 0)?;
    let mut m = context_parts(man_payload, mans)?;
    let mut mant = MantissaModel::new();
    for (ec, mc) in exps.chunks_mut(CHUNK).zip(mans.chunks_mut(CHUNK)) {
        model.decode_into(&mut e, 0, ec);
        mant.decode_into(&mut m, ec, mc);
    }
    e.finish()?;
    m.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::adaptive;

    #[test]
    fn context_survives_saturated_bit_models() {
        // Long runs of one value drive the bit models to their limits, then flip: the range
        // must stay consistent between encoder and decoder at the extremes.
        let n = 200_000;
        for (a, b) in [(0x00u8, 0x60u8), (0x60, 0x00), (0x9F, 0x80)] {
            let sm: Vec<u8> = (0..n).map(|i| if i < n / 2 { a } else { b }).collect();
            let exp = vec![127u8; n];
            let mut c = Vec::new();
            encode_context(&sm, &exp, &mut c);
            let mut back = vec![0u8; n];
            decode_context(&c, &exp, &mut back).unwrap();
            assert_eq!(back, sm);
            let mut e = Vec::new();
            assert!(adaptive::encode(&sm, &mut e));
            let (mut back_e, mut back_m) = (vec![0u8; n], vec![0u8; n]);
            adaptive::decode(&e, &mut back_e).unwrap();
            assert_eq!(back_e, sm);
            // Mismatched payloads (the context was coded against other exponents): any result
            // but a panic is acceptable; the block checksum catches wrong output.
            let _ = decode_pair(&e, &c, &mut back_e, &mut back_m);
        }
    }
}
