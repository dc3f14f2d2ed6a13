//! llama.cpp's importance-matrix files (`llama-imatrix` output, `llama-quantize --imatrix`), read
//! as llama-quantize at [`super::LLAMA_CPP_COMMIT`] reads them (`common/imatrix-loader.cpp`,
//! `load_imatrix` in `tools/quantize/quantize.cpp`): per tensor, the weights its quantizers get
//! ([`super::quantize_rows_weighted`]).
//!
//! Two layouts. The GGUF one (what `llama-imatrix` writes by default): a GGUF file whose F32
//! tensors `NAME.in_sum2` (the sums of squared activations, one row per expert) and
//! `NAME.counts` (the tokens counted, one per expert) give tensor NAME's weights as the sums
//! divided by their expert's count (1 where the count is not positive), with the metadata
//! `imatrix.datasets`, `imatrix.chunk_count` and `imatrix.chunk_size`. The legacy `.dat` one:
//! little-endian i32 entry count; per entry an i32 name length, the name, i32 `ncall`, i32
//! value count and the f32 values (already averaged, times `ncall`: divided by it when
//! positive); then optionally i32 chunk count, i32 length and the dataset's name.
//!
//! Every count is checked against the bytes there before anything is sized by it: the weights
//! take no more memory than the file. A weight that is not finite is an error, as
//! llama-quantize refuses it.

use crate::error::{Error, Result};
use crate::gguf::{GgufHeader, GgufTensor, Value, MAGIC};
use std::collections::BTreeMap;
use std::path::Path;

/// An importance matrix: the weights llama-quantize gives each tensor's quantizer.
#[derive(Clone, Debug, PartialEq)]
pub struct Imatrix {
    /// Per tensor name, its weights: one per column, times the experts of a 3-D tensor.
    pub weights: BTreeMap<String, Vec<f32>>,
    /// The names of the texts it was computed on (`imatrix.datasets`).
    pub datasets: Vec<String>,
    /// How many chunks of text it was computed on (0 where a legacy file does not say).
    pub chunk_count: i64,
    /// Whether the file is in the legacy `.dat` layout.
    pub legacy: bool,
}

impl Imatrix {
    /// The weights llama-quantize gives tensor `name` of `row_len` columns and `experts`
    /// matrices (1 for a 2-D tensor): `None` where the matrix has no entry for it, or (for
    /// the token embeddings, which llama-quantize then quantizes without) an entry of another
    /// size; an error, as llama-quantize stops, for any other tensor whose entry has another
    /// size.
    pub fn for_tensor(&self, name: &str, row_len: u64, experts: u64) -> Result<Option<&[f32]>> {
        let Some(w) = self.weights.get(name) else {
            return Ok(None);
        };
        let want = row_len.checked_mul(experts);
        if want == Some(w.len() as u64) {
            return Ok(Some(w));
        }
        if name == "token_embd.weight" || name == "per_layer_token_embd.weight" {
            return Ok(None);
        }
        Err(bad(format!(
            "its entry for {name:?} holds {} weights, the tensor {row_len} x {experts}",
            w.len()
        )))
    }
}

/// An error about an imatrix file, on one line.
fn bad(why: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("not an imatrix llama-quantize reads: {why}"))
}

/// Reads the imatrix file at `path` (either layout).
pub fn read_imatrix(path: &Path) -> Result<Imatrix> {
    let bytes = std::fs::read(path).map_err(Error::Io)?;
    parse_imatrix(&bytes).map_err(|e| match e {
        Error::InvalidArgument(why) => Error::InvalidArgument(format!("{}: {why}", path.display())),
        e => e,
    })
}

/// Reads an imatrix file's bytes: GGUF where they start with its magic, else the legacy
/// layout.
pub fn parse_imatrix(bytes: &[u8]) -> Result<Imatrix> {
    let m = if bytes.starts_with(&MAGIC) {
        parse_gguf(bytes)?
    } else {
        parse_legacy(bytes)?
    };
    for (name, w) in &m.weights {
        if let Some(v) = w.iter().find(|v| !v.is_finite()) {
            return Err(bad(format!(
                "the weights of {name:?} hold the non-finite {v}"
            )));
        }
    }
    Ok(m)
}

/// The f32 values of `bytes`, little-endian.
fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// C's `std::lround` of an f32 into an int64, as x86-64 gives it: halves away from zero,
/// NaN and values out of range the "integer indefinite" `i64::MIN`.
fn lround(x: f32) -> i64 {
    if x.is_nan() || !(-9.223372e18..9.223372e18).contains(&x) {
        i64::MIN
    } else {
        x.round() as i64
    }
}

