//! GGUF files (llama.cpp's format) as container kind 2: built here, tensor by tensor, from real
//! quantized rows of `testdata/excerpt.gguf` where it has the type and from random blocks
//! where it does not; they round-trip every way an archive is read, list their tensors from
//! the kept header, and crafted files take the generic path.

mod common;

use common::{decodes_everywhere, encode_to_vec, Rng};
use sc::gguf::types::GgmlType;
use sc::gguf::GgufHeader;
use sc::{Archive, DecodeOptions, EncodeOptions, Kind, Mode};
use std::io::Cursor;

const EXCERPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/excerpt.gguf");

/// One tensor to write: name, GGUF dimensions (innermost first), ggml type id, bytes.
struct Tensor {
    name: String,
    dims: Vec<u64>,
    ggml: u32,
    bytes: Vec<u8>,
}

fn string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// A metadata block with a value of every type (arrays of numbers, strings and arrays
/// included), and `general.alignment` when `alignment` is not the default.
fn metadata(alignment: u32) -> (u64, Vec<u8>) {
    let mut kv = Vec::new();
    let mut n = 0;
    let mut put = |key: &str, ty: u32, value: &[u8]| {
        string(&mut kv, key);
        kv.extend_from_slice(&ty.to_le_bytes());
        kv.extend_from_slice(value);
        n += 1;
    };
    put("t.u8", 0, &[7]);
    put("t.i8", 1, &[0xF9]);
    put("t.u16", 2, &300u16.to_le_bytes());
    put("t.i16", 3, &(-300i16).to_le_bytes());
    put("t.u32", 4, &70000u32.to_le_bytes());
    put("t.i32", 5, &(-70000i32).to_le_bytes());
    put("t.f32", 6, &1.5f32.to_le_bytes());
    put("t.bool", 7, &[1]);
    let mut s = Vec::new();
    string(&mut s, "llama");
    put("general.architecture", 8, &s);
    let mut a = 4u32.to_le_bytes().to_vec();
    a.extend_from_slice(&3u64.to_le_bytes());
    [1u32, 2, 3]
        .iter()
        .for_each(|v| a.extend_from_slice(&v.to_le_bytes()));
    put("t.array", 9, &a);
    let mut a = 8u32.to_le_bytes().to_vec();
    a.extend_from_slice(&2u64.to_le_bytes());
    string(&mut a, "<s>");
    string(&mut a, "hé");
    put("tokenizer.ggml.tokens", 9, &a);
    let mut a = 9u32.to_le_bytes().to_vec();
    a.extend_from_slice(&1u64.to_le_bytes());
    a.extend_from_slice(&0u32.to_le_bytes());
    a.extend_from_slice(&1u64.to_le_bytes());
    a.push(5);
    put("t.nested", 9, &a);
    put("t.u64", 10, &(1u64 << 40).to_le_bytes());
    put("t.i64", 11, &(-1i64).to_le_bytes());
    put("t.f64", 12, &0.25f64.to_le_bytes());
    if alignment != 32 {
        put("general.alignment", 4, &alignment.to_le_bytes());
    }
    (n, kv)
}

/// A GGUF v3 file of `tensors` in order, aligned to `alignment`, the padding filled with
/// `pad` (ggml writes zeros; any byte must round-trip).
fn gguf(tensors: &[Tensor], alignment: u32, pad: u8) -> Vec<u8> {
    let (n_kv, kv) = metadata(alignment);
    let mut out = b"GGUF".to_vec();
    out.extend_from_slice(&3u32.to_le_bytes());
    out.extend_from_slice(&(tensors.len() as u64).to_le_bytes());
    out.extend_from_slice(&n_kv.to_le_bytes());
    out.extend_from_slice(&kv);
    let align = |x: u64| x.next_multiple_of(alignment as u64);
    let mut offset = 0u64;
    for t in tensors {
        string(&mut out, &t.name);
        out.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
        t.dims
            .iter()
            .for_each(|d| out.extend_from_slice(&d.to_le_bytes()));
        out.extend_from_slice(&t.ggml.to_le_bytes());
        out.extend_from_slice(&offset.to_le_bytes());
        offset = align(offset + t.bytes.len() as u64);
    }
    out.resize(align(out.len() as u64) as usize, pad);
    for t in tensors {
        out.resize(align(out.len() as u64) as usize, pad);
        out.extend_from_slice(&t.bytes);
    }
    out
}

