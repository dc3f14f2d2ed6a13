//! Coding of one block: the codecs chosen (`crate::choice`), the record and payloads framed;
//! and its decoding, each plane by its codec's decoder (two planes concurrently), then merged
//! and checked.

pub use crate::choice::Scratch;
use crate::choice::{self, SignModels};
use crate::codec::{Codec, CodecError, Decode};
use crate::container::{checksum, BlockRecord, Mode, PlaneEntry};
use crate::entropy::rows::TensorRows;
use crate::transform::{Transform, MAX_PLANES};
use rayon::prelude::*;

/// Codes one block into the scratch `s`; returns its record, whose payloads [`payloads`]
/// finds in `raw` and `s`. `rows` says where its elements lie in the rows of its tensors (see
/// [`TensorRows`]). A block with `base` bytes (as long as it) is coded against them when that pays
/// ([`choice::delta`]).
///
/// Some transforms are chosen per block by measurement ([`choice::refine`]), so the transform
/// recorded may differ from the one planned.
pub fn code_block(
    raw: &[u8],
    base: Option<&[u8]>,
    planned: Transform,
    rows: &[TensorRows],
    mode: Mode,
    signs: SignModels,
    s: &mut Scratch,
) -> BlockRecord {
    let delta = base.and_then(|b| {
        let t = choice::delta::choose(raw, b, planned, &mut s.planes)?;
        Some((t, choice::delta::code(raw, b, t, mode, s)))
    });
    let (transform, codecs) =
        delta.unwrap_or_else(|| choice::code(raw, planned, rows, mode, signs, s));
    let n = transform.planes();
    BlockRecord {
        transform,
        raw_len: raw.len() as u32,
        checksum: checksum::block(raw),
        planes: (0..n)
            .map(|k| PlaneEntry {
                codec: codecs[k],
                coded_len: payload(codecs[k], transform, k, raw, s).len() as u32,
            })
            .collect(),
    }
}

/// Where plane `k` of a `transform` block's payload lies once coded with `codec`: stored planes
/// where they are (the block itself for a single-plane transform other than a delta one),
/// coded ones in the scratch.
fn payload<'a>(
    codec: Codec,
    transform: Transform,
    k: usize,
    raw: &'a [u8],
    s: &'a Scratch,
) -> &'a [u8] {
    match codec {
        Codec::Stored if transform.planes() == 1 && !transform.is_delta() => raw,
        Codec::Stored => &s.planes[k],
        _ => &s.coded[k],
    }
}

/// The plane payloads of a block [`code_block`] coded from `raw` into `s`, in order.
pub fn payloads<'a>(
    record: &'a BlockRecord,
    raw: &'a [u8],
    s: &'a Scratch,
) -> impl Iterator<Item = &'a [u8]> + 'a {
    let t = record.transform;
    (record.planes.iter().enumerate()).map(move |(k, p)| payload(p.codec, t, k, raw, s))
}

const UNPAIRED: CodecError = CodecError("a paired codec's plane without its partner");

/// Decodes a plane that its codec decodes on its own.
fn decode_plane(entry: &PlaneEntry, payload: &[u8], out: &mut [u8]) -> Result<(), CodecError> {
    match entry.codec.spec().decode {
        Decode::Plane(decode) => decode(payload, out),
        Decode::GivenPlane0 { .. } | Decode::GivenBase(_) => {
            Err(CodecError("plane decoded after plane 0 found alone"))
        }
        Decode::Pair { .. } | Decode::Partner => Err(UNPAIRED),
    }
}

/// Decodes a plane into `scratch`, or borrows its payload when stored as is.
fn plane_view<'a>(
    entry: &PlaneEntry,
    payload: &'a [u8],
    len: usize,
    scratch: &'a mut Vec<u8>,
) -> Result<&'a [u8], CodecError> {
    if entry.codec == Codec::Stored {
        return Ok(payload);
    }
    decode_plane(entry, payload, sized(scratch, len))?;
    Ok(scratch)
}

/// `v` resized to `len` bytes for a decoder to fill. Reused bytes are not zeroed first: every
/// plane decoder assigns its whole output (a short or wrong one fails the block checksum).
fn sized(v: &mut Vec<u8>, len: usize) -> &mut [u8] {
    v.resize(len, 0);
    v
}

/// Decodes planes 0 and 1 of a multi-plane block, of `lens` bytes, into `s0`/`s1` (or borrows
/// stored ones); `base` is the block's base bytes (empty for blocks without). Only planes of
/// one length pair with each other or take plane 0 as context (the codecs' rules place them).
fn decode_head<'a>(
    e: [&PlaneEntry; 2],
    parts: [&'a [u8]; 2],
    lens: [usize; 2],
    base: &[u8],
    s0: &'a mut Vec<u8>,
    s1: &'a mut Vec<u8>,
) -> Result<[&'a [u8]; 2], CodecError> {
    let second = e[1].codec.spec().decode;
    let plane_len = lens[1];
    match (e[0].codec.spec().decode, second) {
        (
            Decode::Pair {
                both: Some(decode), ..
            },
            Decode::Partner,
        ) => {
            let (a, b) = (sized(s0, plane_len), sized(s1, plane_len));
            decode(parts[0], parts[1], a, b)?;
            Ok([s0, s1])
        }
        (Decode::Plane(_), Decode::Plane(_)) => {
            let (a, b) = rayon::join(
                || plane_view(e[0], parts[0], lens[0], s0),
                || plane_view(e[1], parts[1], lens[1], s1),
            );
            Ok([a?, b?])
        }
        (Decode::Plane(_), Decode::GivenPlane0 { decode, fused }) => {
            sized(s1, plane_len);
            if let Some((_, both)) = fused.filter(|&(c, _)| c == e[0].codec) {
                both(parts[0], parts[1], sized(s0, plane_len), s1)?;
                return Ok([s0, s1]);
            }
            // The plane's model needs plane 0 first.
            let first = plane_view(e[0], parts[0], plane_len, s0)?;
            decode(parts[1], first, s1)?;
            Ok([first, s1])
        }
        (Decode::Plane(_), Decode::GivenBase(decode)) => {
            sized(s1, plane_len);
            let first = plane_view(e[0], parts[0], plane_len, s0)?;
            decode(parts[1], first, base, s1)?;
            Ok([first, s1])
        }
        _ => Err(UNPAIRED),
    }
}

