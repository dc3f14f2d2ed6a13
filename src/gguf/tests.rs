use super::*;

/// Writes GGUF files for the tests: metadata as (key, type, value bytes), tensors as
/// (name, dims, type, data), laid out as ggml lays them (each at the next aligned offset).
pub(crate) struct Builder {
    pub version: u32,
    pub alignment: u64,
    pub kvs: Vec<(String, u32, Vec<u8>)>,
    pub tensors: Vec<(String, Vec<u64>, u32, Vec<u8>)>,
}

pub(crate) fn string(s: &str) -> Vec<u8> {
    let mut v = (s.len() as u64).to_le_bytes().to_vec();
    v.extend_from_slice(s.as_bytes());
    v
}

impl Builder {
    pub fn new() -> Builder {
        Builder {
            version: 3,
            alignment: DEFAULT_ALIGNMENT,
            kvs: vec![("general.architecture".into(), 8, string("llama"))],
            tensors: Vec::new(),
        }
    }

    pub fn tensor(mut self, name: &str, dims: &[u64], type_id: u32, data: Vec<u8>) -> Builder {
        self.tensors
            .push((name.to_string(), dims.to_vec(), type_id, data));
        self
    }

    pub fn build(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.kvs.len() as u64).to_le_bytes());
        for (k, t, v) in &self.kvs {
            out.extend_from_slice(&string(k));
            out.extend_from_slice(&t.to_le_bytes());
            out.extend_from_slice(v);
        }
        let mut offset = 0u64;
        for (name, dims, t, data) in &self.tensors {
            out.extend_from_slice(&string(name));
            out.extend_from_slice(&(dims.len() as u32).to_le_bytes());
            for d in dims {
                out.extend_from_slice(&d.to_le_bytes());
            }
            out.extend_from_slice(&t.to_le_bytes());
            out.extend_from_slice(&offset.to_le_bytes());
            offset = (offset + data.len() as u64).next_multiple_of(self.alignment);
        }
        for (_, _, _, data) in &self.tensors {
            out.resize(
                (out.len() as u64).next_multiple_of(self.alignment) as usize,
                0,
            );
            out.extend_from_slice(data);
        }
        out
    }
}

fn parse(bytes: &[u8]) -> Result<GgufHeader, GgufError> {
    GgufHeader::parse(bytes, bytes.len() as u64)
}

fn two_tensors() -> Builder {
    Builder::new()
        .tensor("a", &[64, 2], 1, vec![7; 256])
        .tensor("b.q4_0", &[64], 2, vec![1; 36])
}

#[test]
fn reads_tensors_and_metadata() {
    let bytes = two_tensors().build();
    let h = parse(&bytes).unwrap();
    assert_eq!(h.version, 3);
    assert_eq!(h.alignment, 32);
    assert_eq!(
        h.get("general.architecture"),
        Some(&Value::String("llama".into()))
    );
    assert_eq!(h.data_start % 32, 0);
    assert_eq!(h.tensors.len(), 2);
    assert_eq!(h.tensors[0].range, h.data_start..h.data_start + 256);
    assert_eq!(h.tensors[1].ggml_type.name, "Q4_0");
    assert_eq!(h.tensors[1].range.end - h.tensors[1].range.start, 36);
    assert_eq!(&bytes[h.tensors[1].range.start as usize..][..36], &[1; 36]);
}

