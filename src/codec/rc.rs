//! A 32-bit range coder (carry-propagating, byte-wise renormalisation) with a static order-0
//! model per plane: frequencies are normalised to [`PROB_BITS`] bits, transmitted compactly, and
//! decoded through a slot-to-symbol lookup table, never a linear search.
//!
//! Plane payload layout:
//! ```text
//! u8     last used symbol L
//! freqs  for symbols 0..=L: 0x00 n = a run of n+1 zero frequencies;
//!        0x01..=0x7F = that frequency; 0x80|hi, lo = frequency (hi << 8 | lo)
//! bytes  the range-coded symbols
//! ```

use crate::error::CodecError;
use std::num::NonZeroU32;

/// Frequencies sum to `1 << PROB_BITS`.
pub const PROB_BITS: u32 = 15;
pub(crate) const PROB_SCALE: u32 = 1 << PROB_BITS;
const TOP: u32 = 1 << 24;

/// A normalised frequency table and its cumulative sums.
#[derive(Clone)]
pub struct Model {
    freq: [u32; 256],
    cum: [u32; 257],
}

impl Model {
    /// Scales `hist` to sum to `1 << PROB_BITS`, keeping every used symbol at least 1.
    ///
    /// Returns `None` if fewer than two symbols are used (a constant plane needs no coder).
    pub fn from_histogram(hist: &[u32; 256]) -> Option<Model> {
        let total: u64 = hist.iter().map(|&c| c as u64).sum();
        if hist.iter().filter(|&&c| c > 0).count() < 2 {
            return None;
        }
        let mut freq = [0u32; 256];
        let mut sum = 0i64;
        for s in 0..256 {
            if hist[s] > 0 {
                let f = ((hist[s] as u64 * PROB_SCALE as u64 + total / 2) / total).max(1);
                freq[s] = f as u32;
                sum += f as i64;
            }
        }
        // Settle the rounding difference on the largest frequencies, where it costs least.
        let mut order: Vec<usize> = (0..256).filter(|&s| freq[s] > 0).collect();
        order.sort_by_key(|&s| (std::cmp::Reverse(freq[s]), s));
        let mut diff = PROB_SCALE as i64 - sum;
        while diff != 0 {
            for &s in &order {
                if diff > 0 {
                    freq[s] += 1;
                    diff -= 1;
                } else if diff < 0 && freq[s] > 1 {
                    freq[s] -= 1;
                    diff += 1;
                }
                if diff == 0 {
                    break;
                }
            }
        }
        Some(Model::with_freqs(freq))
    }

    fn with_freqs(freq: [u32; 256]) -> Model {
        let mut cum = [0u32; 257];
        for s in 0..256 {
            cum[s + 1] = cum[s] + freq[s];
        }
        Model { freq, cum }
    }

    /// Appends the compact frequency table.
    pub fn write(&self, out: &mut Vec<u8>) {
        let last = (0..256).rev().find(|&s| self.freq[s] > 0).unwrap_or(0);
        out.push(last as u8);
        let mut s = 0;
        while s <= last {
            let f = self.freq[s];
            if f == 0 {
                let mut run = 1;
                while s + run <= last && run < 256 && self.freq[s + run] == 0 {
                    run += 1;
                }
                out.push(0);
                out.push((run - 1) as u8);
                s += run;
                continue;
            }
            if f < 0x80 {
                out.push(f as u8);
            } else {
                out.push(0x80 | (f >> 8) as u8);
                out.push(f as u8);
            }
            s += 1;
        }
    }

    /// Parses a table written by [`Model::write`]; returns it and the bytes read.
    pub fn read(data: &[u8]) -> Result<(Model, usize), CodecError> {
        const TRUNC: CodecError = CodecError("range coder table truncated");
        let mut pos = 0;
        let mut next = || {
            let b = data.get(pos).copied().ok_or(TRUNC);
            pos += 1;
            b
        };
        let last = next()? as usize;
        let mut freq = [0u32; 256];
        let mut s = 0;
        while s <= last {
            let b = next()?;
            if b == 0 {
                s += next()? as usize + 1;
            } else if b < 0x80 {
                freq[s] = b as u32;
                s += 1;
            } else {
                freq[s] = ((b as u32 & 0x7F) << 8) | next()? as u32;
                s += 1;
            }
        }
        if s > last + 1 {
            return Err(CodecError("range coder table has a zero run past its end"));
        }
        let sum: u32 = freq.iter().sum();
        if sum != PROB_SCALE {
            return Err(CodecError(
                "range coder frequencies do not sum to the scale",
            ));
        }
        Ok((Model::with_freqs(freq), pos))
    }

