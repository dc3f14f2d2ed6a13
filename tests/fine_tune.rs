//! Fine-tunes coded against their base, and repeated tensors stored once, at the library level:
//! round trips of the committed excerpt pair (real weights of a base and a 150-step fine-tune
//! of it) and of synthesised F32, F16 and BF16 pairs; tunes with new layers, changed shapes and
//! dtypes; bases given as files, archives, in memory and as folders of shards; a missing, wrong,
//! truncated or changed base; repeated tensors in every way an archive is read; corruption.

mod common;

use common::{read_each, safetensors, tensor_ranges, Rng};
use sc::{
    decode, decode_file, decode_to_vec, encode, encode_file, encode_to_vec, inspect, Archive, Base,
    DecodeOptions, EncodeOptions, EncodeReport, Error, Mode, Reference,
};
use std::io::Cursor;
use std::path::{Path, PathBuf};

const BASE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/testdata/tune-base.safetensors"
);
const TUNE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/tune.safetensors");
const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/sample.safetensors");

fn read(path: &str) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn against<'a>(base: &'a Base, mode: Mode) -> EncodeOptions<'a> {
    EncodeOptions {
        base: Some(base),
        block_size: 64 << 10,
        ..EncodeOptions::new(mode)
    }
}

/// `tune` encoded as a stream of known length against `base`, and the report.
fn streamed(tune: &[u8], base: &Base, mode: Mode) -> (Vec<u8>, EncodeReport) {
    let mut archive = Vec::new();
    let opts = EncodeOptions {
        input_len: Some(tune.len() as u64),
        ..against(base, mode)
    };
    let report = encode(tune, &mut archive, &opts).unwrap();
    (archive, report)
}

fn with<'a>(base: &'a Base) -> DecodeOptions<'a> {
    DecodeOptions {
        base: Some(base),
        check_md5: true,
        ..Default::default()
    }
}

/// Decodes `archive` every way the library reads one (in memory, as a stream, as a file
/// through maps, tensor by tensor through the index) and checks each gives `original`.
fn decodes_everywhere(archive: &[u8], original: &[u8], base: Option<&Base>) {
    let opts = DecodeOptions {
        base,
        check_md5: true,
        ..Default::default()
    };
    assert!(
        decode_to_vec(archive, &opts).unwrap() == original,
        "in memory"
    );
    let mut streamed = Vec::new();
    decode(archive, &mut streamed, &opts).unwrap();
    assert!(streamed == original, "as a stream");
    let mut f = tempfile::tempfile().unwrap();
    std::io::Write::write_all(&mut f, archive).unwrap();
    let mut from_file = Vec::new();
    decode_file(&f, &mut from_file, &opts).unwrap();
    assert!(from_file == original, "as a file");
    let open = || {
        match base {
            Some(b) => Archive::open_with_base(Cursor::new(archive), b.clone()),
            None => Archive::open(Cursor::new(archive)),
        }
        .unwrap()
    };
    let mut a = open();
    for (name, range) in tensor_ranges(original) {
        let got = a.read_tensor(&name).unwrap();
        assert!(got == original[range], "tensor {name} by random access");
    }
    assert!(
        a.read_range(0..original.len() as u64).unwrap() == original,
        "whole range"
    );
    // Many ranges at once, each into its own buffer: every tensor whole, and pieces of them
    // cut at odd places (some left out, some sharing blocks); with repeated tensors, read a
    // piece of the archive at a time, down to a block or less.
    let tensors = tensor_ranges(original);
    let whole: Vec<_> = tensors.iter().map(|(_, r)| r.clone()).collect();
    let mut cuts: Vec<_> = std::iter::once(0..5).collect();
    for (k, r) in whole.iter().enumerate() {
        let third = r.len() / 3;
        let (p, q) = (r.start + third + k, r.end - third + 3 * k);
        cuts.extend([r.start..p.min(r.end), p.min(r.end)..q.min(r.end)]);
        if k % 3 != 0 {
            cuts.push(q.min(r.end)..r.end);
        }
    }
    for piece in [None, Some(1), Some(100 << 10)] {
        for ranges in [&whole, &cuts] {
            let mut a = open();
            if let Some(p) = piece {
                a.set_repeat_piece(p);
            }
            for (r, b) in ranges.iter().zip(read_each(&mut a, ranges).unwrap()) {
                assert!(b[..] == original[r.clone()], "{piece:?}: {r:?} by ranges");
            }
        }
    }
}

