//! GGUF files read as safetensors files are: headers written back (`sc::gguf::write`), GGUF
//! files and archives of them as bases of fine-tunes, the tensors of GGUF archives listed,
//! read and extracted as new GGUF files.

mod common;

use common::{ggml, gguf_every_value, gguf_of, gguf_pair, odd_gguf};
use sc::gguf::{write, GgufHeader, Value};
use sc::{decode_to_vec, encode_to_vec, inspect, Base, DecodeOptions, Dtype, EncodeOptions, Mode};
use std::io::Cursor;

const BASE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/testdata/tune-base.safetensors"
);
const TUNE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/tune.safetensors");
const EXCERPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/excerpt.gguf");

fn read(path: &str) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn parse(bytes: &[u8]) -> GgufHeader {
    GgufHeader::parse(bytes, bytes.len() as u64).expect("valid GGUF")
}

/// What the writer writes, the reader reads back as it was, and the file it reads, the writer
/// writes again byte for byte: every value type, versions 2 and 3, odd alignments, a
/// zero-element tensor, tensors whose lengths are not multiples of the alignment.
#[test]
fn written_files_read_back_and_rewrite_exactly() {
    let q4 = vec![5u8; 36];
    let f16 = vec![1u8; 6];
    for version in [2, 3] {
        for alignment in [None, Some(1u32), Some(8), Some(64)] {
            let mut metadata = gguf_every_value();
            if let Some(a) = alignment {
                metadata.push(("general.alignment".into(), Value::U32(a)));
            }
            let tensors: [(&str, &[u64], _, &[u8]); 3] = [
                ("f16", &[3], ggml("F16"), &f16),
                ("empty", &[0, 4], ggml("F32"), &[]),
                ("q", &[64], ggml("Q4_0"), &q4),
            ];
            let bytes = write::file(version, &metadata, &tensors);
            let h = parse(&bytes);
            assert_eq!(h.version, version);
            assert_eq!(h.metadata, metadata);
            assert_eq!(h.alignment, u64::from(alignment.unwrap_or(32)));
            assert_eq!(bytes.len() as u64 % h.alignment, 0);
            for ((name, dims, t, data), got) in tensors.iter().zip(&h.tensors) {
                assert_eq!((&got.name[..], &got.dims[..]), (*name, *dims));
                assert_eq!(got.ggml_type, *t);
                assert_eq!(
                    &bytes[got.range.start as usize..got.range.end as usize],
                    *data
                );
            }
            let all: Vec<usize> = (0..h.tensors.len()).collect();
            let (header, offsets) = h.header_for(&all);
            assert_eq!(header, bytes[..h.data_start as usize]);
            let starts: Vec<u64> = h
                .tensors
                .iter()
                .map(|t| t.range.start - h.data_start)
                .collect();
            assert_eq!(offsets, starts);
        }
    }
}

/// A header for some tensors, in another order, keeps the metadata and lays them out afresh.
#[test]
fn header_for_some_tensors() {
    let mut metadata = gguf_every_value();
    metadata.push(("general.alignment".into(), Value::U32(16)));
    let (a, b, c) = (vec![1u8; 4], vec![2u8; 34], vec![3u8; 8]);
    let tensors: [(&str, &[u64], _, &[u8]); 3] = [
        ("a", &[1], ggml("F32"), &a),
        ("b", &[32], ggml("Q8_0"), &b),
        ("c", &[2, 2], ggml("BF16"), &c),
    ];
    let h = parse(&write::file(3, &metadata, &tensors));
    let (header, offsets) = h.header_for(&[2, 1]);
    assert_eq!(header.len() % 16, 0);
    assert_eq!(offsets, [0, 16]);
    let mut file = header.clone();
    file.extend_from_slice(&c);
    file.resize(header.len() + 16, 0);
    file.extend_from_slice(&b);
    let got = parse(&file);
    assert_eq!(got.metadata, metadata);
    let names: Vec<&str> = got.tensors.iter().map(|t| &t.name[..]).collect();
    assert_eq!(names, ["c", "b"]);
    assert_eq!(got.tensors[0].dims, [2, 2]);
    assert_eq!(got.tensors[1].ggml_type.name, "Q8_0");
    let (empty, none) = h.header_for(&[]);
    assert!(none.is_empty());
    assert!(parse(&empty).tensors.is_empty());
}

