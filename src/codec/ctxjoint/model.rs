//! The model that encoder and decoder must share, step for step: the context models' constants,
//! the running row and column magnitudes ([`Scale`]) that pick an element's context, and the
//! context models' frequency tables ([`Models`]).

use crate::codec::joint::{self, JOINT_PARAMS};
use crate::entropy::alphabet::Alphabet;
use crate::entropy::model::{Counts, Params, INC};
use crate::entropy::rc::{Decoder, Encoder, PROB_SCALE};
use crate::entropy::rows::{Rows, MAX_ROW, QUAD_LEN};

/// Number of context models.
pub(super) const CONTEXTS: usize = 16;
/// Context models are `1 << STEP_SHIFT` units of [`qlog`] apart: a quarter octave (see
/// [`SMALL_PLANE`]).
pub(super) const STEP_SHIFT: u32 = 4;
/// Planes of fewer elements than this space their contexts twice as far apart, half an octave:
/// each context then sees more of a small plane's elements and learns its model sooner, which
/// pays more than the finer scale (measured: 1.1 KB, 0.08%, less on a model of 1.04 M weights
/// in tensors of 16 K to 35 K elements), while larger planes code smaller with the finer one.
/// The decoder knows the plane's length, so nothing is signalled.
pub(super) const SMALL_PLANE: usize = 1 << 16;
/// Units of [`qlog`] per octave.
pub(super) const OCTAVE: i32 = 64;
/// Weight, in elements, of the previous row's mean magnitude in the estimate for a new row.
pub(super) const ROW_PRIOR: u64 = 16;
/// Rows after which column deviations are refreshed every `REFRESH` rows only.
pub(super) const REFRESH: u64 = 8;
/// Rows of evidence at which a column's deviation counts half.
pub(super) const COLUMN_SHRINK: u64 = 16;
/// Total count, in increments, that a context model inherits from the block-wide counts when it
/// first occurs (about 40 symbols' worth).
pub(super) const INHERIT: u64 = 1000;
/// Octaves below the alphabet's largest exponent from which magnitudes count as 0.
pub(super) const RANGE: i32 = 24;
/// Elements are modelled in quads: the contexts of a quad's elements are computed together.
pub(super) const QUAD: usize = QUAD_LEN;
/// Elements whose contexts the encoder finds at a time, a multiple of [`QUAD`]: the contexts
/// of a whole 64 MiB block would take 32 MiB more.
pub(super) const CONTEXT_CHUNK: usize = 1 << 16;
/// The contexts of quad `q` are computed from the elements of quads `0..q - 1`: the quad in
/// between is still being decoded.
pub(super) const LAG: usize = 2 * QUAD;
/// Slots per entry of a context table's lookup, as a shift: every 16th slot.
pub(super) const BUCKET_SHIFT: u32 = 4;
/// Entries of a context table's lookup.
pub(super) const BUCKETS: usize = (PROB_SCALE >> BUCKET_SHIFT) as usize;
/// Bytes past a context table's lookup, for its block-wise fill.
pub(super) const BUCKET_PAD: usize = 32;
/// The context models' constants: halving as in the joint codec; a context sees a fraction of
/// the block, so its table is rebuilt more often than the joint codec's.
pub(super) const PARAMS: Params = Params {
    limit: JOINT_PARAMS.limit,
    rebuild_max: 512,
};

/// The logarithm of `x` in 1/64 octaves: the position of its leading bit, then the six bits
/// below it as a linear fraction; 0 for 0 and 1. Exact for `x` below 2^58; the sums it is
/// taken of stay below 2^54 (at most 2^25 elements of magnitude below 2^28).
#[inline(always)]
pub(super) fn qlog(x: u64) -> i32 {
    let x = x.max(1);
    let l = 63 - x.leading_zeros();
    let frac = (x << 6 >> l) & 63;
    l as i32 * OCTAVE + frac as i32
}

