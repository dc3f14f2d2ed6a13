//! `signs` (id 14): plane 1 beside a [`ctxsigns`](super::ctxjoint::SIGNED_SPEC) plane 0. Of the
//! six bits [`super::raw6`] stores raw, the sign is range coded with an adaptive model per
//! column of the element's tensor, and bits 4..0 are packed raw.
//!
//! An input feature that a layer reads with weights of mostly one sign leaves that sign in its
//! column of the weight matrix, so a column's signs so far predict its next one. Each column's
//! model is a Krichevsky–Trofimov-style estimate, the share of zeros among its signs so far
//! with `PRIOR` of each as a prior, kept as a probability that moves towards each sign by
//! `1 / (count + 1 + 2 * PRIOR)`; past `CAP` signs the step stays fixed. Columns with no
//! lean cost almost nothing over a raw bit (the prior keeps early estimates near one half).
//!
//! The columns are those of plane 0's parts (see [`crate::entropy::rows::Part`]): element `i` of a
//! part is in column `(phase + i) % len` of its rows, and every part starts its columns afresh.
//!
//! Payload (see docs/FORMAT.md): two range coded streams of the signs (element `k` of the plane
//! in stream `k % 2`), as [`super::adaptive`] lays out two streams, then bits 4..0 of each
//! element, 5 bits an element from the least significant bit up, `ceil(5 * n / 8)` bytes, the
//! unused high bits of the last byte zero.

use super::raw6;
use super::spec::{Decode, Slot, Spec};
use crate::entropy::rc::{Encoder, BIT_PROB_BITS};
use crate::entropy::rows::{parts_fit, Part, Rows};
use crate::entropy::streams::{finish_two, two_streams, Streams};
use crate::error::CodecError;

/// The `signs` codec: plane 1 of an exponent-aligned block, decoded by its `ctxsigns` plane 0.
pub static SPEC: Spec = Spec {
    id: 14,
    name: "signs",
    fits: |at: Slot, coded_len| {
        let n = at.plane_len as usize;
        at.plane == 1
            && at.transform.exponent_aligned()
            && (coded_len as usize) >= fields_len(n) + MIN_STREAMS
            && (coded_len as usize) < raw6::len(n)
    },
    partner: None,
    decode: Decode::Partner,
};

/// Bytes of the shortest two streams: a length and two 4-byte flushes.
const MIN_STREAMS: usize = 12;
/// Prior count of each sign in a column's estimate.
const PRIOR: u32 = 8;
/// Signs after which a column's estimate moves by a fixed step.
const CAP: u32 = 255;
/// `RATES[n]`: the step of the estimate after `n` signs, `2^16 / (n + 1 + 2 * PRIOR)`.
const RATES: [u32; CAP as usize + 1] = {
    let mut t = [0; CAP as usize + 1];
    let mut n = 0;
    while n <= CAP {
        t[n as usize] = (1 << 16) / (n + 1 + 2 * PRIOR);
        n += 1;
    }
    t
};
/// A column's state: the probability of a 0 sign in 1/65536 (low 16 bits) and the signs seen,
/// up to `CAP` (high 16 bits); a column starts at one half and none seen.
const FRESH: u32 = 1 << 15;

/// Length of the packed bits 4..0 of `n` elements.
fn fields_len(n: usize) -> usize {
    (5 * n).div_ceil(8)
}

/// The probability of a 0 sign that a column in state `s` codes with, in 1/4096, within the
/// range coder's bounds for a bit.
#[inline(always)]
fn coding_prob(s: u32) -> u32 {
    ((s & 0xFFFF) >> (16 - BIT_PROB_BITS)).clamp(255, 3841)
}

/// The state of a column in state `s` after a sign `bit`.
#[inline(always)]
fn update(s: u32, bit: u32) -> u32 {
    let (p, n) = ((s & 0xFFFF) as i32, s >> 16);
    let target = 0xFFFF & (bit as i32 - 1);
    // `n` is at most `CAP`, so the index never leaves the table.
    let p = p + (((target - p) * RATES[n as u8 as usize] as i32) >> 16);
    p as u32 | (n + (n < CAP) as u32) << 16
}

/// The columns of one part, for [`encode`] and [`SignDecoder`]: their states and the column
/// of the next element.
struct Columns {
    states: Vec<u32>,
    at: usize,
}