/// Every value type, arrays of numbers, strings and arrays among them, and version 2.
#[test]
fn reads_every_value_type() {
    let mut b = two_tensors();
    b.version = 2;
    let mut arrays = 9u32.to_le_bytes().to_vec(); // an array of two arrays of u16
    arrays.extend_from_slice(&2u64.to_le_bytes());
    for k in 0..2u16 {
        arrays.extend_from_slice(&2u32.to_le_bytes());
        arrays.extend_from_slice(&1u64.to_le_bytes());
        arrays.extend_from_slice(&k.to_le_bytes());
    }
    let mut strings = 8u32.to_le_bytes().to_vec();
    strings.extend_from_slice(&2u64.to_le_bytes());
    strings.extend_from_slice(&string("<s>"));
    strings.extend_from_slice(&string("ü"));
    let mut floats = 6u32.to_le_bytes().to_vec();
    floats.extend_from_slice(&3u64.to_le_bytes());
    for f in [0.5f32, -1.0, 2.0] {
        floats.extend_from_slice(&f.to_le_bytes());
    }
    let values: Vec<(u32, Vec<u8>, Value)> = vec![
        (0, vec![200], Value::U8(200)),
        (1, vec![0xff], Value::I8(-1)),
        (2, 513u16.to_le_bytes().to_vec(), Value::U16(513)),
        (3, (-2i16).to_le_bytes().to_vec(), Value::I16(-2)),
        (4, 7u32.to_le_bytes().to_vec(), Value::U32(7)),
        (5, (-7i32).to_le_bytes().to_vec(), Value::I32(-7)),
        (6, 1.5f32.to_le_bytes().to_vec(), Value::F32(1.5)),
        (7, vec![1], Value::Bool(true)),
        (8, string("text"), Value::String("text".into())),
        (
            9,
            floats.clone(),
            Value::Numbers(6, 3, floats[12..].to_vec()),
        ),
        (9, strings, Value::Strings(vec!["<s>".into(), "ü".into()])),
        (10, u64::MAX.to_le_bytes().to_vec(), Value::U64(u64::MAX)),
        (11, i64::MIN.to_le_bytes().to_vec(), Value::I64(i64::MIN)),
        (12, 0.25f64.to_le_bytes().to_vec(), Value::F64(0.25)),
    ];
    for (k, (t, bytes, _)) in values.iter().enumerate() {
        b.kvs.push((format!("k{k}"), *t, bytes.clone()));
    }
    b.kvs.push(("nested".into(), 9, arrays));
    let h = parse(&b.build()).unwrap();
    assert_eq!(h.version, 2);
    for (k, (_, _, want)) in values.iter().enumerate() {
        assert_eq!(h.get(&format!("k{k}")), Some(want), "k{k}");
    }
    match h.get("nested") {
        Some(Value::Arrays(a)) => assert_eq!(a.len(), 2),
        other => panic!("{other:?}"),
    }
}

#[test]
fn alignment_is_applied() {
    let mut b = two_tensors();
    b.alignment = 64;
    b.kvs
        .push(("general.alignment".into(), 4, 64u32.to_le_bytes().to_vec()));
    let h = parse(&b.build()).unwrap();
    assert_eq!(h.alignment, 64);
    assert_eq!(h.data_start % 64, 0);
    assert_eq!(h.tensors[1].range.start - h.data_start, 256);
    for bad in [
        (4, 48u32.to_le_bytes().to_vec()),
        (10, 64u64.to_le_bytes().to_vec()),
    ] {
        let mut b = two_tensors();
        b.kvs.push(("general.alignment".into(), bad.0, bad.1));
        assert_eq!(parse(&b.build()), Err(GgufError::Alignment));
    }
}

#[test]
fn zero_element_tensors_are_valid() {
    let b = Builder::new()
        .tensor("empty", &[0, 8], 12, vec![])
        .tensor("a", &[32], 8, vec![3; 34]);
    let h = parse(&b.build()).unwrap();
    assert_eq!(h.tensors[0].values(), 0);
    assert!(h.tensors[0].range.is_empty());
}

fn problem(bytes: &[u8]) -> String {
    parse(bytes).unwrap_err().to_string()
}