    fn slot_table(&self) -> Box<[u8; PROB_SCALE as usize]> {
        let mut t = Box::new([0u8; PROB_SCALE as usize]);
        for s in 0..256 {
            t[self.cum[s] as usize..self.cum[s + 1] as usize].fill(s as u8);
        }
        t
    }
}

/// Probability bits of the adaptive binary models ([`Encoder::encode_bit`]).
pub(crate) const BIT_PROB_BITS: u32 = 12;
/// Initial state of an adaptive binary model: probability one half.
pub(crate) const BIT_HALF: u16 = 1 << (BIT_PROB_BITS - 1);
/// Adaptation speed of the binary models: each bit moves the estimate by 1/256 of the error.
/// The bits modelled are nearly stationary, so slow adaptation wins (measured: 1/256 codes the
/// MiniLM BF16 file 0.13% smaller than 1/32).
const BIT_ADAPT: u32 = 8;

/// The updated probability of a 0 after coding a bit (`mask`: all ones for a 1, else 0). It
/// stays within `[255, 3841]` (of 4096), so neither outcome ever gets an empty interval and a
/// coded bit keeps at least `2^24 / 4096 * 255 > 2^19` of the range.
#[inline(always)]
fn adapt(p: u32, mask: u32) -> u16 {
    // One shift for both directions: towards 4096 for a 0 bit, `(4096 - p) >> 8`; towards 0
    // for a 1 bit, `(255 - p) >> 8` rounded down (arithmetic shift), which is `-(p >> 8)`.
    let target = (1 << BIT_PROB_BITS) - (mask & ((1 << BIT_PROB_BITS) - 255));
    (p as i32 + ((target as i32 - p as i32) >> BIT_ADAPT)) as u16
}

/// Range encoder writing into its own buffer.
///
/// A carry out of `low` is added straight into the bytes already written (at most back to the
/// stream's first byte, which a carry never reaches: the coded value stays below 1). The bytes
/// are those of the classic cache-and-pending formulation without its always-zero first byte.
///
/// Renormalisation is branch-free: it stores the byte(s) it might shift out at `pos` (the
/// buffer is kept zero-filled ahead of `pos`) and advances `pos` by the number actually shifted
/// out, so bytes past `pos` are scratch. The shift happens on an unpredictable fraction of the
/// symbols, where a branch would mispredict.
pub(crate) struct Encoder {
    /// Bottom of the interval; bit 32 is a pending carry.
    low: u64,
    range: u32,
    /// Bytes written so far; `buf[pos..]` is scratch. 32 bits (streams are at most a block)
    /// spare the bounds checks an overflow test.
    pos: u32,
    buf: Vec<u8>,
}

impl Encoder {
    /// An encoder expecting about `bytes` bytes of output (it grows as needed).
    pub(crate) fn with_capacity(bytes: usize) -> Self {
        Encoder {
            low: 0,
            range: u32::MAX,
            pos: 0,
            buf: vec![0; bytes.max(16)],
        }
    }

    /// Codes a symbol occupying `[cum, cum + freq)` of a total of `1 << PROB_BITS`.
    #[inline(always)]
    pub(crate) fn encode(&mut self, cum: u32, freq: u32) {
        let r = self.range >> PROB_BITS;
        self.low += r as u64 * cum as u64;
        self.range = r * freq;
        self.carry_check();
        // A symbol keeps at least (range >> 15) * 1 >= 2^9: at most two bytes go out.
        let n = (self.range < TOP) as u32 + (self.range < 1 << 16) as u32;
        self.put2((self.low >> 16) as u16);
        let sh = 8 * n;
        self.low = (self.low << sh) & 0xFFFF_FFFF;
        self.range <<= sh;
        self.pos += n;
    }

    /// Codes one bit with an adaptive model `prob` (probability of a 0), then updates it.
    /// Branch-free (mask arithmetic), like [`Decoder::decode_bit`].
    #[inline(always)]
    pub(crate) fn encode_bit(&mut self, prob: &mut u16, bit: u32) {
        let p = *prob as u32;
        let bound = (self.range >> BIT_PROB_BITS) * p;
        let mask = bit.wrapping_neg();
        self.low += (bound & mask) as u64;
        self.range = (bound & !mask) | (self.range.wrapping_sub(bound) & mask);
        *prob = adapt(p, mask);
        self.carry_check();
        // A bit keeps at least 255/4096 of the range (> 2^19): at most one byte goes out.
        let n = (self.range < TOP) as u32;
        self.put1((self.low >> 24) as u8);
        let sh = 8 * n;
        self.low = (self.low << sh) & 0xFFFF_FFFF;
        self.range <<= sh;
        self.pos += n;
    }

