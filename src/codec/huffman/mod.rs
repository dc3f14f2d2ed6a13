//! `huffman` (id 2): FAST's coder. Canonical Huffman coding with code lengths limited to
//! [`MAX_BITS`], so that a decoder can look codes up in small tables; this one takes up to three
//! symbols per lookup where codes are short, and one with a shorter dependency chain where they
//! are long (the decode loops are in `kernel.rs`).
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
//! a tensor) at the price of a few bytes and of building more decode tables, and the encoder only
//! pays it when it saves more than 1/256 of the plane.

mod kernel;

use super::spec::Spec;
use crate::error::CodecError;
use kernel::{bulk_detect, decode_lanes, encode_lanes, Bulk, EncodeLane};

/// The `huffman` codec.
pub static SPEC: Spec = Spec::plane_coder(2, "huffman", decode);

/// Longest code length.
pub const MAX_BITS: u32 = 12;
/// Number of `MAX_BITS`-bit windows: Kraft sums count the windows that codes start.
const TABLE_LEN: usize = 1 << MAX_BITS;
/// Number of interleaved bit streams per plane.
pub const STREAMS: usize = 4;
/// Per-stream code tables are used only when they save more than 1/this of a plane's bits:
/// building three more decode tables costs a 1 MiB block's decoder several percent of its time
/// (always taking them where they save anything: 8% more decode instructions on MiniLM BF16 for
/// 0.015% of the file; 1/64 instead cost LSTM weights, whose statistics drift, 0.2%).
const OWN_TABLES_GAIN: u64 = 256;

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
    let mut leaves = [(0u64, 0u8); 256];
    let mut n = 0;
    for (s, &c) in hist.iter().enumerate().filter(|(_, &c)| c > 0) {
        leaves[n] = (c as u64, s as u8);
        n += 1;
    }
    let leaves = &mut leaves[..n];
    if n <= 1 {
        if let Some(&(_, s)) = leaves.first() {
            lens[s as usize] = 1;
        }
        return lens;
    }
    leaves.sort_unstable();
    // The merged list of each level (0 = deepest) in one buffer, each item its weight times
    // two plus one for a package: a leaf sorts before a package of the same weight.
    let width = 2 * n;
    let mut items = vec![0u64; width * limit as usize];
    let mut len = vec![0usize; limit as usize];
    for (slot, &(w, _)) in items.iter_mut().zip(leaves.iter()) {
        *slot = w << 1;
    }
    len[0] = n;
    for j in 1..limit as usize {
        let (done, rest) = items.split_at_mut(j * width);
        let below = &done[(j - 1) * width..][..len[j - 1]];
        let merged = &mut rest[..width];
        let packages = below.len() / 2;
        // Past its end, each side reads as heavier than anything: the other one is taken.
        let leaf = |l: usize| leaves.get(l).map_or(u64::MAX, |&(w, _)| w << 1);
        let pkg = |p: usize| match p < packages {
            // Both halves' flags dropped, the sum's own set.
            true => ((below[2 * p] >> 1) + (below[2 * p + 1] >> 1)) << 1 | 1,
            false => u64::MAX,
        };
        let (mut l, mut p) = (0, 0);
        let m = n + packages;
        // Which side is lighter is a coin toss to a branch predictor: selects, not branches.
        for slot in merged[..m].iter_mut() {
            let (a, b) = (leaf(l), pkg(p));
            let take_leaf = a < b;
            *slot = a.min(b);
            l += take_leaf as usize;
            p += !take_leaf as usize;
        }
        len[j] = m;
    }
    let mut take = 2 * n - 2;
    for j in (0..limit as usize).rev() {
        let taken = &items[j * width..][..take.min(len[j])];
        let leaves_taken = taken.iter().filter(|&&x| x & 1 == 0).count();
        for &(_, s) in &leaves[..leaves_taken] {
            lens[s as usize] += 1;
        }
        take = 2 * (taken.len() - leaves_taken);
    }
    lens
}

