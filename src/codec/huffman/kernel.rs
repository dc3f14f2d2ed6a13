//! The Huffman encode and decode loops, each over four streams interleaved. The decode loop
//! has unchecked refills and stores whose bounds are proven per batch, compiled a second time
//! for BMI2 and LZCNT where the CPU has them: the only `unsafe` of the codec besides the
//! huffjoint kernels.
#![allow(unsafe_code)]

use super::{quarter, Single, Table, COUNT_SHIFT, LEN_SHIFT, LOOKUP_MASK, MAX_SYMS, STREAMS};
use crate::error::CodecError;

/// One stream to encode: its symbols, their codes (code in the low 16 bits, length above) and
/// the bytes the stream takes, known from the histogram.
pub(crate) struct EncodeLane<'a> {
    pub(crate) data: &'a [u8],
    pub(crate) table: &'a [u32; 256],
    pub(crate) len: usize,
}

/// A stream being written: its bit accumulator, the bits pending in it, and the byte of the
/// plane's buffer that the accumulator starts at.
#[derive(Clone, Copy, Default)]
struct Writer {
    acc: u64,
    bits: u32,
    pos: usize,
}

impl Writer {
    /// Adds the code of `s`.
    #[inline(always)]
    fn put(&mut self, table: &[u32; 256], s: u8) {
        let e = table[s as usize];
        self.acc |= ((e & 0xFFFF) as u64) << self.bits;
        self.bits += e >> 16;
    }

    /// Moves past the whole bytes of the accumulator, just stored at `pos`.
    #[inline(always)]
    fn advance(&mut self) {
        self.pos += (self.bits >> 3) as usize;
        self.acc >>= self.bits & !7;
        self.bits &= 7;
    }

    /// Stores the accumulator at its byte, overwriting the 8 bytes there, and moves past the
    /// whole bytes in it. The bytes past the stream's last bit are zeros, so this is only for
    /// stores that end inside the stream: a later store rewrites them.
    #[inline(always)]
    fn flush(&mut self, buf: &mut [u8]) {
        buf[self.pos..self.pos + 8].copy_from_slice(&self.acc.to_le_bytes());
        self.advance();
    }

    /// [`Writer::flush`] for a stream's last bytes: the store ORs the word in, since its bytes
    /// past the stream's last bit may be the next stream's, already written (or zeros still).
    #[inline(always)]
    fn flush_or(&mut self, buf: &mut [u8]) {
        let word = &mut buf[self.pos..self.pos + 8];
        let old = u64::from_le(bytemuck::pod_read_unaligned(word));
        word.copy_from_slice(&(old | self.acc).to_le_bytes());
        self.advance();
    }
}

/// Symbols of a stream that are coded with ORed stores: with more left, the bytes still to come
/// (at least a bit per symbol) cover the 8 a store writes. Loading a word just stored at another
/// offset stalls store forwarding, so the bulk of a stream is coded with plain stores.
pub(crate) const OR_TAIL: usize = 64;

/// Appends the streams of `lanes` to `out`, one after the other, coding two at a time so that
/// their dependency chains (position after position) overlap; four at once would spill their
/// state out of the registers.
pub(crate) fn encode_lanes(lanes: [EncodeLane; STREAMS], out: &mut Vec<u8>) {
    let start = out.len();
    let total: usize = lanes.iter().map(|l| l.len).sum();
    // Zeros for the ORed stores, and room for the last stream's 8-byte store past its end.
    out.resize(start + total + 8, 0);
    let buf = &mut out[start..];
    let mut at = 0;
    for pair in lanes.chunks_exact(2) {
        let mut w = [Writer::default(); 2];
        w[0].pos = at;
        w[1].pos = at + pair[0].len;
        at = w[1].pos + pair[1].len;
        let ends = [w[1].pos, at];
        let shorter = pair[1].data.len().min(pair[0].data.len());
        let done = shorter.saturating_sub(OR_TAIL) / 4 * 4;
        pair_detect(&pair[0], &pair[1], done, &mut w, buf);
        for ((w, lane), end) in w.iter_mut().zip(pair).zip(ends) {
            for c in lane.data[done..].chunks(4) {
                c.iter().for_each(|&s| w.put(lane.table, s));
                w.flush_or(buf);
            }
            w.pos += w.bits.div_ceil(8) as usize;
            assert_eq!(
                w.pos, end,
                "a Huffman stream's length differs from its histogram's"
            );
        }
    }
    out.truncate(start + total);
}