    #[inline(always)]
    fn carry_check(&mut self) {
        if self.low >> 32 != 0 {
            self.low &= 0xFFFF_FFFF;
            carry(&mut self.buf[..self.pos as usize]);
        }
    }

    /// Stores the top byte of `w` at `pos` and the bottom one after it (scratch unless the
    /// caller advances `pos` over them).
    #[inline(always)]
    fn put2(&mut self, w: u16) {
        let pos = self.pos as usize;
        match self.buf.get_mut(pos..pos + 2) {
            Some(b) => b.copy_from_slice(&w.to_be_bytes()),
            None => grow_put(&mut self.buf, pos, &w.to_be_bytes()),
        }
    }

    /// Stores `b` at `pos` (scratch unless the caller advances `pos` over it).
    #[inline(always)]
    fn put1(&mut self, b: u8) {
        let pos = self.pos as usize;
        match self.buf.get_mut(pos) {
            Some(x) => *x = b,
            None => grow_put(&mut self.buf, pos, &[b]),
        }
    }

    /// Flushes the final state and appends the stream to `out`.
    pub(crate) fn finish(mut self, out: &mut Vec<u8>) {
        self.carry_check();
        out.extend_from_slice(&self.buf[..self.pos as usize]);
        out.extend_from_slice(&(self.low as u32).to_be_bytes());
    }
}

/// The cold paths of [`Encoder`] are free functions taking only the buffer, so that the
/// encoder's state does not escape and stays in registers.
#[cold]
#[inline(never)]
fn grow_put(buf: &mut Vec<u8>, pos: usize, bytes: &[u8]) {
    let len = (buf.len() * 2).max(pos + bytes.len());
    buf.resize(len, 0);
    buf[pos..pos + bytes.len()].copy_from_slice(bytes);
}

/// Adds a carry to the bytes written so far.
#[cold]
#[inline(never)]
fn carry(written: &mut [u8]) {
    for b in written.iter_mut().rev() {
        *b = b.wrapping_add(1);
        if *b != 0 {
            return;
        }
    }
    debug_assert!(false, "a carry reached the start of a range coded stream");
}

/// Range decoder state for a stream that starts at some position of a byte slice, which
/// every call passes in: streams coded side by side (see `adaptive`) then share one slice, and
/// a decoder is three words that a loop keeps in registers. Bytes past the slice's end read as
/// zeros; [`finish`] checks that the decoder stopped exactly at its stream's end, so a stream
/// that reads into its neighbour is reported as corrupt like one that reads past the end.
///
/// [`finish`]: Decoder::finish
#[derive(Clone, Copy)]
pub(crate) struct Decoder {
    /// Stream positions fit in 32 bits (block payloads do), which spares the bounds checks an
    /// overflow test.
    pos: u32,
    range: u32,
    code: u32,
}

impl Decoder {
    /// Starts the stream at `data[start..]`.
    pub(crate) fn new(data: &[u8], start: usize) -> Self {
        let mut d = Decoder {
            pos: start as u32,
            range: u32::MAX,
            code: 0,
        };
        for _ in 0..4 {
            d.code = (d.code << 8) | byte(data, d.pos as usize);
            d.pos += 1;
        }
        d
    }

    /// The slot the next symbol falls in, and the scale to pass on to [`Decoder::consume`].
    ///
    /// The range stays at least 2^24 (see [`Decoder::normalize`]), so the scale is at least
    /// 2^9 and the slot below 2^23; on valid input (code < range) it is below
    /// `1 << PROB_BITS`. Callers look it up with a bounds check: a predicted branch, where a
    /// clamp would add to the dependency chain from one symbol to the next (as would a
    /// division-by-zero guard; the zero case is a predicted branch here too).
    #[inline(always)]
    pub(crate) fn slot(&self) -> (u32, u32) {
        let r = self.range >> PROB_BITS;
        let slot = match NonZeroU32::new(r) {
            Some(d) => self.code / d,
            None => 0,
        };
        (r, slot)
    }

    /// Removes the symbol `[cum, cum + freq)` found through [`Decoder::slot`].
    #[inline(always)]
    pub(crate) fn consume(&mut self, data: &[u8], r: u32, cum: u32, freq: u32) {
        self.code = self.code.wrapping_sub(r * cum);
        self.range = r * freq;
        self.normalize(data);
    }