/// A safetensors file of the `tensors` (name, byte range) of `file`, each as a U8 vector.
fn as_bytes(file: &[u8], tensors: &[(String, std::ops::Range<usize>)]) -> Vec<u8> {
    let tensors: Vec<(&str, &str, Vec<u64>, Vec<u8>)> = tensors
        .iter()
        .map(|(name, r)| {
            (
                name.as_str(),
                "U8",
                vec![r.len() as u64],
                file[r.clone()].to_vec(),
            )
        })
        .collect();
    safetensors(&tensors, 0, "{}")
}

#[test]
fn the_excerpt_pair_codes_to_a_fraction_and_round_trips() {
    let (base_bytes, tune) = (read(BASE), read(TUNE));
    let base = Base::open(BASE).unwrap();
    assert_eq!(base.name(), "tune-base.safetensors");
    for mode in [Mode::Fast, Mode::Best] {
        let plain = encode_to_vec(&tune, &EncodeOptions::new(mode)).unwrap();
        let (archive, report) = streamed(&tune, &base, mode);
        assert_eq!(report.based_tensors, 7, "{mode}");
        assert_eq!(report.repeated_tensors, 0);
        // Measured: FAST 7.4% and BEST 4.9% of the file, against 65.6% and 65.5% plainly.
        assert!(
            archive.len() * 5 < plain.len(),
            "{mode}: {} vs {}",
            archive.len(),
            plain.len()
        );
        decodes_everywhere(&archive, &tune, Some(&base));
        // The same base from memory, or from an archive of it, serves as well.
        let in_memory = Base::from_bytes("tune-base.safetensors", base_bytes.clone()).unwrap();
        assert!(decode_to_vec(&archive, &with(&in_memory)).unwrap() == tune);
        let info = inspect(&mut Cursor::new(&archive)).unwrap();
        // The kept header deflates: version 3; BEST on safetensors input, with its sign
        // models allowed by default, is version 5.
        assert_eq!(
            info.format_version,
            if mode == Mode::Best {
                sc::container::SIGNS_VERSION
            } else {
                3
            }
        );
        assert!(info.kept_header_stored < info.kept_header_len);
        assert_eq!(info.base_name.as_deref(), Some("tune-base.safetensors"));
        assert_eq!(info.based_tensors, 7);
        assert!(
            info.transforms.contains_key("sub16"),
            "{:?}",
            info.transforms
        );
        if mode == Mode::Best {
            assert!(info.codecs.contains_key("basectx"), "{:?}", info.codecs);
        }
    }
}

/// Committed archives of `testdata/tiny-tune.safetensors` coded against
/// `testdata/tiny.safetensors` (BEST, 4 KiB blocks): by the last encoder of format version 2
/// (kept header stored as it is) and by a version 3 encoder (kept header deflated, the
/// reference section after it). Both must keep decoding, every way an archive is read.
#[test]
fn committed_version_2_and_3_archives_with_references_decode() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/");
    let tune = read(&format!("{dir}tiny-tune.safetensors"));
    let base = Base::open(Path::new(&format!("{dir}tiny.safetensors"))).unwrap();
    for (file, version) in [("tiny-tune.best-v2.sc", 2), ("tiny-tune.best-v3.sc", 3)] {
        let archive = read(&format!("{dir}{file}"));
        let info = inspect(&mut Cursor::new(&archive)).unwrap();
        assert_eq!(info.format_version, version, "{file}");
        assert_eq!(info.kept_header_stored < info.kept_header_len, version == 3);
        assert_eq!(info.base_name.as_deref(), Some("tiny.safetensors"));
        assert!(info.transforms.contains_key("sub16"), "{file}");
        decodes_everywhere(&archive, &tune, Some(&base));
        assert!(matches!(
            decode_to_vec(&archive, &DecodeOptions::default()),
            Err(Error::BaseNeeded { .. })
        ));
    }
}

