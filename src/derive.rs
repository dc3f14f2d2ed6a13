//! Quants re-derived from their seed: the prediction of a quant tensor's bytes from the seed's
//! tensor of the same name (widened to f32 and quantized with llama.cpp's reference quantizers,
//! `crate::gguf::quant`), block by block, and the count of a quant's blocks that re-derive
//! exactly (see `docs/FORMAT.md`, "Reference section", kind 2).
//!
//! A prediction is made per ggml block from the seed's bytes of those values alone, a few
//! hundred blocks at a time, so memory stays small whatever the tensor's size.

use crate::base::Base;
use crate::error::{Error, Result};
use crate::gguf::quant;
use crate::gguf::types::GgmlType;
use crate::read::ReadAt;
use crate::safetensors::TensorInfo;
use rayon::prelude::*;

pub use crate::gguf::quant::{QUANTIZER, QUANTIZERS};

/// ggml blocks predicted at a time: bounds the seed bytes and f32 values held per call.
const CHUNK_BLOCKS: u64 = 256;

/// The values of a tensor (the product of its shape).
fn values(t: &TensorInfo) -> Option<u64> {
    t.shape.iter().try_fold(1u64, |n, &d| n.checked_mul(d))
}

/// The types of a quant tensor `quant` re-derived from the seed tensor `seed`: both of a type
/// the library handles (the seed F32, F16 or BF16, the quant another type `quant::can_quantize`
/// makes), as many values, whole blocks; else `None`.
pub fn derivable(
    seed: &TensorInfo,
    quant: &TensorInfo,
) -> Option<(&'static GgmlType, &'static GgmlType)> {
    let s = quant::type_named(&seed.dtype_name).filter(|t| quant::is_seed_type(t))?;
    let q =
        quant::type_named(&quant.dtype_name).filter(|t| quant::can_quantize(t) && t.id != s.id)?;
    let n = values(quant)?;
    let whole = n.is_multiple_of(u64::from(q.block_values));
    let fits = q.row_bytes(n) == Some(quant.len()) && s.row_bytes(n) == Some(seed.len());
    (whole && fits && values(seed) == Some(n)).then_some((s, q))
}

/// Fills `out` with the predicted bytes `offset..offset + out.len()` of the quant tensor
/// `name` of type `quant`: the seed's tensor of that name (type `seed`) quantized. The seed
/// tensor's identity is checked by the caller.
pub(crate) fn predict(
    base: &Base,
    name: &str,
    seed: &GgmlType,
    quant: &GgmlType,
    offset: u64,
    out: &mut [u8],
) -> Result<()> {
    let bb = u64::from(quant.block_bytes);
    let end = offset + out.len() as u64;
    let mut block = offset / bb;
    while block * bb < end {
        let n = CHUNK_BLOCKS.min(end.div_ceil(bb) - block);
        let predicted = predict_blocks(base, name, seed, quant, block, n)?;
        let (a, b) = ((block * bb).max(offset), ((block + n) * bb).min(end));
        let from = (a - block * bb) as usize;
        out[(a - offset) as usize..(b - offset) as usize]
            .copy_from_slice(&predicted[from..from + (b - a) as usize]);
        block += n;
    }
    Ok(())
}

/// The predicted bytes of `n` ggml blocks of the quant tensor `name` from block `first` on.
fn predict_blocks(
    base: &Base,
    name: &str,
    seed: &GgmlType,
    quant: &GgmlType,
    first: u64,
    n: u64,
) -> Result<Vec<u8>> {
    let bv = u64::from(quant.block_values);
    let size = u64::from(seed.block_bytes);
    let mut raw = vec![0u8; (n * bv * size) as usize];
    base.read(name, first * bv * size, &mut raw)?;
    let values = quant::seed_to_f32(seed, &raw)?;
    quant::quantize_row(quant, &values)
}

/// How one quant tensor derives from its seed, as [`verify_derives`] finds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorDerivation {
    /// The tensor's name.
    pub name: String,
    /// Its ggml type.
    pub dtype: String,
    /// Its ggml blocks (values for plain types), or 0 when it cannot be re-derived.
    pub blocks: u64,
    /// Blocks equal to the seed's re-derived ones.
    pub exact: u64,
    /// Why the tensor cannot be re-derived, if it cannot: no seed tensor of that name, another
    /// shape, a type the quantizer does not make. A tensor kept as it is in the seed (same type
    /// and bytes) counts as derived, every block exact.
    pub not_derivable: Option<String>,
}

impl TensorDerivation {
    /// Whether the tensor derives bit for bit from the seed.
    pub fn derives(&self) -> bool {
        self.not_derivable.is_none() && self.exact == self.blocks
    }
}