/// Tensors of `excerpt.gguf`: real rows of Q8_0, Q4_1, F32, Q5_0, Q4_K and Q6_K weights.
fn excerpt_tensors() -> Vec<Tensor> {
    let file = std::fs::read(EXCERPT).unwrap();
    let h = GgufHeader::parse(&file, file.len() as u64).unwrap();
    h.tensors
        .iter()
        .map(|t| Tensor {
            name: t.name.clone(),
            dims: t.dims.clone(),
            ggml: t.ggml_type.id,
            bytes: file[t.range.start as usize..t.range.end as usize].to_vec(),
        })
        .collect()
}

/// A tensor of `rows` rows of two blocks of `t` each, random bytes but for plausible F16
/// scales at the start of each block (high byte 0x1C..0x1F), so that the scale planes code.
fn random(t: &GgmlType, rows: u64, rng: &mut Rng) -> Tensor {
    let blocks = 2 * rows as usize;
    let mut bytes = rng.bytes(blocks * t.block_bytes as usize);
    if !t.is_plain() {
        for b in bytes.chunks_exact_mut(t.block_bytes as usize) {
            b[1] = 0x1C | (b[1] & 3);
        }
    }
    Tensor {
        name: format!("random.{}", t.name),
        dims: vec![2 * t.block_values as u64, rows],
        ggml: t.id,
        bytes,
    }
}

/// Every type the ggml transforms code, plus F16, BF16 and two types coded as bytes.
fn every_type() -> Vec<Tensor> {
    let mut rng = Rng(27);
    let mut tensors = excerpt_tensors();
    let names = [
        "Q4_0", "Q5_1", "Q8_1", "Q2_K", "Q3_K", "Q5_K", "Q8_K", "F16", "BF16", "IQ4_NL", "MXFP4",
    ];
    for name in names {
        let t = sc::gguf::types::TYPES
            .iter()
            .find(|t| t.name == name)
            .unwrap();
        tensors.push(random(t, 5, &mut rng));
    }
    tensors
}

fn opts(mode: Mode, block_size: u32) -> EncodeOptions<'static> {
    EncodeOptions {
        block_size,
        ..EncodeOptions::new(mode)
    }
}

/// The archive lists the file's tensors as the kept header says: ggml type names, shapes
/// outermost first, offsets from the data's start.
fn lists_its_tensors(archive: &[u8], file: &[u8]) {
    let h = GgufHeader::parse(file, file.len() as u64).unwrap();
    let a = Archive::open(Cursor::new(archive)).unwrap();
    assert_eq!(a.kind(), Kind::Gguf);
    assert_eq!(a.tensors().len(), h.tensors.len());
    for t in &h.tensors {
        let got = a.tensor(&t.name).unwrap();
        assert_eq!(got.dtype_name, t.ggml_type.name);
        let mut shape = t.dims.clone();
        shape.reverse();
        assert_eq!(got.shape, shape, "{}", t.name);
        assert_eq!(a.tensor_range(got), t.range.clone(), "{}", t.name);
    }
    assert!(a.tensors().windows(2).all(|w| w[0].begin <= w[1].begin));
}

#[test]
fn every_ggml_type_round_trips_in_both_modes_at_every_block_size() {
    let file = gguf(&every_type(), 32, 0);
    for mode in [Mode::Fast, Mode::Best] {
        for block in [4096, 4098, 12 << 10, 1 << 20] {
            let archive = encode_to_vec(&file, &opts(mode, block));
            decodes_everywhere(&archive, &file, None);
            lists_its_tensors(&archive, &file);
            let info = sc::inspect(&mut Cursor::new(&archive)).unwrap();
            assert_eq!(info.format_version, 6);
            for t in [
                "q8_0", "q4_1", "q5_0", "q4_k", "q6_k", "q4_0", "q5_1", "q8_1",
            ] {
                assert!(info.transforms.contains_key(t), "{mode} {block}: no {t}");
            }
            for t in ["q2_k", "q3_k", "q5_k", "q8_k", "exp16", "exp32"] {
                assert!(info.transforms.contains_key(t), "{mode} {block}: no {t}");
            }
        }
    }
}