#[test]
fn a_base_archive_or_shard_folder_serves_like_the_file() {
    let (base_bytes, tune) = (read(BASE), read(TUNE));
    let dir = tempfile::tempdir().unwrap();
    // The base as an archive.
    let sc_path = dir.path().join("tune-base.safetensors.sc");
    std::fs::write(
        &sc_path,
        encode_to_vec(&base_bytes, &EncodeOptions::new(Mode::Best)).unwrap(),
    )
    .unwrap();
    let from_archive = Base::open(&sc_path).unwrap();
    // The base as a folder of three shards, split unlike anything in the tune.
    let folder = dir.path().join("base-shards");
    std::fs::create_dir(&folder).unwrap();
    let tensors = tensor_ranges(&base_bytes);
    for (k, part) in tensors.chunks(3).enumerate() {
        let shard = as_bytes(&base_bytes, part);
        std::fs::write(folder.join(format!("model-{k:05}.safetensors")), shard).unwrap();
    }
    // A shard stored as an archive in the folder counts too.
    let last = folder.join("model-00002.safetensors");
    let bytes = std::fs::read(&last).unwrap();
    std::fs::write(
        folder.join("model-00002.safetensors.sc"),
        encode_to_vec(&bytes, &EncodeOptions::default()).unwrap(),
    )
    .unwrap();
    std::fs::remove_file(&last).unwrap();
    let from_folder = Base::open(&folder).unwrap();
    assert_eq!(from_folder.len(), tensors.len());
    assert_eq!(from_folder.name(), "base-shards");
    let file_base = Base::open(BASE).unwrap();
    let archive = encode_to_vec(&tune, &against(&file_base, Mode::Fast)).unwrap();
    for base in [&from_archive, &from_folder] {
        // The shards' tensors are U8 here: dtypes only matter for pairing when encoding.
        assert!(
            decode_to_vec(&archive, &with(base)).unwrap() == tune,
            "{}",
            base.name()
        );
    }
    // Encoded against the archive, decoded against the file: the digests are of the bytes.
    let archive = encode_to_vec(&tune, &against(&from_archive, Mode::Fast)).unwrap();
    assert!(decode_to_vec(&archive, &with(&file_base)).unwrap() == tune);
    // A name in two shards is refused.
    std::fs::write(folder.join("again.safetensors"), &base_bytes).unwrap();
    assert!(matches!(Base::open(&folder), Err(Error::BadBase { .. })));
}

/// The tune coded against its base, and the things that go wrong with the base.
#[test]
fn a_missing_wrong_truncated_or_changed_base_fails_before_any_output() {
    let (base_bytes, tune) = (read(BASE), read(TUNE));
    let base = Base::open(BASE).unwrap();
    let archive = encode_to_vec(&tune, &against(&base, Mode::Fast)).unwrap();
    let decode_with = |b: Option<&Base>| {
        let mut out = Vec::new();
        let opts = DecodeOptions {
            base: b,
            ..Default::default()
        };
        let r = decode(&archive[..], &mut out, &opts);
        (r, out)
    };
    // Missing: named, and nothing written (the kept header would be the first output).
    let (r, out) = decode_with(None);
    match r {
        Err(Error::BaseNeeded { needed }) => assert_eq!(needed, "tune-base.safetensors"),
        other => panic!("{other:?}"),
    }
    assert!(out.is_empty());
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, bytes: &[u8]| -> PathBuf {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    };
    // Wrong: another checkpoint with the same names (the tune itself).
    let wrong = Base::open(write("other.safetensors", &tune)).unwrap();
    // Changed: one bit of one tensor.
    let (name, range) = tensor_ranges(&base_bytes)[5].clone();
    let mut changed = base_bytes.clone();
    changed[range.start + 100] ^= 1;
    let changed = Base::open(write("changed.safetensors", &changed)).unwrap();
    // Missing a tensor: the base without its last one.
    let json_len = u64::from_le_bytes(base_bytes[..8].try_into().unwrap()) as usize;
    let tensors = tensor_ranges(&base_bytes);
    let fewer = as_bytes(&base_bytes, &tensors[..tensors.len() - 1]);
    let fewer = Base::open(write("fewer.safetensors", &fewer)).unwrap();
    for (b, why) in [
        (&wrong, "holds other bytes"),
        (&changed, "holds other bytes"),
        (&fewer, "has no tensor"),
    ] {
        let (r, out) = decode_with(Some(b));
        let e = r.unwrap_err();
        assert!(matches!(e, Error::BaseMismatch { .. }), "{e:?}");
        let msg = e.to_string();
        assert!(
            msg.contains("tune-base.safetensors") && msg.contains(why),
            "{msg}"
        );
        assert!(out.is_empty(), "{}", b.name());
    }
    assert!(decode_with(Some(&changed))
        .0
        .unwrap_err()
        .to_string()
        .contains(&name));
    // Truncated: the base cannot even be opened.
    let cut = write("cut.safetensors", &base_bytes[..json_len + 8 + 1000]);
    match Base::open(&cut) {
        Err(e @ Error::BadBase { .. }) => assert!(e.to_string().contains("cut.safetensors")),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        Base::open(dir.path().join("absent")),
        Err(Error::BadBase { .. })
    ));
    // A base that is itself coded against a base is refused, naming that one.
    let needs = write("needs.sc", &archive);
    let e = Base::open(&needs).unwrap_err().to_string();
    assert!(e.contains("tune-base.safetensors"), "{e}");
    // Random access: the tensors are listed without the base, and reading one needs it.
    let mut a = Archive::open(Cursor::new(&archive)).unwrap();
    assert_eq!(a.base_name(), Some("tune-base.safetensors"));
    assert_eq!(
        a.reference(&name),
        Some(Reference::Base("tune-base.safetensors"))
    );
    assert!(matches!(
        a.read_tensor(&name),
        Err(Error::BaseNeeded { .. })
    ));
    let mut a = Archive::open_with_base(Cursor::new(&archive), changed.clone()).unwrap();
    assert!(matches!(
        a.read_tensor(&name),
        Err(Error::BaseMismatch { .. })
    ));
    // A tensor the changed bit is not in still reads: each is checked on its own.
    let other = &tensors[0].0;
    assert!(a.read_tensor(other).unwrap() == tune[tensor_ranges(&tune)[0].1.clone()]);
}

