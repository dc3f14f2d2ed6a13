//! Entropy coder throughput on real weight planes, per core (single-threaded).
//!
//! Reads `../shared/data/all-MiniLM-L6-v2.BF16.safetensors` when present (and says so when it
//! is not, falling back to the committed `testdata/sample.safetensors` excerpt). The planes are
//! the BF16 high and low bytes of the first 1 MiB block of tensor data, as the pipeline sees them.
//!
//! Run: `cargo bench --bench coders`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use sc::entropy::{histogram, huffman, range};
use sc::safetensors::{json_len, Header};
use sc::split::Transform;
use std::path::Path;

fn planes() -> (Vec<u8>, Vec<u8>) {
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
    Transform::Split16.split(&file[start..start + len], &mut planes);
    let lo = planes.pop().unwrap_or_default();
    let hi = planes.pop().unwrap_or_default();
    (hi, lo)
}

fn bench(c: &mut Criterion) {
    let (hi, lo) = planes();
    let mut g = c.benchmark_group("huffman-high-plane");
    g.throughput(Throughput::Bytes(hi.len() as u64));
    let hist = histogram(&hi);
    let mut coded = Vec::new();
    huffman::encode(&hi, &hist, &mut coded);
    eprintln!(
        "high plane: {} -> {} bytes huffman ({:.3} bits/symbol)",
        hi.len(),
        coded.len(),
        8.0 * coded.len() as f64 / hi.len() as f64
    );
    g.bench_function("encode", |b| {
        let mut out = Vec::with_capacity(hi.len());
        b.iter(|| {
            out.clear();
            huffman::encode(&hi, &histogram(&hi), &mut out);
        })
    });
    let mut out = vec![0u8; hi.len()];
    g.bench_function("decode", |b| b.iter(|| huffman::decode(&coded, &mut out)));
    g.finish();

    for (name, plane) in [("range-high-plane", &hi), ("range-low-plane", &lo)] {
        let mut g = c.benchmark_group(name);
        g.throughput(Throughput::Bytes(plane.len() as u64));
        let mut coded = Vec::new();
        range::encode(plane, &histogram(plane), &mut coded);
        g.bench_function("encode", |b| {
            let mut out = Vec::with_capacity(plane.len());
            b.iter(|| {
                out.clear();
                range::encode(plane, &histogram(plane), &mut out)
            })
        });
        let mut out = vec![0u8; plane.len()];
        g.bench_function("decode", |b| b.iter(|| range::decode(&coded, &mut out)));
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
