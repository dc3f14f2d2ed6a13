//! The checks over a header's tensors (each tensor's type, size and place; no two sharing a
//! name or bytes) and the lists a parse makes of them.

use super::types::GgmlType;
use super::{tensor_error, GgufError, GgufTensor};
use crate::tensor::TensorInfo;

/// `infos` in the order of their bytes; already in order, as writers put them, they are not
/// sorted (a stable sort's scratch would hold half of them again).
pub(super) fn in_data_order(mut infos: Vec<TensorInfo>) -> Vec<TensorInfo> {
    if !infos.is_sorted_by_key(|t| (t.begin, t.end)) {
        infos.sort_by_key(|t| (t.begin, t.end));
    }
    infos
}
/// A tensor of a parse, as the caller wants it listed: its name and its bytes (relative to
/// any fixed start) are all the checks over every tensor need.
pub(super) trait Listed: Sized {
    /// The tensor `t` of a header whose data starts at `data_start`.
    fn make(t: GgufTensor, data_start: u64) -> Self;
    /// Its name.
    fn name(&self) -> &str;
    /// Where its bytes start and end.
    fn span(&self) -> (u64, u64);
}

impl Listed for GgufTensor {
    fn make(t: GgufTensor, _: u64) -> Self {
        t
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn span(&self) -> (u64, u64) {
        (self.range.start, self.range.end)
    }
}

impl Listed for TensorInfo {
    fn make(t: GgufTensor, data_start: u64) -> Self {
        let mut shape = t.dims;
        shape.reverse();
        TensorInfo {
            name: t.name,
            dtype_name: t.ggml_type.name.to_string(),
            dtype: t.ggml_type.dtype(),
            shape,
            begin: t.range.start - data_start,
            end: t.range.end - data_start,
        }
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn span(&self) -> (u64, u64) {
        (self.begin, self.end)
    }
}

/// Checks a tensor's type, size, alignment and place (its bytes must end by `file_len`).
pub(super) fn validate(
    name: &str,
    dims: Vec<u64>,
    type_id: u32,
    offset: u64,
    alignment: u64,
    data_start: u64,
    file_len: u64,
) -> Result<GgufTensor, GgufError> {
    let err = |p: String| tensor_error(name, p);
    let t = GgmlType::from_id(type_id).ok_or_else(|| err(format!("unknown type {type_id}")))?;
    let values = dims
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d))
        .filter(|&n| n < 1 << 62)
        .ok_or_else(|| err(format!("shape {dims:?} overflows")))?;
    let row = dims.first().copied().unwrap_or(1);
    let len = t
        .row_bytes(row)
        .and_then(|r| r.checked_mul(values.checked_div(row).unwrap_or(0)))
        .ok_or_else(|| {
            err(format!(
                "shape {dims:?}: a row of {row} is not whole blocks of {} {}",
                t.block_values, t.name
            ))
        })?;
    if !offset.is_multiple_of(alignment) {
        return Err(err(format!(
            "offset {offset} is not aligned to {alignment}"
        )));
    }
    let range = data_start
        .checked_add(offset)
        .and_then(|s| Some(s..s.checked_add(len)?))
        .filter(|r| r.end <= file_len)
        .ok_or_else(|| {
            err(format!(
                "{len} bytes at {offset} run past the end of the file"
            ))
        })?;
    Ok(GgufTensor {
        name: name.to_string(),
        dims,
        ggml_type: t,
        range,
    })
}

/// Checks that no two of `tensors` share a name or bytes, through one index of 4 bytes a
/// tensor (the tensors in order of their bytes, as writers put them, need none for the
/// second).
pub(super) fn apart<T: Listed>(tensors: &[T]) -> Result<(), GgufError> {
    let mut order: Vec<u32> = (0..tensors.len() as u32).collect();
    let at = |k: &u32| &tensors[*k as usize];
    order.sort_unstable_by(|a, b| at(a).name().cmp(at(b).name()));
    if let Some(w) = order
        .windows(2)
        .find(|w| at(&w[0]).name() == at(&w[1]).name())
    {
        let name = at(&w[0].max(w[1])).name();
        return Err(tensor_error(name, "appears twice".to_string()));
    }
    let overlap = |a: &T, b: &T| {
        let (start, _) = b.span();
        let (_, end) = a.span();
        (start < end)
            .then(|| tensor_error(b.name(), format!("overlaps the bytes of {:?}", a.name())))
    };
    if tensors.is_sorted_by_key(T::span) {
        return tensors
            .windows(2)
            .find_map(|w| overlap(&w[0], &w[1]))
            .map_or(Ok(()), Err);
    }
    // In file order again, so that tensors of equal spans keep it.
    order
        .iter_mut()
        .enumerate()
        .for_each(|(i, k)| *k = i as u32);
    order.sort_by_key(|k| at(k).span());
    order
        .windows(2)
        .find_map(|w| overlap(at(&w[0]), at(&w[1])))
        .map_or(Ok(()), Err)
}
