//! `ctxjoint` (id 9): BEST's coder of an exponent-aligned block's planes 0 and 1 together. The
//! joint symbols of [`super::joint`] (exponent byte and mantissa bits 6..5, as ranks in the
//! block's alphabet) are each coded with one of [`CONTEXTS`] adaptive frequency models, chosen
//! by the magnitude the element's neighbourhood predicts; the other 6 bits go to plane 1 as a
//! [`super::raw6`] payload, its partner.
//!
//! Rows of a weight matrix differ in scale (each output unit has its own) and so do columns
//! (each input feature), so the distribution of an element's exponent depends on where it
//! lies. The model keeps, from the elements coded so far, the mean magnitude of the current
//! row (shrunk towards the previous row's while the row is young) and the mean magnitude of
//! each column relative to the whole block (shrunk towards 1 while few rows are seen). Their
//! product, in quarter-octave steps (half-octave ones in small planes), picks the frequency
//! model; a model is started from the counts of a block-wide model when its context first
//! occurs. Still one range-coder step per element.
//!
//! The row length is not in the data: the encoder takes it from the tensor's shape and writes
//! it, with the column of the block's first element, into the payload. Element `i`'s context
//! depends on elements `0..i-1` only (not on element `i - 1`), so the two interleaved streams
//! of a block stay two independent chains of decoding work.
//!
//! A block that holds several tensors is coded by [`TENSORS_SPEC`] (id 12, `ctxtensors`): its
//! elements are cut into parts, one for each tensor of enough elements, each with the rows of
//! its tensor, while the frequency models run on across the parts. The models then learn from
//! every tensor of the block (small tensors pay most of their coding cost in learning), and a
//! context keeps its meaning from part to part: it names a magnitude relative to the block's
//! context base.
//!
//! With sign models (BEST's default where they pay, `sc -9` wherever they are smaller),
//! [`SIGNED_SPEC`] (id 13, `ctxsigns`) codes the same keys in one part or more, and plane 1 is
//! [`signs`](super::signs): each sign is modelled in its tensor's column. The decoder decodes
//! each quad's signs beside its keys.
//!
//! Payload (see docs/FORMAT.md): the joint alphabet, `u32` row length, `u32` first column,
//! `i16` context base, then two streams of the elements' ranks; for `ctxtensors` and
//! `ctxsigns`, the joint alphabet, `i16` context base, `u32` part count, each part's `u32`
//! element count, row length and first column, then the streams. Plane 1 is `raw6`, or for
//! `ctxsigns` `signs`.

use super::joint::{self, JOINT_PARAMS};
use super::raw6;
use super::signs::SignDecoder;
use super::{huffjoint, Codec, CodecError, Decode, Slot, Spec};
use crate::entropy::alphabet::{self, Alphabet};
use crate::entropy::model::{Counts, Params, INC};
use crate::entropy::rc::{Decoder, Encoder, PROB_SCALE};
use crate::entropy::rows::{parts_fit, Part, Rows, MAX_ROW, QUAD_LEN};
use crate::entropy::streams::{finish_two, two_streams, Streams};

/// The `ctxjoint` codec: plane 0 of an exponent-aligned block, with [`raw6`] as plane 1.
pub static SPEC: Spec = Spec {
    id: 9,
    name: "ctxjoint",
    fits: |at: Slot, coded_len| {
        at.plane == 0 && at.transform.exponent_aligned() && raw6::pair_fits(coded_len, at.plane_len)
    },
    partner: Some(Codec::Raw6),
    decode: Decode::PairOrWords {
        pair: decode::<ROWS>,
        words: decode_words::<ROWS>,
    },
};

/// The `ctxtensors` codec: `ctxjoint` over the parts of a block that holds several tensors,
/// each part in the rows of the tensor it starts with.
pub static TENSORS_SPEC: Spec = Spec {
    id: 12,
    name: "ctxtensors",
    fits: SPEC.fits,
    partner: Some(Codec::Raw6),
    decode: Decode::PairOrWords {
        pair: decode::<PARTS>,
        words: decode_words::<PARTS>,
    },
};

/// The `ctxsigns` codec: `ctxtensors` over one part or more, with [`signs`](super::signs) as plane 1, whose
/// sign models follow the parts' columns.
pub static SIGNED_SPEC: Spec = Spec {
    id: 13,
    name: "ctxsigns",
    fits: SPEC.fits,
    partner: Some(Codec::Signs),
    decode: Decode::PairOrWords {
        pair: decode::<SIGNED>,
        words: decode_words::<SIGNED>,
    },
};

/// The payload layouts, the decoders' const parameter: `ctxjoint`'s (one part's rows),
/// `ctxtensors`' (a table of two parts or more) and `ctxsigns`' (a table of one part or more,
/// plane 1 [`signs`](super::signs) rather than [`raw6`]).
pub const ROWS: u8 = 0;
/// See [`ROWS`].
pub const PARTS: u8 = 1;
/// See [`ROWS`].
pub const SIGNED: u8 = 2;

/// Number of context models.
pub const CONTEXTS: usize = 16;
/// Context models are `1 << STEP_SHIFT` units of [`qlog`] apart: a quarter octave (see
/// [`SMALL_PLANE`]).
const STEP_SHIFT: u32 = 4;
/// Planes of fewer elements than this space their contexts twice as far apart, half an octave:
/// each context then sees more of a small plane's elements and learns its model sooner, which
/// pays more than the finer scale (measured: 1.1 KB, 0.08%, less on a model of 1.04 M weights
/// in tensors of 16 K to 35 K elements), while larger planes code smaller with the finer one.
/// The decoder knows the plane's length, so nothing is signalled.
const SMALL_PLANE: usize = 1 << 16;
/// Units of [`qlog`] per octave.
const OCTAVE: i32 = 64;
/// Weight, in elements, of the previous row's mean magnitude in the estimate for a new row.
const ROW_PRIOR: u64 = 16;
/// Rows after which column deviations are refreshed every `REFRESH` rows only.
const REFRESH: u64 = 8;
/// Rows of evidence at which a column's deviation counts half.
const COLUMN_SHRINK: u64 = 16;
/// Total count, in increments, that a context model inherits from the block-wide counts when it
/// first occurs (about 40 symbols' worth).
const INHERIT: u64 = 1000;
/// Octaves below the alphabet's largest exponent from which magnitudes count as 0.
const RANGE: i32 = 24;
/// Elements are modelled in quads: the contexts of a quad's elements are computed together.
const QUAD: usize = QUAD_LEN;
/// Elements whose contexts the encoder finds at a time, a multiple of [`QUAD`]: the contexts
/// of a whole 64 MiB block would take 32 MiB more.
const CONTEXT_CHUNK: usize = 1 << 16;
/// The contexts of quad `q` are computed from the elements of quads `0..q - 1`: the quad in
/// between is still being decoded.
const LAG: usize = 2 * QUAD;
/// Slots per entry of a context table's lookup, as a shift: every 16th slot.
const BUCKET_SHIFT: u32 = 4;
/// Entries of a context table's lookup.
const BUCKETS: usize = (PROB_SCALE >> BUCKET_SHIFT) as usize;
/// Bytes past a context table's lookup, for its block-wise fill.
const BUCKET_PAD: usize = 32;
/// The context models' constants: halving as in the joint codec; a context sees a fraction of
/// the block, so its table is rebuilt more often than the joint codec's.
const PARAMS: Params = Params {
    limit: JOINT_PARAMS.limit,
    rebuild_max: 512,
};
/// Bytes before the streams: the row length, the first column and the context base.
const LAYOUT_LEN: usize = 10;
/// Bytes of a part in a `ctxtensors` payload: its element count, row length and first column.
const PART_LEN: usize = 12;

