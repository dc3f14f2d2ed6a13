//! The bodies of the fuzz targets (`fuzz/fuzz_targets/`), here so that the tests run the very
//! same checks: `tests/fuzz_regressions.rs` replays every input under `fuzz/regressions/`
//! (and any crash the fuzzers left in `fuzz/artifacts/`), and the property test below feeds
//! [`roundtrip`] generated inputs.

use crate::codec::{
    adaptive, basectx, byctx, context, ctxjoint, huffjoint, huffman, joint, range, raw6, sparse,
};
use crate::{Archive, Base, DecodeOptions, EncodeOptions, Mode, SignModels};
use std::io::{sink, Cursor};
use std::sync::OnceLock;

/// The base the fuzz targets code and decode against: `testdata/tiny.safetensors`, of which
/// `testdata/tiny-tune.safetensors` is a stand-in fine-tune (archives of it coded against this
/// base seed the container target, so its mutations reach the delta decoders).
pub fn base() -> &'static Base {
    static BASE: OnceLock<Base> = OnceLock::new();
    let tiny = include_bytes!("../testdata/tiny.safetensors");
    compiled_in(&BASE, "tiny.safetensors", tiny)
}

/// The base `cell` holds, made from `bytes` (a file of `testdata/` called `name`) on first use.
fn compiled_in(cell: &'static OnceLock<Base>, name: &str, bytes: &[u8]) -> &'static Base {
    // Compiled-in bytes that the tests also open as bases: they cannot fail.
    cell.get_or_init(|| Base::from_bytes(name, bytes.to_vec()).expect("test data is valid"))
}

/// Arbitrary bytes as an archive: decoding (from memory and as a stream, with and without the
/// length, with and without [`base`]), `inspect` and random access (sizes, every tensor, the
/// whole range into a writer and into a buffer, an extracted file) must end in `Ok` or an
/// error, never a panic, hang or huge allocation. The same again with the file header's XXH3
/// made right, so that mutations of a kept header, deflated or not, reach its inflating and
/// parsing instead of stopping at the checksum.
pub fn archive(data: &[u8]) {
    archive_against(data, base());
}

/// [`archive`] with `base` as the base: the bytes as they are and with the header's XXH3 right.
fn archive_against(data: &[u8], base: &Base) {
    read_archive(data, base);
    if let Some(resummed) = with_header_sum(data) {
        read_archive(&resummed, base);
    }
}

/// The seed the derived target decodes against: `testdata/ladder-seed.gguf`, of which
/// `testdata/ladder-q4_k.gguf` is a quant (a few blocks perturbed).
pub fn seed() -> &'static Base {
    static SEED: OnceLock<Base> = OnceLock::new();
    let seed = include_bytes!("../testdata/ladder-seed.gguf");
    compiled_in(&SEED, "ladder-seed.gguf", seed)
}

/// The derived-reference decoder: arbitrary bytes as an archive decoded against [`seed`] (as
/// [`archive`] does against its base), and as the body of a reference section (framed with a
/// right checksum, so that mutations reach its parsing) checked against the quant
/// `testdata/ladder-q4_k.gguf`'s tensors and, where it passes, every referenced tensor's base
/// bytes predicted from the seed. Any result but a panic, hang or huge allocation is
/// acceptable.
pub fn derived(data: &[u8]) {
    archive_against(data, seed());
    use crate::container::refs::{References, TAG};
    use crate::pipeline::refs::{NoOwn, Spans};
    let mut section = TAG.to_vec();
    section.extend_from_slice(&(data.len() as u64).to_le_bytes());
    section.extend_from_slice(data);
    let sum = crate::container::checksum::xxh3(&section);
    section.extend_from_slice(&sum.to_le_bytes());
    let Ok(refs) = References::read(&mut &section[..], Some(section.len() as u64)) else {
        return;
    };
    let quant = include_bytes!("../testdata/ladder-q4_k.gguf");
    let Ok((_, tensors)) = crate::gguf::listed_tensors(quant, quant.len() as u64) else {
        return;
    };
    if refs.check(&tensors).is_err() {
        return;
    }
    let spans = Spans::new(Some(&refs), &tensors, 0);
    for s in spans.spans() {
        let mut out = vec![0u8; (s.range.end - s.range.start) as usize];
        let _ = spans.fill(s.range.start, &mut out, Some(seed()), &NoOwn);
    }
}

