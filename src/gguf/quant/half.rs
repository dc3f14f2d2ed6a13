//! ggml's conversions between f32 and the 16-bit floats, as its reference paths compute them
//! (`ggml-impl.h`): the F16 ones after Maratyszcza's FP16 library, in f32 arithmetic and bit
//! operations, and the BF16 ones in bit operations alone. These are what llama-quantize applies
//! to a high-precision seed: F16 and BF16 widened to f32 before quantizing, and f32 narrowed
//! when the target is F16 or BF16.

/// F16 bits widened to f32 as `GGML_FP16_TO_FP32` does: exact for every finite half, infinity
/// kept, a NaN's payload kept and the NaN made quiet.
pub fn f16_to_f32(h: u16) -> f32 {
    let w = u32::from(h) << 16;
    let sign = w & 0x8000_0000;
    let two_w = w.wrapping_add(w);
    // Normal halves: the exponent rebased by 0xE0, then scaled by 2^-112 into range.
    let exp_offset = 0xE0u32 << 23;
    let exp_scale = f32::from_bits(0x0780_0000); // 2^-112
    let normalized = f32::from_bits((two_w >> 4) + exp_offset) * exp_scale;
    // Subnormal halves: the mantissa placed under 0.5's exponent, then 0.5 taken away.
    let magic_mask = 126u32 << 23;
    let denormalized = f32::from_bits((two_w >> 17) | magic_mask) - 0.5f32;
    let denormalized_cutoff = 1u32 << 27;
    let bits = if two_w < denormalized_cutoff {
        denormalized.to_bits()
    } else {
        normalized.to_bits()
    };
    f32::from_bits(sign | bits)
}

/// f32 narrowed to F16 bits as `GGML_FP32_TO_FP16` does: rounded to nearest even, past the
/// largest half to infinity, any NaN to `0x7E00` with the sign kept.
pub fn f32_to_f16(f: f32) -> u16 {
    let scale_to_inf = f32::from_bits(0x7780_0000); // 2^112
    let scale_to_zero = f32::from_bits(0x0880_0000); // 2^-110
    let base = (f.abs() * scale_to_inf) * scale_to_zero;

    let w = f.to_bits();
    let shl1_w = w.wrapping_add(w);
    let sign = w & 0x8000_0000;
    let bias = (shl1_w & 0xFF00_0000).max(0x7100_0000);

    // Adding a power of two at the half's rounding point leaves the rounded half in the low
    // bits of the sum.
    let base = f32::from_bits((bias >> 1) + 0x0780_0000) + base;
    let bits = base.to_bits();
    let exp_bits = (bits >> 13) & 0x0000_7C00;
    let mantissa_bits = bits & 0x0000_0FFF;
    let nonsign = exp_bits + mantissa_bits;
    let magnitude = if shl1_w > 0xFF00_0000 {
        0x7E00
    } else {
        nonsign
    };
    ((sign >> 16) | magnitude) as u16
}

/// BF16 bits widened to f32 (`GGML_BF16_TO_FP32`): the bits shifted into place, exact.
pub fn bf16_to_f32(h: u16) -> f32 {
    f32::from_bits(u32::from(h) << 16)
}

/// f32 narrowed to BF16 bits as `ggml_compute_fp32_to_bf16` does (`ggml_fp32_to_bf16_row_ref`):
/// rounded to nearest even, subnormals kept, a NaN truncated and made quiet (bit 6 set).
///
/// A build of llama.cpp for a CPU with AVX512-BF16 converts rows with `vcvtne2ps2bf16`
/// instead, which flushes subnormals to zero; the reference path is the one ported.
pub fn f32_to_bf16(f: f32) -> u16 {
    let i = f.to_bits();
    if i & 0x7fff_ffff > 0x7f80_0000 {
        return ((i >> 16) | 64) as u16;
    }
    (i.wrapping_add(0x7fff + ((i >> 16) & 1)) >> 16) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every finite half widens to the value it names and narrows back to itself.
    #[test]
    fn f16_round_trips_and_names_its_value() {
        for h in 0..=u16::MAX {
            let f = f16_to_f32(h);
            let (exp, man) = (i32::from(h >> 10 & 0x1f), f64::from(h & 0x3ff));
            if exp == 0x1f {
                assert!(if man == 0.0 {
                    f.is_infinite()
                } else {
                    f.is_nan()
                });
                continue;
            }
            let mag = match exp {
                0 => man * 2f64.powi(-24),
                _ => (1.0 + man / 1024.0) * 2f64.powi(exp - 15),
            };
            let want = if h & 0x8000 != 0 { -mag } else { mag };
            assert_eq!(f64::from(f), want, "{h:#06x}");
            assert_eq!(f32_to_f16(f), h, "{h:#06x}");
        }
    }

    /// Halfway between two halves rounds to the even one; past 65520 is infinity.
    #[test]
    fn f16_rounds_to_nearest_even() {
        // 1 + 2^-11 lies halfway between 1 and the next half (1 + 2^-10): even is 1.
        assert_eq!(f32_to_f16(1.0 + 2f32.powi(-11)), 0x3c00);
        assert_eq!(f32_to_f16(1.0 + 3.0 * 2f32.powi(-11)), 0x3c02);
        assert_eq!(f32_to_f16(65519.0), 0x7bff);
        assert_eq!(f32_to_f16(65520.0), 0x7c00);
        assert_eq!(f32_to_f16(-f32::NAN), 0xfe00);
    }

    /// BF16 keeps the top half of the bits, rounded to even, NaNs quiet.
    #[test]
    fn bf16_rounds_to_nearest_even_and_quiets_nans() {
        assert_eq!(f32_to_bf16(f32::from_bits(0x3f80_8000)), 0x3f80);
        assert_eq!(f32_to_bf16(f32::from_bits(0x3f81_8000)), 0x3f82);
        assert_eq!(f32_to_bf16(f32::from_bits(0x7f80_0001)), 0x7fc0);
        for h in 0..=u16::MAX {
            if !bf16_to_f32(h).is_nan() {
                assert_eq!(f32_to_bf16(bf16_to_f32(h)), h);
            }
        }
    }
}
