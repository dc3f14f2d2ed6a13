//! Coding of one block: split into planes, code each plane (two planes concurrently), frame.

use crate::container::{checksum, BlockRecord, Codec, Mode, PlaneEntry};
use crate::entropy::{adaptive, entropy_bits, histogram, huffman, joint, range, single_symbol};
use crate::error::CodecError;
use crate::split::{self, Transform, MAX_PLANES};
use rayon::prelude::*;

/// Reusable per-worker buffers: split planes and their coded forms.
#[derive(Default)]
pub struct Scratch {
    planes: [Vec<u8>; MAX_PLANES],
    coded: [Vec<u8>; MAX_PLANES],
    /// Joint keys, for FAST's `huffjoint` codec.
    keys: Vec<u8>,
}

/// Bits per byte above which FAST leaves a plane after the first raw: Huffman would gain too
/// little to pay for halving that plane's decode speed (the near-random mantissa planes of
/// trained weights measure 7.9-8.0).
const FAST_RAW_BITS: f64 = 7.5;
/// The same for BEST, which spends time on any gain above ~0.4%.
const BEST_RAW_BITS: f64 = 7.97;

/// Whether a plane other than the first is worth entropy coding in `mode`, judged by the
/// order-0 entropy of every 8th byte (cheap next to coding, and close enough to decide).
fn worth_coding(data: &[u8], mode: Mode) -> bool {
    let mut h = [0u32; 256];
    for &b in data.iter().step_by(8) {
        h[b as usize] += 1;
    }
    let limit = match mode {
        Mode::Fast => FAST_RAW_BITS,
        Mode::Best => BEST_RAW_BITS,
    };
    entropy_bits(&h) < limit
}

/// Codes one plane into `coded` (left empty when the plane is best stored as is).
fn code_plane(data: &[u8], entropy: bool, mode: Mode, coded: &mut Vec<u8>) -> Codec {
    coded.clear();
    if entropy {
        return code_counted(data, &histogram(data), mode, coded);
    }
    // The scan stops at the first differing byte, so it is free on random data.
    match data.first() {
        Some(&b) if data.len() > 1 && data.iter().all(|&x| x == b) => {
            coded.push(b);
            Codec::Const
        }
        _ => Codec::Stored,
    }
}

