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
//! `-- --nocapture` prints blocks compared and identical per type.

use proptest::prelude::*;
use sc::gguf::quant::{half, quantize_row, quantize_rows, seed_to_f32, LLAMA_CPP_COMMIT};
use sc::gguf::types::{GgmlType, TYPES};

const ROWS: &[u8] = include_bytes!("../testdata/quant-rows.bin");
const EXPECTED: &[u8] = include_bytes!("../testdata/quant-expected.bin");

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
}

fn rows() -> Vec<Vec<f32>> {
    let mut b = Bytes(ROWS);
    assert_eq!(b.take(8), b"SCQROWS1");
    let n = b.u32();
    let rows = (0..n)
        .map(|_| {
            let len = b.u32() as usize;
            let raw = b.take(4 * len);
            raw.chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect()
        })
        .collect();
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
    let types = (0..b.u32())
        .map(|_| {
            let id = b.u32();
            let n = b.u32() as usize;
            (id, b.take(n))
        })
        .collect();
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
        let bb = t.block_bytes as usize;
        let (mut at, mut compared, mut identical) = (0, 0, 0);
        let mut first_diff = None;
        for (r, row) in rows.iter().enumerate() {
            let got = quantize_row(t, row).unwrap();
            for (b, block) in got.chunks_exact(bb).enumerate() {
                let theirs = &want[at..at + bb];
                compared += 1;
                if block == theirs {
                    identical += 1;
                } else if first_diff.is_none() {
                    first_diff = Some(format!(
                        "{name}: row {r} block {b} differs\n  port:     {block:02x?}\n  llama.cpp: {theirs:02x?}"
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
        failures.extend(first_diff);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
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
    let values = sample_rows();
    let expected = include_str!("../testdata/quant-sample.txt");
    assert_eq!(expected.lines().count(), QUANTIZED.len());
    let mut failures = Vec::new();
    for line in expected.lines() {
        let [name, blocks, hash] = line.split(' ').collect::<Vec<_>>()[..] else {
            panic!("bad line {line:?}");
        };
        let t = ty(name);
        let bytes = quantize_rows(t, &values, 256).unwrap();
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

/// The row helper gives each row the bytes of `quantize_row`.
#[test]
fn rows_in_parallel_are_rows_one_by_one() {
    let rows = rows();
    let values: Vec<f32> = rows
        .iter()
        .filter(|r| r.len() == 256)
        .flatten()
        .copied()
        .collect();
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
}
