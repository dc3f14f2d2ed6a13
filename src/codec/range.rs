//! `range` (id 3): BEST's static order-0 coder, for planes whose statistics hold still across
//! the block: frequencies normalised to [`PROB_BITS`](crate::entropy::rc::PROB_BITS) bits, transmitted compactly, decoded
//! through a slot-to-symbol lookup table, never a linear search.
//!
//! Plane payload layout:
//! ```text
//! u8     last used symbol L
//! freqs  for symbols 0..=L: 0x00 n = a run of n+1 zero frequencies;
//!        0x01..=0x7F = that frequency; 0x80|hi, lo = frequency (hi << 8 | lo)
//! bytes  the range-coded symbols
//! ```

use super::spec::Spec;
use crate::entropy::rc::{past_table, Decoder, Encoder, PROB_SCALE};
use crate::error::CodecError;

/// The `range` codec.
pub static SPEC: Spec = Spec::plane_coder(3, "range", decode);

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
    use crate::stats::histogram;

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
