//! Canonical Huffman coding with code lengths limited to [`MAX_BITS`], so that decoding is one
//! lookup in a 4096-entry table per symbol.
//!
//! Plane payload layout (all integers little-endian):
//! ```text
//! u8        T: number of code tables, 1 (shared by all streams) or 4 (one per stream)
//! T tables  u8 first and u8 last used symbol, then the 4-bit code lengths of symbols
//!           first..=last, two per byte, low nibble first
//! u32 x 3   byte length of streams 0, 1 and 2 (stream 3 takes the rest)
//! streams   4 bit streams; stream k codes the k-th quarter of the plane
//! ```
//! Bits are written LSB first, so the decoder peeks with a mask and consumes with a shift; the
//! four independent streams let the decode loop overlap four dependency chains. A table per
//! stream lets the code follow the statistics of each quarter of a block (weights drift across
//! a tensor) at the price of a few bytes, and the encoder only pays it when it wins.

use crate::entropy::histogram;
use crate::error::CodecError;

/// Longest code length; the decode table has `1 << MAX_BITS` entries.
pub const MAX_BITS: u32 = 12;
const TABLE_LEN: usize = 1 << MAX_BITS;
const TABLE_MASK: u64 = TABLE_LEN as u64 - 1;
/// Number of interleaved bit streams per plane.
pub const STREAMS: usize = 4;

/// Optimal code lengths for `hist` with no code longer than `limit` bits (package-merge);
/// unused symbols get length 0. `limit` must allow every used symbol (`2^limit >= count`).
///
/// Package-merge builds, for each of `limit` levels, the merge of the sorted leaves with the
/// pairs ("packages") of the level below; taking the `2n - 2` cheapest items of the top level
/// and expanding packages downwards, a symbol's code length is the number of levels in which it
/// is taken. Leaves are always taken as a prefix of the sorted order, so a per-level count
/// suffices and no item needs to remember its contents.
pub fn code_lengths(hist: &[u32; 256], limit: u32) -> [u8; 256] {
    let mut lens = [0u8; 256];
    let mut leaves: Vec<(u64, usize)> = (0..256)
        .filter(|&s| hist[s] > 0)
        .map(|s| (hist[s] as u64, s))
        .collect();
    let n = leaves.len();
    if n <= 1 {
        if let Some(&(_, s)) = leaves.first() {
            lens[s] = 1;
        }
        return lens;
    }
    leaves.sort_unstable();
    // levels[j]: weights and leaf flags of the merged list at level j (0 = deepest).
    let mut levels: Vec<Vec<(u64, bool)>> = Vec::with_capacity(limit as usize);
    levels.push(leaves.iter().map(|&(w, _)| (w, true)).collect());
    for j in 1..limit as usize {
        let below = &levels[j - 1];
        let packages = below.chunks_exact(2).map(|p| p[0].0 + p[1].0);
        let mut merged = Vec::with_capacity(n + below.len() / 2);
        let mut leaf = leaves.iter().map(|&(w, _)| w).peekable();
        let mut pkg = packages.peekable();
        loop {
            match (leaf.peek(), pkg.peek()) {
                (Some(&l), Some(&p)) if l <= p => {
                    merged.push((l, true));
                    leaf.next();
                }
                (_, Some(&p)) => {
                    merged.push((p, false));
                    pkg.next();
                }
                (Some(&l), None) => {
                    merged.push((l, true));
                    leaf.next();
                }
                (None, None) => break,
            }
        }
        levels.push(merged);
    }
    let mut take = 2 * n - 2;
    for level in levels.iter().rev() {
        let taken = &level[..take.min(level.len())];
        let leaves_taken = taken.iter().filter(|(_, is_leaf)| *is_leaf).count();
        for &(_, s) in &leaves[..leaves_taken] {
            lens[s] += 1;
        }
        take = 2 * (taken.len() - leaves_taken);
    }
    lens
}

/// Canonical codes for `lens`, bit-reversed for an LSB-first stream.
fn canonical_codes(lens: &[u8; 256]) -> [u16; 256] {
    let mut count = [0u16; MAX_BITS as usize + 1];
    for &l in lens.iter() {
        count[l as usize] += 1;
    }
    count[0] = 0;
    let mut next = [0u16; MAX_BITS as usize + 2];
    let mut code = 0u16;
    for len in 1..=MAX_BITS as usize {
        code = (code + count[len - 1]) << 1;
        next[len] = code;
    }
    let mut codes = [0u16; 256];
    for s in 0..256 {
        let l = lens[s] as u32;
        if l > 0 {
            let c = next[l as usize];
            next[l as usize] += 1;
            codes[s] = c.reverse_bits() >> (16 - l);
        }
    }
    codes
}

