//! The encoder: contexts found a chunk of quads at a time, then every key coded under its
//! context's model, and the layout written before the streams.

use super::model::*;
use super::write_layout;
use crate::codec::spec::Codec;
use crate::entropy::alphabet::{self, Alphabet};
use crate::entropy::rc::Encoder;
use crate::entropy::rows::{parts_fit, Part, Rows};
use crate::entropy::streams::finish_two;

/// The context base an encoder writes: the mean magnitude of the block's elements half the
/// contexts above context 0, for contexts `1 << shift` units apart.
pub(super) fn base_of(keys: &[u8], mag: &[u64; 256], shift: u32) -> i32 {
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
/// [`raw6::encode`](crate::codec::raw6::encode).
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

/// Codes `keys` with their `contexts` into the two streams, each pair's first key in stream 0;
/// an odd last key (the plane's) goes to stream 0.
pub(super) fn encode_keys(models: &mut Models, e: &mut [Encoder; 2], keys: &[u8], contexts: &[u8]) {
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
pub(super) fn scale_contexts(
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
pub(super) fn recent_exponent_contexts(exponents: &[u8], rows: Rows, up: bool) -> Vec<u8> {
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
