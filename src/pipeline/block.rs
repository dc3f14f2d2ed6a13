//! Coding of one block: split into planes, code each plane (two planes concurrently), frame.

use crate::container::{checksum, BlockRecord, Codec, Mode, PlaneEntry};
use crate::entropy::{adaptive, entropy_bits, histogram, huffman, range, single_symbol};
use crate::error::CodecError;
use crate::split::{self, Transform, MAX_PLANES};

/// Reusable per-worker buffers: split planes and their coded forms.
#[derive(Default)]
pub struct Scratch {
    planes: [Vec<u8>; MAX_PLANES],
    coded: [Vec<u8>; MAX_PLANES],
}

/// Whether a plane is worth entropy coding in `mode`: FAST leaves the near-random mantissa
/// plane of 16-bit floats raw, because Huffman gains almost nothing there (measured: under
/// 0.01 bit per byte on real weights) and would halve decode speed.
fn entropy_coded(transform: Transform, plane: usize, mode: Mode) -> bool {
    mode == Mode::Best || !(transform.planes() == 2 && plane == 1)
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
            range::encode(data, hist, coded);
            Codec::Range
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

/// Encodes one block into `out`: the record followed by the plane payloads.
///
/// For 16-bit float blocks (`transform` is a 16-bit split) the split is chosen per block by
/// measurement, so the transform recorded may differ from the one planned.
pub fn encode_block(
    raw: &[u8],
    transform: Transform,
    mode: Mode,
    s: &mut Scratch,
    out: &mut Vec<u8>,
) {
    let transform = match (transform, mode) {
        // BEST's context model is built for the exponent-aligned split.
        (Transform::Split16 | Transform::Exp16, Mode::Best) => Transform::Exp16,
        (Transform::Split16 | Transform::Exp16, Mode::Fast) => split::choose16(raw, false),
        (t, _) => t,
    };
    let codecs: Vec<Codec> = match transform.planes() {
        1 => vec![code_plane(
            raw,
            entropy_coded(transform, 0, mode),
            mode,
            &mut s.coded[0],
        )],
        _ => {
            transform.split(raw, &mut s.planes);
            let [p0, p1] = &s.planes;
            let [c0, c1] = &mut s.coded;
            let (a, b) = match mode {
                Mode::Fast => rayon::join(
                    || code_plane(p0, entropy_coded(transform, 0, mode), mode, c0),
                    || code_plane(p1, entropy_coded(transform, 1, mode), mode, c1),
                ),
                Mode::Best => rayon::join(|| code_exponents(p0, c0), || code_mantissas(p1, p0, c1)),
            };
            vec![a, b]
        }
    };
    let sources: [&[u8]; MAX_PLANES] = match transform.planes() {
        1 => [raw, &[]],
        _ => [&s.planes[0], &s.planes[1]],
    };
    let payloads: Vec<&[u8]> = codecs
        .iter()
        .enumerate()
        .map(|(k, c)| match c {
            Codec::Stored => sources[k],
            _ => &s.coded[k][..],
        })
        .collect();
    let record = BlockRecord {
        transform,
        raw_len: raw.len() as u32,
        checksum: checksum::block(raw),
        planes: codecs
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

fn decode_plane(entry: &PlaneEntry, payload: &[u8], out: &mut [u8]) -> Result<(), CodecError> {
    match entry.codec {
        Codec::Stored if payload.len() == out.len() => out.copy_from_slice(payload),
        Codec::Stored => return Err(CodecError("stored plane has the wrong length")),
        Codec::Const => out.fill(*payload.first().ok_or(CodecError("empty const plane"))?),
        Codec::Huffman => huffman::decode(payload, out)?,
        Codec::Range => range::decode(payload, out)?,
        Codec::Adaptive => adaptive::decode(payload, out)?,
        Codec::Context => return Err(CodecError("context plane without its exponent plane")),
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
    scratch.clear();
    scratch.resize(len, 0);
    decode_plane(entry, payload, scratch)?;
    Ok(scratch)
}

/// Decodes a block whose record was validated and whose payload is `payload` into `out`
/// (`record.raw_len` bytes), then checks the block checksum.
pub fn decode_block(
    record: &BlockRecord,
    payload: &[u8],
    out: &mut [u8],
    s: &mut Scratch,
) -> Result<(), CodecError> {
    if payload.len() as u64 != record.payload_len() || out.len() != record.raw_len as usize {
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
    match record.transform.planes() {
        1 => decode_plane(&record.planes[0], parts[0], out)?,
        _ => {
            let [s0, s1] = &mut s.planes;
            let (e0, e1) = (&record.planes[0], &record.planes[1]);
            if e0.codec == Codec::Adaptive && e1.codec == Codec::Context {
                s0.clear();
                s0.resize(plane_len, 0);
                s1.clear();
                s1.resize(plane_len, 0);
                adaptive::decode_pair(parts[0], parts[1], s0, s1)?;
                record.transform.merge(&[s0, s1], out)?;
            } else if e1.codec == Codec::Context {
                // The mantissa plane's model needs the exponents first.
                let exps = plane_view(e0, parts[0], plane_len, s0)?;
                s1.clear();
                s1.resize(plane_len, 0);
                adaptive::decode_context(parts[1], exps, s1)?;
                record.transform.merge(&[exps, s1], out)?;
            } else {
                let (a, b) = rayon::join(
                    || plane_view(e0, parts[0], plane_len, s0),
                    || plane_view(e1, parts[1], plane_len, s1),
                );
                record.transform.merge(&[a?, b?], out)?;
            }
        }
    }
    if checksum::block(out) != record.checksum {
        return Err(CodecError(
            "checksum mismatch: decoded bytes differ from the original",
        ));
    }
    Ok(())
}
