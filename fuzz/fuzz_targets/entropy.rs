//! Arbitrary bytes into each entropy decoder: the first byte picks the decoder, the next two
//! the output length; the rest is the payload.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sc::entropy::{adaptive, huffman, joint, range};

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let n = u16::from_le_bytes([data[1], data[2]]) as usize;
    let payload = &data[3..];
    let mut out = vec![0u8; n];
    let mut other = vec![0u8; n];
    let ctx: Vec<u8> = (0..n).map(|i| (i % 7) as u8 + 120).collect();
    let _ = match data[0] % 7 {
        0 => huffman::decode(payload, &mut out),
        1 => range::decode(payload, &mut out),
        2 => adaptive::decode(payload, &mut out),
        3 => context::decode_context(payload, &ctx, &mut out),
        4 => {
            let (a, b) = payload.split_at(payload.len() / 2);
            context::decode_pair(a, b, &mut out, &mut other)
        }
        5 => {
            // The raw payload's length follows from n; the rest is the joint payload.
            let (a, b) = payload.split_at(payload.len() - raw6::len(n).min(payload.len()));
            joint::decode_joint(a, b, &mut out, &mut other)
        }
        _ => {
            // The same split for FAST's joint codec, decoded into n 16-bit words.
            let (a, b) = payload.split_at(payload.len() - raw6::len(n).min(payload.len()));
            let mut words = vec![0u8; 2 * n];
            huffjoint::decode(a, b, &mut Vec::new(), &mut words)
        }
    };
});