/// The GGUF layout.
fn parse_gguf(bytes: &[u8]) -> Result<Imatrix> {
    let h = GgufHeader::parse(bytes, bytes.len() as u64).map_err(bad)?;
    if h.tensors.is_empty() {
        return Err(bad("it holds no tensors"));
    }
    let u32_key = |key: &str| match h.get(key) {
        None => Ok(None),
        Some(Value::U32(v)) => Ok(Some(*v)),
        Some(_) => Err(bad(format!("{key} is not a u32"))),
    };
    let chunk_count = u32_key("imatrix.chunk_count")?;
    let chunk_size = u32_key("imatrix.chunk_size")?;
    let datasets = match h.get("imatrix.datasets") {
        Some(Value::Strings(s)) => Some(s.clone()),
        Some(_) => Some(Vec::new()),
        None => None,
    };
    let (Some(chunk_count), Some(_), Some(datasets)) = (chunk_count, chunk_size, datasets) else {
        return Err(bad(
            "the metadata imatrix.datasets, imatrix.chunk_count and imatrix.chunk_size is missing",
        ));
    };
    // Per tensor name: its sums and its counts.
    let mut parts: BTreeMap<&str, [Option<&GgufTensor>; 2]> = BTreeMap::new();
    for t in &h.tensors {
        let (name, which) = match (
            t.name.strip_suffix(".in_sum2"),
            t.name.strip_suffix(".counts"),
        ) {
            (Some(n), _) => (n, 0),
            (None, Some(n)) => (n, 1),
            _ => continue,
        };
        parts.entry(name).or_default()[which] = Some(t);
    }
    let mut weights = BTreeMap::new();
    for (name, part) in parts {
        let [Some(sums), Some(counts)] = part else {
            return Err(bad(format!(
                "{name:?} has sums without counts or counts without sums"
            )));
        };
        if sums.ggml_type.name != "F32" || counts.ggml_type.name != "F32" {
            return Err(bad(format!("the sums and counts of {name:?} are not F32")));
        }
        let data = |t: &GgufTensor| &bytes[t.range.start as usize..t.range.end as usize];
        let sums = f32s(data(sums));
        let counts: Vec<i64> = f32s(data(counts)).into_iter().map(lround).collect();
        if counts.is_empty() || !sums.len().is_multiple_of(counts.len()) {
            return Err(bad(format!(
                "{name:?} has {} sums for {} counts",
                sums.len(),
                counts.len()
            )));
        }
        let ne0 = sums.len() / counts.len();
        let mut w = sums;
        for (row, &count) in w.chunks_exact_mut(ne0.max(1)).zip(&counts) {
            let count = count as f32;
            for v in row {
                *v = if count > 0.0 { *v / count } else { 1.0 };
            }
        }
        weights.insert(name.to_string(), w);
    }
    Ok(Imatrix {
        weights,
        datasets,
        chunk_count: i64::from(chunk_count),
        legacy: false,
    })
}

/// Little-endian reads from a legacy file, each checked against the bytes left.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        if n > self.0.len() {
            return Err(bad(format!("it ends inside {what}")));
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }

    fn i32(&mut self, what: &str) -> Result<i32> {
        let b = self.take(4, what)?;
        Ok(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
}

/// The legacy `.dat` layout.
fn parse_legacy(bytes: &[u8]) -> Result<Imatrix> {
    let mut r = Reader(bytes);
    let n = r.i32("the entry count")?;
    if n < 1 {
        return Err(bad(format!(
            "it has {n} entries (neither GGUF nor a legacy imatrix)"
        )));
    }
    let mut weights = BTreeMap::new();
    for i in 0..n {
        let entry = format!("entry {}", i + 1);
        let len = r.i32(&entry)?;
        let len =
            usize::try_from(len).map_err(|_| bad(format!("{entry}'s name length is {len}")))?;
        let raw = r.take(len, &entry)?;
        // C reads the name as a C string: it ends at its first NUL.
        let raw = raw.split(|&b| b == 0).next().unwrap_or_default();
        let name = String::from_utf8_lossy(raw).into_owned();
        let ncall = r.i32(&entry)?;
        let nval = r.i32(&entry)?;
        if nval < 1 {
            return Err(bad(format!("{entry} ({name:?}) has {nval} values")));
        }
        let values = r.take(nval as usize * 4, &entry)?;
        let mut w = f32s(values);
        if ncall > 0 {
            let ncall = ncall as f32;
            for v in &mut w {
                *v /= ncall;
            }
        }
        weights.insert(name, w);
    }
    // The trailing chunk count and dataset name are optional, and read as far as they go.
    let chunk_count = r.i32("the chunk count").map_or(0, i64::from);
    let mut datasets = Vec::new();
    if let Ok(len) = r.i32("the dataset name") {
        let len = usize::try_from(len).unwrap_or(0);
        if let (true, Ok(name)) = (len > 0, r.take(len, "the dataset name")) {
            let name = name.split(|&b| b == 0).next().unwrap_or_default();
            datasets.push(String::from_utf8_lossy(name).into_owned());
        }
    }
    Ok(Imatrix {
        weights,
        datasets,
        chunk_count,
        legacy: true,
    })
}