#[test]
fn lying_tensors_are_refused() {
    let cases: Vec<(Builder, &str)> = vec![
        (
            Builder::new().tensor("t", &[30], 2, vec![0; 18]),
            "not whole blocks",
        ),
        (
            Builder::new().tensor("t", &[32], 77, vec![0; 18]),
            "unknown type 77",
        ),
        (
            Builder::new().tensor("t", &[u64::MAX, 2], 0, vec![0; 4]),
            "overflows",
        ),
        (
            Builder::new().tensor("t", &[1, 1, 1, 1, 1], 0, vec![0; 4]),
            "5 dimensions",
        ),
        (
            Builder::new()
                .tensor("t", &[4], 0, vec![0; 16])
                .tensor("t", &[4], 0, vec![0; 16]),
            "appears twice",
        ),
    ];
    for (b, want) in cases {
        let got = problem(&b.build());
        assert!(got.contains(want), "{got} lacks {want}");
    }
}

/// Offsets patched after building: past the end, unaligned, overlapping.
#[test]
fn lying_offsets_are_refused() {
    let b = two_tensors();
    let bytes = b.build();
    let h = parse(&bytes).unwrap();
    // The second tensor's offset field is the last 8 bytes of the header.
    let at = h.header_len as usize - 8;
    for (offset, want) in [
        (1u64 << 40, "past the end"),
        (u64::MAX - 31, "past the end"),
        (33, "not aligned"),
        (128, "overlaps"),
    ] {
        let mut bad = bytes.clone();
        bad[at..at + 8].copy_from_slice(&offset.to_le_bytes());
        let got = problem(&bad);
        assert!(got.contains(want), "{offset}: {got} lacks {want}");
    }
}

/// Counts in the billions are refused before anything is allocated for them.
#[test]
fn lying_counts_are_refused() {
    let bytes = two_tensors().build();
    for (at, what) in [(8, "tensor count"), (16, "metadata count")] {
        let mut bad = bytes.clone();
        bad[at..at + 8].copy_from_slice(&(3u64 << 32).to_le_bytes());
        assert!(problem(&bad).contains(what));
    }
    let mut b = Builder::new();
    let mut huge = 0u32.to_le_bytes().to_vec();
    huge.extend_from_slice(&u64::MAX.to_le_bytes());
    b.kvs.push(("a".into(), 9, huge));
    assert!(problem(&b.build()).contains("array length"));
}

/// Every prefix of a valid file is an error (or, once the header is whole, a tensor past the
/// end), never a panic.
#[test]
fn every_truncation_is_an_error() {
    let bytes = two_tensors().build();
    for n in 0..bytes.len() {
        assert!(parse(&bytes[..n]).is_err(), "{n}");
    }
}

#[test]
fn other_files_are_not_gguf() {
    assert_eq!(parse(b"GGU"), Err(GgufError::NotGguf));
    assert_eq!(
        parse(b"{\"a\": 1}xxxxxxxxxxxxxxxx"),
        Err(GgufError::NotGguf)
    );
    let mut v1 = two_tensors().build();
    v1[4] = 1;
    assert_eq!(parse(&v1), Err(GgufError::Version(1)));
    let mut b = Builder::new();
    b.kvs
        .push(("bad".into(), 8, vec![1, 0, 0, 0, 0, 0, 0, 0, 0xff]));
    assert_eq!(parse(&b.build()), Err(GgufError::Utf8("metadata string")));
    let mut b = Builder::new();
    b.kvs.push(("bad".into(), 13, vec![0]));
    assert_eq!(parse(&b.build()), Err(GgufError::ValueType(13)));
    let mut b = Builder::new();
    b.kvs.push(("bad".into(), 7, vec![2]));
    assert_eq!(parse(&b.build()), Err(GgufError::Bool(2)));
    let mut b = Builder::new();
    b.kvs.push(("general.architecture".into(), 8, string("x")));
    assert!(matches!(parse(&b.build()), Err(GgufError::DuplicateKey(_))));
}