fn write_lengths(lens: &[u8; 256], out: &mut Vec<u8>) {
    let first = (0..256).find(|&s| lens[s] > 0).unwrap_or(0);
    let last = (0..256).rev().find(|&s| lens[s] > 0).unwrap_or(0);
    out.push(first as u8);
    out.push(last as u8);
    for pair in lens[first..=last].chunks(2) {
        let hi = pair.get(1).copied().unwrap_or(0);
        out.push(pair[0] | (hi << 4));
    }
}

/// Serialised size of a table written by [`write_lengths`].
fn lengths_size(lens: &[u8; 256]) -> usize {
    let first = (0..256).find(|&s| lens[s] > 0).unwrap_or(0);
    let last = (0..256).rev().find(|&s| lens[s] > 0).unwrap_or(0);
    2 + (last + 1 - first).div_ceil(2)
}

/// Parses one table of code lengths; returns it and the number of bytes read.
fn read_lengths(data: &[u8]) -> Result<([u8; 256], usize), CodecError> {
    const TRUNC: CodecError = CodecError("huffman table truncated");
    let (&first, &last) = (data.first().ok_or(TRUNC)?, data.get(1).ok_or(TRUNC)?);
    let (first, last) = (first as usize, last as usize);
    if first > last {
        return Err(CodecError("huffman table symbol range is reversed"));
    }
    let count = last + 1 - first;
    let nbytes = count.div_ceil(2);
    let packed = data.get(2..2 + nbytes).ok_or(TRUNC)?;
    let mut lens = [0u8; 256];
    for (i, len) in lens[first..=last].iter_mut().enumerate() {
        let b = packed[i / 2];
        *len = if i % 2 == 0 { b & 15 } else { b >> 4 };
    }
    let mut kraft = 0u64;
    for &l in &lens {
        if l as u32 > MAX_BITS {
            return Err(CodecError("huffman code length over 12 bits"));
        }
        if l > 0 {
            kraft += 1 << (MAX_BITS - l as u32);
        }
    }
    if kraft == 0 || kraft > TABLE_LEN as u64 {
        return Err(CodecError("huffman code lengths are not a prefix code"));
    }
    Ok((lens, 2 + nbytes))
}

fn coded_bits(hist: &[u32; 256], lens: &[u8; 256]) -> u64 {
    hist.iter()
        .zip(lens)
        .map(|(&h, &l)| h as u64 * l as u64)
        .sum()
}

/// Start of each stream's quarter of a plane of `n` symbols.
fn quarter(n: usize) -> usize {
    n.div_ceil(STREAMS)
}

/// Huffman-codes `data` (whose histogram is `hist`), appending the plane payload to `out`.
pub fn encode(data: &[u8], hist: &[u32; 256], out: &mut Vec<u8>) {
    let q = quarter(data.len());
    let ranges: [(usize, usize); STREAMS] =
        std::array::from_fn(|k| ((k * q).min(data.len()), ((k + 1) * q).min(data.len())));
    // Quarter histograms: three counted, the last one is what remains of the whole.
    let mut quarters = [[0u32; 256]; STREAMS];
    for k in 0..STREAMS - 1 {
        quarters[k] = histogram(&data[ranges[k].0..ranges[k].1]);
    }
    let (counted, last) = quarters.split_at_mut(STREAMS - 1);
    last[0] = *hist;
    for q in counted.iter() {
        for (rest, &c) in last[0].iter_mut().zip(q) {
            // `hist` is the histogram of `data`, so this cannot underflow for a correct caller.
            *rest = rest.saturating_sub(c);
        }
    }
    let shared = code_lengths(hist, MAX_BITS);
    let shared_cost = coded_bits(hist, &shared) + 8 * lengths_size(&shared) as u64;
    let own: [[u8; 256]; STREAMS] = std::array::from_fn(|k| code_lengths(&quarters[k], MAX_BITS));
    let own_cost: u64 = (0..STREAMS)
        .map(|k| coded_bits(&quarters[k], &own[k]) + 8 * lengths_size(&own[k]) as u64)
        .sum();
    // An empty quarter (tiny planes) has no code of its own to write.
    let all_used = ranges.iter().all(|(a, b)| a < b);
    let tables: &[[u8; 256]] = if all_used && own_cost < shared_cost {
        &own
    } else {
        std::slice::from_ref(&shared)
    };
    out.push(tables.len() as u8);
    for lens in tables {
        write_lengths(lens, out);
    }
    let sizes_at = out.len();
    out.extend_from_slice(&[0u8; 12]);
    let mut sizes = [0usize; STREAMS];
    for (k, size) in sizes.iter_mut().enumerate() {
        let lens = &tables[k.min(tables.len() - 1)];
        let codes = canonical_codes(lens);
        // Code in the low 16 bits, length above: one load per symbol.
        let table: [u32; 256] = std::array::from_fn(|s| codes[s] as u32 | (lens[s] as u32) << 16);
        let before = out.len();
        encode_stream(&data[ranges[k].0..ranges[k].1], &table, out);
        *size = out.len() - before;
    }
    for k in 0..3 {
        out[sizes_at + 4 * k..sizes_at + 4 * k + 4]
            .copy_from_slice(&(sizes[k] as u32).to_le_bytes());
    }
}

