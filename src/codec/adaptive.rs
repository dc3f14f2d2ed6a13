//! `adaptive` (id 4): BEST's adaptive order-0 coder: the bytes of a plane coded with the
//! adaptive model of [`crate::entropy::model`], as two streams (see
//! [`crate::entropy::streams`]).
//!
//! Payload: a 32-byte bitmap of the symbols used, then two streams.

use super::spec::Spec;
use crate::entropy::model::{AdaptiveModel, BYTE_PARAMS};
use crate::entropy::rc::Encoder;
use crate::entropy::streams::{finish_two, two_streams};
use crate::error::CodecError;

/// The `adaptive` codec.
pub static SPEC: Spec = Spec::plane_coder(4, "adaptive", decode);

/// Adaptive order-0 coding of `data`, appended to `out`. Returns `false` (appending nothing)
/// when fewer than two symbols occur: such a plane is constant.
pub fn encode(data: &[u8], out: &mut Vec<u8>) -> bool {
    let mut seen = [false; 256];
    for &b in data {
        seen[b as usize] = true;
    }
    let used: Vec<u8> = (0..=255u8).filter(|&s| seen[s as usize]).collect();
    if used.len() < 2 {
        return false;
    }
    let mut bitmap = [0u8; 32];
    for &s in &used {
        bitmap[s as usize / 8] |= 1 << (s % 8);
    }
    out.extend_from_slice(&bitmap);
    let mut model = AdaptiveModel::new(used, BYTE_PARAMS);
    // Even elements go to stream 0, odd ones to stream 1.
    let mut e0 = Encoder::with_capacity(data.len() / 4 + 16);
    let mut e1 = Encoder::with_capacity(data.len() / 4 + 16);
    let mut pairs = data.chunks_exact(2);
    for p in &mut pairs {
        model.encode(&mut e0, p[0]);
        model.encode(&mut e1, p[1]);
    }
    if let [x] = pairs.remainder() {
        model.encode(&mut e0, *x);
    }
    finish_two(out, e0, e1);
    true
}

/// Decodes a payload made by [`encode`] into `out`.
pub fn decode(payload: &[u8], out: &mut [u8]) -> Result<(), CodecError> {
    let (mut model, coded) = AdaptiveModel::read(payload)?;
    let mut st = two_streams(coded, 0)?;
    model.decode_into(&mut st, 0, out);
    st.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::context::{decode_context, encode_context};

    #[test]
    fn adaptive_and_context_roundtrip() {
        let mut x = 12345u32;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        };
        for n in [2usize, 3, 7, 100, 5000, 70_000] {
            let exp: Vec<u8> = (0..n)
                .map(|_| 118 + (rnd() % 16).min(rnd() % 16) as u8)
                .collect();
            let sm: Vec<u8> = (0..n).map(|_| rnd() as u8).collect();
            let mut a = Vec::new();
            if encode(&exp, &mut a) {
                let mut back = vec![0u8; n];
                decode(&a, &mut back).unwrap();
                assert_eq!(back, exp);
            }
            let mut c = Vec::new();
            encode_context(&sm, &exp, &mut c);
            let mut back = vec![0u8; n];
            decode_context(&c, &exp, &mut back).unwrap();
            assert_eq!(back, sm, "n={n}");
        }
    }
}