#[test]
fn quantized_tensors_code_smaller_than_as_bytes() {
    // The excerpt's real rows: field planes beat the bytes they were on main (kind 0).
    let file = std::fs::read(EXCERPT).unwrap();
    for (mode, most) in [(Mode::Fast, 0.93), (Mode::Best, 0.92)] {
        let archive = encode_to_vec(&file, &opts(mode, 1 << 20));
        let ratio = archive.len() as f64 / file.len() as f64;
        assert!(ratio < most, "{mode}: {ratio}");
        decodes_everywhere(&archive, &file, None);
    }
}

#[test]
fn odd_alignments_padding_and_empty_tensors_round_trip() {
    let mut rng = Rng(5);
    let q8 = sc::gguf::types::TYPES
        .iter()
        .find(|t| t.name == "Q8_0")
        .unwrap();
    let mut tensors = vec![random(q8, 3, &mut rng)];
    tensors.push(Tensor {
        name: "empty".into(),
        dims: vec![32, 0],
        ggml: q8.id,
        bytes: Vec::new(),
    });
    tensors.push(Tensor {
        name: "scalar".into(),
        dims: vec![],
        ggml: 0,
        bytes: 1.0f32.to_le_bytes().to_vec(),
    });
    let mut odd = random(q8, 1, &mut rng);
    odd.name = "odd".into();
    tensors.push(odd);
    for alignment in [1, 8, 64, 4096] {
        for pad in [0, 0xA5] {
            let file = gguf(&tensors, alignment, pad);
            for mode in [Mode::Fast, Mode::Best] {
                let archive = encode_to_vec(&file, &opts(mode, 4096));
                decodes_everywhere(&archive, &file, None);
                lists_its_tensors(&archive, &file);
            }
        }
    }
    // Nothing but a header: no tensor, no block.
    let file = gguf(&[], 32, 0);
    let archive = encode_to_vec(&file, &opts(Mode::Best, 4096));
    decodes_everywhere(&archive, &file, None);
    lists_its_tensors(&archive, &file);
}

#[test]
fn a_gguf_stream_is_coded_as_gguf() {
    let file = std::fs::read(EXCERPT).unwrap();
    let mut archive = Vec::new();
    let report = sc::encode(&file[..], &mut archive, &opts(Mode::Fast, 4096)).unwrap();
    assert_eq!(report.kind, Kind::Gguf);
    decodes_everywhere(&archive, &file, None);
}

#[test]
fn crafted_files_take_the_generic_path_and_round_trip() {
    let good = gguf(&excerpt_tensors(), 32, 0);
    let h = GgufHeader::parse(&good, good.len() as u64).unwrap();
    let mut crafted: Vec<(String, Vec<u8>)> = Vec::new();
    // Truncated anywhere in the header or its padding.
    for cut in (0..h.data_start as usize).step_by(97) {
        crafted.push((format!("cut at {cut}"), good[..cut].to_vec()));
    }
    let mut v = good.clone();
    v[4] = 4;
    crafted.push(("version 4".into(), v));
    // A tensor count in the billions.
    let mut v = good.clone();
    v[8..16].copy_from_slice(&(3u64 << 30).to_le_bytes());
    crafted.push(("tensor count".into(), v));
    for (what, file) in &crafted {
        for stream in [false, true] {
            let report = encode_as(file, stream, Kind::Generic, what);
            assert!(report.generic_reason.is_some(), "{what}");
        }
    }
}

