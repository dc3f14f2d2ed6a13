//! Re-derives every tensor of llama-quantize's quants from their seed with the port of
//! llama.cpp's reference quantizers (`sc::gguf::quant`) and counts the blocks that come out
//! identical: the end-to-end check of "quants made by llama-quantize re-derive block for block".
//!
//! ```sh
//! cargo run --release --features internals --example derive_check -- SEED.gguf QUANT.gguf...
//! ```
//!
//! For each quant and each tensor in it: the seed tensor of the same name (F32, F16 or BF16)
//! widened to f32 as ggml does (`seed_to_f32`), quantized row by row to the quant tensor's own
//! ggml type (`quantize_rows`), and compared block by block with the quant's bytes. Prints one
//! line per quant and ggml type (tensors, blocks compared, blocks identical) and the first
//! tensors that differ; exits 1 when any block differs or a tensor cannot be re-derived.

use sc::gguf::quant::{can_quantize, quantize_rows, seed_to_f32};
use sc::gguf::types::GgmlType;
use sc::gguf::{GgufHeader, GgufTensor};
use std::collections::BTreeMap;
use std::process::ExitCode;

/// How many differing or underivable tensors a quant names before it only counts them.
const NAMED: usize = 8;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("derive_check: {e}");
            ExitCode::from(2)
        }
    }
}

/// A GGUF file's bytes and parsed header.
struct Gguf {
    bytes: Vec<u8>,
    header: GgufHeader,
}

impl Gguf {
    fn read(path: &str) -> Result<Gguf, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
        let header = GgufHeader::parse_tensors(&bytes, bytes.len() as u64)
            .map_err(|e| format!("{path}: {e}"))?;
        Ok(Gguf { bytes, header })
    }

    fn data(&self, t: &GgufTensor) -> &[u8] {
        // The reader validated every range against the file's length.
        &self.bytes[t.range.start as usize..t.range.end as usize]
    }
}

/// One ggml type's tally within a quant.
#[derive(Default)]
struct Tally {
    tensors: usize,
    blocks: u64,
    identical: u64,
}

/// Returns whether every tensor of every quant re-derived identically.
fn run(args: &[String]) -> Result<bool, String> {
    let [seed, quants @ ..] = args else {
        return Err("usage: derive_check SEED.gguf QUANT.gguf...".into());
    };
    if quants.is_empty() {
        return Err("usage: derive_check SEED.gguf QUANT.gguf...".into());
    }
    let seed = Gguf::read(seed)?;
    let by_name: BTreeMap<&str, &GgufTensor> = seed
        .header
        .tensors
        .iter()
        .map(|t| (t.name.as_str(), t))
        .collect();
    let mut all_identical = true;
    println!("quant\tggml type\ttensors\tblocks\tidentical");
    for path in quants {
        let quant = Gguf::read(path)?;
        let name = std::path::Path::new(path)
            .file_name()
            .map_or(path.clone(), |n| n.to_string_lossy().into_owned());
        let mut tallies: BTreeMap<&str, Tally> = BTreeMap::new();
        let mut problems = Vec::new();
        for t in &quant.header.tensors {
            let tally = tallies.entry(t.ggml_type.name).or_default();
            tally.tensors += 1;
            match derive(&seed, by_name.get(t.name.as_str()).copied(), t) {
                Ok(derived) => {
                    let (blocks, identical) = compare(t.ggml_type, &derived, quant.data(t));
                    tally.blocks += blocks;
                    tally.identical += identical;
                    if identical < blocks {
                        problems.push(format!(
                            "{}: {} of {blocks} {} blocks differ",
                            t.name,
                            blocks - identical,
                            t.ggml_type.name
                        ));
                    }
                }
                Err(e) => problems.push(format!("{}: {e}", t.name)),
            }
        }
        for (ty, t) in &tallies {
            println!("{name}\t{ty}\t{}\t{}\t{}", t.tensors, t.blocks, t.identical);
        }
        for p in problems.iter().take(NAMED) {
            println!("  {name}: {p}");
        }
        if problems.len() > NAMED {
            println!("  {name}: ... and {} more tensors", problems.len() - NAMED);
        }
        all_identical &= problems.is_empty();
    }
    Ok(all_identical)
}

/// The quant tensor `t` re-derived from its seed tensor: the seed's values widened to f32 and
/// quantized to `t`'s type in rows of `t`'s innermost dimension.
fn derive(seed: &Gguf, from: Option<&GgufTensor>, t: &GgufTensor) -> Result<Vec<u8>, String> {
    let from = from.ok_or("not in the seed")?;
    if from.dims != t.dims {
        return Err(format!(
            "dims {:?} in the seed, {:?} here",
            from.dims, t.dims
        ));
    }
    if !can_quantize(t.ggml_type) {
        return Err(format!(
            "the port has no quantizer for {}",
            t.ggml_type.name
        ));
    }
    let values = seed_to_f32(from.ggml_type, seed.data(from)).map_err(|e| e.to_string())?;
    let row_len = usize::try_from(t.dims[0]).map_err(|e| e.to_string())?;
    quantize_rows(t.ggml_type, &values, row_len).map_err(|e| e.to_string())
}

/// Blocks of type `ty` in `ours` and how many of them equal `theirs`' block at the same place
/// (a length mismatch leaves the missing blocks counted as different).
fn compare(ty: &GgmlType, ours: &[u8], theirs: &[u8]) -> (u64, u64) {
    let size = ty.block_bytes as usize;
    let blocks = ours.len().max(theirs.len()) / size;
    let identical = ours
        .chunks_exact(size)
        .zip(theirs.chunks_exact(size))
        .filter(|(a, b)| a == b)
        .count();
    (blocks as u64, identical as u64)
}