impl Columns {
    /// Columns that start afresh in `rows`, the first element at its phase.
    fn start(&mut self, rows: Rows) {
        self.states.clear();
        self.states.resize(rows.len as usize, FRESH);
        self.at = rows.phase as usize;
    }

    /// Codes the next element's sign with `code` (given the probability of a 0, returning the
    /// sign) and moves on.
    #[inline(always)]
    fn next(&mut self, code: impl FnOnce(u32) -> u32) -> u32 {
        // `at` stays below the states' length (a part's phase is below its row length), so
        // the index is checked but never fails.
        let slot = &mut self.states[self.at];
        let bit = code(coding_prob(*slot));
        *slot = update(*slot, bit);
        self.at += 1;
        if self.at == self.states.len() {
            self.at = 0;
        }
        bit
    }
}

/// Bits 4..0 of the eight bytes of `x` (the first in the low byte), packed into 40 bits from
/// the least significant bit up: the fields are moved together in pairs, fours and eights.
#[inline(always)]
fn pack_fields(x: u64) -> u64 {
    let t = x & 0x1F1F_1F1F_1F1F_1F1F;
    let t = (t & 0x001F_001F_001F_001F) | (t >> 3 & 0x03E0_03E0_03E0_03E0);
    let t = (t & 0x0000_03FF_0000_03FF) | (t >> 6 & 0x000F_FC00_000F_FC00);
    (t & 0xF_FFFF) | (t >> 12 & 0xFF_FFF0_0000)
}

/// The inverse of [`pack_fields`]: eight 5-bit fields packed in the low 40 bits of `f`, moved
/// apart to 6 bits each (bits 4..0 of each 6-bit field of a raw6 payload).
#[inline(always)]
fn spread_fields(f: u64) -> u64 {
    let t = (f & 0xF_FFFF) | (f << 4 & 0x0FFF_FF00_0000);
    let t = (t & 0x0003_FF00_03FF) | (t << 2 & 0x3FF0_003F_F000);
    (t & 0x01F0_1F01_F01F) | (t << 1 & 0x7C07_C07C_07C0)
}

/// Eight signs, one a byte (0 or 1) in `s`, moved to bit 5 of each 6-bit field of a raw6
/// payload's eight.
#[inline(always)]
fn spread_signs(s: u64) -> u64 {
    let t = s & 0x0101_0101_0101_0101;
    let t = (t & 0x0001_0001_0001_0001) | (t >> 2 & 0x0040_0040_0040_0040);
    let t = (t & 0x0000_0041_0000_0041) | (t >> 4 & 0x0004_1000_0004_1000);
    let t = (t & 0x0004_1041) | (t >> 8 & 0x0410_4100_0000);
    t << 5
}

/// Eight elements' raw6 fields (in the low 6 bytes) from their signs, a byte (0 or 1) each,
/// and their packed bits 4..0.
#[inline(always)]
fn raw_group(signs: [u8; 8], fields: &[u8; 5]) -> [u8; 8] {
    let mut f = [0u8; 8];
    f[..5].copy_from_slice(fields);
    (spread_fields(u64::from_le_bytes(f)) | spread_signs(u64::from_le_bytes(signs))).to_le_bytes()
}

/// Whether [`saving_estimate`] runs the model of column `c`: about one column in four, picked
/// by a multiplicative hash, so that columns that differ with a period (pairs, fours) are
/// sampled alike; column 0 always is.
fn sampled(c: u32) -> bool {
    c.wrapping_mul(0x9E37_79B1) >> 30 == 0
}

/// The code length of a sign that a column's model gave probability `q` of 4096, in 1/4096
/// bit, for `q` in `[255, 3841]` (see [`coding_prob`]).
fn cost_table() -> &'static [u16; 4096] {
    static TABLE: std::sync::OnceLock<Box<[u16; 4096]>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = Box::new([0u16; 4096]);
        for (q, c) in t.iter_mut().enumerate().skip(1) {
            *c = (-(q as f64 / 4096.0).log2() * 4096.0).round() as u16;
        }
        t
    })
}