/// `n` weights of roughly normal distribution and scale `scale`.
fn weights(rng: &mut Rng, n: usize, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|_| {
            let s: f32 = (0..4)
                .map(|_| (rng.next() % 1000) as f32 / 1000.0)
                .sum::<f32>()
                - 2.0;
            s * scale
        })
        .collect()
}

/// A fine-tune's step: each weight moved by a small amount, about the same whatever its size.
fn tuned(rng: &mut Rng, w: &[f32], step: f32) -> Vec<f32> {
    w.iter()
        .map(|&x| x + step * ((rng.next() % 2001) as f32 / 1000.0 - 1.0))
        .collect()
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn bf16_bytes(v: &[f32]) -> Vec<u8> {
    // Round to nearest even, as frameworks cast.
    v.iter()
        .flat_map(|x| {
            let b = x.to_bits();
            let r = b.wrapping_add(0x7FFF + (b >> 16 & 1)) >> 16;
            (r as u16).to_le_bytes()
        })
        .collect()
}

fn f16_bytes(v: &[f32]) -> Vec<u8> {
    // Round to nearest (ties away), normal range only: the weights here are well inside it.
    v.iter()
        .flat_map(|&x| {
            let b = x.to_bits();
            let sign = (b >> 16 & 0x8000) as u16;
            let exp = ((b >> 23) & 0xFF) as i32 - 127 + 15;
            let h = if exp <= 0 {
                sign
            } else {
                let m = (b & 0x7F_FFFF) + 0x1000;
                sign | ((exp as u32) << 10 | m >> 13).min(0x7BFF) as u16
            };
            h.to_le_bytes()
        })
        .collect()
}

#[test]
fn f32_f16_and_bf16_pairs_take_the_float_differences() {
    let mut rng = Rng(7);
    let n = 20_000;
    let w = weights(&mut rng, n, 0.05);
    let t = tuned(&mut rng, &w, 2e-5);
    let base = safetensors(
        &[
            ("a.f32", "F32", vec![n as u64], f32_bytes(&w)),
            ("b.f16", "F16", vec![n as u64], f16_bytes(&w)),
            ("c.bf16", "BF16", vec![n as u64], bf16_bytes(&w)),
        ],
        0,
        "{}",
    );
    let tune = safetensors(
        &[
            ("a.f32", "F32", vec![n as u64], f32_bytes(&t)),
            ("b.f16", "F16", vec![n as u64], f16_bytes(&t)),
            ("c.bf16", "BF16", vec![n as u64], bf16_bytes(&t)),
        ],
        0,
        "{}",
    );
    let base = Base::from_bytes("floats.safetensors", base).unwrap();
    for mode in [Mode::Fast, Mode::Best] {
        let plain = encode_to_vec(&tune, &EncodeOptions::new(mode)).unwrap();
        let archive = encode_to_vec(&tune, &against(&base, mode)).unwrap();
        assert!(
            archive.len() * 2 < plain.len(),
            "{mode}: {} vs {}",
            archive.len(),
            plain.len()
        );
        decodes_everywhere(&archive, &tune, Some(&base));
        let info = inspect(&mut Cursor::new(&archive)).unwrap();
        for t in ["sub32", "sub16"] {
            assert!(
                info.transforms.contains_key(t),
                "{mode}: {:?}",
                info.transforms
            );
        }
        // The archive's share per tensor: each delta well under its plain size.
        let a = Archive::open(Cursor::new(&archive)).unwrap();
        let p = Archive::open(Cursor::new(&plain)).unwrap();
        for (x, y) in a
            .stored_bytes()
            .per_tensor
            .iter()
            .zip(p.stored_bytes().per_tensor)
        {
            assert!(x * 10 < y * 7, "{mode}: {x} vs {y}");
        }
    }
}

#[test]
fn new_layers_changed_shapes_and_dtypes_are_coded_plainly() {
    let mut rng = Rng(11);
    let w = weights(&mut rng, 4096, 0.05);
    let t = tuned(&mut rng, &w, 1e-4);
    let base = safetensors(
        &[
            ("kept", "BF16", vec![64, 64], bf16_bytes(&w)),
            ("reshaped", "BF16", vec![64, 64], bf16_bytes(&w)),
            ("retyped", "BF16", vec![2048], bf16_bytes(&w[..2048])),
            ("dropped", "BF16", vec![4096], bf16_bytes(&w)),
        ],
        0,
        "{}",
    );
    let tune = safetensors(
        &[
            ("kept", "BF16", vec![64, 64], bf16_bytes(&t)),
            ("reshaped", "BF16", vec![32, 128], bf16_bytes(&t)),
            ("retyped", "F16", vec![2048], f16_bytes(&t[..2048])),
            (
                "new.layer",
                "BF16",
                vec![4096],
                bf16_bytes(&weights(&mut rng, 4096, 0.02)),
            ),
            (
                "new.ids",
                "I64",
                vec![100],
                (0..100u64).flat_map(u64::to_le_bytes).collect(),
            ),
        ],
        16,
        r#"{"format":"pt"}"#,
    );
    let base = Base::from_bytes("base.safetensors", base).unwrap();
    for mode in [Mode::Fast, Mode::Best] {
        let (archive, report) = streamed(&tune, &base, mode);
        assert_eq!(report.based_tensors, 1, "{mode}");
        decodes_everywhere(&archive, &tune, Some(&base));
        let a = Archive::open(Cursor::new(&archive)).unwrap();
        assert_eq!(
            a.reference("kept"),
            Some(Reference::Base("base.safetensors"))
        );
        for name in ["reshaped", "retyped", "new.layer", "new.ids"] {
            assert_eq!(a.reference(name), None, "{name}");
        }
        // Only the tensor coded against the base needs it.
        let mut a = Archive::open(Cursor::new(&archive)).unwrap();
        for (name, range) in tensor_ranges(&tune) {
            match a.read_tensor(&name) {
                Ok(bytes) => assert!(bytes == tune[range], "{name}"),
                Err(Error::BaseNeeded { .. }) => assert_eq!(name, "kept"),
                Err(e) => panic!("{name}: {e}"),
            }
        }
    }
    // Nothing in common with the base: no reference section, no base needed.
    let unrelated = safetensors(&[("x", "BF16", vec![10], vec![1; 20])], 0, "{}");
    let archive = encode_to_vec(&unrelated, &against(&base, Mode::Fast)).unwrap();
    assert_eq!(inspect(&mut Cursor::new(&archive)).unwrap().base_name, None);
    assert!(decode_to_vec(&archive, &DecodeOptions::default()).unwrap() == unrelated);
}

/// The sample with its word embeddings saved a second time under another name (tied weights),
/// and the sample as it is, with the same header layout.
fn sample_with_tied_copy() -> (Vec<u8>, Vec<u8>) {
    let sample = read(SAMPLE);
    let mut tensors: Vec<(String, String, Vec<u64>, Vec<u8>)> = Vec::new();
    let json_len = u64::from_le_bytes(sample[..8].try_into().unwrap()) as usize;
    let json: serde_json::Value = serde_json::from_slice(&sample[8..8 + json_len]).unwrap();
    for (name, range) in tensor_ranges(&sample) {
        let t = &json[&name];
        let shape = t["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap())
            .collect();
        tensors.push((
            name,
            t["dtype"].as_str().unwrap().into(),
            shape,
            sample[range].to_vec(),
        ));
    }
    let tied = tensors
        .iter()
        .find(|t| t.0 == "embeddings.word_embeddings.weight")
        .unwrap()
        .clone();
    let build = |tensors: &[(String, String, Vec<u64>, Vec<u8>)]| {
        let refs: Vec<(&str, &str, Vec<u64>, Vec<u8>)> = tensors
            .iter()
            .map(|(n, d, s, b)| (n.as_str(), d.as_str(), s.clone(), b.clone()))
            .collect();
        safetensors(&refs, 0, "{}")
    };
    let without = build(&tensors);
    tensors.push(("lm_head.weight".into(), tied.1, tied.2, tied.3));
    (build(&tensors), without)
}

#[test]
fn a_repeated_tensor_is_stored_once() {
    let (file, without) = sample_with_tied_copy();
    let tied_len = file.len() - without.len();
    // The file's bytes, counting the repeated tensor once.
    let unique = without.len();
    for mode in [Mode::Fast, Mode::Best] {
        let once = encode_to_vec(&without, &EncodeOptions::new(mode)).unwrap();
        let mut f = tempfile::tempfile().unwrap();
        std::io::Write::write_all(&mut f, &file).unwrap();
        let mut archive = Vec::new();
        let report = encode_file(&f, &mut archive, &EncodeOptions::new(mode)).unwrap();
        assert_eq!(report.repeated_tensors, 1);
        assert_eq!(report.based_tensors, 0);
        // Smaller than the file's unique bytes, and within a few hundred bytes of an archive
        // of the file without the copy (whose 1.5 MB cost a reference and a record a block).
        assert!(
            archive.len() < unique,
            "{mode}: {} >= {unique}",
            archive.len()
        );
        assert!(
            archive.len() < once.len() + 1024,
            "{mode}: {} vs {}",
            archive.len(),
            once.len()
        );
        assert_eq!(
            archive,
            encode_to_vec(&file, &EncodeOptions::new(mode)).unwrap()
        );
        decodes_everywhere(&archive, &file, None);
        let a = Archive::open(Cursor::new(&archive)).unwrap();
        assert_eq!(
            a.reference("lm_head.weight"),
            Some(Reference::Repeats("embeddings.word_embeddings.weight"))
        );
        assert_eq!(a.base_name(), None);
        // A stream cannot be read twice, so it is coded in full; dedup off does the same.
        let mut streamed = Vec::new();
        let r = encode(&file[..], &mut streamed, &EncodeOptions::new(mode)).unwrap();
        assert_eq!(r.repeated_tensors, 0);
        assert!(
            streamed.len() > once.len() + tied_len / 2,
            "{mode}: {} vs {} + {tied_len}",
            streamed.len(),
            once.len()
        );
        let off = EncodeOptions {
            dedup: false,
            ..EncodeOptions::new(mode)
        };
        assert_eq!(encode_to_vec(&file, &off).unwrap(), streamed);
    }
}

#[test]
fn a_repeated_tensor_of_a_fine_tune_repeats_a_tensor_coded_against_the_base() {
    let (base_file, _) = sample_with_tied_copy();
    let ranges = tensor_ranges(&base_file);
    let mut tune = base_file.clone();
    // Tune every BF16 value of the embeddings by one unit in the last place, in both copies.
    let (_, emb) = ranges
        .iter()
        .find(|(n, _)| n == "embeddings.word_embeddings.weight")
        .unwrap();
    let (_, head) = ranges.iter().find(|(n, _)| n == "lm_head.weight").unwrap();
    for i in (emb.start..emb.end).step_by(6) {
        tune[i] = tune[i].wrapping_add(1);
    }
    tune.copy_within(emb.clone(), head.start);
    let base = Base::from_bytes("tied.safetensors", base_file).unwrap();
    let archive = encode_to_vec(&tune, &against(&base, Mode::Best)).unwrap();
    let info = inspect(&mut Cursor::new(&archive)).unwrap();
    assert_eq!(info.repeated_tensors, 1);
    assert_eq!(info.based_tensors, ranges.len() - 1);
    decodes_everywhere(&archive, &tune, Some(&base));
    let mut a = Archive::open(Cursor::new(&archive)).unwrap();
    assert!(matches!(
        a.read_tensor("lm_head.weight"),
        Err(Error::BaseNeeded { .. })
    ));
}

#[test]
fn corrupt_delta_archives_fail_cleanly() {
    let mut rng = Rng(3);
    let w = weights(&mut rng, 3000, 0.05);
    let t = tuned(&mut rng, &w, 1e-4);
    let mk = |v: &[f32]| {
        safetensors(
            &[
                ("w", "BF16", vec![3000], bf16_bytes(v)),
                ("tied", "BF16", vec![3000], bf16_bytes(v)),
            ],
            0,
            "{}",
        )
    };
    let (base, tune) = (mk(&w), mk(&t));
    let base = Base::from_bytes("b.safetensors", base).unwrap();
    for mode in [Mode::Fast, Mode::Best] {
        let opts = EncodeOptions {
            block_size: 4096,
            ..against(&base, mode)
        };
        let archive = encode_to_vec(&tune, &opts).unwrap();
        let info = inspect(&mut Cursor::new(&archive)).unwrap();
        assert_eq!((info.based_tensors, info.repeated_tensors), (1, 1));
        let header_end = info.header().encoded_len() as usize;
        let refs_start = header_end - info.header().refs.as_ref().unwrap().to_bytes().len();
        for pos in 0..archive.len() {
            for flip in [0x01u8, 0x80, 0xFF] {
                let mut bad = archive.clone();
                bad[pos] ^= flip;
                let opts = with(&base);
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    decode_to_vec(&bad, &opts)
                }));
                let r = r.unwrap_or_else(|_| panic!("{mode} @{pos}: panicked"));
                if let Ok(out) = r {
                    assert!(out == tune, "{mode} @{pos}: wrong output accepted");
                }
                if (refs_start..header_end).contains(&pos) {
                    assert!(decode_to_vec(&bad, &with(&base)).is_err(), "{mode} @{pos}");
                }
                if let Ok(mut a) = Archive::open_with_base(Cursor::new(&bad), base.clone()) {
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        let _ = a.read_tensor("tied");
                    }));
                    assert!(r.is_ok(), "{mode} @{pos}: random access panicked");
                }
            }
        }
    }
}