    /// Decodes one bit with the adaptive model `prob`, updating it as the encoder did.
    ///
    /// Branch-free (conditional moves): the bits coded this way are close to coin flips, so a
    /// branch on them would mispredict about every other time.
    #[inline(always)]
    pub(crate) fn decode_bit(&mut self, data: &[u8], prob: &mut u16) -> u32 {
        let p = *prob as u32;
        let bound = (self.range >> BIT_PROB_BITS) * p;
        let one = self.code >= bound;
        self.code = if one { self.code - bound } else { self.code };
        self.range = if one { self.range - bound } else { bound };
        *prob = adapt(p, (one as u32).wrapping_neg());
        // A bit keeps at least 255/4096 of the range (> 2^19): one byte always restores 2^24.
        let small = self.range < TOP;
        let next = self.code << 8 | byte(data, self.pos as usize);
        self.code = if small { next } else { self.code };
        self.range = if small { self.range << 8 } else { self.range };
        self.pos += small as u32;
        one as u32
    }

    /// Shifts in the 0, 1 or 2 bytes that bring the range back to at least 2^24, without a
    /// data-dependent branch (the shift happens on an unpredictable quarter of the symbols).
    /// Two bytes always suffice: a symbol keeps at least `(range >> 15) * 1 >= 2^9`.
    #[inline(always)]
    fn normalize(&mut self, data: &[u8]) {
        let n = (self.range < TOP) as u32 + (self.range < 1 << 16) as u32;
        let pos = self.pos as usize;
        let next = match data.get(pos..pos + 2) {
            Some(b) => (b[0] as u32) << 8 | b[1] as u32,
            None => byte(data, pos) << 8 | byte(data, pos + 1),
        };
        let sh = 8 * n;
        self.code = ((self.code as u64) << sh | (next >> (16 - sh)) as u64) as u32;
        self.range <<= sh;
        self.pos += n;
    }

    /// Checks that exactly the stream's bytes, up to `end`, were read; anything else is
    /// corruption.
    pub(crate) fn finish(self, end: usize) -> Result<(), CodecError> {
        if self.pos as usize != end {
            return Err(CodecError("range coded stream length mismatch"));
        }
        Ok(())
    }
}

/// The symbol for a slot past the table, which only corrupt input reaches: the last one.
/// Cold and out of line, so the lookup stays a predicted branch instead of a conditional move
/// on the path from one symbol to the next.
#[cold]
#[inline(never)]
pub(crate) fn past_table(slots: &[u8]) -> u8 {
    slots.last().copied().unwrap_or(0)
}

/// `data[pos]`, or 0 past the end.
#[inline(always)]
fn byte(data: &[u8], pos: usize) -> u32 {
    data.get(pos).copied().unwrap_or(0) as u32
}

/// Range-codes `data` with a model built from `hist`, appending the plane payload to `out`.
///
/// Returns `false` (and appends nothing) when fewer than two symbols occur.
pub fn encode(data: &[u8], hist: &[u32; 256], out: &mut Vec<u8>) -> bool {
    let Some(model) = Model::from_histogram(hist) else {
        return false;
    };
    out.reserve(data.len() + 600);
    model.write(out);
    let mut enc = Encoder::with_capacity(data.len() + 16);
    for &s in data {
        enc.encode(model.cum[s as usize], model.freq[s as usize]);
    }
    enc.finish(out);
    true
}

/// Decodes a plane payload made by [`encode`] into `out`.
pub fn decode(payload: &[u8], out: &mut [u8]) -> Result<(), CodecError> {
    let (model, used) = Model::read(payload)?;
    let slots = model.slot_table();
    let data = &payload[used..];
    let mut dec = Decoder::new(data, 0);
    for o in out.iter_mut() {
        let (r, slot) = dec.slot();
        let s = match slots.get(slot as usize) {
            Some(&s) => s,
            None => past_table(&slots[..]),
        };
        *o = s;
        dec.consume(data, r, model.cum[s as usize], model.freq[s as usize]);
    }
    dec.finish(data.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entropy::histogram;

    #[test]
    fn adapt_matches_the_two_sided_update() {
        for p in 1..(1u32 << BIT_PROB_BITS) {
            let up = p + (((1 << BIT_PROB_BITS) - p) >> BIT_ADAPT);
            let down = p - (p >> BIT_ADAPT);
            assert_eq!(adapt(p, 0) as u32, up, "p={p}");
            assert_eq!(adapt(p, u32::MAX) as u32, down, "p={p}");
        }
    }

    #[test]
    fn roundtrip_two_symbols() {
        let data: Vec<u8> = (0..1000)
            .map(|i| if i % 10 == 0 { 7 } else { 200 })
            .collect();
        let mut enc = Vec::new();
        assert!(encode(&data, &histogram(&data), &mut enc));
        let mut out = vec![0u8; data.len()];
        decode(&enc, &mut out).unwrap();
        assert_eq!(out, data);
    }
}
