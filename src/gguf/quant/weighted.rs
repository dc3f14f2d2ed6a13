//! The importance-matrix paths: what llama-quantize's `quantize_q4_0` to `quantize_q6_K` make
//! when given `quant_weights` (an imatrix's vector for the tensor, one weight per column), that
//! is `quantize_row_*_impl` in `ggml-quants.c`, ported with the same float operations in the
//! same order as the reference paths (see `kquants.rs`).
//!
//! Each function takes one block's values `x`, the weights of its columns `qw` (as long as
//! `x`), and writes the block's bytes. The 32-value types also take `sigma2`, the mean square
//! of the whole row, which ggml computes once per row; the super-block types compute theirs per
//! block. Q8_0 has no weighted path (`quantize_q8_0` ignores the weights).

use super::half::f32_to_f16;
use super::kquants::{
    groups_of_16, make_qkx2_quants, make_qx_quants, nearest_int, put_q3_scale, q2_k_quants,
    q3_k_quants, q45_k_end, q6_k_weighted, ScalesMins, Search, QK_K,
};
use super::legacy::{put_nibbles, put_q5};
use super::put_f16;

/// Quantizes one block given its columns' weights and the row's mean square.
pub(super) type WeightedFn = fn(x: &[f32], qw: &[f32], sigma2: f32, out: &mut [u8]);

/// The sum of the squares of `x`, in order from zero, as every weighted path starts.
pub(super) fn sum_squares(x: &[f32]) -> f32 {
    let mut sum = 0f32;
    for &v in x {
        sum += v * v;
    }
    sum
}

/// The weights the paths search under: `qw[i] * sqrtf(sigma2 + x[i]*x[i])`, and their sum.
fn weights<const N: usize>(x: &[f32], qw: &[f32], sigma2: f32) -> ([f32; N], f32) {
    let w: [f32; N] = std::array::from_fn(|i| qw[i] * (sigma2 + x[i] * x[i]).sqrt());
    let mut sum = 0f32;
    for &v in &w {
        sum += v;
    }
    (w, sum)
}

