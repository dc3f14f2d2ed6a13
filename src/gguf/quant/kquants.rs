//! The super-blocks of 256 values: Q2_K to Q6_K and Q8_K, as `quantize_row_q*_K_ref` quantizes
//! them, with the searches they call (`make_qkx2_quants`, `make_q3_quants`, `make_qx_quants`).
//! Each function takes one super-block's 256 values and writes its bytes.
//!
//! The arithmetic is C's, operation for operation, in f32: `w*x*l` is `(w*x)*l` with the int
//! `l` made a float, `a ? b : c` on a float tests `a != 0` (true for NaN), and integers stored
//! into narrower fields keep their low bits as C's conversions do.
//!
//! No importance matrix: these are the reference paths. The weighted paths
//! (`quantize_q*_K_impl` with `quant_weights`) are in `weighted.rs`, sharing the searches and
//! the packing here.

use super::half::{f16_to_f32, f32_to_f16};
use super::{put_f16, signed_absmax};

/// Values of a super-block.
pub(super) const QK_K: usize = 256;
/// Below this, a group's largest magnitude counts as zero (`GROUP_MAX_EPS`).
const GROUP_MAX_EPS: f32 = 1e-15;

/// ggml's `nearest_int`: round to nearest even by adding 1.5 * 2^23 and reading the mantissa.
/// Meant for |x| <= 4194303 (an assert the release build compiles out); past that, and for
/// NaN and infinities, it returns what the bits say, as the release build does.
pub(super) fn nearest_int(x: f32) -> i32 {
    let v = x + 12582912.0;
    (v.to_bits() as i32 & 0x007f_ffff) - 0x0040_0000
}

