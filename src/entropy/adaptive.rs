//! Adaptive modelling for BEST: the models learn each block's statistics as they code, so no
//! table is transmitted beyond the set of symbols used, and statistics that drift across a
//! tensor are followed. Encoder and decoder run the very same model code, step for step.
//!
//! Every plane is range-coded as two streams, even elements in the first and odd elements in
//! the second, sharing one model: the two coder states are independent dependency chains, so
//! the processor overlaps them, while the model sees the elements in their natural order.
//! `[u32 length of stream 0][stream 0][stream 1]` is written "two streams" below.
//!
//! Two plane codecs live here:
//! - **adaptive** (order 0): payload = 32-byte bitmap of the symbols used, then two streams. Counts grow by [`INC`] per symbol and are halved past [`LIMIT`] (a window of a few
//!   thousand symbols); the normalised frequency table and its slot lookup are rebuilt on a
//!   doubling schedule up to every [`REBUILD_MAX`] symbols, so decoding stays one division and
//!   one table lookup per symbol.
//! - **context**: codes the sign/mantissa plane of an exponent-aligned 16-bit split given the
//!   exponent plane. Bits 6 and 5 (the top mantissa bits, whose distribution depends on the
//!   exponent) go through adaptive binary models selected by the exponent byte; bit 7 (sign) and
//!   bits 4..0 are close to uniform and are stored as a raw 6-bit-per-value bit stream, costing
//!   no range-coder work. Payload = two streams, then the raw bits.

use super::range::{Decoder, Encoder, BIT_HALF, PROB_SCALE};
use crate::error::CodecError;

/// Count added per coded symbol.
const INC: u32 = 24;
/// Total count above which all counts are halved (a window of a few thousand symbols).
const LIMIT: u32 = 1 << 17;
/// Longest interval, in symbols, between two rebuilds of the coding table.
const REBUILD_MAX: u32 = 4096;

/// Order-0 adaptive frequency model over a known set of symbols.
struct AdaptiveModel {
    used: Vec<u8>,
    counts: [u32; 256],
    total: u32,
    freq: [u32; 256],
    cum: [u32; 256],
    slots: Box<[u8; PROB_SCALE as usize]>,
    /// Symbols until the next event (halving or rebuild); counts are bumped in between.
    left: u32,
    /// The value `left` had when last set: symbols coded since the last event, once it is 0.
    planned: u32,
    until_rebuild: u32,
    interval: u32,
}

impl AdaptiveModel {
    /// A model over `used` (at least two symbols, ascending), starting uniform.
    fn new(used: Vec<u8>) -> Self {
        let mut counts = [0u32; 256];
        for &s in &used {
            counts[s as usize] = INC;
        }
        let mut m = AdaptiveModel {
            total: INC * used.len() as u32,
            used,
            counts,
            freq: [0; 256],
            cum: [0; 256],
            slots: Box::new([0; PROB_SCALE as usize]),
            left: 0,
            planned: 0,
            until_rebuild: 16,
            interval: 16,
        };
        m.rebuild();
        m.plan();
        m
    }

    /// Sets the countdown to the next event. The total grows by exactly `INC` per symbol, so
    /// the symbol that first takes it past `LIMIT` is known in advance.
    fn plan(&mut self) {
        let until_halving = (LIMIT - self.total) / INC + 1;
        self.left = self.until_rebuild.min(until_halving);
        self.planned = self.left;
    }

    /// Catches up with the symbols coded since the last event, then halves and/or rebuilds.
    #[cold]
    fn event(&mut self) {
        self.total += INC * self.planned;
        self.until_rebuild -= self.planned;
        if self.total > LIMIT {
            self.total = 0;
            for &u in &self.used {
                let c = &mut self.counts[u as usize];
                *c = c.div_ceil(2);
                self.total += *c;
            }
        }
        if self.until_rebuild == 0 {
            self.interval = (self.interval * 2).min(REBUILD_MAX);
            self.until_rebuild = self.interval;
            self.rebuild();
        }
        self.plan();
    }

