//! llama.cpp's reference quantizers, ported bit for bit: f32 rows into the blocks of ggml's
//! quantized types, as `quantize_row_*_ref` in `ggml-quants.c` makes them, and the seed
//! conversions llama-quantize applies (F16 and BF16 widened to f32, f32 narrowed to them).
//!
//! "Bit for bit" means the bytes a default (Release, x86-64) build of llama.cpp at
//! [`LLAMA_CPP_COMMIT`] writes for the same f32 values: every float operation is C's, in f32,
//! in C's order, never fused; where C leaves a result undefined (a NaN or infinity converted to
//! a small integer), the port does what that build does. `tests/quantize.rs` checks every
//! type against vectors the C itself made (`testdata/make_quant_vectors.sh`).
//!
//! Without an importance matrix llama-quantize's `quantize_q4_0` to `quantize_q6_K` call
//! exactly the `_ref` functions ([`quantize_rows`]; `quantize_q8_0` always does). With one
//! they call `quantize_row_*_impl` with the tensor's weights instead
//! ([`quantize_rows_weighted`], `weighted.rs`); [`imatrix`] reads the files those weights come
//! from.

// The quantizers serve the tests now and quant references later.
#![cfg_attr(not(feature = "internals"), allow(dead_code))]

pub mod half;
pub mod imatrix;
mod kquants;
mod legacy;
mod weighted;

use super::types::GgmlType;
use crate::error::{Error, Result};
use rayon::prelude::*;

/// The llama.cpp commit whose `ggml-quants.c` and `ggml-impl.h` this port matches, as archives
/// that re-derive a quant from its seed record it.
pub const LLAMA_CPP_COMMIT: &str = "0c1e570";

/// The quantizer this build re-derives with: llama.cpp's `quantize_row_*_ref` at
/// llama.cpp commit `0c1e570` (`LLAMA_CPP_COMMIT`), as a default (Release, x86-64, no fused multiply-add) build makes them.
pub const QUANTIZER: &str = "llama.cpp 0c1e570 default";

/// Every quantizer identity this build reads: an archive naming another is refused.
pub const QUANTIZERS: &[&str] = &[QUANTIZER];

/// The ggml type named `name`.
pub(crate) fn type_named(name: &str) -> Option<&'static GgmlType> {
    super::types::TYPES.iter().find(|t| t.name == name)
}

/// Whether `ty` can be a seed tensor's type: F32, F16 or BF16.
pub(crate) fn is_seed_type(ty: &GgmlType) -> bool {
    matches!(ty.name, "F32" | "F16" | "BF16")
}

/// Quantizes one block: its values in, its bytes out (both exactly one block long).
type BlockFn = fn(&[f32], &mut [u8]);

/// The quantizer of the type named `name`, if this port has one.
fn block_fn(name: &str) -> Option<BlockFn> {
    Some(match name {
        "F32" => |x, out| out.copy_from_slice(&x[0].to_le_bytes()),
        "F16" => |x, out| out.copy_from_slice(&half::f32_to_f16(x[0]).to_le_bytes()),
        "BF16" => |x, out| out.copy_from_slice(&half::f32_to_bf16(x[0]).to_le_bytes()),
        "Q4_0" => legacy::q4_0,
        "Q4_1" => legacy::q4_1,
        "Q5_0" => legacy::q5_0,
        "Q5_1" => legacy::q5_1,
        "Q8_0" => legacy::q8_0,
        "Q2_K" => kquants::q2_k,
        "Q3_K" => kquants::q3_k,
        "Q4_K" => kquants::q4_k,
        "Q5_K" => kquants::q5_k,
        "Q6_K" => kquants::q6_k,
        "Q8_K" => kquants::q8_k,
        _ => return None,
    })
}

/// The weighted path of the type named `name`, if llama-quantize has one (Q8_0, the plain types
/// and Q8_K quantize as without weights).
fn weighted_fn(name: &str) -> Option<weighted::WeightedFn> {
    Some(match name {
        "Q4_0" => weighted::q4_0,
        "Q4_1" => weighted::q4_1,
        "Q5_0" => weighted::q5_0,
        "Q5_1" => weighted::q5_1,
        "Q2_K" => weighted::q2_k,
        "Q3_K" => weighted::q3_k,
        "Q4_K" => weighted::q4_k,
        "Q5_K" => weighted::q5_k,
        "Q6_K" => weighted::q6_k,
        _ => return None,
    })
}

/// Whether [`quantize_row`] makes type `ty`: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
/// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and Q8_K.
pub fn can_quantize(ty: &GgmlType) -> bool {
    block_fn(ty.name).is_some()
}

/// The quantizer of `ty` and a check that `values` values are whole blocks of it.
fn quantizer(ty: &GgmlType, values: usize) -> Result<BlockFn> {
    let f = block_fn(ty.name).ok_or_else(|| {
        Error::InvalidArgument(format!("no reference quantizer for ggml type {}", ty.name))
    })?;
    let block = ty.block_values as usize;
    if !values.is_multiple_of(block) {
        return Err(Error::InvalidArgument(format!(
            "a row of {values} values is not a whole number of {} blocks ({block} values each)",
            ty.name
        )));
    }
    Ok(f)
}

/// Quantizes `row` to `ty` as llama.cpp's `quantize_row_*_ref` (or, for F16 and BF16, its
/// reference row conversion) does, returning the blocks' bytes. An error if this port has no
/// quantizer for `ty` (see [`can_quantize`]) or the row is not a whole number of its blocks.
pub fn quantize_row(ty: &GgmlType, row: &[f32]) -> Result<Vec<u8>> {
    let f = quantizer(ty, row.len())?;
    let (bv, bb) = (ty.block_values as usize, ty.block_bytes as usize);
    let mut out = vec![0u8; row.len() / bv * bb];
    for (x, y) in row.chunks_exact(bv).zip(out.chunks_exact_mut(bb)) {
        f(x, y);
    }
    Ok(out)
}