#[test]
fn archives_without_references_are_unchanged_by_a_base_option_on_decode() {
    let sample = read(SAMPLE);
    let archive = encode_to_vec(&sample, &EncodeOptions::default()).unwrap();
    let base = Base::open(Path::new(BASE)).unwrap();
    assert!(decode_to_vec(&archive, &with(&base)).unwrap() == sample);
}

/// Each block in flight holds its base bytes besides its own buffers: the smallest budget for
/// a plain archive is a block short of one with a base, and is refused as such.
#[test]
fn the_memory_budget_counts_the_base_bytes() {
    let tune = read(TUNE);
    let base = Base::open(BASE).unwrap();
    let block = 64u32 << 10;
    let plain = sc::memory_needed(block);
    let refused = |r: sc::Result<Vec<u8>>| match r {
        Err(Error::InvalidArgument(why)) => assert!(why.contains("memory budget"), "{why}"),
        other => panic!("{:?}", other.map(|v| v.len())),
    };
    let opts = |memory| EncodeOptions {
        memory,
        ..against(&base, Mode::Fast)
    };
    refused(encode_to_vec(&tune, &opts(plain)));
    let needed = sc::memory_needed_with_references(block);
    assert_eq!(needed, plain + block as u64);
    let archive = encode_to_vec(&tune, &opts(needed)).unwrap();
    let decoding = |memory| DecodeOptions {
        memory,
        ..with(&base)
    };
    refused(decode_to_vec(&archive, &decoding(plain)));
    assert!(decode_to_vec(&archive, &decoding(needed)).unwrap() == tune);
}