    /// Normalises the counts to `PROB_SCALE`, every used symbol at least 1, and refills the
    /// slot table. Integer arithmetic only, so both sides agree exactly.
    fn rebuild(&mut self) {
        let scale = ((PROB_SCALE as u64) << 32) / self.total as u64;
        let mut sum = 0u32;
        let mut largest = self.used[0];
        for &s in &self.used {
            let f = ((self.counts[s as usize] as u64 * scale) >> 32).max(1) as u32;
            self.freq[s as usize] = f;
            sum += f;
            if f > self.freq[largest as usize] {
                largest = s;
            }
        }
        // Rounding leaves at most one unit per symbol to settle, and the largest frequency
        // is always big enough to absorb it (it is at least (SCALE - n) / n for n symbols).
        let fix = PROB_SCALE as i64 - sum as i64;
        let big = self.freq[largest as usize] as i64 + fix;
        if big >= 1 {
            self.freq[largest as usize] = big as u32;
        } else {
            // Unreachable by the bound above; a uniform table keeps every symbol codable.
            let n = self.used.len() as u32;
            for &s in &self.used {
                self.freq[s as usize] = PROB_SCALE / n;
            }
            self.freq[self.used[0] as usize] += PROB_SCALE % n;
        }
        let mut c = 0u32;
        for &s in &self.used {
            let f = self.freq[s as usize];
            self.cum[s as usize] = c;
            self.slots[c as usize..(c + f) as usize].fill(s);
            c += f;
        }
        debug_assert_eq!(c, PROB_SCALE);
    }

    /// Counts symbol `s`: after every symbol the total is past `LIMIT` or not, and the table is
    /// due or not, exactly as if both were checked each time.
    #[inline(always)]
    fn update(&mut self, s: u8) {
        self.counts[s as usize] += INC;
        self.left -= 1;
        if self.left == 0 {
            self.event();
        }
    }
}

impl AdaptiveModel {
    #[inline(always)]
    fn encode(&mut self, enc: &mut Encoder, s: u8) {
        enc.encode(self.cum[s as usize], self.freq[s as usize]);
        self.update(s);
    }

    #[inline(always)]
    fn decode(&mut self, dec: &mut Decoder) -> u8 {
        let (r, slot) = dec.slot();
        let s = self.slots[slot as usize & (PROB_SCALE as usize - 1)];
        dec.consume(r, self.cum[s as usize], self.freq[s as usize]);
        self.update(s);
        s
    }

    /// Reads the used-symbol bitmap of a payload and starts the model.
    fn read(payload: &[u8]) -> Result<(AdaptiveModel, &[u8]), CodecError> {
        let bitmap = payload
            .get(..32)
            .ok_or(CodecError("adaptive model bitmap truncated"))?;
        let used: Vec<u8> = (0..=255u8)
            .filter(|&s| bitmap[s as usize / 8] & (1 << (s % 8)) != 0)
            .collect();
        if used.len() < 2 {
            return Err(CodecError("adaptive model needs at least two symbols"));
        }
        Ok((AdaptiveModel::new(used), &payload[32..]))
    }
}

/// Runs `code(encoder of element i's stream, i)` over `n` elements alternating between two
/// range-coded streams, and appends them to `out` as "two streams".
fn encode_two(out: &mut Vec<u8>, n: usize, mut code: impl FnMut(&mut Encoder, usize)) {
    let len_at = out.len();
    out.extend_from_slice(&[0u8; 4]);
    let mut second = Vec::with_capacity(n / 2 + 16);
    {
        let mut e0 = Encoder::new(out);
        let mut e1 = Encoder::new(&mut second);
        for i in 0..n {
            if i % 2 == 0 {
                code(&mut e0, i);
            } else {
                code(&mut e1, i);
            }
        }
        e0.finish();
        e1.finish();
    }
    let first_len = (out.len() - len_at - 4) as u32;
    out[len_at..len_at + 4].copy_from_slice(&first_len.to_le_bytes());
    out.extend_from_slice(&second);
}

/// Splits "two streams" off the front of `payload` when `tail` bytes must follow them.
fn two_streams(payload: &[u8], tail: usize) -> Result<[Decoder<'_>; 2], CodecError> {
    let head = payload
        .get(..4)
        .ok_or(CodecError("range coded streams truncated"))?;
    let first = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
    let rest = &payload[4..];
    if first > rest.len() || rest.len() - first < tail {
        return Err(CodecError("range coded stream lengths are inconsistent"));
    }
    let (a, b) = rest.split_at(first);
    Ok([Decoder::new(a), Decoder::new(&b[..b.len() - tail])])
}

fn finish_two(decoders: [Decoder; 2]) -> Result<(), CodecError> {
    let [a, b] = decoders;
    a.finish()?;
    b.finish()
}