/// Codes the first `n` symbols (a multiple of 4) of lanes `a` and `b` in fours, interleaved;
/// both lanes have at least [`OR_TAIL`] symbols after them.
#[inline(always)]
fn pair(a: &EncodeLane, b: &EncodeLane, n: usize, w: &mut [Writer; 2], buf: &mut [u8]) {
    let [wa, wb] = w;
    for (ca, cb) in a.data[..n].chunks_exact(4).zip(b.data[..n].chunks_exact(4)) {
        // At most 7 bits pending + 4 x 12 bits fits the 64-bit accumulator.
        for k in 0..4 {
            wa.put(a.table, ca[k]);
            wb.put(b.table, cb[k]);
        }
        wa.flush(buf);
        wb.flush(buf);
    }
}

/// [`pair`] compiled for one-uop variable shifts (BMI2).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "bmi2")]
unsafe fn pair_bmi2(a: &EncodeLane, b: &EncodeLane, n: usize, w: &mut [Writer; 2], buf: &mut [u8]) {
    pair(a, b, n, w, buf);
}

/// [`pair`] as compiled for this CPU.
fn pair_detect(a: &EncodeLane, b: &EncodeLane, n: usize, w: &mut [Writer; 2], buf: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("bmi2") {
        // SAFETY: the CPU has the features `pair_bmi2` is compiled for.
        return unsafe { pair_bmi2(a, b, n, w, buf) };
    }
    pair(a, b, n, w, buf);
}

/// Lookups per stream between refills: a refill leaves at least 56 bits, a lookup takes <= 12.
const LOOKUPS: usize = 4;

/// Set above the unconsumed bits of a lane's buffer: its leading zeros are the bits consumed
/// since the last load, so a lookup only shifts and no bit counter is updated per symbol.
const MARKER: u64 = 1 << 63;

/// A decode table of the interleaved loop: how one lookup turns a stream's next bits into
/// output bytes.
///
/// # Safety
/// [`Lookup::lookup`] must move its position on by at most [`Lookup::ADVANCE`] bytes and write
/// only the [`Lookup::STORE`] bytes from it, and take at most [`MAX_BITS`](super::MAX_BITS)
/// bits: the loop's unchecked stores and refills are bounded by these.
pub(crate) unsafe trait Lookup {
    /// Most output bytes one lookup advances.
    const ADVANCE: usize;
    /// Bytes one lookup stores from its position (some past the bytes it advances).
    const STORE: usize;

    /// Decodes the entry for the next bits of `buf` into `out[*at..*at + STORE]`, and moves
    /// both past it.
    ///
    /// # Safety
    /// `out` must be valid for writes at `*at..*at + STORE`.
    unsafe fn lookup(&self, buf: &mut u64, at: &mut usize, out: *mut u8);

    /// The first symbol of the entry for `window` and its code length (`lens`: the lengths).
    fn first(&self, window: usize, lens: &[u8; 256]) -> (u8, u32);
}

// SAFETY: an entry holds up to `MAX_SYMS` symbols, stored as 4 bytes, of at most 12 bits in all.
unsafe impl Lookup for Table {
    const ADVANCE: usize = MAX_SYMS as usize;
    const STORE: usize = 4;

    #[inline(always)]
    unsafe fn lookup(&self, buf: &mut u64, at: &mut usize, out: *mut u8) {
        let e = self[(*buf & LOOKUP_MASK) as usize];
        out.add(*at)
            .cast::<[u8; 4]>()
            .write_unaligned(e.to_le_bytes());
        *buf >>= (e >> LEN_SHIFT) & 63;
        *at += (e >> COUNT_SHIFT) as usize;
    }

    fn first(&self, window: usize, lens: &[u8; 256]) -> (u8, u32) {
        let e = self[window];
        let s = e as u8;
        match e >> COUNT_SHIFT {
            1 => (s, (e >> LEN_SHIFT) & 63),
            _ => (s, lens[s as usize] as u32),
        }
    }
}

// SAFETY: an entry holds one symbol, stored as 1 byte, of at most 12 bits.
unsafe impl Lookup for Single {
    const ADVANCE: usize = 1;
    const STORE: usize = 1;

    #[inline(always)]
    unsafe fn lookup(&self, buf: &mut u64, at: &mut usize, out: *mut u8) {
        let e = self[(*buf & LOOKUP_MASK) as usize];
        out.add(*at).write((e >> 8) as u8);
        *buf >>= e & 63;
        *at += 1;
    }

    fn first(&self, window: usize, _: &[u8; 256]) -> (u8, u32) {
        let e = self[window];
        ((e >> 8) as u8, (e & 63) as u32)
    }
}

