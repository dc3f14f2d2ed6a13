//! How each block is coded, in FAST and in BEST mode: its transform, then a codec for each
//! plane, chosen by measuring the block. Every margin the choice applies is a named constant
//! below, with what it trades.
//!
//! FAST keeps decoding at copy speed: Huffman codes the predictable planes, near-random planes
//! are stored raw, and 16-bit float blocks go to the `huffjoint`/`raw6` pair where it is
//! estimated smaller. BEST spends time on any gain: adaptive range coding, the `ctxjoint`/`raw6`
//! pair for exponent-aligned blocks of tensors (`joint`/`raw6` for blocks without one), and the
//! static range coder where statistics hold still.

pub mod delta;

use crate::codec::{
    adaptive, byctx, constant, context, ctxjoint, huffjoint, huffman, joint, range, raw6, signs,
    Codec, Slot,
};
use crate::container::Mode;
use crate::entropy::rows::{Part, Rows, TensorRows, QUAD_LEN};
use crate::stats::{entropy_bits, histogram, single_symbol};
use crate::transform::{Transform, MAX_PLANES};
use rayon::prelude::*;

/// Reusable per-worker buffers: split planes and their coded forms.
#[derive(Default)]
pub struct Scratch {
    /// Planes split from a block, or decoded.
    pub(crate) planes: [Vec<u8>; MAX_PLANES],
    /// Coded planes.
    pub(crate) coded: [Vec<u8>; MAX_PLANES],
    /// Joint keys, for FAST's `huffjoint` codec.
    pub(crate) keys: Vec<u8>,
}

/// Bits per byte above which FAST stores a plane after the first raw: Huffman would gain too
/// little to pay for halving that plane's decode speed (the near-random mantissa planes of
/// trained weights measure 7.9-8.0).
const FAST_RAW_BITS: f64 = 7.5;
/// The same for BEST, which spends time on any gain above ~0.4%.
const BEST_RAW_BITS: f64 = 7.97;
/// Planes after the first are judged on every this many bytes: cheap next to coding them, and
/// close enough to decide.
const RAW_SAMPLE_STEP: usize = 8;

/// BEST's estimate of the static range coder's table, per used symbol (one or two bytes of
/// frequency, and zero runs between) and in all (the last-symbol byte, rounding): added to the
/// plane's entropy to judge the coder against the adaptive one, which sends no table but pays
/// for learning.
const RANGE_TABLE_PER_SYMBOL: f64 = 2.0;
const RANGE_TABLE_FIXED: f64 = 16.0;

/// Elements of a tensor's part of a block on which BEST compares the two row lengths a tensor
/// of three or more dimensions offers `ctxjoint` (its last dimension, or all after the first):
/// the one that codes them smaller codes the part. A quarter of a 1 MiB block of BF16 costs a
/// quarter of its coding time per candidate; the choice rarely changes with more.
const ROWS_SAMPLE: usize = 1 << 16;

/// Elements a tensor must have in a block for `ctxjoint` to code them in its own rows, as a
/// part of their own: a part's layout takes 12 bytes, and a few rows teach the row and column
/// estimates little. Smaller tensors (biases, norms) join the part before them.
const MIN_PART: usize = 1024;

/// Planes of at most this many elements that `ctxjoint` codes are also coded with `joint`, and
/// the smaller payload is kept: on a few hundred elements the context models' learning can
/// cost more than they gain (a 384-element plane: 291 bytes against 277). Larger planes rarely
/// change (a few bytes in 10^6 elements) and would pay a second coding pass.
const JOINT_TRIAL_MAX: usize = 1 << 14;

/// BEST keeps its modelled codecs (`context` for the sign/mantissa plane, the joint pairs)
/// unless the order-0 estimate of coding the planes apart promises clearly less: these allow
/// that estimate 1% and 600 bytes, as it ignores the separate coders' tables and learning cost,
/// and the modelled codecs are the ones built for trained weights (decoding one range-coder
/// step per element where the separate coders take more). Low-precision data with zeroed
/// mantissa bits is what goes to the separate coders.
const MODEL_SLACK_RATIO: f64 = 1.01;
const MODEL_SLACK_BYTES: f64 = 600.0;

