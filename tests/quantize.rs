//! The port of llama.cpp's reference quantizers (`sc::gguf::quant`) against the bytes llama.cpp
//! itself makes: `testdata/quant-rows.bin` holds f32 rows (real weights of all-MiniLM-L6-v2 and
//! wordllama, and edge rows: zeros, constants, huge values, subnormals, NaN, infinities, values
//! near F16 overflow), `testdata/quant-expected.bin` what llama.cpp at 0c1e570 quantized them
//! to, and the hashes of its F16 and BF16 conversions over every half and a sweep of f32 bit
//! patterns. Both are made by `testdata/make_quant_vectors.sh` (layouts in
//! `testdata/make_quant_rows.py` and `testdata/quant_vectors.c`).
//!
//! `testdata/quant-sample.txt` holds, per type, the block count and FNV-1a-64 hash of what
//! llama.cpp made of every float tensor of `testdata/sample.safetensors` (widened to f32, in
//! rows of 256): a wider net than the bytes above, which say where a difference is.
//!
//! The importance-matrix paths (`quantize_rows_weighted`) are checked the same way:
//! `testdata/quant-weights.bin` holds weight vectors (imatrix-like, and edge ones) and jobs (a
//! row and its weights), `testdata/quant-expected-weighted.bin` what llama-quantize's entry
//! points (`quantize_q4_0` to `quantize_q6_K` given `quant_weights`) made of them, and
//! `testdata/quant-sample-weighted.txt` the sample's hashes with weights. The imatrix file
//! reader is checked on small files made here.
//!
//! `-- --nocapture` prints blocks compared and identical per type.

use proptest::prelude::*;
use sc::gguf::quant::imatrix::{parse_imatrix, read_imatrix};
use sc::gguf::quant::{
    half, quantize_row, quantize_rows, quantize_rows_weighted, seed_to_f32, LLAMA_CPP_COMMIT,
};
use sc::gguf::types::{GgmlType, TYPES};
use sc::gguf::Value;

const ROWS: &[u8] = include_bytes!("../testdata/quant-rows.bin");
const EXPECTED: &[u8] = include_bytes!("../testdata/quant-expected.bin");
const WEIGHTS: &[u8] = include_bytes!("../testdata/quant-weights.bin");
const EXPECTED_WEIGHTED: &[u8] = include_bytes!("../testdata/quant-expected-weighted.bin");

/// The quantized types the port makes.
const QUANTIZED: &[&str] = &[
    "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K",
];

struct Bytes<'a>(&'a [u8]);

impl<'a> Bytes<'a> {
    fn take(&mut self, n: usize) -> &'a [u8] {
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        head
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take(4).try_into().unwrap())
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take(8).try_into().unwrap())
    }
    /// A u32 count of types, then per type its u32 id, u32 length and bytes.
    fn types(&mut self) -> Vec<(u32, &'a [u8])> {
        (0..self.u32())
            .map(|_| {
                let id = self.u32();
                let n = self.u32() as usize;
                (id, self.take(n))
            })
            .collect()
    }
    /// A u32 length, then that many f32.
    fn f32s(&mut self) -> Vec<f32> {
        let n = self.u32() as usize;
        let raw = self.take(4 * n);
        raw.chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }
}

fn rows() -> Vec<Vec<f32>> {
    let mut b = Bytes(ROWS);
    assert_eq!(b.take(8), b"SCQROWS1");
    let n = b.u32();
    let rows = (0..n).map(|_| b.f32s()).collect();
    assert!(b.0.is_empty());
    rows
}

/// What the expected file holds: each type's bytes by id, then each conversion's count and hash
/// by code.
struct Expected<'a> {
    types: Vec<(u32, &'a [u8])>,
    conversions: Vec<(u32, u64, u64)>,
}

fn expected() -> Expected<'static> {
    let mut b = Bytes(EXPECTED);
    assert_eq!(b.take(8), b"SCQEXP01");
    let types = b.types();
    let conversions = (0..b.u32()).map(|_| (b.u32(), b.u64(), b.u64())).collect();
    assert!(b.0.is_empty());
    Expected { types, conversions }
}