/// Tensors as safetensors describes them: offsets from the data's start, shapes outermost
/// first, dtypes where safetensors has them.
#[test]
fn tensor_infos_read_as_safetensors_ones() {
    let (a, b) = (vec![1u8; 12], vec![2u8; 34]);
    let tensors: [(&str, &[u64], _, &[u8]); 2] = [
        ("a", &[3, 2], ggml("F16"), &a),
        ("b", &[32], ggml("Q8_0"), &b),
    ];
    let h = parse(&write::file(3, &[], &tensors));
    let infos = h.tensor_infos();
    assert_eq!(infos[0].shape, [2, 3]);
    assert_eq!(infos[0].dtype, Some(Dtype::F16));
    assert_eq!((infos[0].begin, infos[0].end), (0, 12));
    assert_eq!((&infos[1].dtype_name[..], infos[1].dtype), ("Q8_0", None));
    assert_eq!((infos[1].begin, infos[1].end), (32, 66));
}

/// The real excerpt's header, rewritten for all its tensors, is the excerpt's header.
#[test]
fn rewrites_the_real_excerpt() {
    let bytes = read(EXCERPT);
    let h = parse(&bytes);
    let all: Vec<usize> = (0..h.tensors.len()).collect();
    let (header, offsets) = h.header_for(&all);
    assert_eq!(header, bytes[..h.data_start as usize]);
    for (t, offset) in h.tensors.iter().zip(offsets) {
        assert_eq!(t.range.start - h.data_start, offset);
    }
}

/// A GGUF file holding the base's tensors (same names, types and shapes) serves as the base,
/// alone, in a folder or in memory, and interchangeably with the safetensors file: each base
/// tensor is known by its name, length and digest.
#[test]
fn a_gguf_file_serves_as_a_base() {
    let (st_base, tune) = (read(BASE), read(TUNE));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("base.gguf");
    let gguf = gguf_of(&st_base, &gguf_every_value());
    std::fs::write(&path, &gguf).unwrap();
    let st = Base::open(BASE).unwrap();
    let bases = [
        Base::open(&path).unwrap(),
        Base::open(dir.path()).unwrap(),
        Base::from_bytes("base.gguf", gguf.clone()).unwrap(),
    ];
    for base in &bases {
        assert_eq!(base.len(), st.len());
        let t = base.tensor("embeddings.word_embeddings.weight").unwrap();
        assert_eq!(
            (t.dtype, &t.shape[..]),
            (Some(Dtype::BF16), &[512, 384][..])
        );
        for mode in [Mode::Fast, Mode::Best] {
            let opts = EncodeOptions {
                base: Some(base),
                ..EncodeOptions::new(mode)
            };
            let archive = encode_to_vec(&tune, &opts).unwrap();
            let info = inspect(&mut Cursor::new(&archive)).unwrap();
            assert_eq!(info.based_tensors, 7, "{mode}");
            for other in [base, &st] {
                let opts = DecodeOptions {
                    base: Some(other),
                    check_md5: true,
                    ..Default::default()
                };
                assert_eq!(decode_to_vec(&archive, &opts).unwrap(), tune);
            }
        }
    }
    let mut bad = gguf.clone();
    bad.truncate(100);
    std::fs::write(&path, &bad).unwrap();
    let err = Base::open(&path).unwrap_err().to_string();
    assert!(err.contains("not a valid GGUF file"), "{err}");
}

fn open(archive: &[u8]) -> sc::Archive<Cursor<&[u8]>> {
    sc::Archive::open(Cursor::new(archive)).unwrap()
}