/// [`SignModels::Paying`] uses sign models on a block where they save at least 1 bit in this
/// many elements. Decoding a block's signs takes about half as long again as decoding the
/// block without them, while most blocks of trained weights gain a few thousandths of a bit
/// per element from them; the blocks that gain more than this (token embeddings and the like:
/// 5 of MiniLM's 54 blocks, which hold most of its gain) are worth their time.
const PAYING_SIGN_ELEMENTS: usize = 64;

/// Where BEST codes the signs of a block with sign models (codec `signs`): a model per column of
/// its tensors (weights of a column often lean to one sign).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum SignModels {
    /// Nowhere: the archive of a safetensors file is one that readers of format version 4
    /// decode, and BEST decodes fastest.
    Off,
    /// On the blocks where they save at least 1 bit in 64 elements (BEST's default): most of
    /// their gain for a small part of their decoding time.
    #[default]
    Paying,
    /// On every block that they code smaller (`sc -9`): the smallest archives, decoding
    /// slowest (MiniLM BF16: 1.4x the time of `Off`, with 36 of its 54 blocks signed).
    Everywhere,
}

impl SignModels {
    /// The bytes by which the signed pair of a block must code the sign/mantissa plane `mans`
    /// (lying in `parts`) smaller than the plain pair to replace it, or `None` where it is not
    /// to be tried: never with [`SignModels::Off`], and with [`SignModels::Paying`] where the
    /// models' estimate saves less than 1 bit in [`PAYING_SIGN_ELEMENTS`] elements.
    pub(crate) fn margin(self, mans: &[u8], parts: &[Part]) -> Option<usize> {
        let bits = 1.0 / PAYING_SIGN_ELEMENTS as f64;
        match self {
            SignModels::Off => None,
            SignModels::Everywhere => Some(0),
            SignModels::Paying => (signs::saving_estimate(mans, parts) >= bits)
                .then_some(mans.len() / (8 * PAYING_SIGN_ELEMENTS)),
        }
    }
}

/// What FAST's `huffjoint` pair adds to its estimate over the planes coded apart: the alphabet
/// (a 32-byte bitmap and a nibble per exponent) and a longer code table (a nibble per key
/// where the exponents' table has one per exponent), about this much in all plus one byte per
/// joint symbol.
const HUFFJOINT_FIXED_BYTES: f64 = 40.0;
const HUFFJOINT_PER_SYMBOL: f64 = 1.0;

/// `choose16` measures at least this many elements of a block (all of a small block).
const SPLIT16_SAMPLE: usize = 16384;
/// ... and at most every this many elements of a large one: a denser sample of a 1 MiB block
/// costs more than the coding it guides.
const SPLIT16_MAX_STEP: usize = 16;

/// The transform a block planned as `planned` is coded with, measured on its bytes `raw`:
/// 16-bit floats take [`choose16`] unless `keep_exp16` (BEST, whose joint model is built for
/// the exponent-aligned split), 32- and 64-bit integers [`choose_delta`], others as planned.
pub fn refine(planned: Transform, raw: &[u8], keep_exp16: bool) -> Transform {
    match planned {
        Transform::Exp16 if !keep_exp16 => choose16(raw, false),
        Transform::Split32 | Transform::Split64 => choose_delta(raw, planned),
        t => t,
    }
}

/// Picks the 16-bit split whose planes measure cheaper for the block `raw`.
///
/// Measures order-0 entropies on a sample (see [`SPLIT16_SAMPLE`]): plane 0 alone when plane 1
/// will be stored raw (`code_plane1` false, FAST), both planes otherwise. Real BF16 weights
/// almost always favour [`Transform::Exp16`]; F16 and unusual data may not, hence the
/// measurement.
pub fn choose16(raw: &[u8], code_plane1: bool) -> Transform {
    let mut h = [[0u32; 256]; 4];
    let step = (raw.len() / 2 / SPLIT16_SAMPLE).clamp(1, SPLIT16_MAX_STEP);
    for c in raw.chunks_exact(2).step_by(step) {
        let w = u16::from_le(bytemuck::pod_read_unaligned(c));
        h[0][(w >> 8) as usize] += 1;
        h[1][(w & 0xFF) as usize] += 1;
        h[2][((w >> 7) & 0xFF) as usize] += 1;
        h[3][(((w >> 8) & 0x80) | (w & 0x7F)) as usize] += 1;
    }
    let e = |k: usize| entropy_bits(&h[k]);
    let (split, exp) = if code_plane1 {
        (e(0) + e(1), e(2) + e(3))
    } else {
        (e(0), e(2))
    };
    if exp <= split {
        Transform::Exp16
    } else {
        Transform::Split16
    }
}