/// The logarithm of `x` in 1/64 octaves: the position of its leading bit, then the six bits
/// below it as a linear fraction; 0 for 0 and 1. Exact for `x` below 2^58; the sums it is
/// taken of stay below 2^54 (at most 2^25 elements of magnitude below 2^28).
#[inline(always)]
fn qlog(x: u64) -> i32 {
    let x = x.max(1);
    let l = 63 - x.leading_zeros();
    let frac = (x << 6 >> l) & 63;
    l as i32 * OCTAVE + frac as i32
}

/// The inverse of [`qlog`], for arguments clamped to 0 ..= 51 octaves (sums of magnitudes
/// weighted by [`ROW_PRIOR`] then stay below 2^58).
fn qexp(q: i32) -> u64 {
    let q = q.clamp(0, 51 * OCTAVE + 63);
    let (l, m) = (q / OCTAVE, 64 + (q & 63) as u64);
    if l >= 6 {
        m << (l - 6)
    } else {
        m >> (6 - l)
    }
}

/// The magnitude of every key: `1 + (m + 1/2) / 4` (m = mantissa bits 6..5) scaled by 2 to the
/// exponent, relative to the alphabet's largest exponent, as an integer below 2^28.
fn magnitudes(alphabet: &Alphabet) -> [u64; 256] {
    let (te, tm) = alphabet.expansion();
    let top = te[..alphabet.len()].iter().copied().max().unwrap_or(0) as i32;
    std::array::from_fn(|k| {
        let (e, m) = (te[k] as i32, (tm[k] >> 5) as u64);
        let shift = e + RANGE - top;
        if e == 0 || shift < 0 || k >= alphabet.len() {
            0
        } else {
            (9 + 2 * m) << shift
        }
    })
}

/// Column statistics are kept in arrays of this many entries (and a few more), indexed
/// modulo their length, which bounds every index without a check.
const COLUMNS: usize = MAX_ROW as usize;

/// The running row and column magnitudes that select an element's context model.
///
/// At the start of quad `q`, the magnitudes of quad `q - 2` are added in order (from quad 2
/// on) and the row's estimate is taken; each element of the quad adds its column's deviation
/// to it.
struct Scale {
    row_len: usize,
    /// Column of the next element to add.
    added: usize,
    /// Column of the first element.
    phase: usize,
    /// Magnitude sum of each column over the rows seen (the entries past `COLUMNS` unused).
    columns: Box<[u64; COLUMNS + QUAD]>,
    /// Each column's deviation from the mean column, in [`qlog`] units, as of the last
    /// refresh (shrunk towards 0 while few rows are seen); entry `row_len + t` repeats column
    /// `t % row_len`, so that the columns of the quad after the next one to add need no wrap.
    deviation: Box<[i32; COLUMNS + LAG]>,
    /// Magnitude sum and count of the current row so far, each starting at the previous
    /// row's mean magnitude with a weight of [`ROW_PRIOR`] elements.
    row_sum: u64,
    row_count: u64,
    /// Rows completed (the first may be partial).
    rows: u64,
    /// Context 0 is at this [`qlog`] of the predicted magnitude.
    base: i32,
    /// Contexts are `1 << shift` units of [`qlog`] apart.
    shift: u32,
}

/// The spacing of the contexts of a plane of `len` elements, as a shift of [`qlog`] units.
fn step_shift(len: usize) -> u32 {
    match len < SMALL_PLANE {
        true => STEP_SHIFT + 1,
        false => STEP_SHIFT,
    }
}

/// The context of a predicted magnitude, in [`qlog`] units above the context base, for
/// contexts `1 << shift` units apart.
#[inline(always)]
fn bucket(q: i32, shift: u32) -> usize {
    (q >> shift).clamp(0, CONTEXTS as i32 - 1) as usize
}

/// The [`qlog`] units from the context base to the middle context, where a plane's mean
/// magnitude lies.
fn half_span(shift: u32) -> i32 {
    ((CONTEXTS as i32) << shift) / 2
}

/// A zeroed array on the heap (without building it on the stack first).
fn zeroed<T: Copy + Default, const N: usize>() -> Box<[T; N]> {
    match vec![T::default(); N].into_boxed_slice().try_into() {
        Ok(a) => a,
        Err(_) => unreachable!("the vector has N elements"),
    }
}

/// The column arrays of a [`Scale`]: 768 KiB, allocated once per thread and kept between
/// planes, of which a plane clears only the entries its rows use.
type ColumnArrays = (Box<[u64; COLUMNS + QUAD]>, Box<[i32; COLUMNS + LAG]>);

thread_local! {
    static KEPT_COLUMNS: std::cell::RefCell<Option<ColumnArrays>> =
        const { std::cell::RefCell::new(None) };
}

impl Scale {
    /// A scale for contexts from `base`, `1 << shift` units apart, to be started at a part's
    /// first element by [`Scale::restart`] before use.
    fn new(base: i32, shift: u32) -> Scale {
        let (columns, deviation) = KEPT_COLUMNS
            .with(|k| k.take())
            .unwrap_or_else(|| (zeroed(), zeroed()));
        Scale {
            row_len: 1,
            added: 0,
            phase: 0,
            columns,
            deviation,
            row_sum: 0,
            row_count: 1,
            rows: 0,
            base,
            shift,
        }
    }

    /// Starts over at the first element of a part in `rows`: nothing seen, the row estimate
    /// at the middle context.
    fn restart(&mut self, rows: Rows) {
        let row_len = rows.len as usize;
        self.columns[..row_len + QUAD].fill(0);
        self.deviation[..row_len + LAG].fill(0);
        self.row_len = row_len;
        self.added = rows.phase as usize;
        self.phase = rows.phase as usize;
        self.row_sum = ROW_PRIOR * qexp(self.base + half_span(self.shift));
        self.row_count = ROW_PRIOR;
        self.rows = 0;
    }

    /// The row's estimated magnitude, in [`qlog`] units less the context base.
    #[inline(always)]
    fn row(&self) -> i32 {
        qlog(self.row_sum) - qlog(self.row_count) - self.base
    }

    /// The context of an element in column `column`, given its quad's [`Scale::row`].
    #[inline(always)]
    fn context_at(&self, row: i32, column: usize) -> usize {
        bucket(row + self.deviation[column], self.shift)
    }

    /// The context of element `j` of quad `q >= 2`, once quad `q - 2` is added: its column is
    /// `QUAD + j` after the next one to add.
    #[inline(always)]
    fn context(&self, row: i32, j: usize) -> usize {
        self.context_at(row, self.added % COLUMNS + QUAD + j % QUAD)
    }

    /// Adds the magnitudes `v` of quad `q - 2` and returns the contexts of quad `q`, for a
    /// plane whose [`Scale::shift`] is `SHIFT`.
    #[inline(always)]
    fn next_contexts<const SHIFT: u32>(&mut self, v: [u64; QUAD]) -> [u8; QUAD] {
        self.add_quad(v);
        let row = self.row();
        let a = self.added % COLUMNS + QUAD;
        std::array::from_fn(|j| bucket(row + self.deviation[a + j], SHIFT) as u8)
    }

    /// The context of element `i` of the first two quads (nothing added yet).
    fn first_context(&self, row: i32, i: usize) -> usize {
        self.context_at(row, (self.phase + i) % self.row_len)
    }