/// `make_qx_quants` with `rmse_type` 1: the scale of `x`'s quants in `-nmax..nmax` (stored plus
/// `nmax` in `l`), chosen among 19 candidates by the error weighted by `qw` (`x*x` without:
/// Q6_K's reference path).
pub(super) fn make_qx_quants(nmax: i32, x: &[f32], l: &mut [i8], qw: Option<&[f32]>) -> f32 {
    let (max, amax) = signed_absmax(x);
    if amax < GROUP_MAX_EPS {
        l.fill(0);
        return 0.0;
    }
    let nmaxf = nmax as f32;
    let quant = |iscale: f32, v: f32| nearest_int(iscale * v).clamp(-nmax, nmax - 1);
    // The sums of w*x*l and w*l*l for the quants of `iscale`.
    let sums = |iscale: f32| {
        let (mut sumlx, mut suml2) = (0f32, 0f32);
        for (i, &v) in x.iter().enumerate() {
            let q = quant(iscale, v) as f32;
            let w = qw.map_or(v * v, |qw| qw[i]);
            sumlx += w * v * q;
            suml2 += w * q * q;
        }
        (sumlx, suml2)
    };
    let set = |iscale: f32, l: &mut [i8]| {
        for (q, &v) in l.iter_mut().zip(x) {
            *q = (nmax + quant(iscale, v)) as i8;
        }
    };
    let mut iscale = -nmaxf / max;
    set(iscale, l);
    let (sumlx, suml2) = sums(iscale);
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in (-9..=9).filter(|&is| is != 0) {
        iscale = -(nmaxf + 0.1 * is as f32) / max;
        let (sumlx, suml2) = sums(iscale);
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            set(iscale, l);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// `make_q3_quants` with `do_rmse`: quants of `x` in `-nmax..nmax` (stored plus `nmax` in `l`),
/// improved one at a time, up to 5 rounds, against the error weighted by `x*x`; returns the
/// least-squares scale.
fn make_q3_quants(nmax: i32, x: &[f32], l: &mut [i8]) -> f32 {
    let (max, amax) = signed_absmax(x);
    if amax < GROUP_MAX_EPS {
        l.fill(0);
        return 0.0;
    }
    let iscale = -(nmax as f32) / max;
    let (mut sumlx, mut suml2) = (0f32, 0f32);
    for (q, &v) in l.iter_mut().zip(x) {
        let li = nearest_int(iscale * v).clamp(-nmax, nmax - 1);
        *q = li as i8;
        let w = v * v;
        sumlx += w * v * li as f32;
        suml2 += w * li as f32 * li as f32;
    }
    for _ in 0..5 {
        let mut changed = false;
        for (q, &v) in l.iter_mut().zip(x) {
            let w = v * v;
            let old = f32::from(*q);
            let mut slx = sumlx - w * v * old;
            if slx > 0.0 {
                let mut sl2 = suml2 - w * old * old;
                let new_l = nearest_int(v * sl2 / slx).clamp(-nmax, nmax - 1);
                if new_l != i32::from(*q) {
                    let nl = new_l as f32;
                    slx += w * v * nl;
                    sl2 += w * nl * nl;
                    if sl2 > 0.0 && slx * slx * suml2 > sumlx * sumlx * sl2 {
                        *q = new_l as i8;
                        sumlx = slx;
                        suml2 = sl2;
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    for q in l.iter_mut() {
        *q += nmax as i8;
    }
    if suml2 > 0.0 {
        sumlx / suml2
    } else {
        0.0
    }
}

/// The parameters of one `make_qkx2_quants` search: quants in `0..=nmax`, and `nstep + 1`
/// candidate scales `(rmin + rdelta*is + nmax) / (max - min)`; `use_mad` weighs absolute
/// errors instead of squared ones.
pub(super) struct Search {
    nmax: i32,
    rmin: f32,
    rdelta: f32,
    nstep: i32,
    use_mad: bool,
}

impl Search {
    /// The search of the weighted paths (`make_qkx3_quants` given weights, which is
    /// `make_qkx2_quants` operation for operation): steps of 0.05 from -0.9, squared error.
    pub(super) fn weighted(nmax: i32) -> Search {
        Search {
            nmax,
            rmin: -0.9,
            rdelta: 0.05,
            nstep: 36,
            use_mad: false,
        }
    }

    /// The search of Q4_K and Q5_K: steps of 0.1 from `rmin`, squared error.
    fn squared(nmax: i32, rmin: f32, nstep: i32) -> Search {
        Search {
            nmax,
            rmin,
            rdelta: 0.1,
            nstep,
            use_mad: false,
        }
    }
}

/// `make_qkx2_quants`: quants of `x` in `0..=nmax` (into `l`) under a scale and a min, chosen
/// by the weighted error among a grid of scales each fitted by least squares. Returns the
/// scale and the min (as a positive offset: values are `scale*l - min`).
pub(super) fn make_qkx2_quants(s: &Search, x: &[f32], weights: &[f32], l: &mut [u8]) -> (f32, f32) {
    let n = x.len();
    let (mut min, mut max) = (x[0], x[0]);
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..n {
        if x[i] < min {
            min = x[i];
        }
        if x[i] > max {
            max = x[i];
        }
        let w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        l.fill(0);
        return (0.0, -min);
    }
    let nmaxf = s.nmax as f32;
    let quants = |iscale: f32, min: f32, l: &mut [u8]| {
        for (q, &v) in l.iter_mut().zip(x) {
            *q = nearest_int(iscale * (v - min)).clamp(0, s.nmax) as u8;
        }
    };
    let error = |scale: f32, min: f32, l: &[u8]| {
        let mut total = 0f32;
        for ((&q, &v), &w) in l.iter().zip(x).zip(weights) {
            let diff = scale * f32::from(q) + min - v;
            let diff = if s.use_mad { diff.abs() } else { diff * diff };
            total += w * diff;
        }
        total
    };
    let iscale = nmaxf / (max - min);
    let mut scale = 1.0 / iscale;
    quants(iscale, min, l);
    let mut best_error = error(scale, min, l);
    if s.nstep < 1 {
        return (scale, -min);
    }
    let mut laux = [0u8; 32];
    let laux = &mut laux[..n];
    for is in 0..=s.nstep {
        let iscale = (s.rmin + s.rdelta * is as f32 + nmaxf) / (max - min);
        quants(iscale, min, laux);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0f32, 0f32, 0f32);
        for ((&q, &v), &w) in laux.iter().zip(x).zip(weights) {
            let q = f32::from(q);
            sum_l += w * q;
            sum_l2 += w * q * q;
            sum_xl += w * q * v;
        }
        let big_d = sum_w * sum_l2 - sum_l * sum_l;
        if big_d > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / big_d;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / big_d;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let cur_error = error(this_scale, this_min, laux);
            if cur_error < best_error {
                l.copy_from_slice(laux);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// `get_scale_min_k4`: group `j`'s 6-bit scale and min out of Q4_K's and Q5_K's 12 bytes.
fn get_scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// Four 2-bit quants a byte, in two halves of 128 values: byte `l` of a half holds values
/// `l`, `l + 32`, `l + 64` and `l + 96`, lowest bits first. `L` is a quant as C holds it.
fn put_crumbs<L: Copy + Into<i32>>(l: &[L], qs: &mut [u8]) {
    for (half, qs) in l.chunks_exact(128).zip(qs.chunks_exact_mut(32)) {
        for (i, q) in qs.iter_mut().enumerate() {
            let v = |k: usize| half[i + 32 * k].into();
            *q = (v(0) | v(1) << 2 | v(2) << 4 | v(3) << 6) as u8;
        }
    }
}

/// Q2_K: 16 groups of 16, each a 2-bit quant with a 4-bit scale and a 4-bit min (absolute
/// error, weights |x|), the scales and mins under the F16 `d` and `dmin`.
pub(super) fn q2_k(x: &[f32], out: &mut [u8]) {
    let search = Search {
        nmax: 3,
        rmin: -0.5,
        rdelta: 0.1,
        nstep: 15,
        use_mad: true,
    };
    let mut l = [0u8; QK_K];
    let (mut scales, mut mins) = ([0f32; 16], [0f32; 16]);
    let (mut max_scale, mut max_min) = (0f32, 0f32);
    for j in 0..16 {
        let xs = &x[16 * j..16 * j + 16];
        let weights: [f32; 16] = std::array::from_fn(|i| xs[i].abs());
        (scales[j], mins[j]) = make_qkx2_quants(&search, xs, &weights, &mut l[16 * j..][..16]);
        if scales[j] > max_scale {
            max_scale = scales[j];
        }
        if mins[j] > max_min {
            max_min = mins[j];
        }
    }
    let sc = &mut out[..16];
    let q4scale = 15f32;
    let d = if max_scale > 0.0 {
        let iscale = q4scale / max_scale;
        for (s, &v) in sc.iter_mut().zip(&scales) {
            *s = nearest_int(iscale * v) as u8;
        }
        f32_to_f16(max_scale / q4scale)
    } else {
        sc.fill(0);
        f32_to_f16(0.0)
    };
    let dmin = if max_min > 0.0 {
        let iscale = q4scale / max_min;
        for (s, &v) in sc.iter_mut().zip(&mins) {
            *s |= (nearest_int(iscale * v) << 4) as u8;
        }
        f32_to_f16(max_min / q4scale)
    } else {
        f32_to_f16(0.0)
    };
    put_f16(out, 80, d);
    put_f16(out, 82, dmin);
    q2_k_quants(x, &mut l, out);
}

/// The end Q2_K's paths share, its scales (bytes 0 to 15), `d` and `dmin` (bytes 80 to 83)
/// written: each group with a nonzero scale requantized under them into `l`, then the quants
/// packed.
pub(super) fn q2_k_quants(x: &[f32], l: &mut [u8; QK_K], out: &mut [u8]) {
    let d = f16_to_f32(u16::from_le_bytes([out[80], out[81]]));
    let dmin = f16_to_f32(u16::from_le_bytes([out[82], out[83]]));
    for j in 0..16 {
        let s = out[j];
        let dj = d * f32::from(s & 0xf);
        if dj == 0.0 {
            continue;
        }
        let dm = dmin * f32::from(s >> 4);
        for ii in 0..16 {
            l[16 * j + ii] = nearest_int((x[16 * j + ii] + dm) / dj).clamp(0, 3) as u8;
        }
    }
    put_crumbs(&l[..], &mut out[16..80]);
}

/// The scales `make` finds for each of Q3_K's and Q6_K's 16 groups of 16 (given the group's
/// index and values), their quants into `l`.
pub(super) fn groups_of_16(
    x: &[f32],
    l: &mut [i8; QK_K],
    mut make: impl FnMut(usize, &[f32], &mut [i8]) -> f32,
) -> [f32; 16] {
    let mut scales = [0f32; 16];
    for (j, s) in scales.iter_mut().enumerate() {
        *s = make(j, &x[16 * j..16 * j + 16], &mut l[16 * j..16 * j + 16]);
    }
    scales
}

/// Q3_K: 16 groups of 16, each a 3-bit quant (2 low bits, the high bit in `hmask`) under a
/// 6-bit signed scale, the scales under the F16 `d`.
pub(super) fn q3_k(x: &[f32], out: &mut [u8]) {
    let mut l = [0i8; QK_K];
    let scales = groups_of_16(x, &mut l, |_, x, l| make_q3_quants(4, x, l));
    let (max_scale, _) = signed_absmax(&scales);
    let sc = &mut out[96..108];
    sc.fill(0);
    let d = if max_scale != 0.0 {
        let iscale = -32.0 / max_scale;
        for (j, &v) in scales.iter().enumerate() {
            let li = i32::from(nearest_int(iscale * v) as i8);
            put_q3_scale(sc, j, li.clamp(-32, 31) + 32);
        }
        f32_to_f16(1.0 / iscale)
    } else {
        f32_to_f16(0.0)
    };
    put_f16(out, 108, d);
    q3_k_quants(x, &mut l, out);
}

/// Group `j`'s 6-bit scale `li` (0 to 63) into Q3_K's 12 scale bytes `sc`, zeroed before the
/// first: the low 4 bits in a nibble, the high 2 in the last 4 bytes.
pub(super) fn put_q3_scale(sc: &mut [u8], j: usize, li: i32) {
    if j < 8 {
        sc[j] = (li & 0xf) as u8;
    } else {
        sc[j - 8] |= ((li & 0xf) << 4) as u8;
    }
    sc[j % 4 + 8] |= ((li >> 4) << (2 * (j / 4))) as u8;
}

/// The end Q3_K's paths share, its scales (bytes 96 to 107) and `d` (108, 109) written: each
/// group with a nonzero scale requantized under them into `l`, then the high bits into `hmask`
/// and the low two packed.
pub(super) fn q3_k_quants(x: &[f32], l: &mut [i8; QK_K], out: &mut [u8]) {
    let d = f16_to_f32(u16::from_le_bytes([out[108], out[109]]));
    let (hmask, rest) = out.split_at_mut(32);
    let (qs, rest) = rest.split_at_mut(64);
    let sc = &rest[..12];
    for j in 0..16 {
        let low = if j < 8 { sc[j] & 0xf } else { sc[j - 8] >> 4 };
        let s = i32::from(low | ((sc[8 + j % 4] >> (2 * (j / 4))) & 3) << 4) - 32;
        let dj = d * s as f32;
        if dj == 0.0 {
            continue;
        }
        for ii in 0..16 {
            l[16 * j + ii] = (nearest_int(x[16 * j + ii] / dj).clamp(-4, 3) + 4) as i8;
        }
    }
    hmask.fill(0);
    for (j, q) in l.iter_mut().enumerate() {
        if *q > 3 {
            hmask[j % 32] |= 1 << (j / 32);
            *q -= 4;
        }
    }
    put_crumbs(&l[..], qs);
}

/// The search Q4_K (`nmax` 15) and Q5_K (31) make for each of their 8 groups of 32: weights
/// `sqrt(mean(x^2)) + |x|`, squared error.
fn groups_of_32(x: &[f32], search: &Search, l: &mut [u8; QK_K]) -> ([f32; 8], [f32; 8]) {
    let (mut scales, mut mins) = ([0f32; 8], [0f32; 8]);
    for j in 0..8 {
        let xs = &x[32 * j..32 * j + 32];
        let mut sum_x2 = 0f32;
        for &v in xs {
            sum_x2 += v * v;
        }
        let av_x = (sum_x2 / 32.0).sqrt();
        let weights: [f32; 32] = std::array::from_fn(|i| av_x + xs[i].abs());
        (scales[j], mins[j]) = make_qkx2_quants(search, xs, &weights, &mut l[32 * j..][..32]);
    }
    (scales, mins)
}

/// The reference path's 6-bit scales and mins of Q4_K and Q5_K with their F16 `d` and `dmin`,
/// each value's quant in `0..=nmax` into `l` from the search.
fn reference_scales(x: &[f32], search: &Search, l: &mut [u8; QK_K]) -> ScalesMins {
    let (scales, mins) = groups_of_32(x, search, l);
    let (mut max_scale, mut max_min) = (0f32, 0f32);
    for j in 0..8 {
        if scales[j] > max_scale {
            max_scale = scales[j];
        }
        if mins[j] > max_min {
            max_min = mins[j];
        }
    }
    let inv_scale = if max_scale > 0.0 {
        63.0 / max_scale
    } else {
        0.0
    };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    ScalesMins {
        ls: std::array::from_fn(|j| (nearest_int(inv_scale * scales[j]) as u8).min(63)),
        lm: std::array::from_fn(|j| (nearest_int(inv_min * mins[j]) as u8).min(63)),
        d: f32_to_f16(max_scale / 63.0),
        dmin: f32_to_f16(max_min / 63.0),
    }
}

/// What Q4_K's and Q5_K's paths choose before their common end: the 8 groups' scales and mins
/// (as C holds them: 6-bit unless a path leaves them uncapped) and the F16 bits of `d` and
/// `dmin`.
pub(super) struct ScalesMins {
    pub(super) ls: [u8; 8],
    pub(super) lm: [u8; 8],
    pub(super) d: u16,
    pub(super) dmin: u16,
}

/// The end Q4_K (`nmax` 15) and Q5_K (31) share: the scales and mins packed into bytes 4 to 15
/// under `d` and `dmin` (bytes 0 to 3), each value requantized under them into `l` (groups of
/// scale zero keep the search's quants), then the quants packed.
pub(super) fn q45_k_end(x: &[f32], nmax: i32, s: &ScalesMins, l: &mut [u8; QK_K], out: &mut [u8]) {
    let sc = &mut out[4..16];
    for j in 0..8 {
        let (ls, lm) = (s.ls[j], s.lm[j]);
        if j < 4 {
            sc[j] = ls;
            sc[j + 4] = lm;
        } else {
            sc[j + 4] = (ls & 0xf) | (lm & 0xf) << 4;
            sc[j - 4] |= (ls >> 4) << 6;
            sc[j] |= (lm >> 4) << 6;
        }
    }
    put_f16(out, 0, s.d);
    put_f16(out, 2, s.dmin);
    for j in 0..8 {
        let (sj, mj) = get_scale_min_k4(j, &out[4..16]);
        let dj = f16_to_f32(s.d) * f32::from(sj);
        if dj == 0.0 {
            continue;
        }
        let dm = f16_to_f32(s.dmin) * f32::from(mj);
        for ii in 0..32 {
            let q = nearest_int((x[32 * j + ii] + dm) / dj);
            l[32 * j + ii] = q.clamp(0, nmax) as u8;
        }
    }
    if nmax == 15 {
        for (pair, q) in l.chunks_exact(64).zip(out[16..144].chunks_exact_mut(32)) {
            for (i, q) in q.iter_mut().enumerate() {
                *q = pair[i] | pair[i + 32] << 4;
            }
        }
        return;
    }
    let (qh, ql) = out[16..176].split_at_mut(32);
    qh.fill(0);
    for (g, (pair, ql)) in l.chunks_exact(64).zip(ql.chunks_exact_mut(32)).enumerate() {
        let (m1, m2) = (1u8 << (2 * g), 2u8 << (2 * g));
        for (i, q) in ql.iter_mut().enumerate() {
            let (mut l1, mut l2) = (pair[i], pair[i + 32]);
            if l1 > 15 {
                l1 -= 16;
                qh[i] |= m1;
            }
            if l2 > 15 {
                l2 -= 16;
                qh[i] |= m2;
            }
            *q = l1 | l2 << 4;
        }
    }
}

/// Q4_K: 8 groups of 32, each a 4-bit quant with a 6-bit scale and min.
pub(super) fn q4_k(x: &[f32], out: &mut [u8]) {
    let mut l = [0u8; QK_K];
    let s = reference_scales(x, &Search::squared(15, -1.0, 20), &mut l);
    q45_k_end(x, 15, &s, &mut l, out);
}

/// Q5_K: 8 groups of 32, each a 5-bit quant (the high bit in `qh`) with a 6-bit scale and min.
pub(super) fn q5_k(x: &[f32], out: &mut [u8]) {
    let mut l = [0u8; QK_K];
    let s = reference_scales(x, &Search::squared(31, -0.5, 15), &mut l);
    q45_k_end(x, 31, &s, &mut l, out);
}

/// Q6_K: 16 groups of 16, each a 6-bit quant under an 8-bit signed scale, the scales under the
/// F16 `d`.
pub(super) fn q6_k(x: &[f32], out: &mut [u8]) {
    q6_k_weighted(x, None, out);
}

/// Q6_K with each group's scale searched under the weights `qw` of its 16 values (`x*x`
/// without): the weighted path differs from the reference in nothing else.
pub(super) fn q6_k_weighted(x: &[f32], qw: Option<&[f32]>, out: &mut [u8]) {
    let mut l = [0i8; QK_K];
    let scales = groups_of_16(x, &mut l, |j, x, l| {
        make_qx_quants(32, x, l, qw.map(|qw| &qw[16 * j..16 * j + 16]))
    });
    let (max_scale, max_abs_scale) = signed_absmax(&scales);
    if max_abs_scale < GROUP_MAX_EPS {
        out[..210].fill(0);
        put_f16(out, 208, f32_to_f16(0.0));
        return;
    }
    let iscale = -128.0 / max_scale;
    let d = f32_to_f16(1.0 / iscale);
    let sc = &mut out[192..208];
    for (s, &v) in sc.iter_mut().zip(&scales) {
        *s = nearest_int(iscale * v).min(127) as u8;
    }
    for j in 0..16 {
        let dj = f16_to_f32(d) * f32::from(sc[j] as i8);
        if dj == 0.0 {
            continue;
        }
        for ii in 0..16 {
            l[16 * j + ii] = (nearest_int(x[16 * j + ii] / dj).clamp(-32, 31) + 32) as i8;
        }
    }
    let (ql, qh) = out[..192].split_at_mut(128);
    for ((half, ql), qh) in l
        .chunks_exact(128)
        .zip(ql.chunks_exact_mut(64))
        .zip(qh.chunks_exact_mut(32))
    {
        let v = |k: usize| i32::from(half[k]);
        for i in 0..32 {
            ql[i] = ((v(i) & 0xf) | (v(i + 64) & 0xf) << 4) as u8;
            ql[i + 32] = ((v(i + 32) & 0xf) | (v(i + 96) & 0xf) << 4) as u8;
            qh[i] = ((v(i) >> 4)
                | (v(i + 32) >> 4) << 2
                | (v(i + 64) >> 4) << 4
                | (v(i + 96) >> 4) << 6) as u8;
        }
    }
    put_f16(out, 208, d);
}

/// Q8_K: 256 8-bit quants under an f32 `d` (the value of largest magnitude over -127), with
/// the sums of each 16 quants. An all-zero block leaves `bsums` as the caller's buffer
/// had it (zeros here; ggml writes nothing there).
pub(super) fn q8_k(x: &[f32], out: &mut [u8]) {
    let (max, amax) = signed_absmax(x);
    let (d, qs) = out.split_at_mut(4);
    let (qs, bsums) = qs.split_at_mut(QK_K);
    if amax == 0.0 {
        d.fill(0);
        qs.fill(0);
        return;
    }
    let iscale = -127.0 / max;
    for (q, &v) in qs.iter_mut().zip(x) {
        *q = nearest_int(iscale * v).min(127) as u8;
    }
    for (sum, group) in bsums.chunks_exact_mut(2).zip(qs.chunks_exact(16)) {
        let s: i32 = group.iter().map(|&q| i32::from(q as i8)).sum();
        sum.copy_from_slice(&(s as i16).to_le_bytes());
    }
    d.copy_from_slice(&(1.0 / iscale).to_le_bytes());
}