/// Encodes `file` in FAST mode, as a stream (its length unknown) or as a file (its length
/// given), checks that it is coded as `kind` and decodes to itself, and returns the report.
fn encode_as(file: &[u8], stream: bool, kind: Kind, what: &str) -> sc::EncodeReport {
    let mut archive = Vec::new();
    let opts = EncodeOptions {
        input_len: (!stream).then_some(file.len() as u64),
        ..opts(Mode::Fast, 4096)
    };
    let report = sc::encode(file, &mut archive, &opts).unwrap();
    assert_eq!(report.kind, kind, "{what}, stream {stream}");
    let back = sc::decode_to_vec(&archive, &DecodeOptions::default()).unwrap();
    assert!(back == *file, "{what}, stream {stream}");
    report
}

/// A GGUF file whose tensors run past its end (cut short, or an offset past the end) is coded
/// as GGUF whether read from a file or a stream: its header is judged on its own, as a stream's
/// must be. The archive lists the tensors; reading one that the original lacks is an error.
#[test]
fn a_gguf_whose_tensors_run_past_its_end_is_gguf_from_a_file_and_a_stream() {
    let good = gguf(&excerpt_tensors(), 32, 0);
    let h = GgufHeader::parse(&good, good.len() as u64).unwrap();
    let last = h.tensors.iter().max_by_key(|t| t.range.end).unwrap();
    // The first tensor's offset moved past the end of the file.
    let info = good
        .windows(17)
        .position(|w| w == b"token_embd.weight")
        .unwrap();
    let offset_at = info + 17 + 4 + 16 + 4;
    let mut moved = good.clone();
    let past = (good.len() as u64 - h.data_start).next_multiple_of(32);
    moved[offset_at..offset_at + 8].copy_from_slice(&past.to_le_bytes());
    let cases = [
        (
            "cut inside the last tensor",
            good[..good.len() - 1].to_vec(),
            last.name.as_str(),
        ),
        ("offset past the end", moved, "token_embd.weight"),
    ];
    for (what, file, missing) in &cases {
        for stream in [false, true] {
            encode_as(file, stream, Kind::Gguf, what);
        }
        let archive = encode_to_vec(file, &opts(Mode::Best, 4096));
        let mut a = Archive::open(Cursor::new(&archive)).unwrap();
        assert_eq!(a.tensors().len(), h.tensors.len(), "{what}");
        let err = a.read_tensor(missing).unwrap_err();
        assert!(err.to_string().contains("past the end"), "{what}: {err}");
    }
}

/// A `general.alignment` larger than the first read of the header (1 MiB) is honoured from a
/// file and a stream, and a stream that ends inside the padding after the header (whose
/// length is unknown until it ends) is coded as plain bytes, as the same file is.
#[test]
fn an_alignment_over_a_mib_and_a_stream_ending_in_the_padding_code() {
    let mut metadata = common::gguf_every_value();
    metadata.push(("general.alignment".into(), sc::gguf::Value::U32(2 << 20)));
    let data = Rng(4).bytes(34 * 8);
    let q8 = common::ggml("Q8_0");
    let file = sc::gguf::write::file(3, &metadata, &[("q", &[256][..], q8, &data[..])]);
    for stream in [false, true] {
        encode_as(&file, stream, Kind::Gguf, "alignment 2 MiB");
        for cut in [1 << 20, (1 << 20) + 1, (2 << 20) - 1] {
            let what = format!("cut at {cut}");
            encode_as(&file[..cut], stream, Kind::Generic, &what);
        }
    }
}

#[test]
fn truncated_or_corrupt_gguf_archives_fail_with_an_error() {
    let file = gguf(&every_type(), 32, 0);
    let archive = encode_to_vec(&file, &opts(Mode::Best, 4096));
    for cut in (0..archive.len()).step_by(331) {
        let got = sc::decode_to_vec(&archive[..cut], &DecodeOptions::default());
        assert!(got.is_err(), "cut at {cut}");
        assert!(
            Archive::open(Cursor::new(&archive[..cut])).is_err(),
            "cut at {cut}"
        );
    }
    let mut rng = Rng(9);
    for _ in 0..300 {
        let mut bad = archive.clone();
        let at = rng.next() as usize % bad.len();
        bad[at] ^= 1 << (rng.next() % 8);
        // An error, or the original: a range coder's flush slack may not matter; the block
        // checksums make sure no other bytes come out.
        if let Ok(back) = sc::decode_to_vec(&bad, &DecodeOptions::default()) {
            assert!(back == file, "byte {at} flipped");
        }
    }
    // Kind 2 in an archive of version 5 is not a GGUF archive.
    let mut old = archive.clone();
    old[4] = 5;
    let err = sc::decode_to_vec(&old, &DecodeOptions::default()).unwrap_err();
    assert!(err.to_string().contains("kind 2"), "{err}");
}