    /// Adds the magnitudes of a quad in order.
    #[inline(always)]
    fn add_quad(&mut self, v: [u64; QUAD]) {
        let a = self.added % COLUMNS;
        if a + QUAD < self.row_len {
            for (c, v) in self.columns[a..a + QUAD].iter_mut().zip(v) {
                *c += v;
            }
            self.row_sum += v.iter().sum::<u64>();
            self.row_count += QUAD as u64;
            self.added += QUAD;
        } else {
            for v in v {
                self.add(v);
            }
        }
    }

    /// Adds the magnitude of the next element in order.
    fn add(&mut self, v: u64) {
        self.row_sum += v;
        self.row_count += 1;
        self.columns[self.added % COLUMNS] += v;
        self.added += 1;
        if self.added == self.row_len {
            self.end_row();
        }
    }

    /// Keeps the column arrays for the thread's next plane.
    fn keep(self) {
        KEPT_COLUMNS.with(|k| k.replace(Some((self.columns, self.deviation))));
    }

    #[cold]
    fn end_row(&mut self) {
        self.added = 0;
        let mean = self.row_sum / self.row_count;
        self.row_sum = ROW_PRIOR * mean;
        self.row_count = ROW_PRIOR;
        self.rows += 1;
        // Deviations settle as rows accumulate: after the first rows they are refreshed
        // every few rows only.
        if self.rows > REFRESH && !self.rows.is_multiple_of(REFRESH) {
            return;
        }
        let columns = &self.columns[..self.row_len];
        let total: u64 = columns.iter().sum();
        let mean_column = qlog(total) - qlog(self.row_len as u64);
        let weight = ((self.rows << 16) / (self.rows + COLUMN_SHRINK)) as i64;
        for (d, &c) in self.deviation.iter_mut().zip(columns) {
            *d = match c {
                0 => 0,
                _ => (((qlog(c) - mean_column) as i64 * weight) >> 16) as i32,
            };
        }
        for t in 0..LAG {
            self.deviation[self.row_len + t] = self.deviation[t % self.row_len];
        }
    }
}

/// One context's adaptive model over the keys `0..=last`: counts on the schedule of the
/// adaptive codec, the coding table, and the key at every 16th slot, from which decoding steps
/// forward (usually not at all) to the key of the slot.
struct Table {
    counts: Counts,
    /// `cum | freq << 16` of each key.
    cf: [u32; 256],
    /// The key whose slots hold slot `16 * b`, for each `b`, then [`BUCKET_PAD`] bytes that
    /// the block-wise fill of [`Table::rebuild`] may write.
    bucket: [u8; BUCKETS + BUCKET_PAD],
    last: u8,
}

impl Table {
    fn new(counts: Counts) -> Table {
        let last = counts.used().last().copied().unwrap_or(0);
        let mut t = Table {
            counts,
            cf: [0; 256],
            bucket: [0; BUCKETS + BUCKET_PAD],
            last,
        };
        t.rebuild();
        t
    }

    /// A table not started: no keys, due (see [`Counts::held`]).
    fn held() -> Table {
        Table {
            counts: Counts::held(PARAMS),
            cf: [0; 256],
            bucket: [0; BUCKETS + BUCKET_PAD],
            last: 0,
        }
    }

    fn rebuild(&mut self) {
        let freq = self.counts.frequencies();
        let mut cum = 0u32;
        for k in 0..=self.last {
            let f = freq[k as usize];
            self.cf[k as usize] = cum | f << 16;
            let first = cum.div_ceil(1 << BUCKET_SHIFT) as usize;
            cum += f;
            let end = cum.div_ceil(1 << BUCKET_SHIFT) as usize;
            // Entries are written in blocks of BUCKET_PAD, the last of which may run into the
            // next keys' entries (those keys then overwrite them) or into the padding: most
            // keys span a few entries, where a call to `fill` costs more than the bytes. Keys
            // that own no entry (`first == end`) write their block too: it lies wholly in later
            // keys' entries or the padding, and a branch on it would mispredict.
            let mut at = first.min(BUCKETS);
            loop {
                self.bucket[at..at + BUCKET_PAD].copy_from_slice(&[k; BUCKET_PAD]);
                at += BUCKET_PAD;
                if at >= end {
                    break;
                }
            }
        }
    }

    #[inline(always)]
    fn count(&mut self, k: u8) {
        if self.counts.count(k) {
            self.event();
        }
    }

    #[cold]
    fn event(&mut self) {
        if self.counts.event() {
            self.rebuild();
        }
    }

    #[inline(always)]
    fn encode(&mut self, enc: &mut Encoder, k: u8) {
        let cf = self.cf[k as usize];
        enc.encode(cf & 0xFFFF, cf >> 16);
        self.count(k);
    }

    /// Decodes one key from `d` (reading `data`) and counts it, leaving the event that may
    /// fall due for [`Models::get`] to take before the table's next symbol: the decoding loop
    /// then holds no call after each symbol. Valid streams give slots below `PROB_SCALE`,
    /// where the last key's slots end; corrupt ones may give more, which are taken as the last
    /// slot, so that the search stops at the last key.
    #[inline(always)]
    fn decode(&mut self, d: &mut Decoder, data: &[u8]) -> u8 {
        let (r, slot) = d.slot();
        // A predicted branch, where a clamp would lengthen the chain from symbol to symbol.
        let slot = match slot < PROB_SCALE {
            true => slot,
            false => last_slot(),
        };
        // The key as an index, not a byte: its load's zero extension serves the next load.
        let mut k = self.bucket[(slot >> BUCKET_SHIFT) as usize % BUCKETS] as usize;
        let mut cf = self.cf[k];
        while slot >= (cf & 0xFFFF) + (cf >> 16) {
            k = (k + 1) % 256;
            cf = self.cf[k];
        }
        d.consume(data, r, cf & 0xFFFF, cf >> 16);
        self.counts.count(k as u8);
        k as u8
    }
}

/// The last slot, for the slots past it that only corrupt streams give. Cold and out of line.
#[cold]
#[inline(never)]
fn last_slot() -> u32 {
    PROB_SCALE - 1
}

/// The context models, each started on first use from the counts of those already started.
/// The tables lie side by side, so that a context's table is found without a pointer.
struct Models {
    used: usize,
    /// Every context's table; those not yet started hold uniform counts until [`Models::start`].
    tables: Box<[Table; CONTEXTS]>,
    /// Bit `c` is set once context `c` is started.
    started: u32,
    params: Params,
    /// Whether a context starts from the counts of those started (always, but in `sc models`).
    inherit: bool,
}

impl Models {
    fn new(used: usize) -> Models {
        // Not started: due, so that the first use starts them.
        let tables: Vec<Table> = (0..CONTEXTS).map(|_| Table::held()).collect();
        Models {
            used,
            tables: match tables.into_boxed_slice().try_into() {
                Ok(t) => t,
                Err(_) => unreachable!("CONTEXTS tables"),
            },
            started: 0,
            params: PARAMS,
            inherit: true,
        }
    }

    /// The model of context `c` (below [`CONTEXTS`]), started and with its due event taken.
    #[inline(always)]
    fn get(&mut self, c: usize) -> &mut Table {
        let c = c % CONTEXTS;
        if self.tables[c].counts.due() {
            self.catch_up(c);
        }
        &mut self.tables[c]
    }