fn ty(name: &str) -> &'static GgmlType {
    TYPES.iter().find(|t| t.name == name).unwrap()
}

/// Every block of every type is llama.cpp's, byte for byte.
#[test]
fn every_type_matches_llama_cpp() {
    let rows = rows();
    let expected = expected();
    assert_eq!(LLAMA_CPP_COMMIT, "0c1e570");
    assert_eq!(expected.types.len(), QUANTIZED.len());
    let mut failures = Vec::new();
    for name in QUANTIZED {
        let t = ty(name);
        let want = expected.types.iter().find(|(id, _)| *id == t.id).unwrap().1;
        let got = rows
            .iter()
            .enumerate()
            .map(|(r, row)| (format!("row {r}"), quantize_row(t, row).unwrap()));
        let first_diff = compare_blocks(name, t, want, got);
        failures.extend(first_diff);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Compares `got` (each piece labelled) block for block with `want`, the bytes llama.cpp made
/// of type `t`: prints the blocks compared and identical, checks the lengths, and returns the
/// first difference.
fn compare_blocks(
    name: &str,
    t: &GgmlType,
    want: &[u8],
    got: impl Iterator<Item = (String, Vec<u8>)>,
) -> Option<String> {
    let bb = t.block_bytes as usize;
    let (mut at, mut compared, mut identical, mut first_diff) = (0, 0, 0, None);
    for (label, got) in got {
        for (b, block) in got.chunks_exact(bb).enumerate() {
            let theirs = &want[at..at + bb];
            compared += 1;
            if block == theirs {
                identical += 1;
            } else if first_diff.is_none() {
                first_diff = Some(format!(
                    "{name}: {label} block {b} differs\n  port:      {block:02x?}\n  llama.cpp: {theirs:02x?}"
                ));
            }
            at += bb;
        }
    }
    assert_eq!(
        at,
        want.len(),
        "{name}: the expected bytes are another length"
    );
    println!("{name}: {compared} blocks compared, {identical} identical");
    first_diff
}

/// The rows of 256 of every float tensor of sample.safetensors, in data order, widened as
/// llama-quantize widens a seed (`make_quant_rows.py --sample`).
fn sample_rows() -> Vec<f32> {
    let file = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/testdata/sample.safetensors"
    ))
    .unwrap();
    let json_len = sc::safetensors::json_len(file[..8].try_into().unwrap()) as usize;
    let header = sc::safetensors::Header::parse(&file[8..8 + json_len], None).unwrap();
    let payload = &file[8 + json_len..];
    let mut tensors = header.tensors;
    tensors.sort_by_key(|t| t.begin);
    let mut values = Vec::new();
    for t in tensors {
        if !["F32", "F16", "BF16"].contains(&t.dtype_name.as_str()) {
            continue;
        }
        let seed = ty(&t.dtype_name);
        let v = seed_to_f32(seed, &payload[t.begin as usize..t.end as usize]).unwrap();
        values.extend_from_slice(&v[..v.len() / 256 * 256]);
    }
    values
}

/// Every type made of the whole sample hashes as llama.cpp's does.
#[test]
fn sample_tensors_hash_as_llama_cpp() {
    let expected = include_str!("../testdata/quant-sample.txt");
    assert_eq!(expected.lines().count(), QUANTIZED.len());
    sample_hashes(expected, None);
}

/// Every weighted type made of the whole sample, each row weighted by the first vector of 256,
/// hashes as llama-quantize's does.
#[test]
fn sample_tensors_weighted_hash_as_llama_cpp() {
    let expected = include_str!("../testdata/quant-sample-weighted.txt");
    assert_eq!(expected.lines().count(), WEIGHTED.len());
    let weights = weights().0;
    let first = weights.iter().find(|w| w.len() == 256).unwrap();
    sample_hashes(expected, Some(first));
}

