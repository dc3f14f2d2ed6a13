//! Entropy coder throughput on real weight planes, per core (single-threaded).
//!
//! Reads `../shared/data/all-MiniLM-L6-v2.BF16.safetensors` when present (and says so when it
//! is not, falling back to the committed `testdata/sample.safetensors` excerpt). The planes are
//! the exponent and sign/mantissa planes (exp16 split) of the first 1 MiB of the largest BF16
//! tensor, as the pipeline sees them: FAST codes the exponent with Huffman; BEST codes both
//! planes with the ctxjoint codec (rows of the tensor's last dimension), next to the joint codec
//! of format version 1's BEST and the adaptive exponent + exponent-context sign/mantissa pair
//! (BEST for F16 blocks). FAST's
//! huffjoint codec is measured on the same block's BF16 words, from words to payloads and back
//! (its decoder writes the words, so the MB/s count 2 bytes per value).
//!
//! Run: `cargo bench --bench coders`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use sc::codec::{adaptive, context, ctxjoint, huffjoint, huffman, joint, range, raw6};
use sc::entropy::rows::Rows;
use sc::safetensors::{json_len, Header};
use sc::stats::histogram;
use sc::transform::Transform;
use std::path::Path;

/// The planes, the words, and the row length of the tensor.
fn planes() -> (Vec<u8>, Vec<u8>, Vec<u8>, u64) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let shared = root.join("../shared/data/all-MiniLM-L6-v2.BF16.safetensors");
    let path = if shared.exists() {
        shared
    } else {
        eprintln!(
            "note: {} is missing; using testdata/sample.safetensors",
            shared.display()
        );
        root.join("testdata/sample.safetensors")
    };
    let file = std::fs::read(&path).expect("read bench input");
    let mut first = [0u8; 8];
    first.copy_from_slice(&file[..8]);
    let n = json_len(&first) as usize;
    let header = Header::parse(&file[8..8 + n], None).expect("safetensors header");
    // The largest BF16 tensor: what dominates a real checkpoint.
    let t = header
        .tensors
        .iter()
        .filter(|t| t.dtype_name == "BF16")
        .max_by_key(|t| t.end - t.begin)
        .expect("a BF16 tensor");
    let start = 8 + n + t.begin as usize;
    let len = ((t.end - t.begin) as usize).min(1 << 20);
    let mut planes = vec![Vec::new(), Vec::new()];
    Transform::Exp16.split(&file[start..start + len], &mut planes);
    let man = planes.pop().unwrap_or_default();
    let exp = planes.pop().unwrap_or_default();
    let row = t.shape.iter().rev().find(|&&d| d > 1).copied().unwrap_or(1);
    (exp, man, file[start..start + len].to_vec(), row)
}

fn bench(c: &mut Criterion) {
    let (exp, man, words, row) = planes();
    let n = exp.len() as u64;
    let bits = |len: usize| 8.0 * len as f64 / n as f64;

    let mut g = c.benchmark_group("huffman-exponent");
    g.throughput(Throughput::Bytes(n));
    let mut coded = Vec::new();
    huffman::encode(&exp, &mut coded);
    eprintln!("huffman exponent: {:.3} bits/value", bits(coded.len()));
    g.bench_function("encode", |b| {
        let mut out = Vec::with_capacity(exp.len());
        b.iter(|| {
            out.clear();
            huffman::encode(&exp, &mut out);
        })
    });
    let mut out = vec![0u8; exp.len()];
    g.bench_function("decode", |b| b.iter(|| huffman::decode(&coded, &mut out)));
    g.finish();

    let mut g = c.benchmark_group("fast-huffjoint");
    g.throughput(Throughput::Bytes(words.len() as u64));
    let census = huffjoint::Census::of16(&words);
    let alphabet = census.alphabet().expect("a BF16 block of trained weights");
    let (mut j, mut r, mut keys) = (Vec::new(), Vec::new(), Vec::new());
    huffjoint::encode(&alphabet, &words, &mut keys, &mut j);
    huffjoint::encode_raw16(&words, &mut r);
    eprintln!("huffjoint: {:.3} bits/value", bits(j.len() + r.len()));
    g.bench_function("encode", |b| {
        let (mut oj, mut or) = (Vec::new(), Vec::new());
        b.iter(|| {
            oj.clear();
            or.clear();
            let census = huffjoint::Census::of16(&words);
            let a = census.alphabet().expect("alphabet");
            huffjoint::encode(&a, &words, &mut keys, &mut oj);
            huffjoint::encode_raw16(&words, &mut or);
        })
    });
    let mut out = vec![0u8; words.len()];
    g.bench_function("decode", |b| {
        b.iter(|| huffjoint::decode(&j, &r, &mut keys, &mut out))
    });
    g.finish();

    let mut g = c.benchmark_group("best-exponent-and-mantissa");
    g.throughput(Throughput::Bytes(2 * n));
    let (mut e, mut m) = (Vec::new(), Vec::new());
    adaptive::encode(&exp, &mut e);
    context::encode_context(&man, &exp, &mut m);
    eprintln!(
        "adaptive exponent {:.3} + context sign/mantissa {:.3} bits/value",
        bits(e.len()),
        bits(m.len())
    );
    g.bench_function("encode", |b| {
        let (mut oe, mut om) = (Vec::new(), Vec::new());
        b.iter(|| {
            oe.clear();
            om.clear();
            adaptive::encode(&exp, &mut oe);
            context::encode_context(&man, &exp, &mut om);
        })
    });
    let (mut de, mut dm) = (vec![0u8; exp.len()], vec![0u8; man.len()]);
    g.bench_function("decode", |b| {
        b.iter(|| context::decode_pair(&e, &m, &mut de, &mut dm))
    });
    g.finish();

    let mut raw = Vec::new();
    raw6::encode(&man, &mut raw);
    let rows = Rows::at(row, 0);
    for (name, ctx) in [("best-joint", false), ("best-ctxjoint", true)] {
        let encode = |out: &mut Vec<u8>| match ctx {
            true => ctxjoint::encode(&exp, &man, rows, out),
            false => joint::encode_joint(&exp, &man, out),
        };
        let mut g = c.benchmark_group(name);
        g.throughput(Throughput::Bytes(2 * n));
        let mut coded = Vec::new();
        encode(&mut coded);
        eprintln!("{name}: {:.3} bits/value", bits(coded.len() + raw.len()));
        g.bench_function("encode", |b| {
            let mut out = Vec::new();
            b.iter(|| {
                out.clear();
                encode(&mut out)
            })
        });
        let (mut de, mut dm) = (vec![0u8; exp.len()], vec![0u8; man.len()]);
        g.bench_function("decode", |b| {
            b.iter(|| match ctx {
                true => ctxjoint::decode::<{ ctxjoint::ROWS }>(&coded, &raw, &mut de, &mut dm),
                false => joint::decode_joint(&coded, &raw, &mut de, &mut dm),
            })
        });
        g.finish();
    }

    let mut g = c.benchmark_group("range-static-exponent");
    g.throughput(Throughput::Bytes(n));
    let mut coded = Vec::new();
    range::encode(&exp, &histogram(&exp), &mut coded);
    g.bench_function("encode", |b| {
        let mut out = Vec::with_capacity(exp.len());
        b.iter(|| {
            out.clear();
            range::encode(&exp, &histogram(&exp), &mut out)
        })
    });
    let mut out = vec![0u8; exp.len()];
    g.bench_function("decode", |b| b.iter(|| range::decode(&coded, &mut out)));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