/// Appends one LSB-first bit stream; whole bytes are flushed with one 8-byte store.
fn encode_stream(data: &[u8], table: &[u32; 256], out: &mut Vec<u8>) {
    let start = out.len();
    // Worst case 12 bits per symbol plus room for the last 8-byte store.
    out.resize(start + data.len() * 12 / 8 + 16, 0);
    let buf = &mut out[start..];
    let mut pos = 0usize;
    let mut acc = 0u64;
    let mut nbits = 0u32;
    let put = |acc: &mut u64, nbits: &mut u32, s: u8| {
        let e = table[s as usize];
        *acc |= ((e & 0xFFFF) as u64) << *nbits;
        *nbits += e >> 16;
    };
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        // At most 7 bits pending + 4 x 12 bits fits the 64-bit accumulator.
        put(&mut acc, &mut nbits, c[0]);
        put(&mut acc, &mut nbits, c[1]);
        put(&mut acc, &mut nbits, c[2]);
        put(&mut acc, &mut nbits, c[3]);
        buf[pos..pos + 8].copy_from_slice(&acc.to_le_bytes());
        pos += (nbits >> 3) as usize;
        acc >>= nbits & !7;
        nbits &= 7;
    }
    for &s in chunks.remainder() {
        put(&mut acc, &mut nbits, s);
    }
    buf[pos..pos + 8].copy_from_slice(&acc.to_le_bytes());
    pos += nbits.div_ceil(8) as usize;
    out.truncate(start + pos);
}

/// Decode state of one bit stream.
struct Stream<'a> {
    data: &'a [u8],
    /// Next byte to load; may run past `data.len()` on corrupt input (zeros are shifted in).
    pos: usize,
    buf: u64,
    nbits: u32,
}

impl<'a> Stream<'a> {
    fn new(data: &'a [u8]) -> Self {
        Stream {
            data,
            pos: 0,
            buf: 0,
            nbits: 0,
        }
    }

    /// Tops the buffer up to at least 56 bits: one unaligned load, no per-byte branches.
    #[inline(always)]
    fn refill(&mut self) {
        if let Some(word) = self.data.get(self.pos..self.pos + 8) {
            let mut b = [0u8; 8];
            b.copy_from_slice(word);
            self.buf |= u64::from_le_bytes(b) << self.nbits;
            self.pos += ((63 - self.nbits) >> 3) as usize;
            self.nbits |= 56;
        } else {
            while self.nbits <= 56 {
                let byte = self.data.get(self.pos).copied().unwrap_or(0);
                self.buf |= (byte as u64) << self.nbits;
                self.pos += 1;
                self.nbits += 8;
            }
        }
    }

    #[inline(always)]
    fn decode(&mut self, table: &[u16; TABLE_LEN]) -> u8 {
        let e = table[(self.buf & TABLE_MASK) as usize];
        let len = (e >> 8) as u32;
        self.buf >>= len;
        self.nbits -= len;
        e as u8
    }

    /// True if decoding consumed more bits than the stream holds.
    fn overran(&self) -> bool {
        (self.pos as u64) * 8 - (self.nbits as u64) > (self.data.len() as u64) * 8
    }
}