/// Adaptive order-0 coding of `data`, appended to `out`. Returns `false` (appending nothing)
/// when fewer than two symbols occur: such a plane is constant.
pub fn encode(data: &[u8], out: &mut Vec<u8>) -> bool {
    let mut seen = [false; 256];
    for &b in data {
        seen[b as usize] = true;
    }
    let used: Vec<u8> = (0..=255u8).filter(|&s| seen[s as usize]).collect();
    if used.len() < 2 {
        return false;
    }
    let mut bitmap = [0u8; 32];
    for &s in &used {
        bitmap[s as usize / 8] |= 1 << (s % 8);
    }
    out.extend_from_slice(&bitmap);
    let mut model = AdaptiveModel::new(used);
    encode_two(out, data.len(), |enc, i| model.encode(enc, data[i]));
    true
}

/// Decodes a payload made by [`encode`] into `out`.
pub fn decode(payload: &[u8], out: &mut [u8]) -> Result<(), CodecError> {
    let (mut model, coded) = AdaptiveModel::read(payload)?;
    let mut decs = two_streams(coded, 0)?;
    let mut pairs = out.chunks_exact_mut(2);
    for pair in &mut pairs {
        pair[0] = model.decode(&mut decs[0]);
        pair[1] = model.decode(&mut decs[1]);
    }
    for o in pairs.into_remainder() {
        *o = model.decode(&mut decs[0]);
    }
    finish_two(decs)
}

/// Adaptive binary models of the two top mantissa bits, one tree per exponent byte.
struct MantissaModel {
    probs: Box<[[u16; 4]; 256]>,
}

impl MantissaModel {
    fn new() -> Self {
        MantissaModel {
            probs: Box::new([[BIT_HALF; 4]; 256]),
        }
    }

    #[inline(always)]
    fn encode(&mut self, enc: &mut Encoder, x: u8, ctx: u8) {
        let p = &mut self.probs[ctx as usize];
        let b6 = (x >> 6 & 1) as u32;
        enc.encode_bit(&mut p[1], b6);
        enc.encode_bit(&mut p[2 + b6 as usize], (x >> 5 & 1) as u32);
    }

    /// The two modelled bits, in place (bits 6 and 5).
    #[inline(always)]
    fn decode(&mut self, dec: &mut Decoder, ctx: u8) -> u8 {
        let p = &mut self.probs[ctx as usize];
        let b6 = dec.decode_bit(&mut p[1]);
        let b5 = dec.decode_bit(&mut p[(2 + b6 as usize) & 3]);
        (b6 << 6 | b5 << 5) as u8
    }
}

/// Bits of a sign/mantissa byte that are stored raw: the sign (bit 7) and bits 4..0.
#[inline(always)]
fn raw_bits(x: u8) -> u64 {
    (((x >> 2) & 0x20) | (x & 0x1F)) as u64
}

/// Fills `out` with the raw fields (sign to bit 7, bits 4..0), leaving bits 6 and 5 clear.
/// `raw` holds `ceil(6 * out.len() / 8)` bytes (checked by the caller); a separate pass keeps
/// bit unpacking out of the serial decode loop.
fn unpack_raw(raw: &[u8], out: &mut [u8]) {
    let expand = |r: u32| (((r & 0x20) << 2) | (r & 0x1F)) as u8;
    let whole = out.len() / 4;
    let (head, tail) = out.split_at_mut(whole * 4);
    for (q, b) in head.chunks_exact_mut(4).zip(raw.chunks_exact(3)) {
        let w = b[0] as u32 | (b[1] as u32) << 8 | (b[2] as u32) << 16;
        q[0] = expand(w);
        q[1] = expand(w >> 6);
        q[2] = expand(w >> 12);
        q[3] = expand(w >> 18);
    }
    // The last 1-3 fields start right after the whole groups of 3 bytes.
    let mut w = 0u32;
    for (i, &b) in raw.iter().skip(whole * 3).take(3).enumerate() {
        w |= (b as u32) << (8 * i);
    }
    for (i, o) in tail.iter_mut().enumerate() {
        *o = expand(w >> (6 * i));
    }
}

/// Context coding of `plane` (sign/mantissa bytes) given `ctx` (the exponent byte of each
/// element), appended to `out`. `ctx` must be as long as `plane`.
pub fn encode_context(plane: &[u8], ctx: &[u8], out: &mut Vec<u8>) {
    let mut model = MantissaModel::new();
    encode_two(out, plane.len(), |enc, i| {
        model.encode(enc, plane[i], ctx[i])
    });
    let mut acc = 0u64;
    let mut nbits = 0u32;
    for &x in plane {
        acc |= raw_bits(x) << nbits;
        nbits += 6;
        if nbits >= 32 {
            out.extend_from_slice(&(acc as u32).to_le_bytes());
            acc >>= 32;
            nbits -= 32;
        }
    }
    out.extend_from_slice(&acc.to_le_bytes()[..nbits.div_ceil(8) as usize]);
}