/// Arrays nested deeper than the reader follows are refused, not recursed into.
#[test]
fn deep_nesting_is_refused() {
    let mut value = Vec::new();
    for _ in 0..100 {
        value.extend_from_slice(&9u32.to_le_bytes());
        value.extend_from_slice(&1u64.to_le_bytes());
    }
    value.extend_from_slice(&0u32.to_le_bytes());
    value.extend_from_slice(&0u64.to_le_bytes());
    let mut b = Builder::new();
    b.kvs.push(("deep".into(), 9, value));
    assert_eq!(parse(&b.build()), Err(GgufError::ValueType(9)));
}

/// The committed excerpt of real checkpoints (`testdata/make_gguf_excerpt.py`): every tensor
/// of each type the excerpt holds, in place, and the size of each from its type and shape.
#[test]
fn reads_the_real_excerpt() {
    let bytes = include_bytes!("../../testdata/excerpt.gguf");
    let h = parse(bytes).unwrap();
    let mut names: Vec<&str> = h.tensors.iter().map(|t| t.ggml_type.name).collect();
    names.sort();
    names.dedup();
    assert_eq!(names, ["F32", "Q4_1", "Q4_K", "Q5_0", "Q6_K", "Q8_0"]);
    for t in &h.tensors {
        let gt = t.ggml_type;
        let blocks = t.values() / u64::from(gt.block_values);
        assert_eq!(
            t.range.end - t.range.start,
            blocks * u64::from(gt.block_bytes)
        );
        assert_eq!((t.range.start - h.data_start) % h.alignment, 0);
    }
    assert!(matches!(h.get("tokenizer.ggml.tokens"), Some(Value::Strings(s)) if s.len() == 64));
    assert_eq!(
        h.get("general.architecture"),
        Some(&Value::String("llama".into()))
    );
}

/// The parse without metadata finds what the full one does, refuses what it refuses (the same
/// error), and keeps no values; the walk by lengths finds where each header ends and reads no
/// further than a prefix holds.
#[test]
fn lighter_parses_agree_with_the_full_one() {
    let mut bad_utf8 = two_tensors();
    bad_utf8
        .kvs
        .push(("bad".into(), 8, vec![1, 0, 0, 0, 0, 0, 0, 0, 0xff]));
    let mut bad_in_array = two_tensors();
    let mut strings = 8u32.to_le_bytes().to_vec();
    strings.extend_from_slice(&2u64.to_le_bytes());
    strings.extend_from_slice(&string("ok"));
    strings.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0, 0xc3]);
    bad_in_array.kvs.push(("bad".into(), 9, strings));
    let mut bad_bools = two_tensors();
    let mut bools = 7u32.to_le_bytes().to_vec();
    bools.extend_from_slice(&2u64.to_le_bytes());
    bools.extend_from_slice(&[1, 5]);
    bad_bools.kvs.push(("bad".into(), 9, bools));
    let files = [
        two_tensors().build(),
        include_bytes!("../../testdata/excerpt.gguf").to_vec(),
        bad_utf8.build(),
        bad_in_array.build(),
        bad_bools.build(),
    ];
    for (k, bytes) in files.iter().enumerate() {
        let len = bytes.len() as u64;
        let full = parse(bytes);
        let tensors = GgufHeader::parse_tensors(bytes, len);
        match (&full, &tensors) {
            (Ok(f), Ok(t)) => {
                assert!(!f.metadata.is_empty() && t.metadata.is_empty(), "file {k}");
                assert_eq!(
                    GgufHeader {
                        metadata: Vec::new(),
                        ..f.clone()
                    },
                    *t,
                    "file {k}"
                );
            }
            _ => assert_eq!(full, tensors, "file {k}"),
        }
        // Bad values are the full parses' to find; the walk reads lengths only.
        let end = GgufHeader::len_in(bytes, len).unwrap();
        assert_eq!(full.map_or(end, |h| h.header_len), end, "file {k}");
        for n in 0..end as usize {
            assert!(
                GgufHeader::len_in(&bytes[..n], len).is_err(),
                "file {k} cut at {n}"
            );
        }
    }
}
