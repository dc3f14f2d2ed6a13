//! Repeated tensors: a tensor whose bytes equal an earlier tensor's (tied embeddings saved
//! twice, buffers repeated in every layer) is coded against that tensor, which costs a few bytes
//! per block, instead of once more in full.
//!
//! Found without reading the file twice: only tensors of equal length are compared, first by a
//! hash of three small samples, then by the XXH3-128 of their bytes, and a match is confirmed
//! byte for byte before it is used.

use crate::error::Result;
use crate::read::ReadAt;
use crate::safetensors::TensorInfo;
use std::collections::HashMap;

/// Shortest tensor worth a reference: below it, a reference's names and a block's record cost
/// about as much as coding the bytes.
pub const MIN_LEN: u64 = 1024;
/// Bytes of each of the three samples (start, middle, end) hashed first.
const SAMPLE: u64 = 4096;
/// Bytes read at a time when hashing or comparing whole tensors.
const CHUNK: usize = 1 << 20;

/// Groups `items` by `key`, keeping the groups of two or more, each in the order given.
fn groups<K: std::hash::Hash + Eq>(
    items: &[usize],
    mut key: impl FnMut(usize) -> Result<K>,
) -> Result<Vec<Vec<usize>>> {
    let mut by: HashMap<K, Vec<usize>> = HashMap::new();
    for &i in items {
        by.entry(key(i)?).or_default().push(i);
    }
    let mut out: Vec<Vec<usize>> = by.into_values().filter(|g| g.len() > 1).collect();
    out.sort_by_key(|g| g[0]);
    Ok(out)
}

/// Hashes the bytes `range` of `input` in chunks into `h`.
fn hash_range(
    input: &dyn ReadAt,
    range: std::ops::Range<u64>,
    buf: &mut [u8],
    h: &mut impl FnMut(&[u8]),
) -> Result<()> {
    let mut at = range.start;
    while at < range.end {
        let n = ((range.end - at) as usize).min(buf.len());
        input.read_exact_at(&mut buf[..n], at)?;
        h(&buf[..n]);
        at += n as u64;
    }
    Ok(())
}

/// Whether the bytes at `a` and `b` (`len` each) are equal.
fn same(input: &dyn ReadAt, a: u64, b: u64, len: u64) -> Result<bool> {
    let mut x = vec![0u8; (len as usize).min(CHUNK)];
    let mut y = x.clone();
    let mut done = 0u64;
    while done < len {
        let n = ((len - done) as usize).min(x.len());
        input.read_exact_at(&mut x[..n], a + done)?;
        input.read_exact_at(&mut y[..n], b + done)?;
        if x[..n] != y[..n] {
            return Ok(false);
        }
        done += n as u64;
    }
    Ok(true)
}

/// The tensors of `tensors` (by data offset, data starting at `prefix_len` in `input`) that
/// repeat an earlier one: pairs of (repeat, first occurrence), as indexes into `tensors`.
pub fn find(
    tensors: &[TensorInfo],
    prefix_len: u64,
    input: &dyn ReadAt,
) -> Result<Vec<(usize, usize)>> {
    let start = |i: usize| prefix_len + tensors[i].begin;
    let sized: Vec<usize> = (0..tensors.len())
        .filter(|&i| tensors[i].len() >= MIN_LEN)
        .collect();
    let mut buf = vec![0u8; CHUNK];
    let mut found = Vec::new();
    for by_len in groups(&sized, |i| Ok(tensors[i].len()))? {
        let len = tensors[by_len[0]].len();
        let samples = [0, len / 2 - SAMPLE.min(len) / 2, len - SAMPLE.min(len)];
        for by_sample in groups(&by_len, |i| {
            let mut h = twox_hash::XxHash3_64::new();
            for s in samples {
                let r = start(i) + s..start(i) + s + SAMPLE.min(len);
                hash_range(input, r, &mut buf, &mut |b| {
                    std::hash::Hasher::write(&mut h, b)
                })?;
            }
            Ok(std::hash::Hasher::finish(&h))
        })? {
            for by_digest in groups(&by_sample, |i| {
                let mut h = twox_hash::XxHash3_128::new();
                hash_range(input, start(i)..start(i) + len, &mut buf, &mut |b| {
                    h.write(b)
                })?;
                Ok(h.finish_128())
            })? {
                let first = by_digest[0];
                for &i in &by_digest[1..] {
                    if same(input, start(first), start(i), len)? {
                        found.push((i, first));
                    }
                }
            }
        }
    }
    found.sort_unstable();
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::safetensors::Header;

    #[test]
    fn finds_repeats_and_confirms_them() {
        let n = 20_000u64;
        let a: Vec<u8> = (0..n).map(|i| (i * 7 % 251) as u8).collect();
        let mut near = a.clone();
        // The same length and samples: only the whole tensor's digest tells it apart.
        near[6000] ^= 1;
        let parts = [&a, &a, &near, &a[..1000].to_vec(), &a[..1000].to_vec()];
        let mut json = String::from("{");
        let mut data = Vec::new();
        for (k, p) in parts.iter().enumerate() {
            json.push_str(&format!(
                "{}\"t{k}\":{{\"dtype\":\"U8\",\"shape\":[{}],\"data_offsets\":[{},{}]}}",
                if k > 0 { "," } else { "" },
                p.len(),
                data.len(),
                data.len() + p.len()
            ));
            data.extend_from_slice(p);
        }
        json.push('}');
        let h = Header::parse(json.as_bytes(), Some(data.len() as u64)).unwrap();
        let found = find(&h.tensors, 0, &&data[..]).unwrap();
        // t1 repeats t0; t2 differs by a byte; t3 and t4 are too short to be worth it.
        assert_eq!(found, [(1, 0)]);
    }
}