/// `bytes` written over the file `path` at `at`, in place (the same file, as another process
/// writing it would).
fn write_in_place(path: &Path, at: u64, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(bytes, at).unwrap();
}

/// The excerpt's base copied into `dir` (another process may change the copy).
fn base_copy(dir: &Path) -> PathBuf {
    let path = dir.join("base.safetensors");
    std::fs::copy(BASE, &path).unwrap();
    path
}

#[test]
fn a_base_truncated_while_in_use_is_an_error_naming_it_not_a_crash() {
    let tmp = tempfile::tempdir().unwrap();
    let path = base_copy(tmp.path());
    let tune = read(TUNE);
    let archive = encode_to_vec(&tune, &against(&Base::open(BASE).unwrap(), Mode::Fast)).unwrap();
    // Opened (headers read), then cut short before its tensors are read: encoding and
    // decoding against it read past its new end, which a map of it would have faulted on.
    let for_encode = Base::open(&path).unwrap();
    let for_decode = Base::open(&path).unwrap();
    let len = std::fs::metadata(&path).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let encoded = encode_to_vec(&tune, &against(&for_encode, Mode::Fast));
    let decoded = decode_to_vec(&archive, &with(&for_decode));
    for e in [encoded.err(), decoded.err()] {
        let e = e.expect("the truncated base went unnoticed");
        let msg = e.to_string();
        assert!(matches!(e, Error::BadBase { .. }), "{msg}");
        assert!(msg.contains(&path.display().to_string()), "{msg}");
        assert!(msg.contains("shrank while it was being read"), "{msg}");
    }
}

