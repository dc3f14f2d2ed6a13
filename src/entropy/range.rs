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
    let up = p + (((1 << BIT_PROB_BITS) - p) >> BIT_ADAPT);
    let down = p - (p >> BIT_ADAPT);
    ((up & !mask) | (down & mask)) as u16
}

/// Range encoder writing into a byte vector.
///
/// A carry out of `low` is added straight into the bytes already written (at most back to the
/// stream's first byte, which a carry never reaches: the coded value stays below 1). This keeps
/// the state to three words, so two encoders interleaved in one loop stay in registers; the
/// bytes are those of the classic cache-and-pending formulation without its always-zero first
/// byte.
pub(crate) struct Encoder<'a> {
    /// Bottom of the interval; bit 32 is a pending carry.
    low: u64,
    range: u32,
    /// Where this stream's bytes start in `out`.
    start: usize,
    out: &'a mut Vec<u8>,
}

impl<'a> Encoder<'a> {
    pub(crate) fn new(out: &'a mut Vec<u8>) -> Self {
        Encoder {
            low: 0,
            range: u32::MAX,
            start: out.len(),
            out,
        }
    }

    /// Codes a symbol occupying `[cum, cum + freq)` of a total of `1 << PROB_BITS`.
    #[inline(always)]
    pub(crate) fn encode(&mut self, cum: u32, freq: u32) {
        let r = self.range >> PROB_BITS;
        self.low += r as u64 * cum as u64;
        self.range = r * freq;
        self.normalize();
    }

    /// Codes one bit with an adaptive model `prob` (probability of a 0), then updates it.
    /// Branch-free, like [`Decoder::decode_bit`].
    #[inline(always)]
    pub(crate) fn encode_bit(&mut self, prob: &mut u16, bit: u32) {
        let p = *prob as u32;
        let bound = (self.range >> BIT_PROB_BITS) * p;
        let mask = bit.wrapping_neg();
        self.low += (bound & mask) as u64;
        self.range = (bound & !mask) | (self.range.wrapping_sub(bound) & mask);
        *prob = adapt(p, mask);
        self.normalize();
    }

    #[inline(always)]
    fn normalize(&mut self) {
        if self.low >> 32 != 0 {
            self.carry();
        }
        while self.range < TOP {
            self.out.push((self.low >> 24) as u8);
            self.low = (self.low << 8) & 0xFFFF_FFFF;
            self.range <<= 8;
        }
    }

    /// Adds the carry in bit 32 of `low` to the bytes written so far.
    #[cold]
    fn carry(&mut self) {
        self.low &= 0xFFFF_FFFF;
        for b in self.out[self.start..].iter_mut().rev() {
            *b = b.wrapping_add(1);
            if *b != 0 {
                return;
            }
        }
        debug_assert!(false, "a carry reached the start of a range coded stream");
    }

    /// Flushes the final state.
    pub(crate) fn finish(mut self) {
        if self.low >> 32 != 0 {
            self.carry();
        }
        self.out.extend_from_slice(&(self.low as u32).to_be_bytes());
    }
}

/// Range decoder over a byte slice; reads zeros past the end and reports that in [`finish`].
///
/// [`finish`]: Decoder::finish
pub(crate) struct Decoder<'a> {
    data: &'a [u8],
    pos: usize,
    range: u32,
    code: u32,
}

impl<'a> Decoder<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        let mut d = Decoder {
            data,
            pos: 0,
            range: u32::MAX,
            code: 0,
        };
        for _ in 0..4 {
            d.code = (d.code << 8) | d.byte();
        }
        d
    }

    #[inline(always)]
    fn byte(&mut self) -> u32 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b as u32
    }

    /// The slot (`0..1 << PROB_BITS`) the next symbol falls in, and the scale to pass on to
    /// [`Decoder::consume`].
    #[inline(always)]
    pub(crate) fn slot(&self) -> (u32, u32) {
        let r = self.range >> PROB_BITS;
        // On valid input code < range, so the slot is below the scale; clamp for corrupt input.
        (r, (self.code / r.max(1)).min(PROB_SCALE - 1))
    }

    /// Removes the symbol `[cum, cum + freq)` found through [`Decoder::slot`].
    #[inline(always)]
    pub(crate) fn consume(&mut self, r: u32, cum: u32, freq: u32) {
        self.code = self.code.wrapping_sub(r * cum);
        self.range = r * freq;
        self.normalize();
    }

    /// Decodes one bit with the adaptive model `prob`, updating it as the encoder did.
    ///
    /// Branch-free (mask arithmetic): the bits coded this way are close to coin flips, so a
    /// branch on them would mispredict about every other time.
    #[inline(always)]
    pub(crate) fn decode_bit(&mut self, prob: &mut u16) -> u32 {
        let p = *prob as u32;
        let bound = (self.range >> BIT_PROB_BITS) * p;
        let one = self.code >= bound;
        let mask = (one as u32).wrapping_neg();
        self.code -= bound & mask;
        self.range = (bound & !mask) | (self.range.wrapping_sub(bound) & mask);
        *prob = adapt(p, mask);
        // A bit keeps at least 255/4096 of the range (> 2^19): one byte always restores 2^24.
        let shift = (self.range < TOP) as u32;
        let byte = self.data.get(self.pos).copied().unwrap_or(0) as u32;
        self.code = (self.code << (8 * shift)) | (byte & shift.wrapping_neg());
        self.range <<= 8 * shift;
        self.pos += shift as usize;
        one as u32
    }

    /// Shifts in the 0, 1 or 2 bytes that bring the range back to at least 2^24, without a
    /// data-dependent branch (the shift happens on an unpredictable quarter of the symbols).
    /// Two bytes always suffice: a symbol keeps at least `(range >> 15) * 1 >= 2^9`.
    #[inline(always)]
    fn normalize(&mut self) {
        let n = (self.range < TOP) as u32 + (self.range < 1 << 16) as u32;
        let next = match self.data.get(self.pos..self.pos + 2) {
            Some(b) => (b[0] as u32) << 8 | b[1] as u32,
            None => {
                let at = |i: usize| self.data.get(self.pos + i).copied().unwrap_or(0) as u32;
                at(0) << 8 | at(1)
            }
        };
        let sh = 8 * n;
        self.code = ((self.code as u64) << sh | (next >> (16 - sh)) as u64) as u32;
        self.range <<= sh;
        self.pos += n as usize;
    }

    /// Checks that exactly the encoder's bytes were read; anything else is corruption.
    pub(crate) fn finish(self) -> Result<(), CodecError> {
        if self.pos != self.data.len() {
            return Err(CodecError("range coded stream length mismatch"));
        }
        Ok(())
    }
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
    let mut enc = Encoder::new(out);
    for &s in data {
        enc.encode(model.cum[s as usize], model.freq[s as usize]);
    }
    enc.finish();
    true
}

/// Decodes a plane payload made by [`encode`] into `out`.
pub fn decode(payload: &[u8], out: &mut [u8]) -> Result<(), CodecError> {
    let (model, used) = Model::read(payload)?;
    let slots = model.slot_table();
    let mut dec = Decoder::new(&payload[used..]);
    for o in out.iter_mut() {
        let (r, slot) = dec.slot();
        let s = slots[slot as usize];
        *o = s;
        dec.consume(r, model.cum[s as usize], model.freq[s as usize]);
    }
    dec.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entropy::histogram;

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