/// Picks byte planes of the values (`plain`, [`Transform::Split32`] or [`Transform::Split64`])
/// or of their differences for the integer block `raw`, whichever planes have the lower summed
/// order-0 entropy. Integer tensors are small next to the weights, so every element is counted.
pub fn choose_delta(raw: &[u8], plain: Transform) -> Transform {
    let delta = match plain {
        Transform::Split32 => Transform::Delta32,
        Transform::Split64 => Transform::Delta64,
        t => return t,
    };
    let cost = |t: Transform| {
        let mut planes = vec![Vec::new(); t.planes()];
        t.split(raw, &mut planes);
        planes
            .iter()
            .map(|p| entropy_bits(&histogram(p)))
            .sum::<f64>()
    };
    if cost(delta) < cost(plain) {
        delta
    } else {
        plain
    }
}

/// Whether a plane other than the first is worth entropy coding in `mode`, judged by the
/// order-0 entropy of a sample of its bytes.
fn worth_coding(data: &[u8], mode: Mode) -> bool {
    let mut h = [0u32; 256];
    for &b in data.iter().step_by(RAW_SAMPLE_STEP) {
        h[b as usize] += 1;
    }
    let limit = match mode {
        Mode::Fast => FAST_RAW_BITS,
        Mode::Best => BEST_RAW_BITS,
    };
    entropy_bits(&h) < limit
}

/// Codes one plane into `coded` (left empty when the plane is best stored as is): entropy-coded
/// if `entropy`, otherwise const or stored.
fn code_plane(data: &[u8], entropy: bool, mode: Mode, coded: &mut Vec<u8>) -> Codec {
    coded.clear();
    if entropy && mode == Mode::Fast {
        // Huffman's streams need the histogram of each quarter: counted once, summed for the
        // whole.
        let quarters = huffman::quarter_histograms(data);
        return code_counted_quarters(
            data,
            &huffman::sum_histograms(&quarters),
            mode,
            coded,
            Some(&quarters),
        );
    }
    if entropy {
        return code_counted(data, &histogram(data), mode, coded);
    }
    match constant::of(data) {
        Some(b) => {
            coded.push(b);
            Codec::Const
        }
        None => Codec::Stored,
    }
}

/// Entropy-codes a plane whose histogram `hist` is known: const, coded if smaller, or stored.
fn code_counted(data: &[u8], hist: &[u32; 256], mode: Mode, coded: &mut Vec<u8>) -> Codec {
    code_counted_quarters(data, hist, mode, coded, None)
}

/// [`code_counted`], given the histograms of the plane's quarters where they are known.
fn code_counted_quarters(
    data: &[u8],
    hist: &[u32; 256],
    mode: Mode,
    coded: &mut Vec<u8>,
    quarters: Option<&[[u32; 256]; huffman::STREAMS]>,
) -> Codec {
    coded.clear();
    if let Some(s) = single_symbol(hist) {
        if data.len() > 1 {
            coded.push(s);
            return Codec::Const;
        }
        return Codec::Stored;
    }
    let codec = match mode {
        Mode::Fast => {
            match quarters {
                Some(q) => huffman::encode_counted(data, q, coded),
                None => huffman::encode(data, coded),
            }
            Codec::Huffman
        }
        Mode::Best => {
            // The adaptive model follows drifting statistics (sorted ids, per-row scales) that
            // one static table averages away; the static coder wins on stationary data by the
            // adaptive model's learning cost. Try adaptive, keep it unless the static coder's
            // estimated size (entropy plus its table) is smaller.
            let used = hist.iter().filter(|&&c| c > 0).count() as f64;
            let estimate = entropy_bits(hist) * data.len() as f64 / 8.0
                + RANGE_TABLE_PER_SYMBOL * used
                + RANGE_TABLE_FIXED;
            if adaptive::encode(data, coded) && (coded.len() as f64) <= estimate {
                Codec::Adaptive
            } else {
                coded.clear();
                range::encode(data, hist, coded);
                Codec::Range
            }
        }
    };
    if coded.len() < data.len() {
        return codec;
    }
    coded.clear();
    Codec::Stored
}

