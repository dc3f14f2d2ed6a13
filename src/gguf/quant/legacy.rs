//! The blocks of 32 values: Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0, as `quantize_row_q*_ref`
//! quantizes them. Each function takes one block's 32 values and writes its bytes. With an
//! importance matrix, ggml takes `quantize_row_q*_impl` for all but Q8_0 (`weighted.rs`).

use super::half::f32_to_f16;
use super::{put_f16, signed_absmax};

/// What ggml's C does where it converts a float to a small integer (`(int8_t)x`,
/// `(uint8_t)x`) on x86-64: a truncating conversion to 32 bits (`cvttss2si`), which gives
/// `i32::MIN` for NaN and values out of range, then the low byte. In range this is plain
/// truncation; out of range (only NaN and infinite rows get there) C leaves it undefined, and
/// this is what the reference build does.
fn c_low_byte(x: f32) -> u8 {
    let wide = if x.is_nan() || !(-2147483648.0..2147483648.0).contains(&x) {
        i32::MIN
    } else {
        x as i32
    };
    wide as u8
}

/// `MIN(cap, (int8_t)x)` stored in a `uint8_t`: the byte read as signed before the cap.
fn capped_i8(x: f32, cap: i32) -> u8 {
    (c_low_byte(x) as i8 as i32).min(cap) as u8
}

/// The least and greatest values, as Q4_1 and Q5_1 find them (NaNs never compare).
fn min_max(x: &[f32]) -> (f32, f32) {
    let (mut min, mut max) = (f32::MAX, -f32::MAX);
    for &v in x {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
    }
    (min, max)
}

/// `d ? 1.0f/d : 0.0f`: a NaN `d` counts as true.
fn inverse(d: f32) -> f32 {
    if d != 0.0 {
        1.0 / d
    } else {
        0.0
    }
}

/// Q4_0: `d` = the value of largest magnitude / -8, quants `x/d + 8.5` truncated, at most 15.
pub(super) fn q4_0(x: &[f32], out: &mut [u8]) {
    let d = signed_absmax(x).0 / -8.0;
    let id = inverse(d);
    put_f16(out, 0, f32_to_f16(d));
    put_nibbles(
        out,
        2,
        &std::array::from_fn(|j| capped_i8(x[j] * id + 8.5, 15)),
    );
}

/// The scale and min of Q4_1 and Q5_1 (`levels` 15 and 31): `d` = (max - min) / levels and
/// `m` = min, written as F16 at bytes 0 and 2; returns the min and 1/d.
fn put_d_m(x: &[f32], levels: f32, out: &mut [u8]) -> (f32, f32) {
    let (min, max) = min_max(x);
    let d = (max - min) / levels;
    put_f16(out, 0, f32_to_f16(d));
    put_f16(out, 2, f32_to_f16(min));
    (min, inverse(d))
}

/// Q4_1: `d` = (max - min) / 15, `m` = min, quants `(x - min)/d + 0.5` truncated, at most 15.
pub(super) fn q4_1(x: &[f32], out: &mut [u8]) {
    let (min, id) = put_d_m(x, 15.0, out);
    put_nibbles(
        out,
        4,
        &std::array::from_fn(|j| capped_i8((x[j] - min) * id + 0.5, 15)),
    );
}

/// The 4-bit quants `l` of Q4_0 and Q4_1 into their block from byte `at`: byte `j` holds
/// values `j` (low nibble) and `j + 16`.
pub(super) fn put_nibbles(out: &mut [u8], at: usize, l: &[u8; 32]) {
    for j in 0..16 {
        out[at + j] = l[j] | l[16 + j] << 4;
    }
}

/// The 5-bit quants `xi` of Q5_0 and Q5_1 into their block from byte `at`: 32 high bits, then
/// the low nibbles.
pub(super) fn put_q5(out: &mut [u8], at: usize, xi: impl Fn(usize) -> u8) {
    let mut qh = 0u32;
    for j in 0..16 {
        let (xi0, xi1) = (xi(j), xi(16 + j));
        out[at + 4 + j] = (xi0 & 0x0f) | (xi1 & 0x0f) << 4;
        qh |= u32::from((xi0 & 0x10) >> 4) << j;
        qh |= u32::from((xi1 & 0x10) >> 4) << (j + 16);
    }
    out[at..at + 4].copy_from_slice(&qh.to_le_bytes());
}

/// Q5_0: `d` = the value of largest magnitude / -16, quants `x/d + 16.5` truncated, at most 31.
pub(super) fn q5_0(x: &[f32], out: &mut [u8]) {
    let d = signed_absmax(x).0 / -16.0;
    let id = inverse(d);
    put_f16(out, 0, f32_to_f16(d));
    put_q5(out, 2, |j| capped_i8(x[j] * id + 16.5, 31));
}

/// Q5_1: `d` = (max - min) / 31, `m` = min, quants `(x - min)/d + 0.5` truncated (uncapped).
pub(super) fn q5_1(x: &[f32], out: &mut [u8]) {
    let (min, id) = put_d_m(x, 31.0, out);
    put_q5(out, 4, |j| c_low_byte((x[j] - min) * id + 0.5));
}

/// Q8_0: `d` = the largest magnitude / 127, quants `x/d` rounded half away from zero.
pub(super) fn q8_0(x: &[f32], out: &mut [u8]) {
    let mut amax = 0f32;
    for &v in x {
        // MAX(amax, fabsf(v)): a NaN on either side picks the second.
        amax = if amax > v.abs() { amax } else { v.abs() };
    }
    let d = amax / 127.0;
    let id = inverse(d);
    put_f16(out, 0, f32_to_f16(d));
    for (q, &v) in out[2..34].iter_mut().zip(x) {
        *q = c_low_byte((v * id).round());
    }
}