/// `make_qp_quants`: quants of the non-negative `x` in `0..=nmax` (into `l`, kept as C's
/// `uint8_t` keeps them) under one scale, chosen among 9 candidates by the error weighted by
/// `qw`, then improved one quant at a time, up to 5 rounds; returns the least-squares scale.
/// Q2_K, Q4_K and Q5_K quantize their groups' scales and mins with it.
fn make_qp_quants(nmax: i32, x: &[f32], l: &mut [u8], qw: &[f32]) -> f32 {
    let mut max = 0f32;
    for &v in x {
        // MAX(max, x[i]): a NaN on the right is taken.
        max = if max > v { max } else { v };
    }
    if max < 1e-15 {
        l.fill(0);
        return 0.0;
    }
    let nmaxf = nmax as f32;
    let mut iscale = nmaxf / max;
    for (q, &v) in l.iter_mut().zip(x) {
        *q = nearest_int(iscale * v) as u8;
    }
    let scale = 1.0 / iscale;
    let mut best_mse = 0f32;
    for ((&q, &v), &w) in l.iter().zip(x).zip(qw) {
        let diff = v - scale * f32::from(q);
        best_mse += w * diff * diff;
    }
    for is in (-4..=4).filter(|&is| is != 0) {
        let iscale_is = (0.1 * is as f32 + nmaxf) / max;
        let scale_is = 1.0 / iscale_is;
        let mut mse = 0f32;
        for (&v, &w) in x.iter().zip(qw) {
            let q = nearest_int(iscale_is * v).min(nmax);
            let diff = v - scale_is * q as f32;
            mse += w * diff * diff;
        }
        if mse < best_mse {
            best_mse = mse;
            iscale = iscale_is;
        }
    }
    let (mut sumlx, mut suml2) = (0f32, 0f32);
    for ((q, &v), &w) in l.iter_mut().zip(x).zip(qw) {
        let li = nearest_int(iscale * v).min(nmax);
        *q = li as u8;
        let lf = li as f32;
        sumlx += w * v * lf;
        suml2 += w * lf * lf;
    }
    for _ in 0..5 {
        let mut changed = false;
        for ((q, &v), &w) in l.iter_mut().zip(x).zip(qw) {
            let old = f32::from(*q);
            let mut slx = sumlx - w * v * old;
            let mut sl2 = suml2 - w * old * old;
            if slx > 0.0 && sl2 > 0.0 {
                let new_l = nearest_int(v * sl2 / slx).min(nmax);
                if new_l != i32::from(*q) {
                    let nl = new_l as f32;
                    slx += w * v * nl;
                    sl2 += w * nl * nl;
                    if slx * slx * suml2 > sumlx * sumlx * sl2 {
                        *q = new_l as u8;
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
    if suml2 > 0.0 {
        sumlx / suml2
    } else {
        0.0
    }
}

/// Q4_0 (`nmax` 8) and Q5_0 (16): the scale searched by `make_qx_quants` under the weights;
/// the quants, in `0..2*nmax`, into `l`.
fn symmetric_32(nmax: i32, x: &[f32], qw: &[f32], sigma2: f32, out: &mut [u8]) -> [u8; 32] {
    let (w, _) = weights::<32>(x, qw, sigma2);
    let mut l = [0i8; 32];
    let d = make_qx_quants(nmax, x, &mut l, Some(&w));
    put_f16(out, 0, f32_to_f16(d));
    l.map(|q| q as u8)
}

/// Q4_1 (`nmax` 15) and Q5_1 (31): scale and min searched by `make_qkx3_quants` under the
/// weights, written as F16 `d` and `m` at bytes 0 and 2; the quants into `l`.
fn affine_32(nmax: i32, x: &[f32], qw: &[f32], sigma2: f32, out: &mut [u8]) -> [u8; 32] {
    let (w, _) = weights::<32>(x, qw, sigma2);
    let mut l = [0u8; 32];
    let (d, the_min) = make_qkx2_quants(&Search::weighted(nmax), x, &w, &mut l);
    put_f16(out, 0, f32_to_f16(d));
    put_f16(out, 2, f32_to_f16(-the_min));
    l
}

/// Q4_0 with weights (`quantize_row_q4_0_impl`).
pub(super) fn q4_0(x: &[f32], qw: &[f32], sigma2: f32, out: &mut [u8]) {
    let l = symmetric_32(8, x, qw, sigma2, out);
    put_nibbles(out, 2, &l);
}

/// Q4_1 with weights (`quantize_row_q4_1_impl`).
pub(super) fn q4_1(x: &[f32], qw: &[f32], sigma2: f32, out: &mut [u8]) {
    let l = affine_32(15, x, qw, sigma2, out);
    put_nibbles(out, 4, &l);
}

/// Q5_0 with weights (`quantize_row_q5_0_impl`).
pub(super) fn q5_0(x: &[f32], qw: &[f32], sigma2: f32, out: &mut [u8]) {
    let l = symmetric_32(16, x, qw, sigma2, out);
    put_q5(out, 2, |j| l[j]);
}

/// Q5_1 with weights (`quantize_row_q5_1_impl`).
pub(super) fn q5_1(x: &[f32], qw: &[f32], sigma2: f32, out: &mut [u8]) {
    let l = affine_32(31, x, qw, sigma2, out);
    put_q5(out, 4, |j| l[j]);
}

/// The search the weighted Q2_K (`G` groups of `N` = 16, `nmax` 3), Q4_K (8 of 32, 15) and Q5_K
/// (8 of 32, 31) make: each group's scale and min by `make_qkx3_quants` under the weights
/// (sigma2 is the super-block's mean square times `k`, 1 or 2), its quants into `l`; then the
/// scales and mins quantized to `qp_max` by `make_qp_quants` under the groups' summed weights.
/// Returns the quantized scales and mins and their scales.
fn searched_groups<const G: usize, const N: usize>(
    x: &[f32],
    qw: &[f32],
    (k, nmax, qp_max): (f32, i32, i32),
    l: &mut [u8; QK_K],
) -> ([u8; G], [u8; G], f32, f32) {
    let sigma2 = k * sum_squares(&x[..QK_K]) / QK_K as f32;
    let (mut scales, mut mins, mut sw) = ([0f32; G], [0f32; G], [0f32; G]);
    for j in 0..G {
        let xs = &x[N * j..N * j + N];
        let (w, sum) = weights::<N>(xs, &qw[N * j..], sigma2);
        sw[j] = sum;
        (scales[j], mins[j]) =
            make_qkx2_quants(&Search::weighted(nmax), xs, &w, &mut l[N * j..N * j + N]);
    }
    let (mut ls, mut lm) = ([0u8; G], [0u8; G]);
    let d = make_qp_quants(qp_max, &scales, &mut ls, &sw);
    let m = make_qp_quants(qp_max, &mins, &mut lm, &sw);
    (ls, lm, d, m)
}

/// Q2_K with weights (`quantize_row_q2_K_impl`): scales and mins to 4 bits.
pub(super) fn q2_k(x: &[f32], qw: &[f32], _: f32, out: &mut [u8]) {
    let mut l = [0u8; QK_K];
    let (ls, lm, dm, mm) = searched_groups::<16, 16>(x, qw, (1.0, 3, 15), &mut l);
    put_f16(out, 80, f32_to_f16(dm));
    put_f16(out, 82, f32_to_f16(mm));
    for j in 0..16 {
        out[j] = ls[j] | lm[j] << 4;
    }
    q2_k_quants(x, &mut l, out);
}

/// Q3_K with weights (`quantize_row_q3_K_impl`): each group's scale searched by
/// `make_qx_quants` under the weights, the scales quantized by `make_qx_quants` under the
/// groups' summed weights.
pub(super) fn q3_k(x: &[f32], qw: &[f32], _: f32, out: &mut [u8]) {
    let sigma2 = 2.0 * sum_squares(&x[..QK_K]) / QK_K as f32;
    let mut l = [0i8; QK_K];
    let mut sw = [0f32; 16];
    let scales = groups_of_16(x, &mut l, |j, xs, l| {
        let (w, sum) = weights::<16>(xs, &qw[16 * j..], sigma2);
        sw[j] = sum;
        make_qx_quants(4, xs, l, Some(&w))
    });
    let sc = &mut out[96..108];
    sc.fill(0);
    let mut ls = [0i8; 16];
    let d_block = make_qx_quants(32, &scales, &mut ls, Some(&sw));
    for (j, &li) in ls.iter().enumerate() {
        put_q3_scale(sc, j, i32::from(li));
    }
    put_f16(out, 108, f32_to_f16(d_block));
    q3_k_quants(x, &mut l, out);
}

/// What Q4_K (`nmax` 15) and Q5_K (31) choose with weights: scales and mins to 6 bits (Q5_K
/// caps them at 63, Q4_K keeps C's bytes as they are).
fn weighted_scales(x: &[f32], qw: &[f32], nmax: i32, l: &mut [u8; QK_K]) -> ScalesMins {
    let (mut ls, mut lm, d_block, m_block) = searched_groups::<8, 32>(x, qw, (2.0, nmax, 63), l);
    if nmax == 31 {
        ls = ls.map(|v| v.min(63));
        lm = lm.map(|v| v.min(63));
    }
    ScalesMins {
        ls,
        lm,
        d: f32_to_f16(d_block),
        dmin: f32_to_f16(m_block),
    }
}

/// Q4_K with weights (`quantize_row_q4_K_impl`).
pub(super) fn q4_k(x: &[f32], qw: &[f32], _: f32, out: &mut [u8]) {
    let mut l = [0u8; QK_K];
    let s = weighted_scales(x, qw, 15, &mut l);
    q45_k_end(x, 15, &s, &mut l, out);
}

/// Q5_K with weights (`quantize_row_q5_K_impl`).
pub(super) fn q5_k(x: &[f32], qw: &[f32], _: f32, out: &mut [u8]) {
    let mut l = [0u8; QK_K];
    let s = weighted_scales(x, qw, 31, &mut l);
    q45_k_end(x, 31, &s, &mut l, out);
}

/// Q6_K with weights (`quantize_row_q6_K_impl`): the reference path with each group's scale
/// searched under `qw` itself.
pub(super) fn q6_k(x: &[f32], qw: &[f32], _: f32, out: &mut [u8]) {
    q6_k_weighted(x, Some(qw), out);
}