/// The bits per element that coding the signs of `mans` (lying in `parts`; 0 if they do not
/// fit) with their column models would save over storing them, estimated by running the models
/// of the [`sampled`] columns of each part (the columns' models are independent of each
/// other): a quarter of [`encode`]'s modelling work and none of its coding.
pub fn saving_estimate(mans: &[u8], parts: &[Part]) -> f64 {
    if !parts_fit(parts, mans.len()) {
        return 0.0;
    }
    let cost = cost_table();
    let (mut bits, mut count) = (0u64, 0u64);
    let (mut columns, mut states) = (Vec::new(), Vec::new());
    let mut k = 0;
    for part in parts {
        let len = part.rows.len as usize;
        columns.clear();
        columns.extend((0..part.rows.len).filter(|&c| sampled(c)));
        states.clear();
        states.resize(columns.len(), FRESH);
        let m = &mans[k..k + part.len];
        let (mut at, mut first) = (0, part.rows.phase as usize);
        while at < m.len() {
            // A row, or the part of one in `m`, from column `first` on.
            let row = &m[at..at + (len - first).min(m.len() - at)];
            let lo = columns.partition_point(|&c| (c as usize) < first);
            let hi = columns.partition_point(|&c| (c as usize) < first + row.len());
            for (s, &c) in states[lo..hi].iter_mut().zip(&columns[lo..hi]) {
                let bit = (row[c as usize - first] >> 7) as u32;
                let p = coding_prob(*s);
                let q = if bit == 0 { p } else { 4096 - p };
                bits += cost[q as usize] as u64;
                count += 1;
                *s = update(*s, bit);
            }
            at += row.len();
            first = 0;
        }
        k += part.len;
    }
    match count {
        0 => 0.0,
        _ => (count as f64 - bits as f64 / 4096.0) / count as f64,
    }
}

/// The `signs` payload of the sign/mantissa plane `mans` whose elements lie in `parts`, as
/// plane 0's payload says. Returns `false` (appending nothing) if the parts do not fit the
/// plane (see `parts_fit`).
pub fn encode(mans: &[u8], parts: &[Part], out: &mut Vec<u8>) -> bool {
    if !parts_fit(parts, mans.len()) {
        return false;
    }
    let [mut e0, mut e1] = [(); 2].map(|_| Encoder::with_capacity(mans.len() / 16 + 16));
    let mut columns = Columns {
        states: Vec::new(),
        at: 0,
    };
    let mut k = 0;
    for part in parts {
        columns.start(part.rows);
        // Parts start at even elements, so each pair's first sign goes to stream 0.
        for pair in mans[k..k + part.len].chunks(2) {
            for (m, e) in pair.iter().zip([&mut e0, &mut e1]) {
                let bit = (m >> 7) as u32;
                columns.next(|p| {
                    e.encode_bit_at(p, bit);
                    bit
                });
            }
        }
        k += part.len;
    }
    finish_two(out, e0, e1);
    let start = out.len();
    out.reserve(fields_len(mans.len()) + 8);
    let (groups, tail) = mans.as_chunks::<8>();
    for g in groups {
        out.extend_from_slice(&pack_fields(u64::from_le_bytes(*g)).to_le_bytes()[..5]);
    }
    let mut last = [0u8; 8];
    last[..tail.len()].copy_from_slice(tail);
    out.extend_from_slice(&pack_fields(u64::from_le_bytes(last)).to_le_bytes()[..5]);
    out.truncate(start + fields_len(mans.len()));
    true
}

/// The decoder of a `signs` payload, driven by the `ctxsigns` decoder of plane 0 as it
/// decodes the keys: the parts start together, and the signs of each quad of keys are decoded
/// beside them, so that the two chains of work overlap.
pub(crate) struct SignDecoder<'a> {
    streams: Streams<'a>,
    /// Bits 4..0 of every element, packed.
    fields: &'a [u8],
    columns: Columns,
    /// The signs decoded so far, a byte (0 or 1) an element.
    signs: Vec<u8>,
    /// Elements of the plane.
    n: usize,
}

impl<'a> SignDecoder<'a> {
    /// The decoder of `payload`, the signs payload of a plane of `n` elements.
    pub(crate) fn open(payload: &'a [u8], n: usize) -> Result<Self, CodecError> {
        let tail = fields_len(n);
        let streams = two_streams(payload, tail)?;
        let fields = &payload[payload.len() - tail..];
        let spare = tail * 8 - 5 * n;
        if fields
            .last()
            .is_some_and(|&b| (b as u32) >> (8 - spare) != 0)
        {
            return Err(CodecError("signs payload has padding bits set"));
        }
        Ok(SignDecoder {
            streams,
            fields,
            columns: Columns {
                states: Vec::new(),
                at: 0,
            },
            signs: Vec::with_capacity(n),
            n,
        })
    }