#[test]
fn a_fifo_or_device_is_refused_as_a_base_without_opening_it() {
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join("fifo");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    // Opening a FIFO waits for a writer: a thread, so that a hang fails the test instead of
    // stalling it.
    for path in [fifo, PathBuf::from("/dev/null")] {
        let (tx, rx) = std::sync::mpsc::channel();
        let p = path.clone();
        std::thread::spawn(move || tx.send(Base::open(&p).map(|_| ()).map_err(|e| e.to_string())));
        let got = rx.recv_timeout(std::time::Duration::from_secs(30));
        let msg = got.expect("Base::open blocked").unwrap_err();
        assert!(msg.contains("not a regular file or a folder"), "{msg}");
        assert!(msg.contains(&path.display().to_string()), "{msg}");
    }
}

#[test]
fn a_base_changed_in_place_during_an_encode_fails_it_naming_the_tensor() {
    let tmp = tempfile::tempdir().unwrap();
    let path = base_copy(tmp.path());
    let tune = read(TUNE);
    let bytes = read(BASE);
    let (name, range) = tensor_ranges(&bytes)[3].clone();
    let base = Base::open(&path).unwrap();
    // Unchanged, the same encode goes through.
    encode_to_vec(&tune, &against(&base, Mode::Fast)).unwrap();
    for mode in [Mode::Fast, Mode::Best] {
        // A fresh base, so that its digests are taken again; changed once they are, before
        // its bytes are read for coding.
        std::fs::copy(BASE, &path).unwrap();
        let base = Base::open(&path).unwrap();
        let at = range.start as u64 + 7;
        let (p, byte) = (path.clone(), bytes[at as usize] ^ 0x10);
        sc::hook::set(move |point| {
            if point == sc::hook::Point::Planned {
                write_in_place(&p, at, &[byte]);
            }
        });
        let got = encode_to_vec(&tune, &against(&base, mode));
        sc::hook::clear();
        let Err(e) = got else {
            panic!("the encode went through")
        };
        let msg = e.to_string();
        assert!(matches!(e, Error::Changed(_)), "{msg}");
        assert!(msg.contains(&format!("{name:?}")), "{msg}");
        assert!(msg.contains(&path.display().to_string()), "{msg}");
    }
}