/// Canonical codes for `lens`, bit-reversed for an LSB-first stream.
fn canonical_codes(lens: &[u8; 256]) -> [u16; 256] {
    let mut count = [0u16; MAX_BITS as usize + 1];
    // Unused symbols are skipped rather than counted and reset: most of the 256 are unused, and
    // incrementing one counter back to back is a store-to-load chain.
    for &l in lens.iter().filter(|&&l| l > 0) {
        count[l as usize] += 1;
    }
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

/// Bits an ideal order-0 coder spends on the symbols counted in `hist`:
/// `n log2 n - sum of c log2 c`.
fn ideal_bits(hist: &[u32; 256]) -> f64 {
    let xlogx = |c: f64| if c > 0.0 { c * c.log2() } else { 0.0 };
    let n: u64 = hist.iter().map(|&c| c as u64).sum();
    xlogx(n as f64) - hist.iter().map(|&c| xlogx(c as f64)).sum::<f64>()
}

/// Start of each stream's quarter of a plane of `n` symbols.
pub(crate) fn quarter(n: usize) -> usize {
    n.div_ceil(STREAMS)
}

/// The ranges of `data` that streams 0 to 3 code.
fn stream_ranges(n: usize) -> [std::ops::Range<usize>; STREAMS] {
    let q = quarter(n);
    std::array::from_fn(|k| (k * q).min(n)..((k + 1) * q).min(n))
}

/// The histograms of the quarters of `data` that streams 0 to 3 code, counted in one pass
/// (four tables, so neighbouring equal bytes do not wait on each other's counts).
pub fn quarter_histograms(data: &[u8]) -> [[u32; 256]; STREAMS] {
    let ranges = stream_ranges(data.len());
    let parts: [&[u8]; STREAMS] = std::array::from_fn(|k| &data[ranges[k].clone()]);
    let common = parts.iter().map(|p| p.len()).min().unwrap_or(0);
    // Eight symbols of each quarter per load, four tables counted in turn: the loads and the
    // bounds checks of a byte at a time cost as much as the counting.
    let words: [&[[u8; 8]]; STREAMS] = std::array::from_fn(|k| parts[k][..common].as_chunks().0);
    let mut h = [[0u32; 256]; STREAMS];
    for (((a, b), c), d) in words[0].iter().zip(words[1]).zip(words[2]).zip(words[3]) {
        let w = [a, b, c, d].map(|x| u64::from_le_bytes(*x));
        for j in 0..8 {
            for k in 0..STREAMS {
                h[k][(w[k] >> (8 * j)) as u8 as usize] += 1;
            }
        }
    }
    let done = words[0].len() * 8;
    for (hist, part) in h.iter_mut().zip(parts) {
        part[done..].iter().for_each(|&b| hist[b as usize] += 1);
    }
    h
}

/// The sum of `quarters`: the histogram of the whole plane.
pub fn sum_histograms(quarters: &[[u32; 256]; STREAMS]) -> [u32; 256] {
    std::array::from_fn(|s| quarters.iter().map(|q| q[s]).sum())
}

/// Huffman-codes `data`, appending the plane payload to `out`.
pub fn encode(data: &[u8], out: &mut Vec<u8>) {
    encode_counted(data, &quarter_histograms(data), out);
}

/// Huffman-codes `data`, whose quarters' histograms are `quarters`
/// ([`quarter_histograms`]), appending the plane payload to `out`.
///
/// # Panics
/// If `quarters` are not the histograms of `data`'s quarters (the streams are sized from them).
pub fn encode_counted(data: &[u8], quarters: &[[u32; 256]; STREAMS], out: &mut Vec<u8>) {
    let hist = sum_histograms(quarters);
    let ranges = stream_ranges(data.len());
    let shared = code_lengths(&hist, MAX_BITS);
    let shared_cost = coded_bits(&hist, &shared) + 8 * lengths_size(&shared) as u64;
    // An empty quarter (tiny planes) has no code of its own to write. Each table costs the
    // decoder about as much time as decoding tens of thousands of symbols, so four tables must
    // save more than 1/OWN_TABLES_GAIN of the plane's bits. Building them costs the encoder
    // more than counting, so they are built only where an ideal coder saves half that.
    let all_used = ranges.iter().all(|r| !r.is_empty());
    let ideal_saving = ideal_bits(&hist) - quarters.iter().map(ideal_bits).sum::<f64>();
    let may_pay = ideal_saving >= (shared_cost / (2 * OWN_TABLES_GAIN)) as f64;
    let own: Option<[[u8; 256]; STREAMS]> = (all_used && may_pay)
        .then(|| std::array::from_fn(|k| code_lengths(&quarters[k], MAX_BITS)));
    let own_pays = |own: &[[u8; 256]; STREAMS]| {
        let own_cost: u64 = (0..STREAMS)
            .map(|k| coded_bits(&quarters[k], &own[k]) + 8 * lengths_size(&own[k]) as u64)
            .sum();
        own_cost + shared_cost / OWN_TABLES_GAIN < shared_cost
    };
    let tables: &[[u8; 256]] = match &own {
        Some(own) if own_pays(own) => own,
        _ => std::slice::from_ref(&shared),
    };
    out.push(tables.len() as u8);
    for lens in tables {
        write_lengths(lens, out);
    }
    let lens = |k: usize| &tables[k.min(tables.len() - 1)];
    let bytes: [usize; STREAMS] =
        std::array::from_fn(|k| (coded_bits(&quarters[k], lens(k)) as usize).div_ceil(8));
    for size in &bytes[..STREAMS - 1] {
        out.extend_from_slice(&(*size as u32).to_le_bytes());
    }
    // Code in the low 16 bits, length above: one load per symbol.
    let mut codes = [[0u32; 256]; STREAMS];
    for (table, lens) in codes.iter_mut().zip(tables) {
        let c = canonical_codes(lens);
        *table = std::array::from_fn(|s| c[s] as u32 | (lens[s] as u32) << 16);
    }
    let lanes: [EncodeLane; STREAMS] = std::array::from_fn(|k| EncodeLane {
        data: &data[ranges[k].clone()],
        table: &codes[k.min(tables.len() - 1)],
        len: bytes[k],
    });
    encode_lanes(lanes, out);
}

/// Bits a decode table looks up at once: every code fits, so a lookup never needs a second
/// step (an 11-bit table, half the size, cost a test and branch per lookup for the rare 12-bit
/// codes: 8% more decode instructions on FAST's joint keys).
pub(crate) const LOOKUP_BITS: u32 = MAX_BITS;
pub(crate) const LOOKUP_LEN: usize = 1 << LOOKUP_BITS;
pub(crate) const LOOKUP_MASK: u64 = LOOKUP_LEN as u64 - 1;

/// Multi-symbol decode table, indexed by the next [`LOOKUP_BITS`] bits of a stream: an entry
/// holds the up to [`MAX_SYMS`] codes that lie wholly inside those bits, as their symbols in
/// bytes 0-2 (stream order), their total length in bits 24-29 and their count in bits 30-31.
/// Exponent planes average under 3 bits per code, so one trip through the lookup-shift
/// dependency chain yields ~2.9 symbols instead of one, and the decoder stores all four bytes
/// unconditionally. Every entry holds at least one symbol.
pub(crate) type Table = [u32; LOOKUP_LEN];

pub(crate) const MAX_SYMS: u32 = 3;
pub(crate) const LEN_SHIFT: u32 = 24;
pub(crate) const COUNT_SHIFT: u32 = 30;
/// Windows that no code starts (incomplete codes, corrupt data only) read as symbol 0 taking
/// 12 bits, as in the single-symbol decoder, so decoding always makes progress.
const UNFILLED: u32 = MAX_BITS << LEN_SHIFT | 1 << COUNT_SHIFT;
/// Single-symbol decode table, indexed like [`Table`]: the length of the code the bits start
/// with in the low byte (a shift takes it as it is), its symbol in the high byte. For planes whose codes are long (int8
/// weights take 7 bits and more), where a multi-symbol entry rarely holds a second code: a
/// lookup then stores one byte and moves one on, without the entry's count.
pub(crate) type Single = [u16; LOOKUP_LEN];

/// Symbols per multi-symbol lookup ([`symbols_per_lookup`]) below which a plane is decoded
/// with [`Single`] tables. A single-symbol lookup's dependency chain (mask, load, shift) is a
/// step shorter, so it decodes faster until a multi-symbol lookup yields about 1.35 symbols
/// (measured on int8 planes of Gaussian weights at spreads from 1 to 40: the multi-symbol
/// loop decodes 2.2 times as fast at 3 symbols per lookup, 0.8 times at 1).
const SINGLE_BELOW: f64 = 1.3;

/// The code lengths of one table and its lookup table, multi-symbol or single-symbol (only the
/// one a plane uses is built).
pub(crate) struct DecodeTable {
    pub(crate) lens: [u8; 256],
    pub(crate) multi: Box<Table>,
    pub(crate) single: Box<Single>,
}

/// A used symbol, its code length and its code (bit-reversed, as it appears in a stream).
type Code = (u8, u32, usize);

impl DecodeTable {
    /// A table to [`DecodeTable::build`] into.
    fn empty() -> Self {
        DecodeTable {
            lens: [0; 256],
            multi: Box::new([0; LOOKUP_LEN]),
            single: Box::new([0; LOOKUP_LEN]),
        }
    }

    /// Makes this the single-symbol table of code lengths `lens`. Every slot is written.
    fn build_single(&mut self, lens: &[u8; 256]) {
        let codes = canonical_codes(lens);
        // Windows that no code starts (an incomplete code: corrupt data) read as symbol 0
        // taking 12 bits, as [`UNFILLED`] in the multi-symbol table.
        self.single.fill(MAX_BITS as u16);
        for s in (0..256).filter(|&s| lens[s] > 0) {
            let entry = (s as u16) << 8 | lens[s] as u16;
            for slot in self.single[codes[s] as usize..]
                .iter_mut()
                .step_by(1 << lens[s])
            {
                *slot = entry;
            }
        }
        self.lens = *lens;
    }

    /// Makes this the table of code lengths `lens`. Every slot is written, so a table kept from
    /// an earlier plane needs no clearing.
    fn build(&mut self, lens: &[u8; 256]) {
        let codes = canonical_codes(lens);
        // Canonical order (by length, then symbol) is the order of the codes' values read
        // most-significant bit first, which `Builder::fill` relies on.
        let mut all = [(0u8, 0u32, 0usize); 256];
        let mut used = 0;
        for s in (0..256).filter(|&s| lens[s] > 0) {
            all[used] = (s as u8, lens[s] as u32, codes[s] as usize);
            used += 1;
        }
        let syms = &mut all[..used];
        syms.sort_unstable_by_key(|&(s, len, _)| (len, s));
        let mut fits = [0usize; LOOKUP_BITS as usize + 1];
        for d in 1..fits.len() {
            let exact = syms.iter().filter(|c| c.1 as usize == d).count();
            fits[d] = 2 * fits[d - 1] + exact;
        }
        Builder {
            table: &mut self.multi,
            syms,
            fits,
        }
        .fill(0, 0, 0);
        self.lens = *lens;
    }
}

struct Builder<'a> {
    table: &'a mut Table,
    /// Used symbols in canonical order.
    syms: &'a [Code],
    /// `fits[d]`: the d-bit windows that start with a whole code are, read most-significant bit
    /// first, exactly `0..fits[d]` (canonical codes are numbered up by length).
    fits: [usize; LOOKUP_BITS as usize + 1],
}