    /// Starts context `c`, or takes its due event.
    #[cold]
    #[inline(never)]
    fn catch_up(&mut self, c: usize) {
        match self.started & 1 << c {
            0 => self.start(c),
            _ => self.tables[c].event(),
        }
    }

    /// Starts context `c` with counts of [`INHERIT`] in all, in proportion to the summed counts
    /// of the contexts started (each key at least 1), or uniform if there are none.
    #[cold]
    fn start(&mut self, c: usize) {
        // The counts inherited are those after every event due.
        for (d, t) in self.tables.iter_mut().enumerate() {
            if self.started & 1 << d != 0 && t.counts.due() {
                t.event();
            }
        }
        let mut sum = [0u64; 256];
        for (d, t) in self.tables.iter().enumerate() {
            if self.started & 1 << d != 0 {
                for (s, &n) in sum.iter_mut().zip(t.counts.counts()) {
                    *s += n as u64;
                }
            }
        }
        let total: u64 = sum.iter().sum();
        let mut counts = uniform_counts(self.used);
        if self.inherit && total > 0 {
            for (n, &s) in counts[..self.used].iter_mut().zip(&sum) {
                *n = (s * INHERIT / total).max(1) as u32;
            }
        }
        let used = joint::keys(self.used);
        self.tables[c] = Table::new(Counts::new(used, self.params, counts));
        self.started |= 1 << c;
    }
}

/// Counts of [`INC`] for keys `0..used`, 0 for the others.
fn uniform_counts(used: usize) -> [u32; 256] {
    let mut counts = [0u32; 256];
    counts[..used.min(256)].fill(INC);
    counts
}

/// The context base an encoder writes: the mean magnitude of the block's elements half the
/// contexts above context 0, for contexts `1 << shift` units apart.
fn base_of(keys: &[u8], mag: &[u64; 256], shift: u32) -> i32 {
    let sum: u64 = keys.iter().map(|&k| mag[k as usize]).sum();
    let mean = sum / keys.len().max(1) as u64;
    (qlog(mean) - half_span(shift)).clamp(i16::MIN as i32, i16::MAX as i32)
}

/// The contexts `sc models` measures next to the codec's own ([`Variant::RowsAndColumns`]).
/// Payloads of the others are for measuring their size; they do not decode. Only `sc models`
/// (the `lab` feature) builds the others.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(feature = "lab"), allow(dead_code))]
pub(crate) enum Variant {
    /// The codec's: the row's running mean magnitude and its column's deviation.
    RowsAndColumns,
    /// The row's running mean magnitude alone.
    Rows,
    /// The column's deviation alone, around the block's mean magnitude.
    Columns,
    /// The codec's contexts, each model starting uniform.
    Uninherited,
    /// The mean exponent of the previous 64 elements, in half-exponent steps around the
    /// block's mean.
    RecentExponent,
    /// That in 4 one-exponent steps, by the exponent one row up relative to it in 4 steps.
    RecentExponentAndUp,
}

/// The ctxjoint payload (plane 0) of an exponent plane and its sign/mantissa plane, whose
/// elements lie in `rows`. Returns `false` (appending nothing) when the planes differ in
/// length or use fewer than 2 or more than [`alphabet::MAX_USED`] joint symbols. Plane 1 is
/// [`raw6::encode`].
pub fn encode(exps: &[u8], mans: &[u8], rows: Rows, out: &mut Vec<u8>) -> bool {
    let whole = [Part {
        len: exps.len(),
        rows,
    }];
    encode_variant(exps, mans, &whole, Variant::RowsAndColumns, out)
}

/// The payload of the planes `exps` and `mans` cut into `parts`: `ctxtensors` for two parts or
/// more, else `ctxjoint`. Returns the codec, or `None` (appending nothing) where [`encode`]
/// returns `false` or the parts do not cover the planes in whole quads (see [`Part::len`]).
pub fn encode_parts(exps: &[u8], mans: &[u8], parts: &[Part], out: &mut Vec<u8>) -> Option<Codec> {
    encode_variant(exps, mans, parts, Variant::RowsAndColumns, out).then_some(match parts.len() {
        1 => Codec::CtxJoint,
        _ => Codec::CtxTensors,
    })
}

/// [`encode_parts`] with the contexts of `variant`, as a `bool`.
pub(crate) fn encode_variant(
    exps: &[u8],
    mans: &[u8],
    parts: &[Part],
    variant: Variant,
    out: &mut Vec<u8>,
) -> bool {
    if exps.len() != mans.len() || !parts_fit(parts, exps.len()) {
        return false;
    }
    let Some(alphabet) = Alphabet::of(exps, mans) else {
        return false;
    };
    let key = alphabet.key_table();
    let keys: Vec<u8> = exps
        .iter()
        .zip(mans)
        .map(|(&e, &x)| key[alphabet::symbol(e, x)])
        .collect();
    let mag = magnitudes(&alphabet);
    let shift = step_shift(keys.len());
    let base = base_of(&keys, &mag, shift);
    alphabet.write(out);
    write_layout(parts, base, out);
    let mut scale = Scale::new(base, shift);
    let (te, _) = alphabet.expansion();
    let mut models = Models::new(alphabet.len());
    models.inherit = variant != Variant::Uninherited;
    let mut e = [(); 2].map(|_| Encoder::with_capacity(keys.len() / 3 + 16));
    // The contexts depend on the keys only, so they are found in passes of their own, over
    // chunks of a part (the chunks start at even elements, so each pair's first key still goes
    // to stream 0).
    let mut contexts = Vec::with_capacity(CONTEXT_CHUNK.min(keys.len()));
    let mut at = 0;
    for part in parts {
        let keys = &keys[at..at + part.len];
        at += part.len;
        scale.restart(part.rows);
        match variant {
            Variant::RecentExponent | Variant::RecentExponentAndUp => {
                let exponents: Vec<u8> = keys.iter().map(|&k| te[k as usize]).collect();
                let up = variant == Variant::RecentExponentAndUp;
                contexts = recent_exponent_contexts(&exponents, part.rows, up);
                encode_keys(&mut models, &mut e, keys, &contexts);
            }
            _ => {
                let mean_row = scale.row();
                for start in (0..keys.len()).step_by(CONTEXT_CHUNK) {
                    let end = (start + CONTEXT_CHUNK).min(keys.len());
                    contexts.clear();
                    let quads = start / QUAD..end.div_ceil(QUAD);
                    scale_contexts(
                        keys,
                        quads,
                        mean_row,
                        &mag,
                        &mut scale,
                        variant,
                        &mut contexts,
                    );
                    encode_keys(&mut models, &mut e, &keys[start..end], &contexts);
                }
            }
        }
    }
    scale.keep();
    let [e0, e1] = e;
    finish_two(out, e0, e1);
    true
}

/// Rewrites the payload `payload` of [`encode_parts`], of codec `codec`, as the `ctxsigns`
/// payload of the same planes, `parts`, models and streams (a `ctxjoint` one gets the part
/// table). Returns `false`, leaving it as it is, if `codec` is neither.
pub fn into_signed(codec: Codec, parts: &[Part], payload: &mut Vec<u8>) -> bool {
    match codec {
        Codec::CtxTensors => true,
        Codec::CtxJoint => {
            let Ok((_, rest)) = Alphabet::read(payload) else {
                return false;
            };
            let Some(&[lo, hi]) = rest.get(8..LAYOUT_LEN) else {
                return false;
            };
            let at = payload.len() - rest.len();
            let base = i16::from_le_bytes([lo, hi]);
            let mut table = Vec::with_capacity(6 + PART_LEN);
            write_table(parts, base, &mut table);
            payload.splice(at..at + LAYOUT_LEN, table);
            true
        }
        _ => false,
    }
}