/// BEST: the exponent plane of a 16-bit block, with the adaptive order-0 model.
fn code_exponents(data: &[u8], coded: &mut Vec<u8>) -> Codec {
    coded.clear();
    if adaptive::encode(data, coded) && coded.len() < data.len() {
        return Codec::Adaptive;
    }
    // Fewer than two symbols, or no gain: the generic choice (const or stored).
    code_plane(data, false, Mode::Best, coded)
}

/// BEST: the sign/mantissa plane of a 16-bit block, given its exponent plane: the context
/// codec unless the plane's order-0 entropy promises clearly less (see [`MODEL_SLACK_RATIO`]);
/// a constant plane goes to the generic coders.
fn code_mantissas(data: &[u8], exponents: &[u8], coded: &mut Vec<u8>) -> Codec {
    coded.clear();
    let hist = histogram(data);
    if data.len() < 2 || single_symbol(&hist).is_some() {
        return code_counted(data, &hist, Mode::Best, coded);
    }
    context::encode_context(data, exponents, coded);
    let order0 = entropy_bits(&hist) * data.len() as f64 / 8.0 + MODEL_SLACK_BYTES;
    if coded.len() < data.len() && (coded.len() as f64) < order0 * MODEL_SLACK_RATIO {
        return Codec::Context;
    }
    code_counted(data, &hist, Mode::Best, coded)
}

/// BEST: the parts of planes `p` for the `ctxjoint` codecs, one for each of the block's
/// tensors `rows` that holds [`MIN_PART`] elements or more there (or for its largest tensor if
/// none does), smaller ones joining the part before them (the first part, the part after).
/// Each part after the first starts at the first quad boundary at or after its tensor's first
/// element, and is in the rows its tensor offers that [`part_rows`] picks; `scratch` is
/// overwritten. Of tensors equally large, the largest is the later.
pub(crate) fn ctx_parts(rows: &[TensorRows], p: [&[u8]; 2], scratch: &mut Vec<u8>) -> Vec<Part> {
    let n = p[0].len();
    let end = |i: usize| rows.get(i + 1).map_or(n, |t| t.start() as usize).min(n);
    let len = |i: usize| end(i).saturating_sub(rows[i].start() as usize);
    let mut opened: Vec<usize> = (0..rows.len()).filter(|&i| len(i) >= MIN_PART).collect();
    if opened.is_empty() {
        opened.extend((0..rows.len()).max_by_key(|&i| len(i)));
    }
    let starts: Vec<usize> = opened
        .iter()
        .enumerate()
        .map(|(j, &i)| match j {
            0 => 0,
            _ => (rows[i].start() as usize).next_multiple_of(QUAD_LEN),
        })
        .collect();
    let ends = starts.iter().skip(1).copied().chain([n]);
    opened
        .iter()
        .zip(starts.iter().zip(ends))
        .map(|(&i, (&start, end))| {
            let first = rows[i].first + start as i64;
            let sample = start..end.min(start + ROWS_SAMPLE);
            let rows = part_rows(
                rows[i].lens,
                first,
                [&p[0][sample.clone()], &p[1][sample]],
                scratch,
            );
            Part {
                len: end - start,
                rows,
            }
        })
        .collect()
}

/// BEST: the row layout of a part whose first element is element `first` of a tensor with
/// rows of `lens`: with two row lengths to choose from, the one that codes `sample` (the
/// part's first [`ROWS_SAMPLE`] elements) smaller. `scratch` is overwritten.
fn part_rows(lens: [u64; 2], first: i64, sample: [&[u8]; 2], scratch: &mut Vec<u8>) -> Rows {
    let [a, b] = lens.map(|len| Rows::at(len, first));
    if a == b {
        return a;
    }
    let mut size = |r| {
        scratch.clear();
        ctxjoint::encode(sample[0], sample[1], r, scratch).then_some(scratch.len())
    };
    match (size(a), size(b)) {
        (Some(x), Some(y)) if y < x => b,
        _ => a,
    }
}

