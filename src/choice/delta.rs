//! How a block that has base bytes is coded: against its base with the delta transform whose
//! planes measure cheaper, or plainly when the delta does not pay (a layer the fine-tune
//! replaced, a tensor unrelated to its namesake in the base).
//!
//! A delta's planes are unlike a weight's: one byte carries nearly everything and the others
//! hold one byte almost everywhere, so every plane may take the `sparse` codec beside the
//! mode's entropy coder, whichever is smallest.

use super::{code_counted, worth_coding, Scratch};
use crate::codec::{basectx, constant, sparse, Codec};
use crate::container::Mode;
use crate::stats::{entropy_bits, histogram};
use crate::transform::{Transform, MAX_PLANES};
use rayon::prelude::*;

/// Elements of a block measured to choose between the plain and delta transforms: plenty to
/// tell a delta of 2-3 bits per value from a weight's 10, cheap next to coding the block.
const SAMPLE: usize = 8192;

/// The delta transforms a block planned as `planned` may take: the float differences and the
/// XOR for 16- and 32-bit floats, the XOR of bytes for anything else.
pub fn family(planned: Transform) -> &'static [Transform] {
    match planned {
        Transform::Exp16 => &[Transform::Sub16, Transform::Xor16],
        Transform::Exp32 => &[Transform::Sub32, Transform::Xor32],
        _ => &[Transform::Xor8],
    }
}

/// Estimated bits per element of `t`'s planes of `raw` against `base`: each plane's order-0
/// entropy, a plane above FAST's raw limit counted as stored.
fn estimate(t: Transform, raw: &[u8], base: &[u8], planes: &mut [Vec<u8>]) -> f64 {
    t.split_against(raw, base, planes);
    planes[..t.planes()]
        .iter()
        .map(|p| match entropy_bits(&histogram(p)) {
            h if h > super::FAST_RAW_BITS => 8.0,
            h => h,
        })
        .sum()
}

/// Every `step`-th element of `raw` and of `base` (`width` bytes each), at most [`SAMPLE`].
fn sample(raw: &[u8], base: &[u8], width: usize) -> (Vec<u8>, Vec<u8>) {
    let n = raw.len() / width;
    let step = n.div_ceil(SAMPLE).max(1);
    let pick = |b: &[u8]| -> Vec<u8> {
        b.chunks_exact(width)
            .step_by(step)
            .flatten()
            .copied()
            .collect()
    };
    (pick(raw), pick(base))
}

/// The transform the block `raw` (planned as `planned`) is coded with against `base`: the
/// member of [`family`] whose planes measure cheapest, or `None` when the plain planes measure
/// no more than it.
pub fn choose(
    raw: &[u8],
    base: &[u8],
    planned: Transform,
    planes: &mut [Vec<u8>],
) -> Option<Transform> {
    let candidates = family(planned);
    let width = candidates[0].width();
    if !raw.len().is_multiple_of(width) || base.len() != raw.len() {
        return None;
    }
    let (r, b) = sample(raw, base, width);
    let plain = match planned.width() {
        w if r.len() % w == 0 => estimate(planned, &r, &[], planes) * width as f64 / w as f64,
        _ => 8.0 * width as f64,
    };
    candidates
        .iter()
        .map(|&t| (t, estimate(t, &r, &b, planes)))
        .filter(|&(_, bits)| bits < plain)
        .min_by(|x, y| x.1.total_cmp(&y.1))
        .map(|(t, _)| t)
}