    /// Starts a part whose elements lie in `rows`.
    pub(crate) fn start(&mut self, rows: Rows) {
        self.columns.start(rows);
    }

    /// Decodes the signs of the next `N` elements (`N` at most 4), the first of them in stream
    /// 0: parts and quads start at even elements.
    #[inline(always)]
    pub(crate) fn decode<const N: usize>(&mut self) {
        let data = self.streams.data;
        let [d0, d1] = &mut self.streams.decs;
        let columns = &mut self.columns;
        let mut bits = [0u8; N];
        for (j, b) in bits.iter_mut().enumerate() {
            *b = columns.next(|p| match j % 2 {
                0 => d0.decode_bit_at(data, p),
                _ => d1.decode_bit_at(data, p),
            }) as u8;
        }
        self.signs.extend_from_slice(&bits);
    }

    /// Decodes the signs of the next `count` elements, at most 4, as [`SignDecoder::decode`].
    pub(crate) fn decode_some(&mut self, count: usize) {
        debug_assert!((1..=4).contains(&count), "{count} signs at a time");
        match count {
            1 => self.decode::<1>(),
            2 => self.decode::<2>(),
            3 => self.decode::<3>(),
            _ => self.decode::<4>(),
        }
    }

    /// Checks that the streams ended where they should and returns the [`raw6`] payload of the
    /// plane: its elements' signs and bits 4..0. Every element must have been decoded.
    pub(crate) fn finish(self) -> Result<Vec<u8>, CodecError> {
        self.streams.finish()?;
        let n = self.n;
        if self.signs.len() != n {
            return Err(CodecError("signs payload does not cover the plane"));
        }
        let mut raw = Vec::with_capacity(raw6::len(n) + 6);
        let (signs, last_signs) = self.signs.as_chunks::<8>();
        let (fields, _) = self.fields.as_chunks::<5>();
        for (s, f) in signs.iter().zip(fields) {
            raw.extend_from_slice(&raw_group(*s, f)[..6]);
        }
        if !last_signs.is_empty() {
            let (mut s, mut f) = ([0u8; 8], [0u8; 5]);
            s[..last_signs.len()].copy_from_slice(last_signs);
            let rest = &self.fields[5 * signs.len()..];
            f[..rest.len()].copy_from_slice(rest);
            raw.extend_from_slice(&raw_group(s, &f)[..6]);
        }
        raw.truncate(raw6::len(n));
        Ok(raw)
    }
}

/// Decodes a `signs` payload of `n` elements lying in `parts` (which cover them, see
/// `parts_fit`) on its own, into the [`raw6`] payload of the same fields.
#[cfg(test)]
pub(crate) fn decode_raw6(payload: &[u8], parts: &[Part], n: usize) -> Result<Vec<u8>, CodecError> {
    let mut dec = SignDecoder::open(payload, n)?;
    for part in parts {
        dec.start(part.rows);
        for q in 0..part.len.div_ceil(4) {
            dec.decode_some((part.len - 4 * q).min(4));
        }
    }
    dec.finish()
}

#[cfg(test)]
mod tests {
    use super::super::ctxjoint;
    use super::super::ctxjoint::tests::roundtrip_coded;
    use super::*;
    use crate::entropy::rows::MAX_ROW;