impl Builder<'_> {
    /// Fills the slots whose low `used` bits (`base`) are the codes that `prefix` holds (an
    /// entry; 0 at the root): each slot is written once, with the longest run of up to
    /// [`MAX_SYMS`] codes its bits start with.
    fn fill(&mut self, base: usize, used: u32, prefix: u32) {
        let count = prefix >> COUNT_SHIFT;
        let symbols = prefix & ((1 << LEN_SHIFT) - 1);
        let room = LOOKUP_BITS - used;
        for &(s, len, code) in self.syms {
            if len > room {
                break;
            }
            let bits = used + len;
            let entry = symbols
                | (s as u32) << (8 * count)
                | bits << LEN_SHIFT
                | (count + 1) << COUNT_SHIFT;
            let start = base | code << used;
            if count + 1 < MAX_SYMS {
                self.fill(start, bits, entry);
            } else {
                let mut slot = start;
                while slot < LOOKUP_LEN {
                    self.table[slot] = entry;
                    slot += 1 << bits;
                }
            }
        }
        // The windows that start with a longer code (or none, in an incomplete code) stop at
        // the prefix; one slot each.
        let rest = if count == 0 { UNFILLED } else { prefix };
        for v in self.fits[room as usize]..1 << room {
            // `v` reversed in `room` bits (the shift stays below 64 when room is 0).
            let window = ((v as u32).reverse_bits() as u64 >> (32 - room)) as usize;
            self.table[base | window << used] = rest;
        }
    }
}