/// BEST: planes 0 and 1 of an exponent-aligned block as a ctxjoint/raw6 pair, or joint/raw6
/// when the block holds no tensor whose rows it would follow or is small and codes smaller so
/// (see [`JOINT_TRIAL_MAX`]); or a ctxsigns/signs pair where `signs` allows one and it is
/// smaller by the margin `signs` asks for ([`SignModels::margin`]). `None`, leaving the buffers
/// to be overwritten, when the pair does not apply or does not pay (see
/// [`MODEL_SLACK_RATIO`]).
fn code_joint(
    p: [&[u8]; 2],
    rows: &[TensorRows],
    signs: SignModels,
    c0: &mut Vec<u8>,
    c1: &mut Vec<u8>,
) -> Option<(Codec, Codec)> {
    c0.clear();
    c1.clear();
    let n = p[0].len();
    // Without sign models plane 1 is raw6 whatever plane 0 takes: coded beside plane 0.
    let raw6_now = signs == SignModels::Off;
    let ((coded, codec, parts), estimate) = rayon::join(
        || match rows.is_empty() {
            false => code_ctxjoint(p, rows, c0),
            true => (
                joint::encode_joint(p[0], p[1], c0),
                Codec::Joint,
                Vec::new(),
            ),
        },
        || {
            if raw6_now {
                raw6::encode(p[1], c1);
            }
            let bits = entropy_bits(&histogram(p[0])) + entropy_bits(&histogram(p[1]));
            bits * n as f64 / 8.0
        },
    );
    let mut pair = (codec, Codec::Raw6);
    // The signed pair replaces the plain one where it is smaller as a whole by the margin
    // `signs` asks for and fits where the plain one would. Where it would not save that margin
    // by the models' estimate, it is not coded. The signs payload is coded straight into `c1`
    // (raw6's length follows from the plane's), so that a block holds one plane-1 payload.
    let tried = ctxjoint::signed_len(codec, c0.len())
        .and_then(|head| signs.margin(p[1], &parts).map(|margin| (head, margin)));
    if let Some((head, margin)) = tried {
        let smaller = signs::encode(p[1], &parts, c1)
            && head + c1.len() + margin < c0.len() + raw6::len(n)
            && raw6::pair_fits(head as u32, n as u32);
        if smaller && ctxjoint::into_signed(codec, &parts, c0) {
            pair = (Codec::CtxSigns, Codec::Signs);
        } else {
            c1.clear();
        }
    }
    if pair.1 == Codec::Raw6 && !raw6_now {
        raw6::encode(p[1], c1);
    }
    let total = c0.len() + c1.len();
    let pays = (total as f64) < estimate * MODEL_SLACK_RATIO + MODEL_SLACK_BYTES;
    (coded && total < 2 * n && pays).then_some(pair)
}

/// BEST: plane 0 of planes `p` of a block of tensors `rows` into `c0` with `ctxjoint` or
/// `ctxtensors`, or with `joint` for a plane of at most [`JOINT_TRIAL_MAX`] elements that it
/// codes smaller. Returns whether a codec applied, which codec it is, and the parts the planes
/// were cut into ([`ctx_parts`]).
fn code_ctxjoint(p: [&[u8]; 2], rows: &[TensorRows], c0: &mut Vec<u8>) -> (bool, Codec, Vec<Part>) {
    let parts = ctx_parts(rows, p, c0);
    c0.clear();
    let Some(codec) = ctxjoint::encode_parts(p[0], p[1], &parts, c0) else {
        return (false, Codec::CtxJoint, parts);
    };
    if p[0].len() <= JOINT_TRIAL_MAX {
        let mut plain = Vec::new();
        if joint::encode_joint(p[0], p[1], &mut plain) && plain.len() < c0.len() {
            std::mem::swap(c0, &mut plain);
            return (true, Codec::Joint, parts);
        }
    }
    (true, codec, parts)
}