/// Splits a context payload into its two range-coded streams and unpacks its raw bits
/// into `out`.
fn context_parts<'a>(payload: &'a [u8], out: &mut [u8]) -> Result<[Decoder<'a>; 2], CodecError> {
    let raw_len = (out.len() * 6).div_ceil(8);
    let decs = two_streams(payload, raw_len)?;
    unpack_raw(&payload[payload.len() - raw_len..], out);
    Ok(decs)
}

/// Decodes a payload made by [`encode_context`]; `ctx` is the decoded exponent plane.
pub fn decode_context(payload: &[u8], ctx: &[u8], out: &mut [u8]) -> Result<(), CodecError> {
    if ctx.len() != out.len() {
        return Err(CodecError("context plane length differs"));
    }
    let mut decs = context_parts(payload, out)?;
    let mut model = MantissaModel::new();
    for (i, (o, &c)) in out.iter_mut().zip(ctx).enumerate() {
        *o |= model.decode(&mut decs[i % 2], c);
    }
    finish_two(decs)
}

/// Decodes an [`encode`] exponent payload and an [`encode_context`] mantissa payload in one
/// loop: four independent range decoders (two per plane) whose latencies overlap.
pub fn decode_pair(
    exp_payload: &[u8],
    man_payload: &[u8],
    exps: &mut [u8],
    mans: &mut [u8],
) -> Result<(), CodecError> {
    if exps.len() != mans.len() {
        return Err(CodecError("context plane length differs"));
    }
    let (mut model, coded) = AdaptiveModel::read(exp_payload)?;
    let [mut e0, mut e1] = two_streams(coded, 0)?;
    let [mut m0, mut m1] = context_parts(man_payload, mans)?;
    let mut mant = MantissaModel::new();
    let mut e_pairs = exps.chunks_exact_mut(2);
    let mut m_pairs = mans.chunks_exact_mut(2);
    for (e, m) in (&mut e_pairs).zip(&mut m_pairs) {
        let c0 = model.decode(&mut e0);
        let c1 = model.decode(&mut e1);
        e[0] = c0;
        e[1] = c1;
        m[0] |= mant.decode(&mut m0, c0);
        m[1] |= mant.decode(&mut m1, c1);
    }
    for (e, m) in e_pairs
        .into_remainder()
        .iter_mut()
        .zip(m_pairs.into_remainder())
    {
        *e = model.decode(&mut e0);
        *m |= mant.decode(&mut m0, *e);
    }
    finish_two([e0, e1])?;
    finish_two([m0, m1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_survives_saturated_bit_models() {
        // Long runs of one value drive the bit models to their limits, then flip: the range
        // must stay consistent between encoder and decoder at the extremes.
        let n = 200_000;
        for (a, b) in [(0x00u8, 0x60u8), (0x60, 0x00), (0x9F, 0x80)] {
            let sm: Vec<u8> = (0..n).map(|i| if i < n / 2 { a } else { b }).collect();
            let exp = vec![127u8; n];
            let mut c = Vec::new();
            encode_context(&sm, &exp, &mut c);
            let mut back = vec![0u8; n];
            decode_context(&c, &exp, &mut back).unwrap();
            assert_eq!(back, sm);
            let mut e = Vec::new();
            assert!(encode(&sm, &mut e));
            let (mut back_e, mut back_m) = (vec![0u8; n], vec![0u8; n]);
            decode(&e, &mut back_e).unwrap();
            assert_eq!(back_e, sm);
            // Mismatched payloads (the context was coded against other exponents): any result
            // but a panic is acceptable; the block checksum catches wrong output.
            let _ = decode_pair(&e, &c, &mut back_e, &mut back_m);
        }
    }

    #[test]
    fn adaptive_and_context_roundtrip() {
        let mut x = 12345u32;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        };
        for n in [2usize, 3, 7, 100, 5000, 70_000] {
            let exp: Vec<u8> = (0..n)
                .map(|_| 118 + (rnd() % 16).min(rnd() % 16) as u8)
                .collect();
            let sm: Vec<u8> = (0..n).map(|_| rnd() as u8).collect();
            let mut a = Vec::new();
            if encode(&exp, &mut a) {
                let mut back = vec![0u8; n];
                decode(&a, &mut back).unwrap();
                assert_eq!(back, exp);
            }
            let mut c = Vec::new();
            encode_context(&sm, &exp, &mut c);
            let mut back = vec![0u8; n];
            decode_context(&c, &exp, &mut back).unwrap();
            assert_eq!(back, sm, "n={n}");
        }
    }
}