/// The length of the `ctxsigns` payload that [`into_signed`] makes of a payload of `len` bytes
/// of codec `codec`, or `None` if `codec` is neither `ctxjoint` nor `ctxtensors`.
pub fn signed_len(codec: Codec, len: usize) -> Option<usize> {
    match codec {
        Codec::CtxTensors => Some(len),
        // One part's table (the base, the count and the part) for the row layout.
        Codec::CtxJoint => Some(len + 6 + PART_LEN - LAYOUT_LEN),
        _ => None,
    }
}

/// Writes the layout that follows the alphabet: `ctxjoint`'s for one part, `ctxtensors`' for
/// more.
fn write_layout(parts: &[Part], base: i32, out: &mut Vec<u8>) {
    let base = base as i16;
    if let [whole] = parts {
        let base = base.to_le_bytes();
        out.extend_from_slice(&whole.rows.len.to_le_bytes());
        out.extend_from_slice(&whole.rows.phase.to_le_bytes());
        out.extend_from_slice(&base);
        return;
    }
    write_table(parts, base, out);
}

/// Writes the context base and the part table of the `ctxtensors` and `ctxsigns` layouts.
fn write_table(parts: &[Part], base: i16, out: &mut Vec<u8>) {
    out.extend_from_slice(&base.to_le_bytes());
    out.extend_from_slice(&(parts.len() as u32).to_le_bytes());
    for p in parts {
        for field in [p.len as u32, p.rows.len, p.rows.phase] {
            out.extend_from_slice(&field.to_le_bytes());
        }
    }
}

/// Codes `keys` with their `contexts` into the two streams, each pair's first key in stream 0;
/// an odd last key (the plane's) goes to stream 0.
fn encode_keys(models: &mut Models, e: &mut [Encoder; 2], keys: &[u8], contexts: &[u8]) {
    let [e0, e1] = e;
    let pairs = keys.chunks_exact(2).zip(contexts.chunks_exact(2));
    for (k, c) in pairs {
        models.get(c[0] as usize).encode(e0, k[0]);
        models.get(c[1] as usize).encode(e1, k[1]);
    }
    if let (Some(&k), Some(&c)) = (keys.last(), contexts.last()) {
        if keys.len() % 2 == 1 {
            models.get(c as usize).encode(e0, k);
        }
    }
}

/// Appends to `contexts` the context of every element of `quads` of a part's `keys` under
/// `scale` (or, for the [`Variant::Rows`] and [`Variant::Columns`] measurements, under half of
/// it), which has seen the quads before them; `mean_row` is the row estimate at the part's
/// start.
fn scale_contexts(
    keys: &[u8],
    quads: std::ops::Range<usize>,
    mean_row: i32,
    mag: &[u64; 256],
    scale: &mut Scale,
    variant: Variant,
    contexts: &mut Vec<u8>,
) {
    for q in quads {
        let quad = &keys[q * QUAD..((q + 1) * QUAD).min(keys.len())];
        if q >= 2 {
            let k = &keys[(q - 2) * QUAD..(q - 1) * QUAD];
            scale.add_quad([0, 1, 2, 3].map(|j| mag[k[j] as usize]));
        }
        let row = match variant {
            Variant::Columns => mean_row,
            _ => scale.row(),
        };
        contexts.extend((0..quad.len()).map(|j| {
            let c = match (variant, q) {
                (Variant::Rows, _) => bucket(row, scale.shift),
                (_, 0 | 1) => scale.first_context(row, q * QUAD + j),
                _ => scale.context(row, j),
            };
            c as u8
        }));
    }
}

/// The contexts of [`Variant::RecentExponent`] or, with `up`, of
/// [`Variant::RecentExponentAndUp`], from each element's exponent.
fn recent_exponent_contexts(exponents: &[u8], rows: Rows, up: bool) -> Vec<u8> {
    const RECENT: usize = 64;
    let n = exponents.len().max(1) as i64;
    let mean2 = 2 * exponents.iter().map(|&e| e as i64).sum::<i64>() / n;
    let row = rows.len as usize;
    let mut sum = 0i64;
    (0..exponents.len())
        .map(|i| {
            let seen = i.min(RECENT) as i64;
            let recent2 = match seen {
                0 => mean2,
                _ => 2 * sum / seen,
            };
            if i >= RECENT {
                sum -= exponents[i - RECENT] as i64;
            }
            sum += exponents[i] as i64;
            let steps = recent2 - mean2;
            let c = if up {
                let coarse = (steps.div_euclid(2) + 2).clamp(0, 3);
                let above = match i.checked_sub(row) {
                    Some(a) => {
                        (2 * exponents[a] as i64 - recent2)
                            .div_euclid(2)
                            .clamp(-2, 1)
                            + 2
                    }
                    None => 1,
                };
                coarse * 4 + above
            } else {
                (steps + CONTEXTS as i64 / 2).clamp(0, CONTEXTS as i64 - 1)
            };
            c as u8
        })
        .collect()
}

/// Reads the layout `layout` (see [`ROWS`]) that follows the alphabet of a plane of `len`
/// elements. Returns the parts, the context base and the streams.
fn read_layout(
    payload: &[u8],
    len: usize,
    layout: u8,
) -> Result<(Vec<Part>, i32, &[u8]), CodecError> {
    let tensors = layout != ROWS;
    let truncated = CodecError(match layout {
        ROWS => "ctxjoint layout truncated",
        PARTS => "ctxtensors part table truncated",
        _ => "ctxsigns part table truncated",
    });
    let word = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    let rows = |b: &[u8]| Rows {
        len: word(b),
        phase: word(&b[4..]),
    };
    let (parts, base, rest) = if tensors {
        let head = payload.get(..6).ok_or(truncated)?;
        let count = word(&head[2..]) as usize;
        let table_len = count
            .checked_mul(PART_LEN)
            .filter(|&n| count > (layout == PARTS) as usize && n <= payload.len() - 6)
            .ok_or(CodecError(match layout {
                PARTS => "ctxtensors part count out of range",
                _ => "ctxsigns part count out of range",
            }))?;
        let (table, rest) = payload[6..].split_at(table_len);
        let parts = table
            .chunks_exact(PART_LEN)
            .map(|b| Part {
                len: word(b) as usize,
                rows: rows(&b[4..]),
            })
            .collect();
        (parts, &head[..2], rest)
    } else {
        let head = payload.get(..LAYOUT_LEN).ok_or(truncated)?;
        let whole = vec![Part {
            len,
            rows: rows(head),
        }];
        (whole, &head[8..], &payload[LAYOUT_LEN..])
    };
    if !parts_fit(&parts, len) {
        return Err(CodecError(match layout {
            ROWS => "ctxjoint row layout out of range",
            PARTS => "ctxtensors part table does not fit the plane",
            _ => "ctxsigns part table does not fit the plane",
        }));
    }
    Ok((parts, i16::from_le_bytes([base[0], base[1]]) as i32, rest))
}

/// The decoding state of one plane: the models, the scale and the two streams.
struct State<'a> {
    scale: Scale,
    /// The plane's parts, and how many are started.
    parts: Vec<Part>,
    started: usize,
    /// Elements of the current part not yet decoded.
    left: usize,
    models: Models,
    mag: [u64; 256],
    streams: Streams<'a>,
    /// Magnitudes of the last two quads decoded, quad `q`'s at `q % 2`.
    last: [[u64; QUAD]; 2],
    /// Elements of the current part decoded.
    done: usize,
    /// The decoder of plane 1's signs, for the [`SIGNED`] layout (boxed, which keeps the
    /// state that the plain layouts' hot loop reads small).
    signs: Option<Box<SignDecoder<'a>>>,
}