/// Checks each line (type, blocks, hash) of `expected` against the sample's rows of 256
/// quantized with `weights`.
fn sample_hashes(expected: &str, weights: Option<&[f32]>) {
    let values = sample_rows();
    let mut failures = Vec::new();
    for line in expected.lines() {
        let [name, blocks, hash] = line.split(' ').collect::<Vec<_>>()[..] else {
            panic!("bad line {line:?}");
        };
        let t = ty(name);
        let bytes = quantize_rows_weighted(t, &values, 256, weights).unwrap();
        let got = (
            bytes.len() / t.block_bytes as usize,
            format!("{:016x}", fnv(FNV_START, &bytes)),
        );
        println!(
            "{name}: {} blocks hashed, {}",
            got.0,
            if got.1 == hash {
                "identical"
            } else {
                "DIFFERENT"
            }
        );
        if (got.0.to_string().as_str(), got.1.as_str()) != (blocks, hash) {
            failures.push(format!(
                "{name}: {} blocks hash {}, llama.cpp {blocks} {hash}",
                got.0, got.1
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The first `n` rows of 256 of quant-rows.bin, one after the other.
fn rows_of_256(n: usize) -> Vec<f32> {
    let rows = rows();
    let short = rows.iter().filter(|r| r.len() == 256);
    short.take(n).flatten().copied().collect()
}

/// The row helper gives each row the bytes of `quantize_row`.
#[test]
fn rows_in_parallel_are_rows_one_by_one() {
    let values = rows_of_256(usize::MAX);
    for name in QUANTIZED {
        let t = ty(name);
        let one_by_one: Vec<u8> = values
            .chunks(256)
            .flat_map(|r| quantize_row(t, r).unwrap())
            .collect();
        assert_eq!(
            quantize_rows(t, &values, 256).unwrap(),
            one_by_one,
            "{name}"
        );
    }
    assert!(quantize_rows(ty("Q4_K"), &values, 0).is_err());
    assert!(quantize_rows(ty("Q4_K"), &values[..300], 100).is_err());
}

const FNV_START: u64 = 0xcbf2_9ce4_8422_2325;

fn fnv(h: u64, bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(h, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// The f32 bit patterns the narrowing conversions were hashed over (`sweep` in
/// quant_vectors.c): the row values, then 2^20 spread patterns each with its F16 and BF16 ties.
fn sweep(rows: &[Vec<f32>]) -> Vec<u32> {
    let mut out: Vec<u32> = rows.iter().flatten().map(|v| v.to_bits()).collect();
    for i in 0..1u32 << 20 {
        let p = i.wrapping_mul(0x9E37_79B9);
        out.extend([p, (p & !0x1FFF) | 0x1000, (p & !0xFFFF) | 0x8000]);
    }
    out
}

/// The F16 and BF16 conversions are ggml's on every half and bf16 and on the f32 sweep.
#[test]
fn seed_conversions_match_ggml() {
    let expected = expected();
    let patterns = sweep(&rows());
    let want = |code: u32| {
        let (_, n, h) = *expected.conversions.iter().find(|c| c.0 == code).unwrap();
        (n, h)
    };
    let widen = |f: fn(u16) -> f32| {
        let h = (0..=u16::MAX).fold(FNV_START, |h, x| fnv(h, &f(x).to_le_bytes()));
        (65536, h)
    };
    let narrow = |f: fn(f32) -> u16| {
        let h = patterns.iter().fold(FNV_START, |h, &p| {
            fnv(h, &f(f32::from_bits(p)).to_le_bytes())
        });
        (patterns.len() as u64, h)
    };
    assert_eq!(widen(half::f16_to_f32), want(0), "F16 -> F32");
    assert_eq!(widen(half::bf16_to_f32), want(1), "BF16 -> F32");
    assert_eq!(narrow(half::f32_to_f16), want(2), "F32 -> F16");
    assert_eq!(narrow(half::f32_to_bf16), want(3), "F32 -> BF16");
}

/// The plain targets and seeds: F16 and BF16 rows narrow and widen through the same functions,
/// F32 is its bytes.
#[test]
fn plain_rows_and_seeds() {
    let row: Vec<f32> = rows()[0].clone();
    for name in ["F32", "F16", "BF16"] {
        let t = ty(name);
        let bytes = quantize_row(t, &row).unwrap();
        assert_eq!(bytes.len(), row.len() * t.block_bytes as usize);
        let back = seed_to_f32(t, &bytes).unwrap();
        let again = quantize_row(t, &back).unwrap();
        assert_eq!(again, bytes, "{name}: narrowing a widened row changes it");
    }
    let f32s = quantize_row(ty("F32"), &row).unwrap();
    assert_eq!(seed_to_f32(ty("F32"), &f32s).unwrap(), row);
    let err = seed_to_f32(ty("F16"), &[0, 0, 0]).unwrap_err().to_string();
    assert!(err.contains("3 bytes"), "{err}");
    assert!(seed_to_f32(ty("Q4_0"), &[0; 18]).is_err());
}

/// A row that is not whole blocks, or a type without a quantizer, is an error naming it.
#[test]
fn bad_rows_and_types_are_errors() {
    let e = quantize_row(ty("Q4_K"), &[0.0; 255])
        .unwrap_err()
        .to_string();
    assert!(e.contains("255") && e.contains("Q4_K"), "{e}");
    let e = quantize_row(ty("Q8_0"), &[0.0; 33])
        .unwrap_err()
        .to_string();
    assert!(e.contains("33") && e.contains("Q8_0"), "{e}");
    let e = quantize_row(ty("IQ2_XXS"), &[0.0; 256])
        .unwrap_err()
        .to_string();
    assert!(e.contains("IQ2_XXS"), "{e}");
    assert!(quantize_row(ty("Q8_0"), &[]).unwrap().is_empty());
}

/// The types llama-quantize quantizes with weights, in the order of the weighted vectors.
const WEIGHTED: &[&str] = &[
    "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K",
];

/// The weight vectors of quant-weights.bin and its jobs (row, vector).
fn weights() -> (Vec<Vec<f32>>, Vec<(usize, usize)>) {
    let mut b = Bytes(WEIGHTS);
    assert_eq!(b.take(8), b"SCQWGT01");
    let vectors = (0..b.u32()).map(|_| b.f32s()).collect();
    let jobs = (0..b.u32())
        .map(|_| (b.u32() as usize, b.u32() as usize))
        .collect();
    assert!(b.0.is_empty());
    (vectors, jobs)
}

/// Each job's row quantized to `name` with its weights is llama-quantize's, block for block.
fn weighted_matches_llama_cpp(name: &str) {
    let (rows, (vectors, jobs)) = (rows(), weights());
    let mut b = Bytes(EXPECTED_WEIGHTED);
    assert_eq!(b.take(8), b"SCQEXPW1");
    let types = b.types();
    assert!(b.0.is_empty());
    assert_eq!(types.len(), WEIGHTED.len());
    let t = ty(name);
    let want = types.iter().find(|(id, _)| *id == t.id).unwrap().1;
    let got = jobs.iter().enumerate().map(|(j, &(r, v))| {
        let row = &rows[r];
        let bytes = quantize_rows_weighted(t, row, row.len(), Some(&vectors[v])).unwrap();
        (format!("job {j} (row {r}, weights {v})"), bytes)
    });
    let first_diff = compare_blocks(name, t, want, got);
    assert!(first_diff.is_none(), "{}", first_diff.unwrap());
}

macro_rules! weighted_tests {
    ($($test:ident $name:literal),* $(,)?) => {$(
        /// The type's importance-matrix path is llama-quantize's on every job.
        #[test]
        fn $test() {
            weighted_matches_llama_cpp($name);
        }
    )*};
}

weighted_tests! {
    weighted_q4_0_matches_llama_cpp "Q4_0",
    weighted_q4_1_matches_llama_cpp "Q4_1",
    weighted_q5_0_matches_llama_cpp "Q5_0",
    weighted_q5_1_matches_llama_cpp "Q5_1",
    weighted_q8_0_matches_llama_cpp "Q8_0",
    weighted_q2_k_matches_llama_cpp "Q2_K",
    weighted_q3_k_matches_llama_cpp "Q3_K",
    weighted_q4_k_matches_llama_cpp "Q4_K",
    weighted_q5_k_matches_llama_cpp "Q5_K",
    weighted_q6_k_matches_llama_cpp "Q6_K",
}

/// No weights is the reference path; so are the types whose entry points ignore them.
#[test]
fn weights_the_entry_points_ignore() {
    let rows = rows();
    let row = &rows[0];
    let w: Vec<f32> = (0..row.len()).map(|i| 0.5 + (i % 7) as f32).collect();
    for name in QUANTIZED.iter().chain(&["F32", "F16", "BF16"]) {
        let t = ty(name);
        let plain = quantize_rows(t, row, row.len()).unwrap();
        assert_eq!(
            quantize_rows_weighted(t, row, row.len(), None).unwrap(),
            plain
        );
        let weighted = quantize_rows_weighted(t, row, row.len(), Some(&w)).unwrap();
        let ignores = ["Q8_0", "Q8_K", "F32", "F16", "BF16"].contains(name);
        assert_eq!(weighted == plain, ignores, "{name}");
    }
}

/// A 3-D tensor's rows take their expert's weights: the rows split evenly among the vectors.
#[test]
fn experts_take_their_own_weights() {
    let values = rows_of_256(6);
    let w: Vec<f32> = (0..512).map(|i| 1.0 + (i * 37 % 101) as f32).collect();
    for name in WEIGHTED {
        let t = ty(name);
        let all = quantize_rows_weighted(t, &values, 256, Some(&w)).unwrap();
        let mut each = quantize_rows_weighted(t, &values[..768], 256, Some(&w[..256])).unwrap();
        each.extend(quantize_rows_weighted(t, &values[768..], 256, Some(&w[256..])).unwrap());
        assert_eq!(all, each, "{name}");
    }
    let t = ty("Q4_K");
    for (n, rows_of) in [(255, 6), (0, 6), (256 * 4, 6), (256 * 7, 6)] {
        let e = quantize_rows_weighted(t, &values[..256 * rows_of], 256, Some(&w.repeat(4)[..n]))
            .unwrap_err()
            .to_string();
        assert!(e.contains(&format!("{n} importance weights")), "{e}");
    }
    let e = quantize_rows_weighted(t, &values[..300], 256, Some(&w[..256])).unwrap_err();
    assert!(e.to_string().contains("300 values"), "{e}");
}

/// A GGUF imatrix as llama-imatrix writes it: per tensor `NAME.in_sum2` (a row of sums per
/// expert) and `NAME.counts`, with the three metadata keys.
fn gguf_imatrix(metadata: &[(&str, Value)], tensors: &[(&str, &[u64], &str, &[f32])]) -> Vec<u8> {
    let metadata: Vec<(String, Value)> = metadata
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    let data: Vec<Vec<u8>> = tensors
        .iter()
        .map(|t| t.3.iter().flat_map(|v| v.to_le_bytes()).collect())
        .collect();
    let tensors: Vec<(&str, &[u64], &GgmlType, &[u8])> = tensors
        .iter()
        .zip(&data)
        .map(|(t, d)| (t.0, t.1, ty(t.2), &d[..]))
        .collect();
    sc::gguf::write::file(3, &metadata, &tensors)
}

fn imatrix_metadata() -> Vec<(&'static str, Value)> {
    vec![
        ("general.type", Value::String("imatrix".into())),
        (
            "imatrix.datasets",
            Value::Strings(vec!["wiki.train.raw".into()]),
        ),
        ("imatrix.chunk_count", Value::U32(10)),
        ("imatrix.chunk_size", Value::U32(512)),
    ]
}

/// The GGUF layout reads as llama-quantize reads it: sums over counts, per expert, 1 where an
/// expert counted nothing; bad files are one-line errors, never panics.
#[test]
fn imatrix_gguf_files() {
    let sums = [2.0, 4.0, 6.0, 8.0, 1.0, 1.0, 1.0, 1.0];
    let file = gguf_imatrix(
        &imatrix_metadata(),
        &[
            ("blk.0.ffn_up_exps.weight.in_sum2", &[4, 2], "F32", &sums),
            (
                "blk.0.ffn_up_exps.weight.counts",
                &[1, 2],
                "F32",
                &[2.0, 0.0],
            ),
            (
                "output.weight.in_sum2",
                &[4, 1],
                "F32",
                &[3.0, 6.0, 9.0, 0.0],
            ),
            ("output.weight.counts", &[1, 1], "F32", &[2.6]),
        ],
    );
    let m = parse_imatrix(&file).unwrap();
    assert!(!m.legacy);
    assert_eq!(
        (m.datasets.clone(), m.chunk_count),
        (vec!["wiki.train.raw".to_string()], 10)
    );
    let up = m
        .for_tensor("blk.0.ffn_up_exps.weight", 4, 2)
        .unwrap()
        .unwrap();
    assert_eq!(up, [1.0, 2.0, 3.0, 4.0, 1.0, 1.0, 1.0, 1.0]);
    // The count is rounded to an integer (3) before dividing.
    assert_eq!(
        m.for_tensor("output.weight", 4, 1).unwrap().unwrap(),
        [1.0, 2.0, 3.0, 0.0]
    );
    assert_eq!(m.for_tensor("blk.1.attn_q.weight", 4, 1).unwrap(), None);
    let e = m.for_tensor("output.weight", 8, 1).unwrap_err().to_string();
    assert!(
        e.contains("output.weight") && e.contains("4 weights"),
        "{e}"
    );

    let path = std::env::temp_dir().join(format!("sc-imatrix-{}.gguf", std::process::id()));
    std::fs::write(&path, &file).unwrap();
    assert_eq!(read_imatrix(&path).unwrap(), m);
    std::fs::remove_file(&path).unwrap();

    let err = |bytes: &[u8]| parse_imatrix(bytes).unwrap_err().to_string();
    let check = |e: String, what: &str| {
        assert!(
            e.contains(what) && !e.contains('\n'),
            "{e:?} does not say {what:?}"
        );
    };
    let mut meta = imatrix_metadata();
    meta.retain(|(k, _)| *k != "imatrix.chunk_size");
    let t: &[(&str, &[u64], &str, &[f32])] = &[
        ("a.in_sum2", &[2, 1], "F32", &[1.0, 2.0]),
        ("a.counts", &[1, 1], "F32", &[1.0]),
    ];
    check(err(&gguf_imatrix(&meta, t)), "imatrix.chunk_size");
    check(err(&gguf_imatrix(&imatrix_metadata(), &t[..1])), "without");
    check(err(&gguf_imatrix(&imatrix_metadata(), &[])), "no tensors");
    let f16: &[(&str, &[u64], &str, &[f32])] = &[
        ("a.in_sum2", &[2, 1], "F32", &[1.0, 2.0]),
        ("a.counts", &[2, 1], "F16", &[1.0]),
    ];
    check(err(&gguf_imatrix(&imatrix_metadata(), f16)), "F32");
    let nan: &[(&str, &[u64], &str, &[f32])] = &[
        ("a.in_sum2", &[2, 1], "F32", &[1.0, f32::INFINITY]),
        ("a.counts", &[1, 1], "F32", &[1.0]),
    ];
    check(err(&gguf_imatrix(&imatrix_metadata(), nan)), "non-finite");
    let uneven: &[(&str, &[u64], &str, &[f32])] = &[
        ("a.in_sum2", &[3, 1], "F32", &[1.0, 2.0, 3.0]),
        ("a.counts", &[1, 2], "F32", &[1.0, 1.0]),
    ];
    check(
        err(&gguf_imatrix(&imatrix_metadata(), uneven)),
        "3 sums for 2 counts",
    );
    // Cut anywhere: an error, unless only the padding after the last tensor is gone.
    for n in 0..file.len() {
        match parse_imatrix(&file[..n]) {
            Ok(cut) => assert!(cut == m && n >= file.len() - 32, "cut at {n}"),
            Err(e) => check(e.to_string(), "imatrix"),
        }
    }
}

/// The legacy layout: the values divided by `ncall` where positive, the name read up to a NUL,
/// the trailing chunk count and dataset optional; bad files are one-line errors, never panics
/// nor allocations the bytes do not hold.
#[test]
fn imatrix_legacy_files() {
    fn entry(out: &mut Vec<u8>, name: &[u8], ncall: i32, values: &[f32]) {
        out.extend((name.len() as i32).to_le_bytes());
        out.extend(name);
        out.extend(ncall.to_le_bytes());
        out.extend((values.len() as i32).to_le_bytes());
        out.extend(values.iter().flat_map(|v| v.to_le_bytes()));
    }
    let mut file = 2i32.to_le_bytes().to_vec();
    entry(&mut file, b"blk.0.attn_q.weight", 4, &[4.0, 8.0, 1.0]);
    entry(&mut file, b"output.weight\0junk", 0, &[5.0, 6.0]);
    let entries = file.len();
    file.extend(7i32.to_le_bytes());
    file.extend(4i32.to_le_bytes());
    file.extend(b"wiki");
    let m = parse_imatrix(&file).unwrap();
    assert!(m.legacy);
    assert_eq!(
        (m.datasets.clone(), m.chunk_count),
        (vec!["wiki".to_string()], 7)
    );
    assert_eq!(m.weights["blk.0.attn_q.weight"], [1.0, 2.0, 0.25]);
    assert_eq!(m.weights["output.weight"], [5.0, 6.0]);
    // The trailer is optional, and read as far as it goes.
    for n in entries..file.len() {
        assert_eq!(parse_imatrix(&file[..n]).unwrap().weights, m.weights);
    }
    for n in 0..entries {
        let e = parse_imatrix(&file[..n]).unwrap_err().to_string();
        assert!(e.contains("imatrix") && !e.contains('\n'), "{e}");
    }
    let mut huge = 1i32.to_le_bytes().to_vec();
    entry(&mut huge, b"a", 1, &[1.0]);
    huge[4 + 4 + 1 + 4..][..4].copy_from_slice(&i32::MAX.to_le_bytes());
    let e = parse_imatrix(&huge).unwrap_err().to_string();
    assert!(e.contains("ends inside entry 1"), "{e}");
    for (bytes, what) in [
        (0i32.to_le_bytes().to_vec(), "0 entries"),
        (
            [1i32.to_le_bytes(), (-1i32).to_le_bytes()].concat(),
            "name length is -1",
        ),
    ] {
        let e = parse_imatrix(&bytes).unwrap_err().to_string();
        assert!(e.contains(what), "{e}");
    }
    let mut zero = 1i32.to_le_bytes().to_vec();
    entry(&mut zero, b"a", 1, &[]);
    assert!(parse_imatrix(&zero)
        .unwrap_err()
        .to_string()
        .contains("0 values"));
    let mut inf = 1i32.to_le_bytes().to_vec();
    entry(&mut inf, b"a", 1, &[f32::NAN]);
    assert!(parse_imatrix(&inf)
        .unwrap_err()
        .to_string()
        .contains("non-finite"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any f32 bit patterns (alone or among ordinary values) quantize to every type without a panic, to the type's size.
    #[test]
    fn any_bits_quantize(row in proptest::collection::vec(
        prop_oneof![any::<u32>().prop_map(f32::from_bits), -2.0f32..2.0],
        512,
    )) {
        for name in QUANTIZED.iter().chain(&["F16", "BF16"]) {
            let t = ty(name);
            let out = quantize_row(t, &row).unwrap();
            prop_assert_eq!(out.len() as u64, t.row_bytes(512).unwrap());
        }
    }

    /// Any f32 bit patterns, weighted by any weights (zeros, negatives, NaN), quantize to
    /// every weighted type without a panic, to the type's size.
    #[test]
    fn any_bits_and_weights_quantize(
        row in proptest::collection::vec(
            prop_oneof![any::<u32>().prop_map(f32::from_bits), -2.0f32..2.0], 512),
        weights in proptest::collection::vec(
            prop_oneof![any::<u32>().prop_map(f32::from_bits), 0.0f32..100.0, Just(0.0)], 256),
    ) {
        for name in WEIGHTED {
            let t = ty(name);
            let out = quantize_rows_weighted(t, &row, 256, Some(&weights)).unwrap();
            prop_assert_eq!(out.len() as u64, t.row_bytes(512).unwrap());
        }
    }
}
