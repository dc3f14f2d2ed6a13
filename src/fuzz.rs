//! The bodies of the fuzz targets (`fuzz/fuzz_targets/`), here so that the tests run the very
//! same checks: `tests/fuzz_regressions.rs` replays every input under `fuzz/regressions/`
//! (and any crash the fuzzers left in `fuzz/artifacts/`), and the property test below feeds
//! [`roundtrip`] generated inputs.

use crate::codec::{adaptive, context, ctxjoint, huffjoint, huffman, joint, range, raw6};
use crate::{Archive, DecodeOptions, EncodeOptions, Mode};
use std::io::{sink, Cursor};

/// Arbitrary bytes as an archive: decoding (from memory and as a stream, with and without the
/// length), `inspect` and random access (sizes, every tensor, the whole range into a writer
/// and into a buffer, an extracted file) must end in `Ok` or an error, never a panic, hang or
/// huge allocation.
pub fn archive(data: &[u8]) {
    for archive_len in [Some(data.len() as u64), None] {
        let opts = DecodeOptions {
            check_md5: true,
            archive_len,
            ..Default::default()
        };
        let _ = crate::decode(data, sink(), &opts);
    }
    let _ = crate::decode_to_vec(data, &DecodeOptions::default());
    let _ = crate::inspect(&mut Cursor::new(data));
    if let Ok(mut a) = Archive::open(Cursor::new(data)) {
        let _ = a.stored_bytes();
        let names: Vec<String> = a.tensors().iter().map(|t| t.name.clone()).collect();
        for n in &names {
            let _ = a.read_tensor_to(n, &mut sink());
        }
        let _ = a.read_range_to(0..a.original_len(), &mut sink());
        // Bounded: an index may claim any length, but the buffer must be the caller's.
        let len = a.original_len().min(1 << 24);
        let _ = a.read_range_into(0..len, &mut vec![0; len as usize]);
        // Two buffers with a gap between them.
        let (mut x, mut y) = (vec![0; len as usize / 4], vec![0; len as usize / 2]);
        let _ = a.read_ranges_into(&mut [(0, &mut x[..]), (len / 2, &mut y[..])]);
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let _ = a.write_safetensors(&names, &mut sink());
    }
}

/// Arbitrary bytes into each entropy decoder: the first byte picks the decoder, the next two
/// the output length; the rest is the payload. Any result but a panic is acceptable.
pub fn entropy(data: &[u8]) {
    if data.len() < 3 {
        return;
    }
    let n = u16::from_le_bytes([data[1], data[2]]) as usize;
    let payload = &data[3..];
    let mut out = vec![0u8; n];
    let mut other = vec![0u8; n];
    let ctx: Vec<u8> = (0..n).map(|i| (i % 7) as u8 + 120).collect();
    // The raw6 payload's length follows from n; the rest is the joint payload.
    let (head, raw) = payload.split_at(payload.len() - raw6::len(n).min(payload.len()));
    let _ = match data[0] % 8 {
        0 => huffman::decode(payload, &mut out),
        1 => range::decode(payload, &mut out),
        2 => adaptive::decode(payload, &mut out),
        3 => context::decode_context(payload, &ctx, &mut out),
        4 => {
            let (a, b) = payload.split_at(payload.len() / 2);
            context::decode_pair(a, b, &mut out, &mut other)
        }
        5 => joint::decode_joint(head, raw, &mut out, &mut other),
        6 => ctxjoint::decode(head, raw, &mut out, &mut other),
        _ => huffjoint::decode(head, raw, &mut Vec::new(), &mut vec![0u8; 2 * n]),
    };
}

/// Arbitrary input through encode and decode must come back byte for byte, in both modes and
/// at several block sizes (the first byte picks them; the rest is the input). Panics if not.
pub fn roundtrip(data: &[u8]) {
    let Some((&sel, input)) = data.split_first() else {
        return;
    };
    let mode = if sel & 1 == 0 { Mode::Fast } else { Mode::Best };
    let block_size = [4096, 4098, 12290, 65536][(sel >> 1) as usize % 4];
    let opts = EncodeOptions {
        block_size,
        ..EncodeOptions::new(mode)
    };
    let archive = crate::encode_to_vec(input, &opts).expect("encoding into memory cannot fail");
    let opts = DecodeOptions {
        check_md5: true,
        ..Default::default()
    };
    let back = crate::decode_to_vec(&archive, &opts).expect("own archive must decode");
    assert!(back == input, "round trip differs");
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 64,
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        /// Generated inputs through the round-trip target: random bytes, and BF16-like words
        /// behind a safetensors header, so both paths of the encoder run.
        #[test]
        fn roundtrip_target(
            sel in any::<u8>(),
            bytes in prop::collection::vec(any::<u8>(), 0..20_000),
            words in prop::collection::vec(0x3C00u16..0x3F80, 0..10_000),
        ) {
            let mut data = vec![sel];
            data.extend_from_slice(&bytes);
            super::roundtrip(&data);
            let json = format!(
                r#"{{"w":{{"dtype":"BF16","shape":[{}],"data_offsets":[0,{}]}}}}"#,
                words.len(),
                2 * words.len()
            );
            let mut st = vec![sel];
            st.extend_from_slice(&(json.len() as u64).to_le_bytes());
            st.extend_from_slice(json.as_bytes());
            st.extend(words.iter().flat_map(|w| w.to_le_bytes()));
            super::roundtrip(&st);
        }
    }
}