/// A GGUF archive lists the file's tensors (ggml type, shape outermost first, offsets from
/// the data's start), reads each, and gives the metadata as text, from the archive and from
/// `inspect`.
#[test]
fn gguf_archives_list_and_read_their_tensors_and_metadata() {
    for file in [read(EXCERPT), odd_gguf()] {
        let h = parse(&file);
        for mode in [Mode::Fast, Mode::Best] {
            let archive = encode_to_vec(&file, &EncodeOptions::new(mode)).unwrap();
            let mut a = open(&archive);
            assert_eq!(a.kind(), sc::Kind::Gguf);
            assert_eq!(a.tensors().len(), h.tensors.len());
            for t in &h.tensors {
                let got = a.tensor(&t.name).unwrap().clone();
                assert_eq!(got.dtype_name, t.ggml_type.name);
                let dims: Vec<u64> = t.dims.iter().rev().copied().collect();
                assert_eq!(got.shape, dims);
                assert_eq!(a.tensor_range(&got), t.range);
                let want = &file[t.range.start as usize..t.range.end as usize];
                assert_eq!(a.read_tensor(&t.name).unwrap(), want);
            }
            let meta = a.metadata().unwrap().clone();
            assert_eq!(meta.len(), h.metadata.len());
            for (k, v) in &h.metadata {
                assert_eq!(meta[k], v.to_text(), "{k}");
            }
            let info = inspect(&mut Cursor::new(&archive)).unwrap();
            assert_eq!(info.metadata().as_ref(), Some(&meta));
            assert_eq!(info.tensors.as_ref().unwrap(), a.tensors());
        }
    }
    let meta = open(&encode_to_vec(&odd_gguf(), &Default::default()).unwrap())
        .metadata()
        .unwrap()
        .clone();
    assert_eq!(meta["k8"], "tëxt");
    assert_eq!(meta["k9"], "[0.5,-1.0]");
    assert_eq!(meta["k10"], "[true,false,true]");
    assert_eq!(meta["k12"], r#"["<s>","","ü"]"#);
    assert_eq!(meta["k14"], r#"[[9],["x"],[]]"#);
    assert_eq!(meta["k15"], u64::MAX.to_string());
    assert_eq!(meta["general.alignment"], "64");
}

/// `write_gguf` writes a valid GGUF file of the chosen tensors with the original metadata,
/// each tensor's bytes as they were; all of them, in order, give back a file ggml laid out.
#[test]
fn write_gguf_makes_a_gguf_file_of_the_chosen_tensors() {
    for file in [read(EXCERPT), odd_gguf()] {
        let h = parse(&file);
        let archive = encode_to_vec(&file, &EncodeOptions::new(Mode::Fast)).unwrap();
        let mut a = open(&archive);
        let all: Vec<&str> = h.tensors.iter().map(|t| t.name.as_str()).collect();
        let mut out = Vec::new();
        let n = a.write_gguf(&all, &mut out).unwrap();
        assert_eq!(n, out.len() as u64);
        assert_eq!(out, file, "the whole file, as ggml lays it out");
        // The last and the first, named twice: once each, in file order.
        let (first, last) = (all[0], all[all.len() - 1]);
        let mut out = Vec::new();
        a.write_gguf(&[last, first, last], &mut out).unwrap();
        let got = parse(&out);
        assert_eq!(got.metadata, h.metadata);
        assert_eq!(got.version, h.version);
        assert_eq!(got.alignment, h.alignment);
        assert_eq!(out.len() as u64 % h.alignment, 0);
        let names: Vec<&str> = got.tensors.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, [first, last]);
        for t in &got.tensors {
            let orig = h.tensors.iter().find(|o| o.name == t.name).unwrap();
            assert_eq!((&t.dims, t.ggml_type), (&orig.dims, orig.ggml_type));
            let (r, o) = (&t.range, &orig.range);
            assert_eq!(
                out[r.start as usize..r.end as usize],
                file[o.start as usize..o.end as usize]
            );
        }
        // Tensors that share an offset (zero-element ones) are told apart by name.
        for t in h.tensors.iter().filter(|t| t.values() == 0) {
            let mut out = Vec::new();
            a.write_gguf(&[&t.name], &mut out).unwrap();
            let got = parse(&out);
            assert_eq!(
                (&got.tensors[0].name, &got.tensors[0].dims),
                (&t.name, &t.dims)
            );
        }
        let mut none = Vec::new();
        a.write_gguf(&[], &mut none).unwrap();
        assert!(parse(&none).tensors.is_empty());
        let err = a.write_gguf(&["nope"], &mut Vec::new()).unwrap_err();
        assert!(matches!(err, sc::Error::NoSuchTensor(_)), "{err}");
        let err = a.write_safetensors(&[first], &mut Vec::new()).unwrap_err();
        assert!(err.to_string().contains("write_gguf"), "{err}");
    }
    let st = encode_to_vec(&read(BASE), &Default::default()).unwrap();
    let err = open(&st).write_gguf(&[], &mut Vec::new()).unwrap_err();
    assert!(err.to_string().contains("not a GGUF file"), "{err}");
}

/// A GGUF fine-tune coded against its GGUF base (the file, or an archive of it): the float
/// tensors and the quantized one of the same name, type and shape are coded against the base,
/// the archive is smaller than without it, and it decodes every way with either.
#[test]
fn a_gguf_fine_tune_codes_against_a_gguf_base() {
    let (base_file, tune) = gguf_pair(&read(BASE), &read(TUNE));
    let dir = tempfile::tempdir().unwrap();
    let base_path = dir.path().join("base.gguf");
    std::fs::write(&base_path, &base_file).unwrap();
    let sc_path = dir.path().join("other").join("base.gguf.sc");
    std::fs::create_dir(sc_path.parent().unwrap()).unwrap();
    std::fs::write(
        &sc_path,
        encode_to_vec(&base_file, &Default::default()).unwrap(),
    )
    .unwrap();
    let (file, archive) = (
        Base::open(&base_path).unwrap(),
        Base::open(&sc_path).unwrap(),
    );
    for mode in [Mode::Fast, Mode::Best] {
        let plain = encode_to_vec(&tune, &EncodeOptions::new(mode)).unwrap();
        for base in [&file, &archive] {
            let opts = EncodeOptions {
                base: Some(base),
                ..EncodeOptions::new(mode)
            };
            let coded = encode_to_vec(&tune, &opts).unwrap();
            let info = inspect(&mut Cursor::new(&coded)).unwrap();
            assert_eq!(info.kind, sc::Kind::Gguf);
            assert_eq!(info.based_tensors, 8, "{mode}");
            assert!(
                coded.len() < plain.len() * 3 / 4,
                "{mode}: {} vs {}",
                coded.len(),
                plain.len()
            );
            let a = open(&coded);
            assert!(matches!(a.reference("q8"), Some(sc::Reference::Base(_))));
            for other in [&file, &archive] {
                let opts = DecodeOptions {
                    base: Some(other),
                    check_md5: true,
                    ..Default::default()
                };
                assert_eq!(decode_to_vec(&coded, &opts).unwrap(), tune);
                let mut streamed = Vec::new();
                sc::decode(&coded[..], &mut streamed, &opts).unwrap();
                assert_eq!(streamed, tune);
                let mut a = sc::Archive::open_with_base(Cursor::new(&coded), other.clone());
                let a = a.as_mut().unwrap();
                for t in parse(&tune).tensors {
                    let want = &tune[t.range.start as usize..t.range.end as usize];
                    assert_eq!(a.read_tensor(&t.name).unwrap(), want, "{}", t.name);
                }
            }
        }
    }
}

/// An extract from one shard of a split checkpoint is a whole file: the `split.*` keys that
/// say it is one of N are dropped, the other metadata kept.
#[test]
fn write_gguf_drops_the_keys_that_claim_a_split() {
    let mut metadata = vec![
        (
            "general.architecture".to_string(),
            Value::String("llama".into()),
        ),
        ("split.no".into(), Value::U16(1)),
        ("split.count".into(), Value::U16(3)),
        ("split.tensors.count".into(), Value::I32(3)),
    ];
    metadata.extend(gguf_every_value());
    let file = gguf_of(&read(BASE), &metadata);
    let archive = encode_to_vec(&file, &EncodeOptions::new(Mode::Fast)).unwrap();
    let mut a = open(&archive);
    let name = a.tensors()[0].name.clone();
    let mut out = Vec::new();
    a.write_gguf(&[&name], &mut out).unwrap();
    let got = parse(&out);
    let kept: Vec<_> = metadata
        .iter()
        .filter(|(k, _)| !k.starts_with("split."))
        .cloned()
        .collect();
    assert_eq!(got.metadata, kept);
    assert_eq!(got.tensors.len(), 1);
}

/// Extracting many tensors by name from an archive of many compares names
/// O((names + tensors) log tensors) times, not names times tensors (2 * 10^7 here).
#[test]
fn tensors_are_found_by_name_without_a_scan() {
    let n = 20_000usize;
    let f32 = ggml("F32");
    let names: Vec<String> = (0..n).map(|i| format!("blk.{i}.w")).collect();
    let data: Vec<[u8; 4]> = (0..n).map(|i| (i as f32).to_le_bytes()).collect();
    let tensors: Vec<(&str, &[u64], _, &[u8])> = names
        .iter()
        .zip(&data)
        .map(|(name, d)| (name.as_str(), &[1u64][..], f32, &d[..]))
        .collect();
    let file = write::file(3, &[], &tensors);
    let archive = encode_to_vec(&file, &EncodeOptions::new(Mode::Fast)).unwrap();
    let mut a = open(&archive);
    let wanted: Vec<&str> = names.iter().rev().step_by(10).map(String::as_str).collect();
    let before = sc::hook::done(sc::hook::Work::NamesCompared);
    for name in &wanted {
        assert!(a.tensor(name).is_some());
    }
    let mut out = Vec::new();
    a.write_gguf(&wanted, &mut out).unwrap();
    let compared = sc::hook::done(sc::hook::Work::NamesCompared) - before;
    let log = (n as f64).log2().ceil() as u64 + 1;
    let bound = 4 * (n + 2 * wanted.len()) as u64 * log;
    assert!(
        compared <= bound,
        "{compared} name comparisons (bound {bound})"
    );
    assert_eq!(parse(&out).tensors.len(), wanted.len());
}
