//! The 32-bit range coder the BEST codecs drive (carry-propagating, byte-wise
//! renormalisation): symbols given as intervals of a `1 << PROB_BITS` total, and bits with
//! adaptive binary models. The adaptive frequency model is [`super::model`]; the others live
//! with their codecs ([`crate::codec::range`]'s static one, [`crate::codec::context`]'s).

use crate::error::CodecError;
use std::num::NonZeroU32;

/// Frequencies sum to `1 << PROB_BITS`.
pub const PROB_BITS: u32 = 15;
/// `1 << PROB_BITS`.
pub const PROB_SCALE: u32 = 1 << PROB_BITS;
const TOP: u32 = 1 << 24;

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
        self.encode_bit_at(p, bit);
        *prob = adapt(p, bit.wrapping_neg());
    }

    /// Codes one bit whose 0 has probability `p` of 4096, `p` in `[255, 3841]` (a model that
    /// keeps its own state, such as [`crate::codec::signs`]'s).
    #[inline(always)]
    pub(crate) fn encode_bit_at(&mut self, p: u32, bit: u32) {
        let bound = (self.range >> BIT_PROB_BITS) * p;
        let mask = bit.wrapping_neg();
        self.low += (bound & mask) as u64;
        self.range = (bound & !mask) | (self.range.wrapping_sub(bound) & mask);
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
        self.normalize_bit(data);
        one as u32
    }

    /// Decodes one bit whose 0 has probability `p` of 4096, `p` in `[255, 3841]`, as
    /// [`Encoder::encode_bit_at`] coded it.
    #[inline(always)]
    pub(crate) fn decode_bit_at(&mut self, data: &[u8], p: u32) -> u32 {
        let bound = (self.range >> BIT_PROB_BITS) * p;
        // Mask arithmetic: the bits coded this way are close to coin flips, so a branch on
        // them would mispredict about every other time.
        let one = (self.code >= bound) as u32;
        let mask = one.wrapping_neg();
        self.code -= bound & mask;
        self.range = (bound & !mask) | (self.range.wrapping_sub(bound) & mask);
        self.normalize_bit(data);
        one
    }

    /// Shifts in the byte that brings the range back to at least 2^24 after a bit, if it fell
    /// below: a bit keeps at least 255/4096 of the range (> 2^19), so one byte always suffices.
    #[inline(always)]
    fn normalize_bit(&mut self, data: &[u8]) {
        let small = self.range < TOP;
        let next = self.code << 8 | byte(data, self.pos as usize);
        self.code = if small { next } else { self.code };
        self.range = if small { self.range << 8 } else { self.range };
        self.pos += small as u32;
    }

    /// Shifts in the 0, 1 or 2 bytes that bring the range back to at least 2^24, without a
    /// data-dependent branch (the shift happens on an unpredictable quarter of the symbols).
    /// Two bytes always suffice: a symbol keeps at least `(range >> 15) * 1 >= 2^9`.
    ///
    /// The three outcomes are computed side by side and one is picked by two selects on the
    /// range: the shifts are by constants, so the next division waits on a compare and two
    /// selects rather than on a shift count derived from the range.
    #[inline(always)]
    fn normalize(&mut self, data: &[u8]) {
        let (one, two) = (self.range < TOP, self.range < 1 << 16);
        let pos = self.pos as usize;
        let next = match data.get(pos..pos + 2) {
            Some(b) => (b[0] as u32) << 8 | b[1] as u32,
            None => byte(data, pos) << 8 | byte(data, pos + 1),
        };
        let (code, range) = (self.code, self.range);
        self.code = select(
            two,
            code << 16 | next,
            select(one, code << 8 | next >> 8, code),
        );
        self.range = select(two, range << 16, select(one, range << 8, range));
        self.pos += one as u32 + two as u32;
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

/// `a` if `c`, else `b`: a conditional move, as `c` is an unpredictable outcome of the data.
#[inline(always)]
fn select(c: bool, a: u32, b: u32) -> u32 {
    let mask = (c as u32).wrapping_neg();
    (a & mask) | (b & !mask)
}

/// `data[pos]`, or 0 past the end.
#[inline(always)]
fn byte(data: &[u8], pos: usize) -> u32 {
    data.get(pos).copied().unwrap_or(0) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adapt_matches_the_two_sided_update() {
        for p in 1..(1u32 << BIT_PROB_BITS) {
            let up = p + (((1 << BIT_PROB_BITS) - p) >> BIT_ADAPT);
            let down = p - (p >> BIT_ADAPT);
            assert_eq!(adapt(p, 0) as u32, up, "p={p}");
            assert_eq!(adapt(p, u32::MAX) as u32, down, "p={p}");
        }
    }
}