/// The 8 bytes of `data` from `at` on, little-endian, zeros past the end.
#[inline(always)]
fn read_word(data: &[u8], at: usize) -> u64 {
    match data.get(at..at + 8) {
        Some(word) => u64::from_le(bytemuck::pod_read_unaligned(word)),
        None => read_word_tail(data, at),
    }
}

/// [`read_word`] near the end of a stream: only its last few symbols, or corrupt input.
#[cold]
fn read_word_tail(data: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    if let Some(rest) = data.get(at..) {
        let n = rest.len().min(8);
        b[..n].copy_from_slice(&rest[..n]);
    }
    u64::from_le_bytes(b)
}

/// One stream with its table of kind `T` and output range `at..end` of the plane.
pub(crate) struct Lane<'a, T> {
    data: &'a [u8],
    /// Byte of `data` that `buf` was last loaded from.
    byte: usize,
    /// The stream's bits from `byte * 8` on, shifted right past those consumed, under [`MARKER`].
    buf: u64,
    table: &'a T,
    lens: &'a [u8; 256],
    at: usize,
    end: usize,
}

// Not derived: a derive would ask `T: Copy`, which the tables (arrays) are not needed to be.
impl<T> Clone for Lane<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Lane<'_, T> {}

impl<'a, T: Lookup> Lane<'a, T> {
    pub(crate) fn new(
        data: &'a [u8],
        table: &'a T,
        lens: &'a [u8; 256],
        at: usize,
        end: usize,
    ) -> Self {
        Lane {
            data,
            byte: 0,
            buf: MARKER,
            table,
            lens,
            at,
            end,
        }
    }

    fn room(&self) -> usize {
        self.end - self.at
    }

    /// Reloads the buffer at the first unconsumed bit: at least 56 bits then lie under the marker.
    #[inline(always)]
    fn refill(&mut self) {
        let consumed = self.buf.leading_zeros() as usize;
        self.byte += consumed / 8;
        self.buf = (read_word(self.data, self.byte) | MARKER) >> (consumed % 8);
    }

    /// [`Lane::refill`] without the bounds check.
    ///
    /// # Safety
    /// `data` must hold 8 bytes from `byte + leading_zeros(buf) / 8` on.
    #[inline(always)]
    unsafe fn refill_unchecked(&mut self) {
        let consumed = self.buf.leading_zeros() as usize;
        self.byte += consumed / 8;
        let word = u64::from_le(
            self.data
                .as_ptr()
                .add(self.byte)
                .cast::<u64>()
                .read_unaligned(),
        );
        self.buf = (word | MARKER) >> (consumed % 8);
    }

    /// Rounds of refill and [`LOOKUPS`] lookups that stay inside `data`: the first refill
    /// advances at most 7 bytes (a safe bound: up to 55 bits are consumed), each later one at
    /// most 6 (a refill leaves under 8 bits of the loaded byte consumed, the lookups take at
    /// most 48), and each loads 8 bytes.
    fn rounds_in_data(&self) -> usize {
        match self.data.len().checked_sub(self.byte + 7 + 8) {
            Some(slack) => slack / 6 + 1,
            None => 0,
        }
    }

    /// Decodes one symbol; for the last few of a stream, where a whole entry may not fit.
    fn decode_one(&mut self, out: &mut [u8]) {
        self.refill();
        let (s, len) = self
            .table
            .first((self.buf & LOOKUP_MASK) as usize, self.lens);
        self.buf >>= len;
        if let Some(o) = out.get_mut(self.at) {
            *o = s;
        }
        self.at += 1;
    }

    /// True if decoding consumed more bits than the stream holds.
    fn overran(&self) -> bool {
        self.byte * 8 + self.buf.leading_zeros() as usize > self.data.len() * 8
    }
}