/// Codes one plane of a delta block into `coded`: const, the mode's entropy coder, `sparse`
/// or stored, whichever is smallest (the entropy coder only where FAST would code the plane at
/// all).
fn code_plane(data: &[u8], mode: Mode, coded: &mut Vec<u8>) -> Codec {
    coded.clear();
    if let Some(b) = constant::of(data) {
        coded.push(b);
        return Codec::Const;
    }
    let hist = histogram(data);
    let mut codec = Codec::Stored;
    if mode == Mode::Best || worth_coding(data, mode) {
        codec = code_counted(data, &hist, mode, coded);
    }
    let best = match codec {
        Codec::Stored => data.len(),
        _ => coded.len(),
    };
    let (fill, count) = hist
        .iter()
        .enumerate()
        .max_by_key(|&(s, &c)| (c, std::cmp::Reverse(s)))
        .map_or((0, 0), |(s, &c)| (s as u8, c as usize));
    // Each exception costs at least two bytes: no need to count when that is already too much.
    let exceptions = data.len() - count;
    if 1 + 2 * exceptions < best && sparse::size(data, fill, best) < best {
        sparse::encode(data, fill, coded);
        return Codec::Sparse;
    }
    if codec == Codec::Stored {
        coded.clear();
    }
    codec
}

/// Codes the block `raw` with `transform` (a delta transform) against `base`; returns the codec
/// of each plane, whose payloads are then `s.coded[k]`, or `s.planes[k]` for a stored plane.
pub fn code(
    raw: &[u8],
    base: &[u8],
    transform: Transform,
    mode: Mode,
    s: &mut Scratch,
) -> [Codec; MAX_PLANES] {
    let n = transform.planes();
    transform.split_against(raw, base, &mut s.planes);
    let chosen: Vec<Codec> = s.coded[..n]
        .par_iter_mut()
        .zip(&s.planes[..n])
        .map(|(c, p)| code_plane(p, mode, c))
        .collect();
    let mut codecs = [Codec::Stored; MAX_PLANES];
    codecs[..n].copy_from_slice(&chosen);
    if mode == Mode::Best && transform == Transform::Sub16 {
        let [high, low, ..] = &s.planes;
        let stored = match codecs[1] {
            Codec::Stored => low.len(),
            _ => s.coded[1].len(),
        };
        let shift = basectx::choose_shift(low, high, base);
        let mut coded = std::mem::take(&mut s.keys);
        coded.clear();
        basectx::encode(low, high, base, shift, &mut coded);
        if coded.len() < stored {
            std::mem::swap(&mut coded, &mut s.coded[1]);
            codecs[1] = Codec::BaseCtx;
        }
        s.keys = coded;
    }
    codecs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(v: &[u16]) -> Vec<u8> {
        v.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    #[test]
    fn small_moves_take_the_difference_and_unrelated_data_stays_plain() {
        let mut next = crate::test_rng(0x9E37_79B9);
        let base: Vec<u16> = (0..20000)
            .map(|_| 0x3C00 + (next() % 0x300) as u16)
            .collect();
        let tune: Vec<u16> = base
            .iter()
            .map(|&w| w.wrapping_add((next() % 3) as u16).wrapping_sub(1))
            .collect();
        let other: Vec<u16> = (0..20000)
            .map(|_| 0x3C00 + (next() % 0x300) as u16)
            .collect();
        let mut planes = vec![Vec::new(); MAX_PLANES];
        let (b, t, o) = (words(&base), words(&tune), words(&other));
        assert_eq!(
            choose(&t, &b, Transform::Exp16, &mut planes),
            Some(Transform::Sub16)
        );
        assert_eq!(choose(&o, &b, Transform::Exp16, &mut planes), None);
        assert_eq!(
            choose(&b, &b, Transform::Bytes, &mut planes),
            Some(Transform::Xor8)
        );
        // A block whose base is not as long cannot be coded against it.
        assert_eq!(choose(&t, &b[2..], Transform::Exp16, &mut planes), None);
    }

    #[test]
    fn planes_take_the_smallest_codec() {
        let mut sparse_plane = vec![0u8; 50_000];
        sparse_plane[100] = 3;
        sparse_plane[40_000] = 200;
        let mut coded = Vec::new();
        for mode in [Mode::Fast, Mode::Best] {
            assert_eq!(code_plane(&sparse_plane, mode, &mut coded), Codec::Sparse);
            assert_eq!(code_plane(&[5; 100], mode, &mut coded), Codec::Const);
        }
        let skewed: Vec<u8> = (0..50_000u32).map(|i| (i * i % 7) as u8).collect();
        assert_eq!(code_plane(&skewed, Mode::Fast, &mut coded), Codec::Huffman);
    }
}