/// `data` with the XXH3 after its file header recomputed, when the header's lengths put that
/// checksum inside `data` (see docs/FORMAT.md, "File header").
fn with_header_sum(data: &[u8]) -> Option<Vec<u8>> {
    let u32_at = |at: usize| Some(u32::from_le_bytes(data.get(at..at + 4)?.try_into().ok()?));
    let flags = u32_at(12)?;
    let kept = u64::from_le_bytes(data.get(16..24)?.try_into().ok()?);
    let end = match flags & 4 {
        0 => 24usize.checked_add(usize::try_from(kept).ok()?)?,
        _ => 28 + u32_at(24)? as usize,
    };
    let mut out = data.to_vec();
    let sum = crate::container::checksum::xxh3(data.get(..end)?);
    out.get_mut(end..end.checked_add(8)?)?
        .copy_from_slice(&sum.to_le_bytes());
    Some(out)
}

fn read_archive(data: &[u8], with: &Base) {
    for base in [None, Some(with)] {
        for archive_len in [Some(data.len() as u64), None] {
            let opts = DecodeOptions {
                check_md5: true,
                archive_len,
                base,
                ..Default::default()
            };
            let _ = crate::decode(data, sink(), &opts);
        }
        let opts = DecodeOptions {
            base,
            ..Default::default()
        };
        let _ = crate::decode_to_vec(data, &opts);
    }
    let _ = crate::inspect(&mut Cursor::new(data));
    for a in [
        Archive::open(Cursor::new(data)),
        Archive::open_with_base(Cursor::new(data), with.clone()),
    ] {
        let Ok(mut a) = a else {
            continue;
        };
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
/// the output length; the rest is the payload (for the sign models, its first two bytes say
/// where it splits into the two planes' payloads). Any result but a panic is acceptable.
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
    let base: Vec<u8> = (0..2 * n).map(|i| (i * 37 % 251) as u8).collect();
    let _ = match data[0] % 13 {
        0 => huffman::decode(payload, &mut out),
        1 => range::decode(payload, &mut out),
        2 => adaptive::decode(payload, &mut out),
        3 => context::decode_context(payload, &ctx, &mut out),
        4 => {
            let (a, b) = payload.split_at(payload.len() / 2);
            context::decode_pair(a, b, &mut out, &mut other)
        }
        5 => joint::decode_joint(head, raw, &mut out, &mut other),
        6 => ctxjoint::decode::<{ ctxjoint::ROWS }>(head, raw, &mut out, &mut other),
        7 => huffjoint::decode(head, raw, &mut Vec::new(), &mut vec![0u8; 2 * n]),
        8 => sparse::decode(payload, &mut out),
        9 => ctxjoint::decode::<{ ctxjoint::PARTS }>(head, raw, &mut out, &mut other),
        11 => {
            // The signs payload's length does not follow from n: the first two bytes give the
            // ctxsigns payload's length, the signs payload follows it.
            let (len, rest) = match payload {
                [a, b, rest @ ..] => (u16::from_le_bytes([*a, *b]) as usize, rest),
                _ => (0, payload),
            };
            let (signed, signs) = rest.split_at(len.min(rest.len()));
            ctxjoint::decode::<{ ctxjoint::SIGNED }>(signed, signs, &mut out, &mut other)
        }
        12 => byctx::decode(payload, &ctx, &mut out),
        _ => {
            let high: Vec<u8> = (0..n).map(|i| (i % 61 == 0) as u8).collect();
            basectx::decode(payload, &high, &base, &mut out)
        }
    };
}

/// Arbitrary input through encode and decode must come back byte for byte, in both modes, at
/// several block sizes, plainly or coded against [`base`], with sign models where they pay,
/// nowhere or everywhere they are smaller (the first byte picks them; the rest is the input).
/// Returns what went wrong otherwise; the fuzz target and the tests panic with it.
pub fn roundtrip(data: &[u8]) -> Result<(), String> {
    let Some((&sel, input)) = data.split_first() else {
        return Ok(());
    };
    let mode = if sel & 1 == 0 { Mode::Fast } else { Mode::Best };
    let block_size = [4096, 4098, 12290, 65536][(sel >> 1) as usize % 4];
    let base = (sel & 8 != 0).then(base);
    let opts = EncodeOptions {
        block_size,
        base,
        sign_models: match sel >> 4 & 3 {
            0 => SignModels::Paying,
            1 | 3 => SignModels::Everywhere,
            _ => SignModels::Off,
        },
        ..EncodeOptions::new(mode)
    };
    let archive = crate::encode_to_vec(input, &opts).map_err(|e| format!("encode failed: {e}"))?;
    let opts = DecodeOptions {
        check_md5: true,
        base,
        ..Default::default()
    };
    let back =
        crate::decode_to_vec(&archive, &opts).map_err(|e| format!("own archive fails: {e}"))?;
    match back == input {
        true => Ok(()),
        false => Err("round trip differs".into()),
    }
}

/// Arbitrary bytes as a GGUF file: the header reader ends in `Ok` or an error, never a panic,
/// hang or allocation beyond the input's size; what it accepts holds only tensors inside the
/// input, overlapping none, after the header; the field analysis of an accepted file runs.
pub fn gguf(data: &[u8]) {
    use crate::gguf::GgufHeader;
    let Ok(h) = GgufHeader::parse(data, data.len() as u64) else {
        return;
    };
    let mut ranges: Vec<_> = h.tensors.iter().map(|t| t.range.clone()).collect();
    ranges.sort_by_key(|r| (r.start, r.end));
    assert!(h.header_len <= h.data_start && h.data_start <= data.len() as u64);
    for r in &ranges {
        assert!(h.data_start <= r.start && r.start <= r.end && r.end <= data.len() as u64);
    }
    assert!(ranges.windows(2).all(|w| w[0].end <= w[1].start));
    // A panic is this target's report: a file the reader accepts must also analyse.
    crate::lab::gguf::analyze_gguf(&mut Cursor::new(data)).expect("an accepted file analyses");
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
            prop_assert_eq!(super::roundtrip(&data), Ok(()));
            let json = format!(
                r#"{{"w":{{"dtype":"BF16","shape":[{}],"data_offsets":[0,{}]}}}}"#,
                words.len(),
                2 * words.len()
            );
            let mut st = vec![sel];
            st.extend_from_slice(&(json.len() as u64).to_le_bytes());
            st.extend_from_slice(json.as_bytes());
            st.extend(words.iter().flat_map(|w| w.to_le_bytes()));
            prop_assert_eq!(super::roundtrip(&st), Ok(()));
        }

        /// The stand-in fine-tune with some of its bytes changed, coded against the base.
        #[test]
        fn roundtrip_against_the_base(
            sel in any::<u8>(),
            changes in prop::collection::vec((any::<u16>(), any::<u8>()), 0..64),
        ) {
            let mut tune = include_bytes!("../testdata/tiny-tune.safetensors").to_vec();
            for (at, x) in changes {
                // The header stays; the tensor bytes after it take the changes.
                let at = 1000 + at as usize % (tune.len() - 1000);
                tune[at] ^= x;
            }
            let mut data = vec![sel | 8];
            data.extend_from_slice(&tune);
            prop_assert_eq!(super::roundtrip(&data), Ok(()));
        }
    }
}