/// Decodes the planes of a ggml transform's block: plane 0 first, then the others at once, each
/// given plane 0 where its codec asks; merged into `out`.
fn decode_ggml(
    record: &BlockRecord,
    parts: &[&[u8]],
    base: &[u8],
    out: &mut [u8],
    s: &mut Scratch,
) -> Result<(), CodecError> {
    let (t, e) = (record.transform, &record.planes);
    let [s0, rest @ ..] = &mut s.planes;
    let first = plane_view(&e[0], parts[0], t.plane_len(0, out.len()), s0)?;
    let others = (rest[..parts.len() - 1].par_iter_mut())
        .zip(&e[1..])
        .zip(&parts[1..])
        .enumerate()
        .map(|(k, ((s, e), part))| {
            let len = t.plane_len(k + 1, out.len());
            match e.codec.spec().decode {
                Decode::GivenPlane0 { decode, .. } => {
                    decode(part, first, sized(s, len))?;
                    Ok(&s[..])
                }
                _ => plane_view(e, part, len, s),
            }
        })
        .collect::<Result<Vec<&[u8]>, CodecError>>()?;
    let mut views: [&[u8]; MAX_PLANES] = Default::default();
    views[0] = first;
    views[1..parts.len()].copy_from_slice(&others);
    t.merge_against(&views[..parts.len()], base, out)
}

/// Decodes a block whose record was validated and whose payload is `payload` into `out`
/// (`record.raw_len` bytes), then checks the block checksum. A block with a delta transform
/// needs its `base` bytes (as long as the block).
pub fn decode_block(
    record: &BlockRecord,
    payload: &[u8],
    base: Option<&[u8]>,
    out: &mut [u8],
    s: &mut Scratch,
) -> Result<(), CodecError> {
    let n = record.planes.len();
    if payload.len() as u64 != record.payload_len()
        || out.len() != record.raw_len as usize
        || n != record.transform.planes()
    {
        return Err(CodecError("payload length does not match the record"));
    }
    let base = match (record.transform.is_delta(), base) {
        (false, _) => &[][..],
        (true, Some(b)) if b.len() == out.len() => b,
        (true, _) => return Err(CodecError("a delta block without its base bytes")),
    };
    let mut parts: [&[u8]; MAX_PLANES] = Default::default();
    let mut rest = payload;
    for (part, p) in parts.iter_mut().zip(&record.planes) {
        let (head, tail) = rest.split_at(p.coded_len as usize);
        *part = head;
        rest = tail;
    }
    let t = record.transform;
    let words = match record.planes[0].codec.spec().decode {
        // Validation placed such a codec only where its partner codes plane 1.
        Decode::Pair { words, .. } if record.transform == Transform::Exp16 => words,
        _ => None,
    };
    if n == 1 {
        decode_plane(&record.planes[0], parts[0], out)?;
        if record.transform == Transform::Xor8 {
            for (o, b) in out.iter_mut().zip(base) {
                *o ^= b;
            }
        }
    } else if let Some(decode) = words {
        decode(parts[0], parts[1], &mut s.keys, out)?;
    } else if t.ggml().is_some() {
        decode_ggml(record, &parts[..n], base, out, s)?;
    } else {
        let e = &record.planes;
        let [s0, s1, tail @ ..] = &mut s.planes;
        let (head, rest) = rayon::join(
            || {
                decode_head(
                    [&e[0], &e[1]],
                    [parts[0], parts[1]],
                    [t.plane_len(0, out.len()), t.plane_len(1, out.len())],
                    base,
                    s0,
                    s1,
                )
            },
            || {
                tail[..n - 2]
                    .par_iter_mut()
                    .zip(&e[2..])
                    .zip(&parts[2..n])
                    .enumerate()
                    .map(|(k, ((s, e), part))| {
                        plane_view(e, part, t.plane_len(k + 2, out.len()), s)
                    })
                    .collect::<Result<Vec<&[u8]>, CodecError>>()
            },
        );
        // A fixed array: no allocation per block (the tail's Vec is empty, so free, for the
        // common two-plane blocks).
        let mut views: [&[u8]; MAX_PLANES] = Default::default();
        views[..2].copy_from_slice(&head?);
        for (v, r) in views[2..].iter_mut().zip(rest?) {
            *v = r;
        }
        record.transform.merge_against(&views[..n], base, out)?;
    }
    if checksum::block(out) != record.checksum {
        return Err(CodecError(
            "checksum mismatch: decoded bytes differ from the original",
        ));
    }
    Ok(())
}