/// FAST: an `exp16` block as a huffjoint/raw6 pair, coded from the block's words (`None`,
/// leaving the buffers to be overwritten, when the pair does not apply or is not estimated
/// smaller than the planes coded apart).
///
/// Both estimates come from one count of the joint symbols: the keys' entropy plus 6 raw
/// bits, against the exponents' entropy plus plane 1 as FAST would code it on its own.
fn code_huffjoint(raw: &[u8], coded: &mut [Vec<u8>], keys: &mut Vec<u8>) -> Option<[Codec; 2]> {
    let [c0, c1, ..] = coded else {
        unreachable!("a block has room for two planes")
    };
    c0.clear();
    c1.clear();
    if huffjoint::sampled_too_many16(raw) {
        return None;
    }
    let census = huffjoint::Census::of16(raw);
    let alphabet = census.alphabet()?;
    let hist = census.keys(&alphabet);
    let mut sm = [0u32; 256];
    for c in raw.chunks_exact(2).step_by(RAW_SAMPLE_STEP) {
        sm[((c[1] & 0x80) | (c[0] & 0x7F)) as usize] += 1;
    }
    let plane1 = match entropy_bits(&sm) {
        h if h < FAST_RAW_BITS => h,
        _ => 8.0,
    };
    let apart = entropy_bits(&census.exponents()) + plane1;
    let together = entropy_bits(&hist) + 6.0;
    let n = raw.len() / 2;
    let extra = HUFFJOINT_FIXED_BYTES + HUFFJOINT_PER_SYMBOL * alphabet.len() as f64;
    if together * n as f64 / 8.0 + extra >= apart * n as f64 / 8.0 {
        return None;
    }
    rayon::join(
        || huffjoint::encode(&alphabet, raw, keys, c0),
        || huffjoint::encode_raw16(raw, c1),
    );
    (c0.len() + c1.len() < 2 * n).then_some([Codec::HuffJoint, Codec::Raw6])
}

/// BEST: plane `k` (after the first) of a ggml block transform with `byctx` given plane 0
/// (each ggml block's scale's high byte), or on its own, whichever is smaller.
fn code_given_scale(
    transform: Transform,
    k: usize,
    data: &[u8],
    high: &[u8],
    coded: &mut Vec<u8>,
) -> Codec {
    let alone = code_plane(data, true, Mode::Best, coded);
    let alone_len = match alone {
        Codec::Stored => data.len(),
        _ => coded.len(),
    };
    let mut by = Vec::new();
    let slot = Slot {
        plane: k,
        transform,
        plane_len: data.len() as u32,
    };
    if byctx::encode(data, high, &mut by)
        && by.len() < alone_len
        && (byctx::SPEC.fits)(slot, by.len() as u32)
    {
        *coded = by;
        return Codec::ByCtx;
    }
    alone
}

/// Codes a plane after the first, on its own: entropy-coded where [`worth_coding`] says so.
fn code_other(data: &[u8], mode: Mode, coded: &mut Vec<u8>) -> Codec {
    code_plane(data, worth_coding(data, mode), mode, coded)
}

/// Codes planes 0 and 1 of a multi-plane block, concurrently unless BEST models plane 1 with
/// plane 0 as context (then the exponent plane is coded on the other thread meanwhile).
fn code_head(
    transform: Transform,
    rows: &[TensorRows],
    mode: Mode,
    signs: SignModels,
    p: [&[u8]; 2],
    c: &mut [Vec<u8>],
) -> (Codec, Codec) {
    let [c0, c1] = c else {
        unreachable!("code_head gets two coded buffers")
    };
    match mode {
        Mode::Best if transform.exponent_aligned() => code_joint(p, rows, signs, c0, c1)
            .unwrap_or_else(|| {
                rayon::join(
                    || code_exponents(p[0], c0),
                    || code_mantissas(p[1], p[0], c1),
                )
            }),
        _ => rayon::join(
            || code_plane(p[0], true, mode, c0),
            || code_other(p[1], mode, c1),
        ),
    }
}

