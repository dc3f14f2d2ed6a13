//! `byctx` (id 15, format version 6): BEST's coder of a plane after the first of a ggml block
//! transform given plane 0, the high byte of each ggml block's scale: each byte coded with an
//! adaptive order-0 model of its own for each value of its ggml block's byte of plane 0. A
//! scale computed from a BF16 weight (`amax / 127`) takes few of the low bytes its high byte
//! allows (on Gemma 3's Q8_0 embedding the low byte costs 5 bits given the high byte, 6.9
//! without), and the quants of a block spread differently with its scale's magnitude (1% less
//! for the same embedding's quants).
//!
//! Payload: for each value `c` that plane 0 holds, ascending, a 32-byte bitmap of the bytes the
//! plane holds in the ggml blocks where plane 0 holds `c` (at least one); then two streams (see
//! [`crate::entropy::streams`]): element *i* in stream `i mod 2`, coded with the adaptive model
//! of its context over that context's bytes, unless the context has one byte only (then
//! nothing is coded for it). Element *i* of a plane of `r` bytes per ggml block belongs to
//! block `i / r`.

use super::spec::{Decode, Slot, Spec};
use crate::entropy::model::{AdaptiveModel, BYTE_PARAMS};
use crate::entropy::rc::Encoder;
use crate::entropy::streams::{finish_two, two_streams};
use crate::error::CodecError;

/// The `byctx` codec: a plane after the first of a ggml block transform (whose plane 0 holds
/// one byte per ggml block).
pub static SPEC: Spec = Spec {
    id: 15,
    name: "byctx",
    fits: |at: Slot, coded_len| {
        at.plane >= 1
            && at.transform.ggml().is_some()
            && at.transform.unit_bytes(0) == 1
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

/// The context of each element of a plane of `len` bytes given plane 0 `ctx`: the bytes of
/// `ctx`, each repeated `len / ctx.len()` times. `None` unless that divides exactly.
fn contexts(ctx: &[u8], len: usize) -> Option<impl Iterator<Item = u8> + '_> {
    let r = len.checked_div(ctx.len())?;
    (r > 0 && r * ctx.len() == len)
        .then(|| ctx.iter().flat_map(move |&c| std::iter::repeat_n(c, r)))
}

/// Codes `data` given plane 0 `ctx` (whose length divides `data`'s), appended to `out`.
/// Returns `false` (appending nothing) when the lengths do not fit.
pub fn encode(data: &[u8], ctx: &[u8], out: &mut Vec<u8>) -> bool {
    let Some(cs) = contexts(ctx, data.len()) else {
        return false;
    };
    let mut bitmaps = [None::<[u8; 32]>; 256];
    for (&x, c) in data.iter().zip(cs) {
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
    let cs = contexts(ctx, data.len()).into_iter().flatten();
    for (i, (&x, c)) in data.iter().zip(cs).enumerate() {
        if let Some(Model::Many(m)) = &mut models[c as usize] {
            m.encode(&mut enc[i % 2], x);
        }
    }
    let [e0, e1] = enc;
    finish_two(out, e0, e1);
    true
}

/// Decodes a payload made by [`encode`] into `out`, given plane 0 `ctx`.
pub fn decode(payload: &[u8], ctx: &[u8], out: &mut [u8]) -> Result<(), CodecError> {
    let Some(cs) = contexts(ctx, out.len()) else {
        return Err(CodecError(
            "byctx plane is not whole ggml blocks of plane 0",
        ));
    };
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
    for (i, (o, c)) in out.iter_mut().zip(cs).enumerate() {
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
            assert!(encode(&data, &ctx, &mut coded));
            let mut back = vec![0u8; n];
            decode(&coded, &ctx, &mut back).unwrap();
            assert_eq!(back, data, "n={n}");
            // Three bytes a ggml block: each element in its block's context.
            let wide: Vec<u8> = data.iter().flat_map(|&x| [x, x ^ 1, 9]).collect();
            let mut coded = Vec::new();
            assert!(encode(&wide, &ctx, &mut coded));
            let mut back = vec![0u8; 3 * n];
            decode(&coded, &ctx, &mut back).unwrap();
            assert_eq!(back, wide, "n={n} x3");
            // A plane that is not whole ggml blocks of plane 0.
            assert!(n == 1 || decode(&coded, &ctx, &mut vec![0u8; 3 * n + 1]).is_err());
            // Any cut of the payload is an error or other bytes, never a panic.
            for cut in 0..coded.len() {
                let mut out = vec![0u8; n];
                let _ = decode(&coded[..cut], &ctx, &mut out);
            }
        }
    }
}
