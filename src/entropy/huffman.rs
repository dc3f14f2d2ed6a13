//! Canonical Huffman coding with code lengths limited to [`MAX_BITS`], so that decoding is one
//! lookup in a 4096-entry table per symbol.
//!
//! Plane payload layout (all integers little-endian):
//! ```text
//! u8        last used symbol L
//! nibbles   code length of symbols 0..=L, two per byte, low nibble first
//! u32 x 3   byte length of streams 0, 1 and 2 (stream 3 takes the rest)
//! streams   4 bit streams; stream k codes the k-th quarter of the plane
//! ```
//! Bits are written LSB first, so the decoder peeks with a mask and consumes with a shift; the
//! four independent streams let the decode loop overlap four dependency chains.

use crate::entropy::histogram;
use crate::error::CodecError;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Longest code length; the decode table has `1 << MAX_BITS` entries.
pub const MAX_BITS: u32 = 12;
const TABLE_LEN: usize = 1 << MAX_BITS;
const TABLE_MASK: u64 = TABLE_LEN as u64 - 1;
/// Number of interleaved bit streams per plane.
pub const STREAMS: usize = 4;

/// Optimal code lengths for `hist`, limited to `limit` bits; unused symbols get length 0.
///
/// A plain Huffman tree is built first; if it is too deep, lengths are clamped and the Kraft
/// excess is paid back by lengthening the rarest codes, then any slack is spent shortening the
/// most frequent ones. For byte alphabets this is within a fraction of a percent of optimal.
pub fn code_lengths(hist: &[u32; 256], limit: u32) -> [u8; 256] {
    let mut lens = [0u8; 256];
    let used: Vec<usize> = (0..256).filter(|&s| hist[s] > 0).collect();
    match used.len() {
        0 => return lens,
        1 => {
            lens[used[0]] = 1;
            return lens;
        }
        _ => {}
    }
    // Tree nodes: leaves are 0..256, internal nodes follow; parent links give depths.
    let mut parent = vec![usize::MAX; 512];
    let mut heap: BinaryHeap<Reverse<(u64, usize)>> =
        used.iter().map(|&s| Reverse((hist[s] as u64, s))).collect();
    let mut next = 256;
    while heap.len() > 1 {
        let (Some(Reverse((fa, a))), Some(Reverse((fb, b)))) = (heap.pop(), heap.pop()) else {
            break;
        };
        parent[a] = next;
        parent[b] = next;
        heap.push(Reverse((fa + fb, next)));
        next += 1;
    }
    let root = next - 1;
    // Internal nodes are created in order, so a parent always has a larger index: walk down.
    let mut depth = vec![0u32; 512];
    for node in (256..root).rev() {
        depth[node] = depth[parent[node]] + 1;
    }
    for &s in &used {
        depth[s] = depth[parent[s]] + 1;
    }
    let mut order = used.clone();
    order.sort_by_key(|&s| (hist[s], s));
    let one = |len: u32| 1i64 << (limit - len);
    let mut kraft: i64 = 0;
    for &s in &used {
        let d = depth[s].min(limit);
        lens[s] = d as u8;
        kraft += one(d);
    }
    let full = 1i64 << limit;
    // Pay back the excess from clamping, rarest symbols first.
    for &s in &order {
        while kraft > full && (lens[s] as u32) < limit {
            kraft -= one(lens[s] as u32 + 1);
            lens[s] += 1;
        }
    }
    // Spend slack on the most frequent symbols.
    for &s in order.iter().rev() {
        while lens[s] > 1 && kraft + one(lens[s] as u32) <= full {
            kraft += one(lens[s] as u32);
            lens[s] -= 1;
        }
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
    let last = (0..256).rev().find(|&s| lens[s] > 0).unwrap_or(0);
    out.push(last as u8);
    for pair in lens[..=last].chunks(2) {
        let hi = pair.get(1).copied().unwrap_or(0);
        out.push(pair[0] | (hi << 4));
    }
}

/// Parses the code lengths; returns them and the number of bytes read.
fn read_lengths(data: &[u8]) -> Result<([u8; 256], usize), CodecError> {
    let &last = data.first().ok_or(CodecError("huffman table truncated"))?;
    let count = last as usize + 1;
    let nbytes = count.div_ceil(2);
    let packed = data
        .get(1..1 + nbytes)
        .ok_or(CodecError("huffman table truncated"))?;
    let mut lens = [0u8; 256];
    for (s, len) in lens[..count].iter_mut().enumerate() {
        let b = packed[s / 2];
        *len = if s % 2 == 0 { b & 15 } else { b >> 4 };
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
    Ok((lens, 1 + nbytes))
}

/// Start of each stream's quarter of a plane of `n` symbols.
fn quarter(n: usize) -> usize {
    n.div_ceil(STREAMS)
}

/// Huffman-codes `data` with its histogram `hist`, appending the plane payload to `out`.
pub fn encode(data: &[u8], hist: &[u32; 256], out: &mut Vec<u8>) {
    let lens = code_lengths(hist, MAX_BITS);
    let codes = canonical_codes(&lens);
    // code in the low 16 bits, length above: one load per symbol.
    let mut table = [0u32; 256];
    for s in 0..256 {
        table[s] = codes[s] as u32 | (lens[s] as u32) << 16;
    }
    let base = out.len();
    write_lengths(&lens, out);
    let sizes_at = out.len();
    out.extend_from_slice(&[0u8; 12]);
    let q = quarter(data.len());
    let mut sizes = [0usize; STREAMS];
    for (k, size) in sizes.iter_mut().enumerate() {
        let start = (k * q).min(data.len());
        let end = ((k + 1) * q).min(data.len());
        let before = out.len();
        encode_stream(&data[start..end], &table, out);
        *size = out.len() - before;
    }
    for k in 0..3 {
        out[sizes_at + 4 * k..sizes_at + 4 * k + 4]
            .copy_from_slice(&(sizes[k] as u32).to_le_bytes());
    }
    debug_assert!(out.len() > base);
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
    let (lens, used) = read_lengths(payload)?;
    let table = decode_table(&lens);
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
    let (h0, t0) = o0.split_at_mut(groups * 4);
    let (h1, t1) = o1.split_at_mut(groups * 4);
    let (h2, t2) = o2.split_at_mut(groups * 4);
    let (h3, t3) = o3.split_at_mut(groups * 4);
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
            a[i] = s0.decode(&table);
            b[i] = s1.decode(&table);
            c[i] = s2.decode(&table);
            d[i] = s3.decode(&table);
        }
    }
    for (s, tail) in [(&mut s0, t0), (&mut s1, t1), (&mut s2, t2), (&mut s3, t3)] {
        for o in tail.iter_mut() {
            s.refill();
            *o = s.decode(&table);
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
