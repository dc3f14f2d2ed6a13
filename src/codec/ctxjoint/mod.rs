//! `ctxjoint` (id 9): BEST's coder of an exponent-aligned block's planes 0 and 1 together. The
//! joint symbols of [`super::joint`] (exponent byte and mantissa bits 6..5, as ranks in the
//! block's alphabet) are each coded with one of 16 adaptive frequency models (`model::CONTEXTS`), chosen
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
//!
//! The folder: this file holds the three codecs' specs and the payload layouts; `model` the
//! model that encoder and decoder must share, step for step; `encode` the encoder; `decode`
//! the decoder.

mod decode;
mod encode;
mod model;
#[cfg(test)]
pub(super) mod tests;

pub use decode::{decode, decode_words};
pub use encode::{encode, encode_parts};
#[cfg(feature = "lab")]
pub(crate) use encode::{encode_variant, Variant};

use crate::codec::raw6;
use crate::codec::spec::{Codec, Decode, Slot, Spec};
use crate::entropy::alphabet::Alphabet;
use crate::entropy::rows::{parts_fit, Part, Rows};
use crate::error::CodecError;

/// The `ctxjoint` codec: plane 0 of an exponent-aligned block, with [`raw6`] as plane 1.
pub static SPEC: Spec = Spec {
    id: 9,
    name: "ctxjoint",
    fits: |at: Slot, coded_len| {
        at.plane == 0 && at.transform.exponent_aligned() && raw6::pair_fits(coded_len, at.plane_len)
    },
    partner: Some(Codec::Raw6),
    decode: Decode::Pair {
        both: Some(decode::<ROWS>),
        words: Some(decode_words::<ROWS>),
    },
};

/// The `ctxtensors` codec: `ctxjoint` over the parts of a block that holds several tensors,
/// each part in the rows of the tensor it starts with.
pub static TENSORS_SPEC: Spec = Spec {
    id: 12,
    name: "ctxtensors",
    fits: SPEC.fits,
    partner: Some(Codec::Raw6),
    decode: Decode::Pair {
        both: Some(decode::<PARTS>),
        words: Some(decode_words::<PARTS>),
    },
};

/// The `ctxsigns` codec: `ctxtensors` over one part or more, with [`signs`](super::signs) as plane 1, whose
/// sign models follow the parts' columns.
pub static SIGNED_SPEC: Spec = Spec {
    id: 13,
    name: "ctxsigns",
    fits: SPEC.fits,
    partner: Some(Codec::Signs),
    decode: Decode::Pair {
        both: Some(decode::<SIGNED>),
        words: Some(decode_words::<SIGNED>),
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
/// Bytes before the streams: the row length, the first column and the context base.
const LAYOUT_LEN: usize = 10;
/// Bytes of a part in a `ctxtensors` payload: its element count, row length and first column.
const PART_LEN: usize = 12;

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
pub(super) fn write_layout(parts: &[Part], base: i32, out: &mut Vec<u8>) {
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

/// Reads the layout `layout` (see [`ROWS`]) that follows the alphabet of a plane of `len`
/// elements. Returns the parts, the context base and the streams.
pub(super) fn read_layout(
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