/// Codes the block `raw`, planned as `planned`, whose elements lie in the rows of its tensors
/// `rows`, in `mode` (BEST with sign models as `signs` says): returns the transform it is coded
/// with (see [`refine`]) and the codec of each of its planes. Plane `k`'s payload is then
/// `s.coded[k]`, or for a stored plane `s.planes[k]` (the block itself for a one-plane block).
pub fn code(
    raw: &[u8],
    planned: Transform,
    rows: &[TensorRows],
    mode: Mode,
    signs: SignModels,
    s: &mut Scratch,
) -> (Transform, [Codec; MAX_PLANES]) {
    let transform = refine(planned, raw, mode == Mode::Best);
    let n = transform.planes();
    let Scratch {
        planes,
        coded,
        keys,
    } = s;
    let mut codecs = [Codec::Stored; MAX_PLANES];
    let huffjoint = mode == Mode::Fast && transform == Transform::Exp16;
    if n == 1 {
        codecs[0] = code_plane(raw, true, mode, &mut coded[0]);
    } else if transform.ggml().is_some() {
        // Every field of a quantized block is worth coding: even the quants of Q8_0 measure
        // 7.5 bits a byte, which FAST's raw threshold would leave stored.
        transform.split(raw, planes);
        let chosen: Vec<Codec> = (coded[..n].par_iter_mut())
            .zip(&planes[..n])
            .enumerate()
            .map(|(k, (c, p))| match mode {
                Mode::Best if k > 0 => code_given_scale(transform, k, p, &planes[0], c),
                _ => code_plane(p, true, mode, c),
            })
            .collect();
        codecs[..n].copy_from_slice(&chosen);
    } else if let Some(pair) = huffjoint
        .then(|| code_huffjoint(raw, coded, keys))
        .flatten()
    {
        codecs[..2].copy_from_slice(&pair);
    } else {
        transform.split(raw, planes);
        let (head, tail) = coded[..n].split_at_mut(2);
        let (pair, rest) = rayon::join(
            || code_head(transform, rows, mode, signs, [&planes[0], &planes[1]], head),
            || {
                tail.par_iter_mut()
                    .zip(&planes[2..n])
                    .map(|(c, p)| code_other(p, mode, c))
                    .collect::<Vec<Codec>>()
            },
        );
        (codecs[0], codecs[1]) = pair;
        codecs[2..n].copy_from_slice(&rest);
    }
    (transform, codecs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delta_is_chosen_for_sequences_not_for_noise() {
        let ids: Vec<u8> = (1000..1300u64).flat_map(u64::to_le_bytes).collect();
        assert_eq!(choose_delta(&ids, Transform::Split64), Transform::Delta64);
        // Small unordered values: their differences spread wider than they do.
        let mut x = 0x2545_F491u32;
        let noise: Vec<u8> = (0..300)
            .flat_map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                (x >> 22).to_le_bytes()
            })
            .collect();
        assert_eq!(choose_delta(&noise, Transform::Split32), Transform::Split32);
    }

    /// Planes 0 and 1 of `n` weight-like values: exponents a few below 120, most often the
    /// highest, and random signs and mantissas.
    fn weight_planes(rnd: &mut impl FnMut() -> u32, n: usize) -> [Vec<u8>; 2] {
        let exps = (0..n)
            .map(|_| 120 - (rnd() % 6).min(rnd() % 6) as u8)
            .collect();
        [exps, (0..n).map(|_| rnd() as u8).collect()]
    }

    #[test]
    fn parts_follow_the_tensors_that_fill_the_block() {
        let mut rnd = crate::test_rng(0x51ED_270B);
        let n = 10_000;
        let [exps, mans] = weight_planes(&mut rnd, n);
        let at = |lens, first| TensorRows { lens, first };
        let parts = |rows: &[TensorRows], n: usize| -> Vec<(usize, Rows)> {
            ctx_parts(rows, [&exps[..n], &mans[..n]], &mut Vec::new())
                .iter()
                .map(|p| (p.len, p.rows))
                .collect()
        };
        let r = |len, first| Rows::at(len, first);
        // A bias (joins the part after it), a tensor from element 10, a bias (joins the part
        // before it), then a tensor from element 4003 (its part starts at the next quad).
        let rows = [
            at([10, 10], 0),
            at([100, 100], -10),
            at([7, 7], -3000),
            at([64, 64], -4003),
        ];
        assert_eq!(parts(&rows, n), [(4004, r(100, -10)), (n - 4004, r(64, 1))]);
        // With no tensor of MIN_PART elements, the largest gives the whole block its rows; a
        // block starting inside a tensor keeps its place in the rows.
        let small = [at([10, 10], 0), at([30, 30], -500), at([7, 7], -1400)];
        assert_eq!(parts(&small, 1500), [(1500, r(30, -500))]);
        assert_eq!(parts(&[at([64, 64], 128)], n), [(n, r(64, 128))]);
        // Tensors past a short (truncated) block are dropped.
        let beyond = [at([100, 100], 0), at([64, 64], -20_000)];
        assert_eq!(parts(&beyond, n), [(n, r(100, 0))]);
    }

    /// Small tensor planes keep whichever of ctxjoint and joint codes them smaller; larger
    /// ones are ctxjoint's whatever joint would give.
    #[test]
    fn small_planes_keep_the_smaller_joint_payload() {
        let mut rnd = crate::test_rng(0x9E37_79B9);
        let mut chosen = Vec::new();
        for n in [384usize, 1000, 5000, JOINT_TRIAL_MAX + 4] {
            let [exps, mans] = weight_planes(&mut rnd, n);
            let rows = TensorRows {
                lens: [32, 32],
                first: 0,
            };
            let (mut c0, mut c1) = (Vec::new(), Vec::new());
            let (codec, _) =
                code_joint([&exps, &mans], &[rows], SignModels::Off, &mut c0, &mut c1).unwrap();
            let (mut ctx, mut plain) = (Vec::new(), Vec::new());
            let layout = Rows::at(32, 0);
            assert!(ctxjoint::encode(&exps, &mans, layout, &mut ctx));
            assert!(joint::encode_joint(&exps, &mans, &mut plain));
            if n <= JOINT_TRIAL_MAX {
                assert_eq!(c0.len(), ctx.len().min(plain.len()), "n={n}");
            } else {
                assert_eq!((codec, c0.len()), (Codec::CtxJoint, ctx.len()), "n={n}");
            }
            chosen.push(codec);
        }
        // Rows of i.i.d. values give the contexts nothing to learn: joint wins the small ones.
        assert!(chosen.contains(&Codec::Joint), "{chosen:?}");
    }

    /// With sign models, a block whose columns lean to a sign takes the ctxsigns/signs pair,
    /// smaller than the plain pair and within the container's placement rules; coin-flip signs
    /// keep the plain pair. Where the signs save less than 1 bit in [`PAYING_SIGN_ELEMENTS`]
    /// elements, only [`SignModels::Everywhere`] takes the signed pair. Columns that lean in
    /// turn (the odd ones only) are found as the even ones are.
    #[test]
    fn sign_models_take_the_signed_pair_where_it_is_smaller() {
        let mut rnd = crate::test_rng(0x51_6E5);
        let n = 40_000;
        let [exps, coin] = weight_planes(&mut rnd, n);
        let mut lean = |share: fn(usize) -> u32| -> Vec<u8> {
            (0..n)
                .map(|i| match rnd() % 1000 < share(i) {
                    true => rnd() as u8 | 0x80,
                    false => rnd() as u8 & 0x7F,
                })
                .collect()
        };
        // Every other column of 40 mostly negative (7 in 8), or every column slightly (57%).
        let strong = lean(|i| match i % 2 {
            0 => 875,
            _ => 500,
        });
        let odd = lean(|i| match i % 2 {
            0 => 500,
            _ => 875,
        });
        let slight = lean(|_| 570);
        let rows = TensorRows {
            lens: [40, 40],
            first: 0,
        };
        let slot = |plane| Slot {
            plane,
            transform: Transform::Exp16,
            plane_len: n as u32,
        };
        let parts = [Part {
            len: n,
            rows: Rows::at(40, 0),
        }];
        // Coin flips are not even coded with BEST's margin.
        assert_eq!(SignModels::Paying.margin(&coin, &parts), None);
        assert_eq!(SignModels::Off.margin(&coin, &parts), None);
        let signed = (Codec::CtxSigns, Codec::Signs);
        let plain = (Codec::CtxJoint, Codec::Raw6);
        for (mans, everywhere, paying) in [
            (&strong, signed, signed),
            (&odd, signed, signed),
            (&slight, signed, plain),
            (&coin, plain, plain),
        ] {
            let code = |signs| {
                let (mut c0, mut c1) = (Vec::new(), Vec::new());
                let pair = code_joint([&exps, mans], &[rows], signs, &mut c0, &mut c1).unwrap();
                (pair, c0.len() + c1.len(), [c0.len(), c1.len()])
            };
            let (off, plain_len, _) = code(SignModels::Off);
            assert_eq!(off, plain);
            for (signs, want) in [
                (SignModels::Everywhere, everywhere),
                (SignModels::Paying, paying),
            ] {
                let (pair, len, lens) = code(signs);
                assert_eq!(pair, want, "{signs:?}");
                if pair == plain {
                    assert_eq!(len, plain_len);
                    continue;
                }
                let margin = match signs {
                    SignModels::Paying => n / 512,
                    _ => 0,
                };
                assert_eq!(signs.margin(mans, &parts), Some(margin));
                assert!(len + margin < plain_len, "{signs:?}: {len} vs {plain_len}");
                for (k, (codec, coded)) in [pair.0, pair.1].into_iter().zip(lens).enumerate() {
                    assert!((codec.spec().fits)(slot(k), coded as u32), "{codec:?}");
                }
            }
        }
    }
}