#[test]
fn a_repeated_tensor_changed_during_an_encode_fails_it_naming_both() {
    let tmp = tempfile::tempdir().unwrap();
    let (file, _) = sample_with_tied_copy();
    let path = tmp.path().join("tied.safetensors");
    let ranges = tensor_ranges(&file);
    let source = ranges
        .iter()
        .find(|(n, _)| n == "embeddings.word_embeddings.weight")
        .unwrap()
        .1
        .clone();
    for mode in [Mode::Fast, Mode::Best] {
        std::fs::write(&path, &file).unwrap();
        // The source's blocks are read (and stored) as they are; then it changes, before the
        // repeat is coded against it.
        let at = source.start as u64 + 11;
        let (p, end, byte) = (path.clone(), source.end as u64, file[at as usize] ^ 0x40);
        let mut done = false;
        sc::hook::set(move |point| {
            if let sc::hook::Point::Read { end: read } = point {
                if read >= end && !done {
                    write_in_place(&p, at, &[byte]);
                    done = true;
                }
            }
        });
        let opts = EncodeOptions {
            block_size: 64 << 10,
            ..EncodeOptions::new(mode)
        };
        let f = std::fs::File::open(&path).unwrap();
        let mut archive = Vec::new();
        let got = encode_file(&f, &mut archive, &opts);
        sc::hook::clear();
        let Err(e) = got else {
            panic!("the encode went through")
        };
        let msg = e.to_string();
        assert!(msg.contains("\"lm_head.weight\""), "{msg}");
        assert!(
            msg.contains("\"embeddings.word_embeddings.weight\""),
            "{msg}"
        );
        assert!(msg.contains("changed while it was being read"), "{msg}");
    }
}

#[test]
fn an_input_that_shrinks_during_an_encode_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("tune.safetensors");
    std::fs::copy(TUNE, &path).unwrap();
    let len = std::fs::metadata(&path).unwrap().len();
    let p = path.clone();
    sc::hook::set(move |point| {
        if point == sc::hook::Point::Planned {
            let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
            f.set_len(len / 2).unwrap();
        }
    });
    let f = std::fs::File::open(&path).unwrap();
    let got = encode_file(&f, std::io::sink(), &EncodeOptions::default());
    sc::hook::clear();
    let msg = got.unwrap_err().to_string();
    assert!(
        msg.contains("the file shrank while it was being read"),
        "{msg}"
    );
}