/// Decodes the first `N` lanes, interleaved, until one has too little output room left for a
/// whole round of unconditional stores, or too few stream bytes for a round of unchecked
/// refills.
#[inline(always)]
fn run<T: Lookup, const N: usize>(lanes: &mut [Lane<T>], out: &mut [u8], shared: Option<&T>) {
    // How far one round of lookups can advance a stream's output position, and how far past
    // its position it can write: the last lookup stores after at most `LOOKUPS - 1` advances.
    let round_advance = LOOKUPS * T::ADVANCE;
    let round_reach = (LOOKUPS - 1) * T::ADVANCE + T::STORE;
    let Some(chunk) = lanes.first_chunk_mut::<N>() else {
        return;
    };
    // A local copy keeps the decode state in registers across the stores through `ptr`.
    let mut l = *chunk;
    let ptr = out.as_mut_ptr();
    loop {
        let room = l.iter().map(Lane::room).min().unwrap_or(0);
        let by_room = (room + round_advance).saturating_sub(round_reach) / round_advance;
        let by_data = l.iter().map(Lane::rounds_in_data).min().unwrap_or(0);
        let rounds = by_room.min(by_data);
        if rounds == 0 {
            break;
        }
        for _ in 0..rounds {
            for lane in l.iter_mut() {
                // SAFETY: `rounds_in_data` bounds the bytes this batch's refills load.
                unsafe { lane.refill_unchecked() };
            }
            for _ in 0..LOOKUPS {
                for lane in l.iter_mut() {
                    // One table for all lanes (the common case) is one pointer in a register
                    // instead of four competing for them.
                    let table = shared.unwrap_or(lane.table);
                    // SAFETY: every lane has `end <= out.len()` and at least `room` bytes left
                    // at the start of this batch; round j starts at most `j * round_advance`
                    // past that and writes below `j * round_advance + round_reach <= room`.
                    unsafe { table.lookup(&mut lane.buf, &mut lane.at, ptr) };
                }
            }
        }
    }
    *chunk = l;
}

/// Decodes all but the last few symbols of each lane (those of its last 20 or so stream
/// bytes, or the last dozen or so output positions).
#[inline(always)]
pub(crate) fn bulk<T: Lookup>(lanes: &mut [Lane<T>; STREAMS], out: &mut [u8]) {
    let first = lanes[0].table;
    match lanes.iter().all(|l| std::ptr::eq(l.table, first)) {
        true => bulk_with(lanes, out, Some(first)),
        false => bulk_with(lanes, out, None),
    }
}

/// [`bulk`] with `shared` the table of every lane, if they share one.
#[inline(always)]
fn bulk_with<T: Lookup>(lanes: &mut [Lane<T>; STREAMS], out: &mut [u8], shared: Option<&T>) {
    // Streams finish the interleaved loop at different times (their codes differ in length);
    // the ones with the most left go on together.
    run::<T, 4>(lanes, out, shared);
    lanes.sort_unstable_by_key(|l| std::cmp::Reverse(l.room()));
    run::<T, 3>(lanes, out, shared);
    lanes[..3].sort_unstable_by_key(|l| std::cmp::Reverse(l.room()));
    run::<T, 2>(lanes, out, shared);
    lanes[..2].sort_unstable_by_key(|l| std::cmp::Reverse(l.room()));
    run::<T, 1>(lanes, out, shared);
}

/// [`bulk`] compiled for one-uop variable shifts (BMI2) and leading-zero counts (LZCNT).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "bmi2,lzcnt")]
unsafe fn bulk_bmi2<T: Lookup>(lanes: &mut [Lane<T>; STREAMS], out: &mut [u8]) {
    bulk(lanes, out);
}

/// [`bulk`] as compiled for this CPU.
pub(crate) fn bulk_detect<T: Lookup>(lanes: &mut [Lane<T>; STREAMS], out: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("bmi2") && std::is_x86_feature_detected!("lzcnt") {
        // SAFETY: the CPU has the features `bulk_bmi2` is compiled for.
        return unsafe { bulk_bmi2(lanes, out) };
    }
    bulk(lanes, out);
}

/// An interleaved loop over the lanes of tables of kind `T`.
pub(crate) type Bulk<T> = fn(&mut [Lane<T>; STREAMS], &mut [u8]);

/// Decodes the four `streams` into `out`, each with its table of kind `T` and its code lengths.
pub(crate) fn decode_lanes<T: Lookup>(
    tables: [(&T, &[u8; 256]); STREAMS],
    streams: [&[u8]; STREAMS],
    out: &mut [u8],
    decode_bulk: Bulk<T>,
) -> Result<(), CodecError> {
    let n = out.len();
    let q = quarter(n);
    let mut lanes: [Lane<T>; STREAMS] = std::array::from_fn(|k| {
        let (table, lens) = tables[k];
        Lane::new(
            streams[k],
            table,
            lens,
            (k * q).min(n),
            ((k + 1) * q).min(n),
        )
    });
    decode_bulk(&mut lanes, out);
    for lane in &mut lanes {
        while lane.at < lane.end {
            lane.decode_one(out);
        }
        if lane.overran() {
            return Err(CodecError("huffman stream overrun"));
        }
    }
    Ok(())
}
