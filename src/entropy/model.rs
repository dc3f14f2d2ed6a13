//! The adaptive order-0 frequency model that BEST's `adaptive`, `context`, `joint` and
//! `ctxjoint` codecs run: it learns a block's statistics as it codes, so no table is
//! transmitted beyond the set of symbols used, and statistics that drift across a tensor are
//! followed. Encoder and decoder run the very same model code, step for step.
//!
//! Counts grow by an increment per symbol and are halved past a limit (for bytes, 24 and
//! 2^17: a window of a few thousand symbols); the normalised frequency table and its slot
//! lookup are rebuilt on a doubling schedule up to every 4096 symbols, so decoding stays one
//! division and one table lookup per symbol.

use super::rc::{past_table, Decoder, Encoder, PROB_SCALE};
use super::streams::Streams;
use crate::error::CodecError;

/// Count added per coded symbol, in every adaptive model (a constant, so the decode loops
/// add an immediate).
pub(crate) const INC: u32 = 24;

/// Adaptation constants of an adaptive model (besides the count increment, 24).
#[derive(Clone, Copy, Debug)]
pub struct Params {
    /// Total count above which all counts are halved.
    pub limit: u32,
    /// Longest interval, in symbols, between two rebuilds of the coding table.
    pub rebuild_max: u32,
}

/// The constants of a model of bytes (the `adaptive` codec's, and `context`'s exponent plane):
/// a window of a few thousand symbols.
pub(crate) const BYTE_PARAMS: Params = Params {
    limit: 1 << 17,
    rebuild_max: 4096,
};

/// Bytes past the slot table, written by the word-wise fill of [`AdaptiveModel::rebuild`].
const SLOT_PAD: usize = 16;

/// Adaptive counts of a known set of symbols, on the schedule every adaptive model shares:
/// each coded symbol adds [`INC`], all counts are halved when the total exceeds the limit, and
/// the coding table is due for a rebuild after 16 symbols, then after intervals doubling up to
/// the longest.
pub(crate) struct Counts {
    p: Params,
    used: Vec<u8>,
    counts: [u32; 256],
    total: u32,
    /// Symbols until the next event (halving or rebuild); counts are bumped in between.
    left: u32,
    /// The value `left` had when last set: symbols coded since the last event, once it is 0.
    planned: u32,
    until_rebuild: u32,
    interval: u32,
}

impl Counts {
    /// Counts of `used` (at least two symbols, ascending) starting at `counts`, which must be
    /// at least 1 for every used symbol, 0 for the others, and sum to at most `p.limit`.
    pub(crate) fn new(used: Vec<u8>, p: Params, counts: [u32; 256]) -> Counts {
        let mut c = Counts {
            p,
            total: counts.iter().sum(),
            used,
            counts,
            left: 0,
            planned: 0,
            until_rebuild: 16,
            interval: 16,
        };
        c.plan();
        c
    }

    /// The counts of the symbols.
    pub(crate) fn counts(&self) -> &[u32; 256] {
        &self.counts
    }

    /// The symbols counted, ascending.
    pub(crate) fn used(&self) -> &[u8] {
        &self.used
    }

    /// Sets the countdown to the next event. The total grows by exactly `INC` per symbol, so
    /// the symbol that first takes it past `LIMIT` is known in advance.
    fn plan(&mut self) {
        let until_halving = (self.p.limit - self.total) / INC + 1;
        self.left = self.until_rebuild.min(until_halving);
        self.planned = self.left;
    }

    /// Counts symbol `s`; returns whether an event is due ([`Counts::event`]).
    #[inline(always)]
    pub(crate) fn count(&mut self, s: u8) -> bool {
        self.counts[s as usize] += INC;
        self.left -= 1;
        self.left == 0
    }

    /// Whether an event is due: a model that counts with [`Counts::count`] but takes its
    /// events when next used (before its next symbol) asks this first.
    #[inline(always)]
    pub(crate) fn due(&self) -> bool {
        self.left == 0
    }

    /// Counts of no symbols, due for an event: the place of a model that must not code before
    /// it is started; its owner starts it (replacing the counts) instead of calling
    /// [`Counts::event`].
    pub(crate) fn held(p: Params) -> Counts {
        Counts {
            p,
            used: Vec::new(),
            counts: [0; 256],
            total: 0,
            left: 0,
            planned: 0,
            until_rebuild: 0,
            interval: 0,
        }
    }

    /// Catches up with the symbols coded since the last event and halves the counts if the
    /// total is past the limit; returns whether the coding table is due for a rebuild.
    #[cold]
    pub(crate) fn event(&mut self) -> bool {
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
        let rebuild = self.until_rebuild == 0;
        if rebuild {
            self.interval = (self.interval * 2).min(self.p.rebuild_max);
            self.until_rebuild = self.interval;
        }
        self.plan();
        rebuild
    }