impl State<'_> {
    /// Decodes the next `out.len()` keys into `out`; every call but the plane's last decodes
    /// whole quads. Whole quads past the first two go through [`State::quads`], for the
    /// plane's context spacing; the rest through [`State::quad`].
    fn decode_into(&mut self, out: &mut [u8]) {
        let mut at = 0;
        while at < out.len() {
            if self.left == 0 {
                self.next_part();
            }
            let end = at + self.left.min(out.len() - at);
            let rest = &mut out[at..end];
            let whole = match self.done >= LAG {
                true => rest.len() / QUAD * QUAD,
                false => 0,
            };
            if whole > 0 {
                let quads = &mut rest[..whole];
                match (self.scale.shift == STEP_SHIFT, self.signs.is_some()) {
                    (true, false) => self.quads::<STEP_SHIFT, false>(quads),
                    (false, false) => self.quads::<{ STEP_SHIFT + 1 }, false>(quads),
                    (true, true) => self.quads::<STEP_SHIFT, true>(quads),
                    (false, true) => self.quads::<{ STEP_SHIFT + 1 }, true>(quads),
                }
                at += whole;
                self.left -= whole;
            } else {
                let n = rest.len().min(QUAD);
                self.quad(&mut rest[..n]);
                at += n;
                self.left -= n;
            }
        }
    }

    /// Starts the next part: its rows, nothing seen. Parts cover the plane, so a plane's
    /// elements never run past its last part (a payload whose parts do not is refused).
    fn next_part(&mut self) {
        let part = self.parts[self.started.min(self.parts.len() - 1)];
        self.started += 1;
        self.scale.restart(part.rows);
        if let Some(signs) = &mut self.signs {
            signs.start(part.rows);
        }
        self.left = part.len;
        self.done = 0;
        self.last = [[0; QUAD]; 2];
    }

    /// Decodes whole quads of a plane past its first two, with contexts `1 << SHIFT` units
    /// apart (the plane's [`Scale::shift`]), and with `SIGNS` each quad's signs.
    ///
    /// The hot loop of BEST's decoding. The spacing is a constant and the contexts of a
    /// quad are found before its elements are decoded, so that between two elements only the
    /// two decoders' state and the four tables are live; starting a context (at most
    /// [`CONTEXTS`] times a plane) and a model's events are out of line. The signs' decoding
    /// is a chain of work of its own, which runs in the keys' shadow.
    #[inline(never)]
    fn quads<const SHIFT: u32, const SIGNS: bool>(&mut self, out: &mut [u8]) {
        let data = self.streams.data;
        let mut decs = self.streams.decs;
        let State {
            scale,
            models,
            mag,
            last,
            done,
            signs,
            ..
        } = self;
        let mut signs = signs.as_mut().filter(|_| SIGNS);
        let mut q = *done / QUAD;
        for quad in out.chunks_exact_mut(QUAD) {
            // This quad's magnitudes replace those of quad q - 2, added first.
            let l = &mut last[q % 2];
            let c = scale.next_contexts::<SHIFT>(*l).map(|c| c as usize);
            let [d0, d1] = &mut decs;
            let keys = [
                models.get(c[0]).decode(d0, data),
                models.get(c[1]).decode(d1, data),
                models.get(c[2]).decode(d0, data),
                models.get(c[3]).decode(d1, data),
            ];
            quad.copy_from_slice(&keys);
            *l = keys.map(|k| mag[k as usize]);
            if let Some(s) = &mut signs {
                s.decode::<QUAD>();
            }
            q += 1;
        }
        *done = q * QUAD;
        self.streams.decs = decs;
    }

    /// Decodes one quad of `out.len()` elements: one of the plane's first two quads (nothing
    /// added yet), or its last, partial one.
    fn quad(&mut self, out: &mut [u8]) {
        let data = self.streams.data;
        let [mut d0, mut d1] = self.streams.decs;
        let q = self.done / QUAD;
        self.done += out.len();
        let scale = &mut self.scale;
        let l = &mut self.last[q % 2];
        if q >= 2 {
            scale.add_quad(*l);
        }
        let row = scale.row();
        for (j, (k, l)) in out.iter_mut().zip(l).enumerate() {
            let c = match q {
                0 | 1 => scale.first_context(row, q * QUAD + j),
                _ => scale.context(row, j),
            };
            let t = self.models.get(c);
            *k = match j % 2 {
                0 => t.decode(&mut d0, data),
                _ => t.decode(&mut d1, data),
            };
            *l = self.mag[*k as usize];
        }
        self.streams.decs = [d0, d1];
        if let Some(s) = &mut self.signs {
            s.decode_some(out.len());
        }
    }
}

/// Decodes a payload `payload` of layout `LAYOUT` (see [`ROWS`]) and its plane-1 payload
/// `plane1` into the exponent plane `exps` and the sign/mantissa plane `mans`.
pub fn decode<const LAYOUT: u8>(
    payload: &[u8],
    plane1: &[u8],
    exps: &mut [u8],
    mans: &mut [u8],
) -> Result<(), CodecError> {
    let (alphabet, mut st) = State::open(payload, plane1, LAYOUT, exps.len())?;
    if st.signs.is_none() {
        joint::check_planes(plane1, exps, mans)?;
        joint::decode_chunks(&alphabet, plane1, exps, mans, |ec| st.decode_into(ec));
        return st.finish().map(drop);
    }
    // The raw fields are known once the signs are decoded, beside the keys.
    st.decode_into(exps);
    let raw = st.finish_signed()?;
    joint::check_planes(&raw, exps, mans)?;
    let (te, tm) = alphabet.expansion();
    joint::expand(&te, &tm, &raw, exps, mans);
    Ok(())
}

/// Decodes a payload `payload` of layout `LAYOUT` (see [`ROWS`]) and its plane-1 payload
/// `plane1` of an `exp16` block straight into the block's bytes `out`, with `keys` as scratch:
/// the keys are expanded into the elements as FAST's [`huffjoint`](super::huffjoint) expands
/// its own, the transform's merge folded in, so that no planes are written and merged.
pub fn decode_words<const LAYOUT: u8>(
    payload: &[u8],
    plane1: &[u8],
    keys: &mut Vec<u8>,
    out: &mut [u8],
) -> Result<(), CodecError> {
    let (alphabet, mut st) = State::open(payload, plane1, LAYOUT, out.len() / 2)?;
    if st.signs.is_none() {
        return huffjoint::decode_words(plane1, keys, out, |keys| {
            st.decode_into(keys);
            st.finish()?;
            Ok(alphabet)
        });
    }
    let keys = huffjoint::key_scratch(keys, out)?;
    st.decode_into(keys);
    let raw = st.finish_signed()?;
    // The signs' decoder made `raw` for exactly these keys.
    huffjoint::expand_words(&alphabet, keys, &raw, out);
    Ok(())
}