/// The code lengths of a payload's tables (the first `count` of them) and its four streams.
type Parsed<'a> = ([[u8; 256]; STREAMS], usize, [&'a [u8]; STREAMS]);

fn parse(payload: &[u8]) -> Result<Parsed<'_>, CodecError> {
    let count = *payload
        .first()
        .ok_or(CodecError("huffman table truncated"))? as usize;
    if count != 1 && count != STREAMS {
        return Err(CodecError("huffman table count must be 1 or 4"));
    }
    let mut used = 1;
    let mut tables = [[0u8; 256]; STREAMS];
    for lens in &mut tables[..count] {
        let n;
        (*lens, n) = read_lengths(&payload[used..])?;
        used += n;
    }
    let sizes = payload
        .get(used..used + 12)
        .ok_or(CodecError("huffman stream sizes truncated"))?;
    let mut rest = &payload[used + 12..];
    let mut streams = [&rest[..0]; STREAMS];
    for (k, stream) in streams.iter_mut().enumerate() {
        // Stream 3 has no size of its own: it takes the rest.
        let size = match sizes.get(4 * k..4 * k + 4) {
            Some(b) => u32::from_le(bytemuck::pod_read_unaligned(b)) as usize,
            None => rest.len(),
        };
        if size > rest.len() {
            return Err(CodecError("huffman stream sizes exceed the plane"));
        }
        (*stream, rest) = rest.split_at(size);
    }
    Ok((tables, count, streams))
}