    /// The counts normalised to `PROB_SCALE`, every used symbol at least 1. Integer
    /// arithmetic only, so both sides agree exactly.
    pub(crate) fn frequencies(&self) -> [u32; 256] {
        let scale = ((PROB_SCALE as u64) << 32) / self.total as u64;
        let normal = |c: u32| ((c as u64 * scale) >> 32).max(1) as u32;
        let mut freq = [0u32; 256];
        let n = self.used.len();
        // Symbols `0..n` (the joint codecs' keys) are normalised as one run, which the
        // compiler vectorises.
        if self.used.last().map(|&s| s as usize + 1) == Some(n) {
            for (f, &c) in freq.iter_mut().zip(&self.counts[..n]) {
                *f = normal(c);
            }
        } else {
            for &s in &self.used {
                freq[s as usize] = normal(self.counts[s as usize]);
            }
        }
        // Past the last used symbol the table is zeros, which change neither.
        let span = &freq[..self.used.last().map_or(0, |&s| s as usize + 1)];
        let sum: u32 = span.iter().sum();
        let top = span.iter().copied().max().unwrap_or(0);
        let largest = span.iter().position(|&f| f == top).unwrap_or(0) as u8;
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
        freq
    }
}

/// Order-0 adaptive frequency model over a known set of symbols.
pub(crate) struct AdaptiveModel {
    c: Counts,
    /// `cum | freq << 16` of each symbol: one load gives both (cum < 2^15, freq <= 2^15).
    cf: [u32; 256],
    /// The symbol of each slot, then [`SLOT_PAD`] bytes that the word-wise fill may write.
    slots: [u8; PROB_SCALE as usize + SLOT_PAD],
}

impl AdaptiveModel {
    /// A model over `used` (at least two symbols, ascending), starting uniform. Boxed: the
    /// tables are 34 KiB, and one pointer reaches all of them in the coding loops.
    pub(crate) fn new(used: Vec<u8>, p: Params) -> Box<Self> {
        let mut counts = [0u32; 256];
        for &s in &used {
            counts[s as usize] = INC;
        }
        let mut m = Box::new(AdaptiveModel {
            c: Counts::new(used, p, counts),
            cf: [0; 256],
            slots: [0; PROB_SCALE as usize + SLOT_PAD],
        });
        m.rebuild();
        m
    }

    /// Handles an event of the counts.
    #[cold]
    fn event(&mut self) {
        if self.c.event() {
            self.rebuild();
        }
    }

    /// Refills the coding table and the slot table from the counts.
    fn rebuild(&mut self) {
        let freq = self.c.frequencies();
        // Most runs are short, where a call to `fill` costs more than the bytes: the first
        // SLOT_PAD slots of each symbol are written as one block, which may run into the next
        // symbol's slots (that symbol then overwrites them) or into the padding past the table.
        let mut c = 0u32;
        for &s in &self.c.used {
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
        if self.c.count(s) {
            self.event();
        }
    }
}

impl AdaptiveModel {
    #[inline(always)]
    pub(crate) fn encode(&mut self, enc: &mut Encoder, s: u8) {
        let cf = self.cf[s as usize];
        enc.encode(cf & 0xFFFF, cf >> 16);
        self.update(s);
    }

    /// Decodes one symbol from `d` (reading `data`): one step of [`AdaptiveModel::encode`]'s
    /// inverse, for coders that switch models from symbol to symbol.
    #[inline(always)]
    pub(crate) fn decode_one(&mut self, data: &[u8], d: &mut Decoder) -> u8 {
        let (r, slot) = d.slot();
        let slots = &self.slots[..PROB_SCALE as usize];
        let s = match slots.get(slot as usize) {
            Some(&s) => s,
            None => past_table(slots),
        };
        let e = self.cf[s as usize];
        d.consume(data, r, e & 0xFFFF, e >> 16);
        self.update(s);
        s
    }

    /// Decodes `out`, element `first + j` into `out[j]`, even elements from stream 0 and odd
    /// ones from stream 1. The symbols are taken in runs up to the next event, so the inner
    /// loop keeps no countdown.
    pub(crate) fn decode_into(&mut self, st: &mut Streams, first: usize, out: &mut [u8]) {
        let data = st.data;
        let [mut d0, mut d1] = st.decs;
        let mut done = 0;
        while done < out.len() {
            let run = (self.c.left as usize).min(out.len() - done);
            let chunk = &mut out[done..done + run];
            let odd = (first + done) % 2 == 1;
            let slots = &self.slots[..PROB_SCALE as usize];
            let (cf, counts) = (&self.cf, &mut self.c.counts);
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
            self.c.left -= run as u32;
            if self.c.left == 0 {
                self.event();
            }
            done += run;
        }
        st.decs = [d0, d1];
    }

    /// Reads the used-symbol bitmap of a payload and starts the model.
    pub(crate) fn read(payload: &[u8]) -> Result<(Box<AdaptiveModel>, &[u8]), CodecError> {
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