impl<'a> State<'a> {
    /// The alphabet of `payload`, of layout `layout` (see [`ROWS`]), and the state that
    /// decodes its `len` keys, and for the [`SIGNED`] layout the signs of plane 1's payload
    /// `plane1`.
    fn open(
        payload: &'a [u8],
        plane1: &'a [u8],
        layout: u8,
        len: usize,
    ) -> Result<(Alphabet, State<'a>), CodecError> {
        let (alphabet, rest) = Alphabet::read(payload)?;
        let (parts, base, coded) = read_layout(rest, len, layout)?;
        let st = State {
            scale: Scale::new(base, step_shift(len)),
            left: 0,
            parts,
            started: 0,
            models: Models::new(alphabet.len()),
            mag: magnitudes(&alphabet),
            streams: two_streams(coded, 0)?,
            last: [[0; QUAD]; 2],
            done: 0,
            signs: match layout {
                SIGNED => Some(Box::new(SignDecoder::open(plane1, len)?)),
                _ => None,
            },
        };
        Ok((alphabet, st))
    }

    /// Keeps the column arrays for the thread's next plane and checks that both streams
    /// ended where they should; returns plane 1's raw6 payload where the signs were decoded
    /// here.
    fn finish(self) -> Result<Option<Vec<u8>>, CodecError> {
        self.scale.keep();
        self.streams.finish()?;
        self.signs.map(|s| s.finish()).transpose()
    }

    /// [`State::finish`] of a plane whose signs were decoded here: plane 1's raw6 payload.
    fn finish_signed(self) -> Result<Vec<u8>, CodecError> {
        self.finish()?
            .ok_or(CodecError("ctxsigns plane decoded without its signs"))
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::codec::signs;

    /// Weights-like planes: rows with scales of their own, columns with scales of their own.
    fn planes(n: usize, row: usize, seed: u32) -> (Vec<u8>, Vec<u8>) {
        let mut x = seed | 1;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        };
        let row_scale: Vec<i32> = (0..n / row + 2).map(|_| (rnd() % 5) as i32).collect();
        let col_scale: Vec<i32> = (0..row).map(|_| (rnd() % 3) as i32).collect();
        let (mut e, mut m) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for i in 0..n {
            let drop = (rnd() % 8).min(rnd() % 8) as i32;
            e.push((120 + row_scale[i / row] + col_scale[i % row] - drop) as u8);
            m.push(rnd() as u8);
        }
        (e, m)
    }

    fn roundtrip(e: &[u8], m: &[u8], rows: Rows) -> usize {
        let mut p = Vec::new();
        assert!(encode(e, m, rows, &mut p));
        let mut r = Vec::new();
        raw6::encode(m, &mut r);
        let (mut de, mut dm) = (vec![0xAA; e.len()], vec![0x55; e.len()]);
        decode::<ROWS>(&p, &r, &mut de, &mut dm).unwrap();
        assert_eq!(de, e);
        assert_eq!(dm, m);
        p.len()
    }

    #[test]
    fn qlog_is_monotone_and_inverts() {
        let mut last = -1;
        for x in 1..100_000u64 {
            let q = qlog(x);
            assert!(q >= last, "x={x}");
            last = q;
        }
        assert_eq!(qlog(0), 0);
        assert_eq!(qlog(1), 0);
        assert_eq!(qlog(2), 64);
        assert_eq!(qlog(3), 64 + 32);
        assert_eq!(qlog(3 << 56), 57 * 64 + 32);
        for q in [384, 400, 1000, 2000, 51 * 64 + 63] {
            assert_eq!(qlog(qexp(q)), q, "q={q}");
        }
    }

    #[test]
    fn roundtrips_at_any_layout() {
        for (n, row) in [
            (2usize, 1usize),
            (3, 2),
            (7, 3),
            (100, 10),
            (8191, 384),
            (8193, 64),
        ] {
            let (e, m) = planes(n, row, n as u32);
            if Alphabet::of(&e, &m).is_none() {
                continue;
            }
            for rows in [
                Rows { len: 1, phase: 0 },
                Rows::at(row as u64, 0),
                Rows::at(row as u64, 5),
                Rows::at(row as u64, -3),
                Rows::at(n as u64 * 3, 7),
                Rows {
                    len: MAX_ROW,
                    phase: MAX_ROW - 1,
                },
            ] {
                roundtrip(&e, &m, rows);
            }
        }
    }

    /// Codes `e`/`m` in `parts` and decodes them both ways; returns the payload's length.
    fn roundtrip_parts(e: &[u8], m: &[u8], parts: &[Part]) -> usize {
        roundtrip_coded(e, m, parts, false).0
    }

    /// Codes `e`/`m` in `parts`, as `ctxsigns`/`signs` when `signed` (through
    /// [`into_signed`]), and decodes them both ways; returns the lengths of the two payloads.
    pub(in crate::codec) fn roundtrip_coded(
        e: &[u8],
        m: &[u8],
        parts: &[Part],
        signed: bool,
    ) -> (usize, usize) {
        let mut p = Vec::new();
        let mut codec = encode_parts(e, m, parts, &mut p).expect("parts fit");
        assert_eq!(codec == Codec::CtxTensors, parts.len() > 1);
        let mut r = Vec::new();
        if signed {
            let len = signed_len(codec, p.len());
            assert!(into_signed(codec, parts, &mut p));
            assert_eq!(len, Some(p.len()));
            assert!(signs::encode(m, parts, &mut r));
            codec = Codec::CtxSigns;
        } else {
            raw6::encode(m, &mut r);
        }
        let (mut de, mut dm) = (vec![0xAA; e.len()], vec![0x55; e.len()]);
        let Decode::PairOrWords { pair, words } = codec.spec().decode else {
            unreachable!("ctxjoint decodes pairs or words")
        };
        pair(&p, &r, &mut de, &mut dm).unwrap();
        assert_eq!((de.as_slice(), dm.as_slice()), (e, m));
        // The words path writes the block's BF16 words (exp16: exponent bits 14..7).
        let mut out = vec![0u8; 2 * e.len()];
        words(&p, &r, &mut Vec::new(), &mut out).unwrap();
        let want: Vec<u8> = e
            .iter()
            .zip(m)
            .flat_map(|(&e, &m)| {
                let w = (m as u16 & 0x80) << 8 | (e as u16) << 7 | (m as u16 & 0x7F);
                w.to_le_bytes()
            })
            .collect();
        assert!(out == want);
        (p.len(), r.len())
    }

    #[test]
    fn parts_roundtrip_and_share_their_models() {
        // Three tensors of their own row lengths and scales, the last of odd length.
        let shapes = [(6000usize, 60usize, 1u32), (4000, 40, 2), (2001, 23, 3)];
        let (mut e, mut m, mut parts) = (Vec::new(), Vec::new(), Vec::new());
        for (n, row, seed) in shapes {
            let (pe, pm) = planes(n, row, seed);
            e.extend(pe);
            m.extend(pm);
            parts.push(Part {
                len: n,
                rows: Rows::at(row as u64, 0),
            });
        }
        let together = roundtrip_parts(&e, &m, &parts);
        // Each tensor as a block of its own pays for learning three times over.
        let mut at = 0;
        let apart: usize = parts
            .iter()
            .map(|p| {
                let r = at..at + p.len;
                at += p.len;
                roundtrip(&e[r.clone()], &m[r], p.rows)
            })
            .sum();
        assert!(together < apart, "{together} vs {apart}");
        // A part may start mid-row, and one part is ctxjoint's payload.
        parts[1].rows = Rows::at(40, -7);
        roundtrip_parts(&e, &m, &parts);
        let whole = [Part {
            len: e.len(),
            rows: Rows::at(60, 0),
        }];
        let mut one = Vec::new();
        assert!(encode(&e, &m, whole[0].rows, &mut one));
        assert_eq!(roundtrip_parts(&e, &m, &whole), one.len());
    }