    /// Planes in `parts` that look like weights: exponents around 120, random mantissa bits,
    /// and each column's sign set with a probability of its own, drawn from `leans`.
    fn planes(parts: &[Part], leans: &[u32], seed: u32) -> (Vec<u8>, Vec<u8>) {
        let mut x = seed | 1;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        };
        let (mut e, mut m) = (Vec::new(), Vec::new());
        for part in parts {
            // Each column's chance of a set sign, in 1/256.
            let lean: Vec<u32> = (0..part.rows.len)
                .map(|_| leans[rnd() as usize % leans.len()])
                .collect();
            for i in 0..part.len {
                let column = (part.rows.phase as usize + i) % part.rows.len as usize;
                let sign = ((rnd() & 0xFF) < lean[column]) as u8;
                e.push(120 - (rnd() % 8).min(rnd() % 8) as u8);
                m.push(sign << 7 | (rnd() as u8 & 0x7F));
            }
        }
        (e, m)
    }

    /// Columns that lean to one sign or the other, some of them strongly.
    const LEANING: [u32; 4] = [13, 51, 205, 243];
    /// Columns of fair coins.
    const FAIR: [u32; 1] = [128];

    fn part(len: usize, row: u64, first: i64) -> Part {
        Part {
            len,
            rows: Rows::at(row, first),
        }
    }

    /// Three tensors' parts: whole rows, a part that starts mid-row, an odd-length last part.
    fn three_parts() -> [Part; 3] {
        [part(6000, 60, 0), part(4000, 40, -7), part(2001, 23, 0)]
    }

    #[test]
    fn roundtrips_in_any_parts() {
        let layouts: Vec<Vec<Part>> = vec![
            three_parts().to_vec(),
            vec![part(1001, 1, 0)],
            vec![part(3, 2, 1)],
            vec![part(5000, MAX_ROW as u64, -1)],
            vec![part(4000, 50, 0), part(70_001, MAX_ROW as u64, -3)],
            vec![part(8, 5, 2), part(12, 12, 0), part(9, 1, 0)],
        ];
        for (k, parts) in layouts.iter().enumerate() {
            for leans in [&LEANING[..], &FAIR] {
                let (e, m) = planes(parts, leans, k as u32 + 1);
                let (signed, signs) = roundtrip_coded(&e, &m, parts, true);
                let (plain, raw) = roundtrip_coded(&e, &m, parts, false);
                assert_eq!(raw, raw6::len(e.len()));
                // A ctxjoint payload's layout (row length, first column, context base) becomes
                // the context base, the part count and one part.
                let gained = match parts.len() {
                    1 => 2 + 4 + 12 - 10,
                    _ => 0,
                };
                assert_eq!(signed, plain + gained, "{parts:?}");
                assert!(signs >= fields_len(e.len()) + MIN_STREAMS);
            }
        }
    }

    /// The signs payload and the raw6 one of planes in `parts` whose columns lean as `leans`.
    fn sizes(parts: &[Part], leans: &[u32]) -> (usize, usize) {
        let (e, m) = planes(parts, leans, 7);
        let mut out = Vec::new();
        assert!(encode(&m, parts, &mut out));
        assert_eq!(decode_raw6(&out, parts, m.len()).unwrap(), {
            let mut raw = Vec::new();
            raw6::encode(&m, &mut raw);
            raw
        });
        (out.len(), raw6::len(e.len()))
    }

    #[test]
    fn leaning_columns_pay_and_fair_coins_cost_little() {
        // 400 rows of 500 columns, and the three tensors.
        for parts in [vec![part(200_000, 500, 0)], three_parts().to_vec()] {
            let (signs, raw) = sizes(&parts, &LEANING);
            // The leans' entropy is half a bit a sign; the models must save 3/8 of a bit.
            let n = raw * 8 / 6;
            eprintln!("leaning: {signs} vs raw6 {raw}");
            assert!(
                signs + n * 3 / 8 / 8 < raw,
                "leaning: {signs} vs raw6 {raw}"
            );
            let (signs, raw) = sizes(&parts, &FAIR);
            eprintln!("fair: {signs} vs raw6 {raw}");
            assert!(
                signs <= raw + raw / 500 + MIN_STREAMS,
                "fair: {signs} vs raw6 {raw}"
            );
        }
    }

    /// The estimate from a quarter of the columns lands near what coding every sign saves,
    /// in any parts, where the columns lean as much as each other (one to a sign, one to the
    /// other); it is 0 for parts that do not fit.
    #[test]
    fn saving_estimate_follows_the_coded_saving() {
        let layouts = [
            vec![part(200_000, 500, 0)],
            three_parts().to_vec(),
            vec![part(30_000, 64, 1)],
        ];
        for parts in &layouts {
            for leans in [&[51, 205][..], &FAIR] {
                let (_, m) = planes(parts, leans, 11);
                let mut out = Vec::new();
                assert!(encode(&m, parts, &mut out));
                let saved = (raw6::len(m.len()) as f64 - out.len() as f64) * 8.0 / m.len() as f64;
                let estimate = saving_estimate(&m, parts);
                assert!(
                    (estimate - saved).abs() < 0.03,
                    "{parts:?}: estimate {estimate} vs {saved}"
                );
            }
        }
        let m = vec![0x80; 100];
        assert_eq!(saving_estimate(&m, &[part(99, 10, 0)]), 0.0);
    }

    #[test]
    fn parts_that_do_not_fit_are_refused() {
        let m = vec![0x80u8; 100];
        for parts in [
            vec![],
            vec![part(99, 10, 0)],
            vec![part(50, 10, 0), part(51, 10, 0)],
            vec![part(50, 10, 0), part(50, 10, 0)],
            vec![Part {
                len: 100,
                rows: Rows { len: 0, phase: 0 },
            }],
        ] {
            let mut out = vec![1];
            assert!(!encode(&m, &parts, &mut out), "{parts:?}");
            assert_eq!(out, [1]);
        }
    }

    /// Decodes the `ctxsigns` payload `p` and signs payload `r` both ways; `Ok` with whether
    /// both gave back `e`/`m`, or the pair decoder's error. Panics only if a decoder does.
    fn decode_both(p: &[u8], r: &[u8], e: &[u8], m: &[u8]) -> Result<bool, CodecError> {
        let (mut de, mut dm) = (vec![0; e.len()], vec![0; e.len()]);
        let pair = ctxjoint::decode::<{ ctxjoint::SIGNED }>(p, r, &mut de, &mut dm);
        let mut out = vec![0; 2 * e.len()];
        let words = ctxjoint::decode_words::<{ ctxjoint::SIGNED }>(p, r, &mut Vec::new(), &mut out);
        assert_eq!(pair.is_ok(), words.is_ok());
        pair.map(|()| de == e && dm == m)
    }

    #[test]
    fn corrupt_signs_payloads_are_errors_or_wrong_data() {
        let parts = three_parts();
        let (e, m) = planes(&parts, &LEANING, 3);
        let mut p = Vec::new();
        let codec = ctxjoint::encode_parts(&e, &m, &parts, &mut p).unwrap();
        assert!(ctxjoint::into_signed(codec, &parts, &mut p));
        let mut r = Vec::new();
        assert!(encode(&m, &parts, &mut r));
        assert_eq!(decode_both(&p, &r, &e, &m), Ok(true));
        let fields = r.len() - fields_len(m.len());
        // Every byte flipped (a bit that codes): the packed bits come back wrong; a stream
        // gives an error or wrong signs but where a flush's slack goes unread.
        let mut unchanged = 0;
        for k in 0..r.len() {
            let mut q = r.clone();
            q[k] ^= 1 << (k % 5);
            let decoded = decode_both(&p, &q, &e, &m);
            match k < fields {
                true => unchanged += (decoded == Ok(true)) as usize,
                false => assert_eq!(decoded, Ok(false), "field byte {k}"),
            }
        }
        assert!(unchanged <= 8, "{unchanged} stream bytes unread");
        // Truncated or extended, a stream ends in the wrong place.
        for cut in (0..r.len()).step_by(7).chain([r.len() - 1]) {
            assert!(decode_both(&p, &r[..cut], &e, &m).is_err(), "cut {cut}");
        }
        let mut longer = r.clone();
        longer.push(0);
        assert!(decode_both(&p, &longer, &e, &m).is_err());
        // 12001 elements leave 3 bits of the last byte unused.
        assert_eq!(fields_len(m.len()) * 8 - 5 * m.len(), 3);
        for bit in 5..8 {
            let mut q = r.clone();
            *q.last_mut().unwrap() |= 1 << bit;
            assert_eq!(
                decode_both(&p, &q, &e, &m),
                Err(CodecError("signs payload has padding bits set"))
            );
        }
        // The first stream's length, wrong.
        let first = u32::from_le_bytes(r[..4].try_into().unwrap());
        for bad in [0, 1, first - 1, first + 1, fields as u32, u32::MAX] {
            let mut q = r.clone();
            q[..4].copy_from_slice(&bad.to_le_bytes());
            assert!(decode_both(&p, &q, &e, &m).is_err(), "first stream {bad}");
        }
        // The signs of other planes, or in other parts (a part's first column only renames
        // its columns: the row length matters).
        let (_, other) = planes(&parts, &LEANING, 4);
        let mut q = Vec::new();
        assert!(encode(&other, &parts, &mut q));
        assert_ne!(decode_both(&p, &q, &e, &m), Ok(true));
        let moved = [part(6000, 60, 0), part(4000, 41, -7), part(2001, 23, 0)];
        let mut q = Vec::new();
        assert!(encode(&m, &moved, &mut q));
        assert_ne!(decode_both(&p, &q, &e, &m), Ok(true));
    }
}
