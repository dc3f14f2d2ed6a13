//! `byctx` (id 15, format version 6): BEST's coder of plane 1 of a ggml block transform given
//! plane 0: each byte coded with an adaptive order-0 model of its own for each value of the
//! byte at the same position of plane 0. Planes 0 and 1 of the ggml layouts are the high and
//! low bytes of the block's F16 scale, and a scale computed from a BF16 weight (`amax / 127`)
//! takes few of the low bytes its high byte allows: on Gemma 3's Q8_0 embedding the low byte
//! costs 5 bits given the high byte, 6.9 without.
//!
//! Payload: for each value `c` that plane 0 holds, ascending, a 32-byte bitmap of the bytes
//! plane 1 holds where plane 0 holds `c` (at least one); then two streams (see
//! [`crate::entropy::streams`]): element *i* in stream `i mod 2`, coded with the adaptive model
//! of its context over that context's bytes, unless the context has one byte only (then
//! nothing is coded for it).

use super::{CodecError, Decode, Slot, Spec};
use crate::entropy::model::{AdaptiveModel, BYTE_PARAMS};
use crate::entropy::rc::Encoder;
use crate::entropy::streams::{finish_two, two_streams};

/// The `byctx` codec: plane 1 of a ggml block transform whose planes 0 and 1 are as long.
pub static SPEC: Spec = Spec {
    id: 15,
    name: "byctx",
    fits: |at: Slot, coded_len| {
        at.plane == 1
            && at.transform.ggml().is_some()
            && at.transform.unit_bytes(0) == at.transform.unit_bytes(1)
            && coded_len >= 32
            && coded_len < at.plane_len
    },
    partner: None,
    decode: Decode::GivenPlane0 {
        decode,
        fused: None,
    },
};

/// A context's model: none for a context of one byte, which codes nothing.
enum Model {
    One(u8),
    Many(Box<AdaptiveModel>),
}

/// The models of the contexts in `bitmaps` (by context, `None` for contexts absent).
fn models(bitmaps: &[Option<[u8; 32]>; 256]) -> Vec<Option<Model>> {
    bitmaps
        .iter()
        .map(|b| {
            let b = b.as_ref()?;
            let used: Vec<u8> = (0..=255u8)
                .filter(|&s| b[s as usize / 8] & (1 << (s % 8)) != 0)
                .collect();
            Some(match used[..] {
                [s] => Model::One(s),
                _ => Model::Many(AdaptiveModel::new(used, BYTE_PARAMS)),
            })
        })
        .collect()
}

/// Codes `data` given `ctx` (as long), appended to `out`.
pub fn encode(data: &[u8], ctx: &[u8], out: &mut Vec<u8>) {
    let mut bitmaps = [None::<[u8; 32]>; 256];
    for (&x, &c) in data.iter().zip(ctx) {
        let b = bitmaps[c as usize].get_or_insert([0; 32]);
        b[x as usize / 8] |= 1 << (x % 8);
    }
    bitmaps
        .iter()
        .flatten()
        .for_each(|b| out.extend_from_slice(b));
    let mut models = models(&bitmaps);
    let mut enc = [
        Encoder::with_capacity(data.len() / 4 + 16),
        Encoder::with_capacity(data.len() / 4 + 16),
    ];
    for (i, (&x, &c)) in data.iter().zip(ctx).enumerate() {
        if let Some(Model::Many(m)) = &mut models[c as usize] {
            m.encode(&mut enc[i % 2], x);
        }
    }
    let [e0, e1] = enc;
    finish_two(out, e0, e1);
}

/// Decodes a payload made by [`encode`] into `out`, given plane 0 `ctx` (as long).
pub fn decode(payload: &[u8], ctx: &[u8], out: &mut [u8]) -> Result<(), CodecError> {
    if ctx.len() != out.len() {
        return Err(CodecError("byctx planes differ in length"));
    }
    let mut present = [false; 256];
    ctx.iter().for_each(|&c| present[c as usize] = true);
    let mut bitmaps = [None::<[u8; 32]>; 256];
    let mut rest = payload;
    for c in (0..256).filter(|&c| present[c]) {
        let (b, tail) = rest
            .split_first_chunk::<32>()
            .ok_or(CodecError("byctx bitmaps truncated"))?;
        if b.iter().all(|&x| x == 0) {
            return Err(CodecError("byctx context without a byte"));
        }
        bitmaps[c] = Some(*b);
        rest = tail;
    }
    let mut models = models(&bitmaps);
    let mut st = two_streams(rest, 0)?;
    let data = st.data;
    for (i, (o, &c)) in out.iter_mut().zip(ctx).enumerate() {
        *o = match &mut models[c as usize] {
            Some(Model::One(s)) => *s,
            Some(Model::Many(m)) => m.decode_one(data, &mut st.decs[i % 2]),
            None => return Err(CodecError("byctx context without a model")),
        };
    }
    st.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_each_byte_in_its_context() {
        let mut rnd = crate::test_rng(11);
        for n in [1usize, 2, 3, 100, 5000] {
            let ctx: Vec<u8> = (0..n).map(|_| 60 + (rnd() % 5) as u8).collect();
            let data: Vec<u8> = ctx
                .iter()
                .map(|&c| match c {
                    60 => 7,
                    _ => c.wrapping_mul(3) ^ (rnd() % 8) as u8,
                })
                .collect();
            let mut coded = Vec::new();
            encode(&data, &ctx, &mut coded);
            let mut back = vec![0u8; n];
            decode(&coded, &ctx, &mut back).unwrap();
            assert_eq!(back, data, "n={n}");
            // Any cut of the payload is an error or other bytes, never a panic.
            for cut in 0..coded.len() {
                let mut out = vec![0u8; n];
                let _ = decode(&coded[..cut], &ctx, &mut out);
            }
        }
    }
}