/// Entropy-codes a plane whose histogram `hist` is known: const, coded if smaller, or stored.
fn code_counted(data: &[u8], hist: &[u32; 256], mode: Mode, coded: &mut Vec<u8>) -> Codec {
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
            huffman::encode(data, hist, coded);
            Codec::Huffman
        }
        Mode::Best => {
            // The adaptive model follows drifting statistics (sorted ids, per-row scales) that
            // one static table averages away; the static coder wins on stationary data by the
            // adaptive model's learning cost. Try adaptive, keep it unless the static coder's
            // estimated size (entropy plus its table) is smaller.
            let used = hist.iter().filter(|&&c| c > 0).count() as f64;
            let estimate = entropy_bits(hist) * data.len() as f64 / 8.0 + 2.0 * used + 16.0;
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

/// BEST: the sign/mantissa plane of a 16-bit block, given its exponent plane.
///
/// The context model stores 6 of the 8 bits raw, which suits trained weights; a plane whose
/// order-0 entropy is clearly lower (constant, or low-precision data with zeroed mantissa
/// bits) goes to the generic coders instead.
fn code_mantissas(data: &[u8], exponents: &[u8], coded: &mut Vec<u8>) -> Codec {
    coded.clear();
    let hist = histogram(data);
    if data.len() < 2 || single_symbol(&hist).is_some() {
        return code_counted(data, &hist, Mode::Best, coded);
    }
    adaptive::encode_context(data, exponents, coded);
    let order0 = entropy_bits(&hist) * data.len() as f64 / 8.0 + 600.0;
    if coded.len() < data.len() && (coded.len() as f64) < order0 * 1.01 {
        return Codec::Context;
    }
    code_counted(data, &hist, Mode::Best, coded)
}

/// BEST: planes 0 and 1 of an exponent-aligned block as a joint/raw6 pair (`None`, leaving
/// the buffers to be overwritten, when the pair does not apply or does not pay).
///
/// The joint model codes the exponent and mantissa bits 6..5 as one symbol and stores the
/// other 6 bits raw, which suits trained weights. Planes whose order-0 entropies promise
/// clearly less (low-precision data with zeroed mantissa bits) go to the separate coders.
fn code_joint(p: [&[u8]; 2], c0: &mut Vec<u8>, c1: &mut Vec<u8>) -> Option<(Codec, Codec)> {
    c0.clear();
    c1.clear();
    let n = p[0].len();
    let (joint, estimate) = rayon::join(
        || adaptive::encode_joint(p[0], p[1], c0),
        || {
            joint::encode_raw6(p[1], c1);
            let bits = entropy_bits(&histogram(p[0])) + entropy_bits(&histogram(p[1]));
            bits * n as f64 / 8.0
        },
    );
    let total = c0.len() + c1.len();
    (joint && total < 2 * n && (total as f64) < estimate * 1.01 + 600.0)
        .then_some((Codec::Joint, Codec::Raw6))
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
    if joint::sampled_too_many16(raw) {
        return None;
    }
    let census = joint::Census::of16(raw);
    let alphabet = census.alphabet()?;
    let hist = census.keys(&alphabet);
    let mut sm = [0u32; 256];
    for c in raw.chunks_exact(2).step_by(8) {
        sm[((c[1] & 0x80) | (c[0] & 0x7F)) as usize] += 1;
    }
    let plane1 = match entropy_bits(&sm) {
        h if h < FAST_RAW_BITS => h,
        _ => 8.0,
    };
    let apart = entropy_bits(&census.exponents()) + plane1;
    let together = entropy_bits(&hist) + 6.0;
    let n = raw.len() / 2;
    // What the pair adds: the alphabet (32 bytes and a nibble per exponent) and a longer code
    // table (a nibble per key where the exponents' table has one per exponent).
    let extra = 40.0 + alphabet.len() as f64;
    if together * n as f64 / 8.0 + extra >= apart * n as f64 / 8.0 {
        return None;
    }
    rayon::join(
        || joint::encode_huffman16(&alphabet, &hist, raw, keys, c0),
        || joint::encode_raw16(raw, c1),
    );
    (c0.len() + c1.len() < 2 * n).then_some([Codec::HuffJoint, Codec::Raw6])
}

/// Codes a plane after the first, on its own: entropy-coded where [`worth_coding`] says so.
fn code_other(data: &[u8], mode: Mode, coded: &mut Vec<u8>) -> Codec {
    code_plane(data, worth_coding(data, mode), mode, coded)
}

/// Codes planes 0 and 1 of a multi-plane block, concurrently unless BEST models plane 1 with
/// plane 0 as context (then the exponent plane is coded on the other thread meanwhile).
fn code_head(transform: Transform, mode: Mode, p: [&[u8]; 2], c: &mut [Vec<u8>]) -> (Codec, Codec) {
    let [c0, c1] = c else {
        unreachable!("code_head gets two coded buffers")
    };
    match mode {
        Mode::Best if transform.exponent_aligned() => code_joint(p, c0, c1).unwrap_or_else(|| {
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

/// Encodes one block into `out`: the record followed by the plane payloads.
///
/// Some transforms are chosen per block by measurement ([`split::refine`]), so the transform
/// recorded may differ from the one planned.
pub fn encode_block(
    raw: &[u8],
    transform: Transform,
    mode: Mode,
    s: &mut Scratch,
    out: &mut Vec<u8>,
) {
    let transform = split::refine(transform, raw, mode == Mode::Best);
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
    } else if let Some(pair) = huffjoint
        .then(|| code_huffjoint(raw, coded, keys))
        .flatten()
    {
        codecs[..2].copy_from_slice(&pair);
    } else {
        transform.split(raw, planes);
        let (head, tail) = coded[..n].split_at_mut(2);
        let (pair, rest) = rayon::join(
            || code_head(transform, mode, [&planes[0], &planes[1]], head),
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
    let payloads: Vec<&[u8]> = (0..n)
        .map(|k| match codecs[k] {
            Codec::Stored if n == 1 => raw,
            Codec::Stored => &planes[k][..],
            _ => &coded[k][..],
        })
        .collect();
    let record = BlockRecord {
        transform,
        raw_len: raw.len() as u32,
        checksum: checksum::block(raw),
        planes: codecs[..n]
            .iter()
            .zip(&payloads)
            .map(|(&codec, p)| PlaneEntry {
                codec,
                coded_len: p.len() as u32,
            })
            .collect(),
    };
    out.clear();
    out.reserve(record.encoded_len() + record.payload_len() as usize);
    record.write(out);
    for p in payloads {
        out.extend_from_slice(p);
    }
}

const UNPAIRED: CodecError = CodecError("joint and raw6 planes must come as a pair");

fn decode_plane(entry: &PlaneEntry, payload: &[u8], out: &mut [u8]) -> Result<(), CodecError> {
    match entry.codec {
        Codec::Stored if payload.len() == out.len() => out.copy_from_slice(payload),
        Codec::Stored => return Err(CodecError("stored plane has the wrong length")),
        Codec::Const => out.fill(*payload.first().ok_or(CodecError("empty const plane"))?),
        Codec::Huffman => huffman::decode(payload, out)?,
        Codec::Range => range::decode(payload, out)?,
        Codec::Adaptive => adaptive::decode(payload, out)?,
        Codec::Context => return Err(CodecError("context plane without its exponent plane")),
        Codec::Joint | Codec::HuffJoint | Codec::Raw6 => return Err(UNPAIRED),
    }
    Ok(())
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

/// Decodes planes 0 and 1 of a multi-plane block into `s0`/`s1` (or borrows stored ones).
fn decode_head<'a>(
    e: [&PlaneEntry; 2],
    parts: [&'a [u8]; 2],
    plane_len: usize,
    s0: &'a mut Vec<u8>,
    s1: &'a mut Vec<u8>,
) -> Result<[&'a [u8]; 2], CodecError> {
    match (e[0].codec, e[1].codec) {
        (Codec::Joint, Codec::Raw6) => {
            let (a, b) = (sized(s0, plane_len), sized(s1, plane_len));
            adaptive::decode_joint(parts[0], parts[1], a, b)?;
            return Ok([s0, s1]);
        }
        (Codec::Joint | Codec::HuffJoint, _) | (_, Codec::Raw6) => return Err(UNPAIRED),
        _ => {}
    }
    if e[1].codec != Codec::Context {
        let (a, b) = rayon::join(
            || plane_view(e[0], parts[0], plane_len, s0),
            || plane_view(e[1], parts[1], plane_len, s1),
        );
        return Ok([a?, b?]);
    }
    sized(s1, plane_len);
    if e[0].codec == Codec::Adaptive {
        // Both planes in one call: decode_pair alternates between them chunk by chunk.
        adaptive::decode_pair(parts[0], parts[1], sized(s0, plane_len), s1)?;
        return Ok([s0, s1]);
    }
    // The mantissa plane's model needs the exponents first.
    let exps = plane_view(e[0], parts[0], plane_len, s0)?;
    adaptive::decode_context(parts[1], exps, s1)?;
    Ok([exps, s1])
}

/// Decodes a block whose record was validated and whose payload is `payload` into `out`
/// (`record.raw_len` bytes), then checks the block checksum.
pub fn decode_block(
    record: &BlockRecord,
    payload: &[u8],
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
    let mut parts: [&[u8]; MAX_PLANES] = Default::default();
    let mut rest = payload;
    for (part, p) in parts.iter_mut().zip(&record.planes) {
        let (head, tail) = rest.split_at(p.coded_len as usize);
        *part = head;
        rest = tail;
    }
    let plane_len = record.transform.plane_len(out.len());
    let fused = record.transform == Transform::Exp16
        && record.planes[0].codec == Codec::HuffJoint
        && record.planes[1].codec == Codec::Raw6;
    if n == 1 {
        decode_plane(&record.planes[0], parts[0], out)?;
    } else if fused {
        joint::decode_huffman16(parts[0], parts[1], &mut s.keys, out)?;
    } else {
        let e = &record.planes;
        let [s0, s1, tail @ ..] = &mut s.planes;
        let (head, rest) = rayon::join(
            || decode_head([&e[0], &e[1]], [parts[0], parts[1]], plane_len, s0, s1),
            || {
                tail[..n - 2]
                    .par_iter_mut()
                    .zip(&e[2..])
                    .zip(&parts[2..n])
                    .map(|((s, e), part)| plane_view(e, part, plane_len, s))
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
        record.transform.merge(&views[..n], out)?;
    }
    if checksum::block(out) != record.checksum {
        return Err(CodecError(
            "checksum mismatch: decoded bytes differ from the original",
        ));
    }
    Ok(())
}