/// Decodes a plane payload made by [`encode`] into `out` (whose length is the symbol count).
pub fn decode(payload: &[u8], out: &mut [u8]) -> Result<(), CodecError> {
    decode_with(payload, out, 256, DETECT)
}

/// [`decode`] for payloads whose symbols are all below `symbols` (keys into a table of that
/// many entries): a code table with a longer alphabet is an error.
pub fn decode_below(payload: &[u8], out: &mut [u8], symbols: usize) -> Result<(), CodecError> {
    decode_with(payload, out, symbols, DETECT)
}

/// The interleaved loop a plane is decoded with.
#[derive(Clone, Copy)]
pub(crate) enum Loop {
    /// Over multi-symbol tables.
    Multi(Bulk<Table>),
    /// Over single-symbol tables.
    Single(Bulk<Single>),
}

/// How the loop of a plane is picked.
#[derive(Clone, Copy)]
pub(crate) enum Loops {
    /// By the plane's code lengths ([`SINGLE_BELOW`]).
    Chosen(Bulk<Table>, Bulk<Single>),
    /// Always this one.
    #[cfg(test)]
    Only(Loop),
}

impl Loops {
    /// The loop for a plane whose codes are `long` or not.
    fn pick(self, long: bool) -> Loop {
        match self {
            Loops::Chosen(_, single) if long => Loop::Single(single),
            Loops::Chosen(multi, _) => Loop::Multi(multi),
            #[cfg(test)]
            Loops::Only(one) => one,
        }
    }
}