/// [`quantize_row`] over the rows of `row_len` values that `values` holds, the rows spread over
/// rayon's threads (each row's bytes are those of [`quantize_row`]; blocks are independent).
pub fn quantize_rows(ty: &GgmlType, values: &[f32], row_len: usize) -> Result<Vec<u8>> {
    let f = quantizer(ty, row_len)?;
    each_row(ty, values, row_len, |_, row, out| {
        let bv = ty.block_values as usize;
        for (x, y) in row
            .chunks_exact(bv)
            .zip(out.chunks_exact_mut(ty.block_bytes as usize))
        {
            f(x, y);
        }
    })
}

/// The rows of `row_len` values of `values` quantized to `ty` as llama-quantize's
/// `ggml_quantize_chunk` does given an importance matrix's `weights` for the tensor: one weight
/// per column (`row_len` of them), or one such vector per expert of a 3-D tensor, the rows
/// split evenly among them in order. `None` is [`quantize_rows`], as llama.cpp takes the
/// reference paths without weights; so are Q8_0, F32, F16, BF16 and Q8_K, whose entry points
/// ignore them. Rows are spread over rayon's threads. An error if `ty` has no quantizer, the
/// rows are not whole blocks, or the weights do not fit the rows.
pub fn quantize_rows_weighted(
    ty: &GgmlType,
    values: &[f32],
    row_len: usize,
    weights: Option<&[f32]>,
) -> Result<Vec<u8>> {
    let Some(weights) = weights else {
        return quantize_rows(ty, values, row_len);
    };
    quantizer(ty, row_len)?;
    let rows = values.len().checked_div(row_len).unwrap_or(0);
    let experts = weights.len().checked_div(row_len).unwrap_or(0);
    if experts == 0 || !weights.len().is_multiple_of(row_len) || !rows.is_multiple_of(experts) {
        return Err(Error::InvalidArgument(format!(
            "{} importance weights do not fit {rows} rows of {row_len} (one weight per column, \
             or one vector per expert)",
            weights.len()
        )));
    }
    let Some(f) = weighted_fn(ty.name) else {
        return quantize_rows(ty, values, row_len);
    };
    let per_expert = rows / experts;
    let bv = ty.block_values as usize;
    each_row(ty, values, row_len, |r, row, out| {
        let qw = &weights[r / per_expert * row_len..][..row_len];
        let sigma2 = weighted::sum_squares(row) / row_len as f32;
        let blocks = row.chunks_exact(bv).zip(qw.chunks_exact(bv));
        for ((x, qw), y) in blocks.zip(out.chunks_exact_mut(ty.block_bytes as usize)) {
            f(x, qw, sigma2, y);
        }
    })
}

/// The bytes of `ty` for the rows of `row_len` values that `values` holds, `f` making each
/// row's (given its index, its values and its bytes) on rayon's threads; an error if `values`
/// is not whole rows.
fn each_row(
    ty: &GgmlType,
    values: &[f32],
    row_len: usize,
    f: impl Fn(usize, &[f32], &mut [u8]) + Sync,
) -> Result<Vec<u8>> {
    if row_len == 0 || !values.len().is_multiple_of(row_len) {
        return Err(Error::InvalidArgument(format!(
            "{} values are not a whole number of rows of {row_len}",
            values.len()
        )));
    }
    let (bv, bb) = (ty.block_values as usize, ty.block_bytes as usize);
    let mut out = vec![0u8; values.len() / bv * bb];
    out.par_chunks_mut(row_len / bv * bb)
        .zip(values.par_chunks(row_len))
        .enumerate()
        .for_each(|(r, (out, row))| f(r, row, out));
    Ok(out)
}

/// A seed's values as llama-quantize reads them before quantizing: `bytes` of plain type `ty`
/// (F32, F16 or BF16, little-endian) widened to f32 exactly as ggml does. An error for other
/// types or a length that is not a whole number of values.
pub fn seed_to_f32(ty: &GgmlType, bytes: &[u8]) -> Result<Vec<f32>> {
    let widen: fn(&[u8]) -> f32 = match ty.name {
        "F32" => |b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        "F16" => |b| half::f16_to_f32(u16::from_le_bytes([b[0], b[1]])),
        "BF16" => |b| half::bf16_to_f32(u16::from_le_bytes([b[0], b[1]])),
        _ => {
            return Err(Error::InvalidArgument(format!(
                "ggml type {} is not a seed type (F32, F16, BF16)",
                ty.name
            )))
        }
    };
    let size = ty.block_bytes as usize;
    if !bytes.len().is_multiple_of(size) {
        return Err(Error::InvalidArgument(format!(
            "{} bytes are not a whole number of {} values",
            bytes.len(),
            ty.name
        )));
    }
    Ok(bytes.chunks_exact(size).map(widen).collect())
}

/// The value of largest magnitude in `x` (the first of them, sign kept) and that magnitude, as
/// ggml's quantizers find it (a NaN never wins; all zeros give zeros).
fn signed_absmax(x: &[f32]) -> (f32, f32) {
    let (mut max, mut amax) = (0f32, 0f32);
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    (max, amax)
}

/// Writes F16 bits `h` little-endian at `out[at..at + 2]`.
fn put_f16(out: &mut [u8], at: usize, h: u16) {
    out[at..at + 2].copy_from_slice(&h.to_le_bytes());
}