/// Decodes a plane payload made by [`encode`] into `out` (whose length is the symbol count).
pub fn decode(payload: &[u8], out: &mut [u8]) -> Result<(), CodecError> {
    let count = *payload
        .first()
        .ok_or(CodecError("huffman table truncated"))? as usize;
    if count != 1 && count != STREAMS {
        return Err(CodecError("huffman table count must be 1 or 4"));
    }
    let mut used = 1;
    let mut tables = Vec::with_capacity(count);
    for _ in 0..count {
        let (lens, n) = read_lengths(&payload[used..])?;
        tables.push(decode_table(&lens));
        used += n;
    }
    let table_for = |k: usize| &*tables[k.min(count - 1)];
    let (t0, t1, t2, t3) = (table_for(0), table_for(1), table_for(2), table_for(3));
    let sizes_bytes = payload
        .get(used..used + 12)
        .ok_or(CodecError("huffman stream sizes truncated"))?;
    let mut streams_data = &payload[used + 12..];
    let mut streams: Vec<Stream> = Vec::with_capacity(STREAMS);
    for k in 0..STREAMS {
        let size = if k < 3 {
            let mut b = [0u8; 4];
            b.copy_from_slice(&sizes_bytes[4 * k..4 * k + 4]);
            u32::from_le_bytes(b) as usize
        } else {
            streams_data.len()
        };
        if size > streams_data.len() {
            return Err(CodecError("huffman stream sizes exceed the plane"));
        }
        let (head, rest) = streams_data.split_at(size);
        streams.push(Stream::new(head));
        streams_data = rest;
    }
    let q = quarter(out.len());
    let mut outs: [&mut [u8]; STREAMS] = Default::default();
    let mut rest = out;
    for o in outs.iter_mut() {
        let (head, tail) = rest.split_at_mut(q.min(rest.len()));
        *o = head;
        rest = tail;
    }
    let groups = outs.iter().map(|o| o.len() / 4).min().unwrap_or(0);
    let [o0, o1, o2, o3] = outs;
    let (h0, r0) = o0.split_at_mut(groups * 4);
    let (h1, r1) = o1.split_at_mut(groups * 4);
    let (h2, r2) = o2.split_at_mut(groups * 4);
    let (h3, r3) = o3.split_at_mut(groups * 4);
    let [mut s0, mut s1, mut s2, mut s3]: [Stream; STREAMS] = match streams.try_into() {
        Ok(s) => s,
        Err(_) => return Err(CodecError("huffman stream count")),
    };
    let quads = h0
        .chunks_exact_mut(4)
        .zip(h1.chunks_exact_mut(4))
        .zip(h2.chunks_exact_mut(4))
        .zip(h3.chunks_exact_mut(4));
    for (((a, b), c), d) in quads {
        s0.refill();
        s1.refill();
        s2.refill();
        s3.refill();
        for i in 0..4 {
            a[i] = s0.decode(t0);
            b[i] = s1.decode(t1);
            c[i] = s2.decode(t2);
            d[i] = s3.decode(t3);
        }
    }
    for (s, tail, table) in [
        (&mut s0, r0, t0),
        (&mut s1, r1, t1),
        (&mut s2, r2, t2),
        (&mut s3, r3, t3),
    ] {
        for o in tail.iter_mut() {
            s.refill();
            *o = s.decode(table);
        }
        if s.overran() {
            return Err(CodecError("huffman stream overrun"));
        }
    }
    Ok(())
}

/// Lookup table: low 8 bits symbol, high 8 bits code length.
fn decode_table(lens: &[u8; 256]) -> Box<[u16; TABLE_LEN]> {
    let codes = canonical_codes(lens);
    // Unfilled slots (only reachable in an incomplete code on corrupt data) consume 12 bits.
    let mut table = Box::new([(MAX_BITS as u16) << 8; TABLE_LEN]);
    for s in 0..256 {
        let l = lens[s] as usize;
        if l == 0 {
            continue;
        }
        let entry = (l as u16) << 8 | s as u16;
        let mut i = codes[s] as usize;
        while i < TABLE_LEN {
            table[i] = entry;
            i += 1 << l;
        }
    }
    table
}

/// Encodes `data` into a new buffer, computing its histogram; for tests and benches.
pub fn encode_plain(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    encode(data, &histogram(data), &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kraft(lens: &[u8; 256]) -> u64 {
        lens.iter()
            .filter(|&&l| l > 0)
            .map(|&l| 1u64 << (MAX_BITS - l as u32))
            .sum()
    }

    #[test]
    fn lengths_limited_and_prefix_free_on_extreme_skew() {
        let mut hist = [0u32; 256];
        for (s, h) in hist.iter_mut().enumerate() {
            // Fibonacci-like growth would give depth 255 without limiting.
            *h = 1u32 << (s % 31);
        }
        let lens = code_lengths(&hist, MAX_BITS);
        assert!(lens.iter().all(|&l| (1..=12).contains(&l)));
        assert!(kraft(&lens) <= 1 << MAX_BITS);
    }

    #[test]
    fn roundtrip_small_sizes() {
        for n in 0..40usize {
            let data: Vec<u8> = (0..n).map(|i| (i * 7 % 5) as u8).collect();
            let enc = encode_plain(&data);
            let mut out = vec![0u8; n];
            if n > 0 {
                decode(&enc, &mut out).unwrap();
            }
            assert_eq!(out, data, "n={n}");
        }
    }
}