/// Counts the ggml blocks of the quant tensor `t` (its bytes read from `quant` at `start`) that
/// equal their prediction from the seed tensor of the same name in `base`, of type `seed`.
pub(crate) fn count_exact(
    base: &Base,
    t: &TensorInfo,
    seed: &GgmlType,
    q: &GgmlType,
    quant: &dyn ReadAt,
    start: u64,
) -> Result<u64> {
    let bb = u64::from(q.block_bytes);
    let blocks = t.len() / bb;
    let chunks: Vec<u64> = (0..blocks.div_ceil(CHUNK_BLOCKS)).collect();
    let counts: Result<Vec<u64>> = chunks
        .par_iter()
        .map(|&c| {
            let first = c * CHUNK_BLOCKS;
            let n = CHUNK_BLOCKS.min(blocks - first);
            let predicted = predict_blocks(base, &t.name, seed, q, first, n)?;
            let mut got = vec![0u8; predicted.len()];
            quant.read_exact_at(&mut got, start + first * bb)?;
            let same = (got.chunks_exact(bb as usize))
                .zip(predicted.chunks_exact(bb as usize))
                .filter(|(a, b)| a == b)
                .count();
            Ok(same as u64)
        })
        .collect();
    Ok(counts?.iter().sum())
}

/// Tensor by tensor, whether the GGUF file `quant` (`len` bytes) derives bit for bit from the
/// seed `seed`: each of its tensors re-derived from the seed's tensor of the same name with
/// [`QUANTIZER`] (or equal to it, where both have the same type), its exact blocks counted.
pub fn verify_derives(seed: &Base, quant: &dyn ReadAt, len: u64) -> Result<Vec<TensorDerivation>> {
    let mut magic = [0u8; 4];
    if len < 4 || quant.read_exact_at(&mut magic, 0).is_err() || magic != crate::gguf::MAGIC {
        return Err(Error::InvalidArgument(
            "the quant is not a GGUF file".into(),
        ));
    }
    let (header, _) = crate::gguf::read_header_at(len, |buf, at| quant.read_exact_at(buf, at))?
        .map_err(|e| Error::InvalidArgument(format!("the quant is not a valid GGUF file: {e}")))?;
    let start = header.data_start;
    let mut out = Vec::new();
    for t in header.tensor_infos() {
        let mut d = TensorDerivation {
            name: t.name.clone(),
            dtype: t.dtype_name.clone(),
            blocks: 0,
            exact: 0,
            not_derivable: None,
        };
        if start + t.end > len {
            return Err(Error::InvalidArgument(format!(
                "the quant's tensor {:?} runs past its end",
                t.name
            )));
        }
        match seed.tensor(&t.name) {
            None => d.not_derivable = Some("the seed has no tensor of this name".into()),
            Some(s) if s.dtype_name == t.dtype_name && s.shape == t.shape => {
                let size = quant::type_named(&t.dtype_name).map_or(1, |ty| ty.block_bytes);
                d.blocks = t.len() / u64::from(size);
                d.exact = count_same(seed, &t, size as usize, quant, start + t.begin)?;
            }
            Some(s) => match derivable(s, &t) {
                None => {
                    d.not_derivable = Some(format!(
                        "{} {:?} cannot be re-derived from the seed's {} {:?}",
                        t.dtype_name, t.shape, s.dtype_name, s.shape
                    ))
                }
                Some((sty, qty)) => {
                    d.blocks = t.len() / u64::from(qty.block_bytes);
                    d.exact = count_exact(seed, &t, sty, qty, quant, start + t.begin)?;
                }
            },
        }
        out.push(d);
    }
    Ok(out)
}

/// Counts the blocks of `size` bytes of the tensor `t` (read from `quant` at `start`) equal to
/// those of the seed's tensor of the same name and type.
fn count_same(
    base: &Base,
    t: &TensorInfo,
    size: usize,
    quant: &dyn ReadAt,
    start: u64,
) -> Result<u64> {
    let chunk = (size * 65536) as u64;
    let mut same = 0u64;
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let mut at = 0u64;
    while at < t.len() {
        let n = (t.len() - at).min(chunk) as usize;
        a.resize(n, 0);
        b.resize(n, 0);
        base.read(&t.name, at, &mut a)?;
        quant.read_exact_at(&mut b, start + at)?;
        let equal = a.chunks(size).zip(b.chunks(size)).filter(|(x, y)| x == y);
        same += equal.count() as u64;
        at += n as u64;
    }
    Ok(same)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_quantizer_names_the_commit_ported() {
        assert!(super::QUANTIZER.contains(crate::gguf::quant::LLAMA_CPP_COMMIT));
    }
}