    #[test]
    fn bad_parts_are_refused_and_bad_part_tables_are_errors() {
        let (e, m) = planes(3000, 50, 9);
        let part = |len, row| Part {
            len,
            rows: Rows::at(row, 0),
        };
        let refused = [
            vec![],
            vec![part(1001, 50), part(1999, 50)],
            vec![part(1000, 50), part(1000, 50)],
            vec![part(1000, 50), part(2004, 50)],
            vec![part(0, 50), part(3000, 50)],
            // A middle part's rows may not be longer than its elements and 3 more.
            vec![part(1000, 50), part(4, 8), part(1996, 50)],
            vec![
                part(1000, 50),
                Part {
                    len: 2000,
                    rows: Rows { len: 50, phase: 50 },
                },
            ],
        ];
        for parts in refused {
            let mut out = Vec::new();
            assert_eq!(encode_parts(&e, &m, &parts, &mut out), None, "{parts:?}");
            assert!(out.is_empty());
        }
        let mut fits = Vec::new();
        let three = [part(1000, 50), part(4, 7), part(1996, 50)];
        assert_eq!(
            encode_parts(&e, &m, &three, &mut fits),
            Some(Codec::CtxTensors)
        );
        let mut p = Vec::new();
        let parts = [part(1000, 50), part(1200, 30), part(800, 7)];
        assert_eq!(
            encode_parts(&e, &m, &parts, &mut p),
            Some(Codec::CtxTensors)
        );
        let mut r = Vec::new();
        raw6::encode(&m, &mut r);
        let (mut de, mut dm) = (vec![0; 3000], vec![0; 3000]);
        decode::<PARTS>(&p, &r, &mut de, &mut dm).unwrap();
        // A ctxtensors payload is its ctxsigns payload; the part table checks are the same.
        let mut same = p.clone();
        assert!(into_signed(Codec::CtxTensors, &parts, &mut same));
        assert_eq!(same, p);
        let mut s = Vec::new();
        assert!(signs::encode(&m, &parts, &mut s));
        let layouts: [(super::super::PairFn, &[u8]); 2] =
            [(decode::<PARTS>, &r), (decode::<SIGNED>, &s)];
        // The part table follows the alphabet and the context base.
        let at = Alphabet::read(&p).unwrap().1.as_ptr() as usize - p.as_ptr() as usize + 2;
        let field = |k: usize| at + 4 + 4 * k;
        for (decode, r) in layouts {
            decode(&p, r, &mut de, &mut dm).unwrap();
            for (offset, bad) in [
                (at, 0u32),
                (at, 1),
                (at, 4),
                (at, u32::MAX),
                (field(0), 999),
                (field(0), 0),
                (field(6), 801),
                (field(1), 0),
                (field(2), 50),
                (field(4), MAX_ROW + 1),
                (field(4), 1204),
            ] {
                let mut q = p.clone();
                q[offset..offset + 4].copy_from_slice(&bad.to_le_bytes());
                assert!(decode(&q, r, &mut de, &mut dm).is_err(), "{offset} {bad}");
            }
            for cut in [at - 1, at + 3, field(8), field(9) - 1] {
                assert!(decode(&p[..cut], r, &mut de, &mut dm).is_err(), "{cut}");
            }
            for k in 0..p.len() {
                let mut q = p.clone();
                q[k] ^= 0x5A;
                let _ = decode(&q, r, &mut de, &mut dm);
            }
        }
        // A ctxjoint payload is not a ctxtensors or ctxsigns one, nor the other way round.
        let mut one = Vec::new();
        assert!(encode(&e, &m, Rows::at(50, 0), &mut one));
        assert!(decode::<PARTS>(&one, &r, &mut de, &mut dm).is_err());
        assert!(decode::<SIGNED>(&one, &s, &mut de, &mut dm).is_err());
        assert!(decode::<ROWS>(&p, &r, &mut de, &mut dm).is_err());
        // One part is a ctxsigns table (not a ctxtensors one), which must cover the plane.
        let whole = [part(3000, 50)];
        assert!(into_signed(Codec::CtxJoint, &whole, &mut one));
        let mut s = Vec::new();
        assert!(signs::encode(&m, &whole, &mut s));
        decode::<SIGNED>(&one, &s, &mut de, &mut dm).unwrap();
        assert_eq!((de.as_slice(), dm.as_slice()), (&e[..], &m[..]));
        assert!(decode::<PARTS>(&one, &r, &mut de, &mut dm).is_err());
        for (offset, bad) in [(at, 0u32), (at, 2), (field(0), 2996), (field(2), 50)] {
            let mut q = one.clone();
            q[offset..offset + 4].copy_from_slice(&bad.to_le_bytes());
            assert!(
                decode::<SIGNED>(&q, &s, &mut de, &mut dm).is_err(),
                "{offset} {bad}"
            );
        }
        // Neither a joint payload nor plane 1 becomes a ctxsigns payload.
        for codec in [Codec::Joint, Codec::Raw6] {
            let mut q = p.clone();
            assert!(!into_signed(codec, &parts, &mut q));
            assert_eq!(q, p);
        }
    }

    #[test]
    fn rows_beat_the_joint_codec_on_scaled_rows() {
        let (e, m) = planes(200_000, 500, 7);
        let ctx = roundtrip(&e, &m, Rows::at(500, 0));
        let mut plain = Vec::new();
        assert!(joint::encode_joint(&e, &m, &mut plain));
        assert!(
            (ctx as f64) < plain.len() as f64 * 0.97,
            "ctxjoint {ctx} vs joint {}",
            plain.len()
        );
    }

    #[test]
    fn bad_layouts_and_payloads_are_errors() {
        let (e, m) = planes(5000, 50, 3);
        assert!(!encode(&e, &m, Rows { len: 0, phase: 0 }, &mut Vec::new()));
        assert!(!encode(&e, &m, Rows { len: 4, phase: 4 }, &mut Vec::new()));
        assert!(!encode(
            &e,
            &m,
            Rows {
                len: MAX_ROW + 1,
                phase: 0
            },
            &mut Vec::new()
        ));
        let mut p = Vec::new();
        assert!(encode(&e, &m, Rows::at(50, 0), &mut p));
        let mut r = Vec::new();
        raw6::encode(&m, &mut r);
        let (mut de, mut dm) = (vec![0; 5000], vec![0; 5000]);
        let at = Alphabet::read(&p).unwrap().1.as_ptr() as usize - p.as_ptr() as usize;
        for (field, bad) in [(0, 0u32), (0, MAX_ROW + 1), (4, 50)] {
            let mut q = p.clone();
            q[at + field..at + field + 4].copy_from_slice(&bad.to_le_bytes());
            assert!(decode::<ROWS>(&q, &r, &mut de, &mut dm).is_err());
        }
        for cut in [0, 1, 33, at + 3, at + 9, at + 12, p.len() / 2, p.len() - 1] {
            assert!(decode::<ROWS>(&p[..cut], &r, &mut de, &mut dm).is_err());
        }
        assert!(decode::<ROWS>(&p, &r[1..], &mut de, &mut dm).is_err());
        assert!(decode::<ROWS>(&p, &r, &mut de[1..], &mut dm).is_err());
        for k in 0..p.len() {
            let mut q = p.clone();
            q[k] ^= 0x5A;
            let _ = decode::<ROWS>(&q, &r, &mut de, &mut dm);
        }
    }
}