/// Both loops, compiled for this CPU.
const DETECT: Loops = Loops::Chosen(bulk_detect, bulk_detect);

/// Symbols a multi-symbol lookup yields on average with a code of lengths `lens`, under the
/// probabilities the lengths stand for (a code of length l comes next with probability 2^-l,
/// scaled by the Kraft sum):
/// the chance that one code fits the window, plus that two do, up to [`MAX_SYMS`].
fn symbols_per_lookup(lens: &[u8; 256]) -> f64 {
    const BITS: usize = LOOKUP_BITS as usize;
    let mut p = [0f64; BITS + 1];
    for &l in lens.iter().filter(|&&l| l > 0) {
        p[l as usize] += (-(l as f64)).exp2();
    }
    // An incomplete code (one symbol, a 1-bit code) stands for probabilities that sum to
    // its Kraft sum: scaled to sum to 1, as the symbols that occur do.
    let kraft: f64 = p.iter().sum();
    if kraft > 0.0 {
        p.iter_mut().for_each(|x| *x /= kraft);
    }
    // fits[b]: the chance that the next k codes fit in b bits, for k = 0, 1, ...
    let mut fits = [1f64; BITS + 1];
    let mut total = 0.0;
    for _ in 0..MAX_SYMS {
        fits = std::array::from_fn(|b| (1..=b).map(|l| p[l] * fits[b - l]).sum());
        total += fits[BITS];
    }
    total
}

fn decode_with(
    payload: &[u8],
    out: &mut [u8],
    symbols: usize,
    loops: Loops,
) -> Result<(), CodecError> {
    let (lens, count, streams) = parse(payload)?;
    let lens = &lens[..count];
    if lens
        .iter()
        .any(|l| l[symbols.min(256)..].iter().any(|&x| x != 0))
    {
        return Err(CodecError("huffman table codes symbols past the alphabet"));
    }
    let long = lens.iter().map(symbols_per_lookup).sum::<f64>() < SINGLE_BELOW * count as f64;
    // Tables kept from this thread's last plane: the steady state builds into them instead of
    // allocating (and zeroing) 24 KiB per table per plane. Taken out while in use, so a nested
    // call would only build its own.
    let mut kept = KEPT_TABLES.with(|k| k.take());
    if kept.len() < lens.len() {
        kept.resize_with(lens.len(), DecodeTable::empty);
    }
    let tables = &mut kept[..lens.len()];
    let result = match loops.pick(long) {
        Loop::Single(single) => {
            for (table, l) in tables.iter_mut().zip(lens) {
                table.build_single(l);
            }
            decode_lanes(per_lane(tables, |t| &*t.single), streams, out, single)
        }
        Loop::Multi(multi) => {
            for (table, l) in tables.iter_mut().zip(lens) {
                table.build(l);
            }
            decode_lanes(per_lane(tables, |t| &*t.multi), streams, out, multi)
        }
    };
    KEPT_TABLES.with(|k| k.replace(kept));
    result
}

/// The lookup table (`which` of each) and code lengths of each stream's lane: one shared by
/// all, or one per stream.
fn per_lane<T>(
    tables: &[DecodeTable],
    which: impl Fn(&DecodeTable) -> &T,
) -> [(&T, &[u8; 256]); STREAMS] {
    std::array::from_fn(|k| {
        let t = &tables[k.min(tables.len() - 1)];
        (which(t), &t.lens)
    })
}

thread_local! {
    static KEPT_TABLES: std::cell::RefCell<Vec<DecodeTable>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Encodes `data` into a new buffer, computing its histogram; for tests and benches.
#[cfg(any(test, feature = "internals"))]
pub fn encode_plain(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_counted(data, &quarter_histograms(data), &mut out);
    out
}

#[cfg(test)]
mod tests;