/// The inverse of [`qlog`], for arguments clamped to 0 ..= 51 octaves (sums of magnitudes
/// weighted by [`ROW_PRIOR`] then stay below 2^58).
pub(super) fn qexp(q: i32) -> u64 {
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
pub(super) fn magnitudes(alphabet: &Alphabet) -> [u64; 256] {
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
pub(super) const COLUMNS: usize = MAX_ROW as usize;

/// The running row and column magnitudes that select an element's context model.
///
/// At the start of quad `q`, the magnitudes of quad `q - 2` are added in order (from quad 2
/// on) and the row's estimate is taken; each element of the quad adds its column's deviation
/// to it.
pub(super) struct Scale {
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
    pub(super) shift: u32,
}

/// The spacing of the contexts of a plane of `len` elements, as a shift of [`qlog`] units.
pub(super) fn step_shift(len: usize) -> u32 {
    match len < SMALL_PLANE {
        true => STEP_SHIFT + 1,
        false => STEP_SHIFT,
    }
}

/// The context of a predicted magnitude, in [`qlog`] units above the context base, for
/// contexts `1 << shift` units apart.
#[inline(always)]
pub(super) fn bucket(q: i32, shift: u32) -> usize {
    (q >> shift).clamp(0, CONTEXTS as i32 - 1) as usize
}

/// The [`qlog`] units from the context base to the middle context, where a plane's mean
/// magnitude lies.
pub(super) fn half_span(shift: u32) -> i32 {
    ((CONTEXTS as i32) << shift) / 2
}

/// A zeroed array on the heap (without building it on the stack first).
pub(super) fn zeroed<T: Copy + Default, const N: usize>() -> Box<[T; N]> {
    match vec![T::default(); N].into_boxed_slice().try_into() {
        Ok(a) => a,
        Err(_) => unreachable!("the vector has N elements"),
    }
}

/// The column arrays of a [`Scale`]: 768 KiB, allocated once per thread and kept between
/// planes, of which a plane clears only the entries its rows use.
pub(super) type ColumnArrays = (Box<[u64; COLUMNS + QUAD]>, Box<[i32; COLUMNS + LAG]>);

thread_local! {
    static KEPT_COLUMNS: std::cell::RefCell<Option<ColumnArrays>> =
        const { std::cell::RefCell::new(None) };
}

impl Scale {
    /// A scale for contexts from `base`, `1 << shift` units apart, to be started at a part's
    /// first element by [`Scale::restart`] before use.
    pub(super) fn new(base: i32, shift: u32) -> Scale {
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
    pub(super) fn restart(&mut self, rows: Rows) {
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
    pub(super) fn row(&self) -> i32 {
        qlog(self.row_sum) - qlog(self.row_count) - self.base
    }

    /// The context of an element in column `column`, given its quad's [`Scale::row`].
    #[inline(always)]
    pub(super) fn context_at(&self, row: i32, column: usize) -> usize {
        bucket(row + self.deviation[column], self.shift)
    }

    /// The context of element `j` of quad `q >= 2`, once quad `q - 2` is added: its column is
    /// `QUAD + j` after the next one to add.
    #[inline(always)]
    pub(super) fn context(&self, row: i32, j: usize) -> usize {
        self.context_at(row, self.added % COLUMNS + QUAD + j % QUAD)
    }

    /// Adds the magnitudes `v` of quad `q - 2` and returns the contexts of quad `q`, for a
    /// plane whose [`Scale::shift`] is `SHIFT`.
    #[inline(always)]
    pub(super) fn next_contexts<const SHIFT: u32>(&mut self, v: [u64; QUAD]) -> [u8; QUAD] {
        self.add_quad(v);
        let row = self.row();
        let a = self.added % COLUMNS + QUAD;
        std::array::from_fn(|j| bucket(row + self.deviation[a + j], SHIFT) as u8)
    }

    /// The context of element `i` of the first two quads (nothing added yet).
    pub(super) fn first_context(&self, row: i32, i: usize) -> usize {
        self.context_at(row, (self.phase + i) % self.row_len)
    }

    /// Adds the magnitudes of a quad in order.
    #[inline(always)]
    pub(super) fn add_quad(&mut self, v: [u64; QUAD]) {
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
    pub(super) fn add(&mut self, v: u64) {
        self.row_sum += v;
        self.row_count += 1;
        self.columns[self.added % COLUMNS] += v;
        self.added += 1;
        if self.added == self.row_len {
            self.end_row();
        }
    }

    /// Keeps the column arrays for the thread's next plane.
    pub(super) fn keep(self) {
        KEPT_COLUMNS.with(|k| k.replace(Some((self.columns, self.deviation))));
    }

    #[cold]
    pub(super) fn end_row(&mut self) {
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
pub(super) struct Table {
    counts: Counts,
    /// `cum | freq << 16` of each key.
    cf: [u32; 256],
    /// The key whose slots hold slot `16 * b`, for each `b`, then [`BUCKET_PAD`] bytes that
    /// the block-wise fill of [`Table::rebuild`] may write.
    bucket: [u8; BUCKETS + BUCKET_PAD],
    last: u8,
}

impl Table {
    pub(super) fn new(counts: Counts) -> Table {
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
    pub(super) fn held() -> Table {
        Table {
            counts: Counts::held(PARAMS),
            cf: [0; 256],
            bucket: [0; BUCKETS + BUCKET_PAD],
            last: 0,
        }
    }

    pub(super) fn rebuild(&mut self) {
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
    pub(super) fn count(&mut self, k: u8) {
        if self.counts.count(k) {
            self.event();
        }
    }

    #[cold]
    pub(super) fn event(&mut self) {
        if self.counts.event() {
            self.rebuild();
        }
    }

    #[inline(always)]
    pub(super) fn encode(&mut self, enc: &mut Encoder, k: u8) {
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
    pub(super) fn decode(&mut self, d: &mut Decoder, data: &[u8]) -> u8 {
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
pub(super) fn last_slot() -> u32 {
    PROB_SCALE - 1
}

/// The context models, each started on first use from the counts of those already started.
/// The tables lie side by side, so that a context's table is found without a pointer.
pub(super) struct Models {
    used: usize,
    /// Every context's table; those not yet started hold uniform counts until [`Models::start`].
    tables: Box<[Table; CONTEXTS]>,
    /// Bit `c` is set once context `c` is started.
    started: u32,
    params: Params,
    /// Whether a context starts from the counts of those started (always, but in `sc models`).
    pub(super) inherit: bool,
}

impl Models {
    pub(super) fn new(used: usize) -> Models {
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
    pub(super) fn get(&mut self, c: usize) -> &mut Table {
        let c = c % CONTEXTS;
        if self.tables[c].counts.due() {
            self.catch_up(c);
        }
        &mut self.tables[c]
    }

    /// Starts context `c`, or takes its due event.
    #[cold]
    #[inline(never)]
    pub(super) fn catch_up(&mut self, c: usize) {
        match self.started & 1 << c {
            0 => self.start(c),
            _ => self.tables[c].event(),
        }
    }

    /// Starts context `c` with counts of [`INHERIT`] in all, in proportion to the summed counts
    /// of the contexts started (each key at least 1), or uniform if there are none.
    #[cold]
    pub(super) fn start(&mut self, c: usize) {
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
pub(super) fn uniform_counts(used: usize) -> [u32; 256] {
    let mut counts = [0u32; 256];
    counts[..used.min(256)].fill(INC);
    counts
}