/// A header of several MiB (a tokenizer's vocabulary) is kept deflated in pieces of 1 MiB, and
/// the pieces make one stream that every way of reading an archive inflates whole.
#[test]
fn a_header_of_several_mib_round_trips() {
    let tokens: Vec<String> = (0..300_000).map(|i| format!("token {i}")).collect();
    let metadata = [(
        "tokenizer.ggml.tokens".to_string(),
        sc::gguf::Value::Strings(tokens),
    )];
    let data: Vec<u8> = (0..4096u32)
        .flat_map(|i| (i as f32).to_le_bytes())
        .collect();
    let f32 = common::ggml("F32");
    let file = sc::gguf::write::file(3, &metadata, &[("w", &[4096][..], f32, &data[..])]);
    assert!(file.len() > 4 << 20, "{}", file.len());
    for mode in [Mode::Fast, Mode::Best] {
        let archive = encode_to_vec(&file, &opts(mode, 1 << 20));
        assert!(archive.len() < file.len() / 2, "{mode}: {}", archive.len());
        decodes_everywhere(&archive, &file, None);
        lists_its_tensors(&archive, &file);
    }
}

/// A kept GGUF header that does not parse (a tensor of an unknown type, the file header's
/// checksum made right) is corruption to every reader that lists tensors: `inspect` (what
/// `sc info` shows) fails as `Archive::open` does; a full decode restores the kept header's
/// bytes as stored without parsing them (FORMAT.md).
#[test]
fn a_kept_gguf_header_that_does_not_parse_is_corruption_to_inspect() {
    // Random metadata keeps the header from deflating: it is stored as it is, so a byte of it
    // can be changed in place.
    let noise = sc::gguf::Value::Numbers(0, 512, Rng(8).bytes(512));
    let name = "a-tensor-named-to-be-found-in-the-kept-header-by-its-sixty-four-b";
    let data = Rng(9).bytes(34 * 4);
    let q8 = common::ggml("Q8_0");
    let metadata = [("noise".to_string(), noise)];
    let file = sc::gguf::write::file(3, &metadata, &[(name, &[128][..], q8, &data[..])]);
    let opts = EncodeOptions {
        md5: false,
        ..opts(Mode::Fast, 4096)
    };
    let mut archive = encode_to_vec(&file, &opts);
    let info = sc::inspect(&mut Cursor::new(&archive)).unwrap();
    let p = info.kept_header_len as usize;
    assert_eq!(info.kept_header_stored as usize, p, "stored as it is");
    // The tensor's type id follows its name, dimension count and one dimension.
    let at = archive[24..24 + p]
        .windows(name.len())
        .position(|w| w == name.as_bytes())
        .unwrap();
    let type_at = 24 + at + name.len() + 4 + 8;
    assert_eq!(archive[type_at], 8);
    archive[type_at] = 99;
    let sum = sc::container::checksum::xxh3(&archive[..24 + p]);
    archive[24 + p..32 + p].copy_from_slice(&sum.to_le_bytes());
    let err = sc::inspect(&mut Cursor::new(&archive)).unwrap_err();
    assert!(err.to_string().contains("kept GGUF header"), "{err}");
    let err = Archive::open(Cursor::new(&archive)).err().unwrap();
    assert!(err.to_string().contains("kept GGUF header"), "{err}");
    let back = sc::decode_to_vec(&archive, &DecodeOptions::default()).unwrap();
    let mut changed = file.clone();
    changed[type_at - 24] = 99;
    assert!(back == changed);
}
