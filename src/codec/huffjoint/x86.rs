//! The x86-64 kernels of [`super`]: the raw fields packed with BMI2 `pext`, and keys and raw
//! fields expanded into BF16 words with AVX-512 VBMI, AVX2 or BMI2, each chosen at run time
//! where the CPU has it. The only `unsafe` of the codec besides the Huffman decode loop.
#![allow(unsafe_code)]

use super::{expand16, expand16_portable, pack16, pack16_portable};

/// The masks of the raw fields in four 16-bit lanes: the sign and bits 4..0 of each.
const RAW16_MASK: u64 = 0x801F_801F_801F_801F;

/// [`pack16`] with one BMI2 `pext`: the fields lie in the payload's bit order already.
#[target_feature(enable = "bmi2")]
unsafe fn pack16_bmi2(groups: &[[u8; 8]], dst: &mut [[u8; 3]]) -> usize {
    pack16(groups, dst, |x| std::arch::x86_64::_pext_u64(x, RAW16_MASK))
}

/// [`pack16`] as compiled for this CPU.
pub(super) fn pack16_detect(groups: &[[u8; 8]], dst: &mut [[u8; 3]]) -> usize {
    if std::is_x86_feature_detected!("bmi2") {
        // SAFETY: the CPU has the feature `pack16_bmi2` is compiled for.
        return unsafe { pack16_bmi2(groups, dst) };
    }
    pack16_portable(groups, dst)
}

/// [`expand16`] with the fields spread by one BMI2 `pdep`.
#[target_feature(enable = "bmi2")]
unsafe fn expand16_bmi2(base: &[u32; 256], keys: &[u8], raw: &[u8], out: &mut [u8]) -> usize {
    expand16(base, keys, raw, out, |w| {
        std::arch::x86_64::_pdep_u64(w, RAW16_MASK)
    })
}

/// The words of whole steps of 16 elements with AVX2, as many as `keys` (16 a step), `raw`
/// (12 bytes a step, read 16 at a time) and `out` (32 bytes a step) hold; returns the number
/// of elements done. The same words as [`expand16`]: a gather of the keys' bases, the raw
/// fields moved into place lane by lane.
#[target_feature(enable = "avx2")]
unsafe fn expand16_avx2(base: &[u32; 256], keys: &[u8], raw: &[u8], out: &mut [u8]) -> usize {
    use std::arch::x86_64::*;
    let steps = (keys.len() / 16)
        .min(out.len() / 32)
        .min(raw.len().checked_sub(16).map_or(0, |r| r / 12 + 1));
    // Each 32-bit lane takes the two raw bytes its field starts in (field j at bit 6j: byte
    // 6j / 8, then a shift by 6j % 8); lanes 0..7 hold fields 0..7, 8..15 the next eight.
    let z = -128i8;
    let pick_lo = _mm256_setr_epi8(
        0, 1, z, z, 0, 1, z, z, 1, 2, z, z, 2, 3, z, z, 3, 4, z, z, 3, 4, z, z, 4, 5, z, z, 5, 6,
        z, z,
    );
    let pick_hi = _mm256_add_epi8(pick_lo, _mm256_set1_epi32(0x0000_0606));
    let shifts = _mm256_setr_epi32(0, 6, 4, 2, 0, 6, 4, 2);
    let (low5, sign) = (_mm256_set1_epi32(0x1F), _mm256_set1_epi32(0x20));
    let place = |f: __m256i| {
        let f = _mm256_srlv_epi32(f, shifts);
        _mm256_or_si256(
            _mm256_and_si256(f, low5),
            _mm256_slli_epi32(_mm256_and_si256(f, sign), 10),
        )
    };
    let table = base.as_ptr() as *const i32;
    for s in 0..steps {
        // SAFETY: `steps` keeps the 16-byte key load, the 16-byte raw load at 12s and the
        // 32-byte store at 32s inside their slices; gathered indices are bytes, and `base`
        // has 256 entries.
        unsafe {
            let kv = _mm_loadu_si128(keys.as_ptr().add(16 * s) as *const __m128i);
            let k_lo = _mm256_cvtepu8_epi32(kv);
            let k_hi = _mm256_cvtepu8_epi32(_mm_srli_si128::<8>(kv));
            let b_lo = _mm256_i32gather_epi32::<4>(table, k_lo);
            let b_hi = _mm256_i32gather_epi32::<4>(table, k_hi);
            let r = _mm_loadu_si128(raw.as_ptr().add(12 * s) as *const __m128i);
            let rr = _mm256_broadcastsi128_si256(r);
            let w_lo = _mm256_or_si256(b_lo, place(_mm256_shuffle_epi8(rr, pick_lo)));
            let w_hi = _mm256_or_si256(b_hi, place(_mm256_shuffle_epi8(rr, pick_hi)));
            // Words are below 2^16, so the saturating pack is exact; it packs per 128-bit
            // half, and the permute puts the four quarters back in order.
            let packed = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packus_epi32(w_lo, w_hi));
            _mm256_storeu_si256(out.as_mut_ptr().add(32 * s) as *mut __m256i, packed);
        }
    }
    steps * 16
}

/// The words of whole steps of 64 elements with AVX-512 VBMI, as many as `keys` (64 a step),
/// `raw` (48 bytes a step) and `out` (128 bytes a step) hold; returns the number of elements
/// done. The same words as [`expand16`] without a gather: the bases' low and high bytes are
/// looked up by byte permutes of 128-byte tables, and a multishift cuts each word's raw bits
/// out of the three bytes that hold a group's four fields.
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
unsafe fn expand16_vbmi(base: &[u32; 256], keys: &[u8], raw: &[u8], out: &mut [u8]) -> usize {
    use std::arch::x86_64::*;
    let steps = (keys.len() / 64).min(raw.len() / 48).min(out.len() / 128);
    let (lo, hi): ([u8; 256], [u8; 256]) = (
        std::array::from_fn(|k| base[k] as u8),
        std::array::from_fn(|k| (base[k] >> 8) as u8),
    );
    // SAFETY: each table is 256 bytes, four 64-byte loads.
    let quarters = |t: &[u8; 256]| -> [__m512i; 4] {
        std::array::from_fn(|q| unsafe { _mm512_loadu_si512(t.as_ptr().add(64 * q).cast()) })
    };
    let (lo, hi) = (quarters(&lo), quarters(&hi));
    // Keys below 128 index the first two quarters (bit 6 picks one), the rest the last two;
    // bit 7 of each key picks between the two lookups.
    let look = |t: &[__m512i; 4], k: __m512i, upper: __mmask64| {
        _mm512_mask_blend_epi8(
            upper,
            _mm512_permutex2var_epi8(t[0], k, t[1]),
            _mm512_permutex2var_epi8(t[2], k, t[3]),
        )
    };
    // Group g (elements 4g..4g+3) takes raw bytes 3g..3g+2 into its 64-bit lane; the second
    // half of a step's elements starts at raw byte 24.
    let gather_idx = |first: u8| -> __m512i {
        let b: [u8; 64] = std::array::from_fn(|i| first + (3 * (i / 8) + (i % 8).min(2)) as u8);
        // SAFETY: a 64-byte array.
        unsafe { _mm512_loadu_si512(b.as_ptr().cast()) }
    };
    let (idx0, idx1) = (gather_idx(0), gather_idx(24));
    // Word j of a lane: its low byte from bit 6j (mantissa bits 4..0), its high byte from bit
    // 6j - 2 (the sign, field bit 5, lands at bit 15; offsets rotate within the lane).
    let ctrl = _mm512_set1_epi64(i64::from_le_bytes([0, 62, 6, 4, 12, 10, 18, 16]));
    let keep = _mm512_set1_epi16(0x801F_u16 as i16);
    let fields = |r: __m512i, idx: __m512i| {
        _mm512_and_si512(
            _mm512_multishift_epi64_epi8(ctrl, _mm512_permutexvar_epi8(idx, r)),
            keep,
        )
    };
    // Unpacking interleaves within 128-bit lanes; these put the words back in order.
    let first = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
    let second = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
    for s in 0..steps {
        // SAFETY: `steps` keeps the 64-byte key load at 64s, the 48-byte masked raw load at
        // 48s and the two 64-byte stores at 128s inside their slices.
        unsafe {
            let k = _mm512_loadu_si512(keys.as_ptr().add(64 * s).cast());
            let upper = _mm512_movepi8_mask(k);
            let (l, h) = (look(&lo, k, upper), look(&hi, k, upper));
            let (a, b) = (_mm512_unpacklo_epi8(l, h), _mm512_unpackhi_epi8(l, h));
            let r = _mm512_maskz_loadu_epi8(0xFFFF_FFFF_FFFF, raw.as_ptr().add(48 * s).cast());
            let w0 = _mm512_or_si512(_mm512_permutex2var_epi64(a, first, b), fields(r, idx0));
            let w1 = _mm512_or_si512(_mm512_permutex2var_epi64(a, second, b), fields(r, idx1));
            let o = out.as_mut_ptr().add(128 * s);
            _mm512_storeu_si512(o.cast(), w0);
            _mm512_storeu_si512(o.add(64).cast(), w1);
        }
    }
    steps * 64
}

/// [`expand16_vbmi`] then [`expand16_avx2`] where the CPU has AVX-512 VBMI, [`expand16_avx2`]
/// where it has AVX2, else [`expand16`] as compiled for this CPU. Each leaves fewer than 32
/// elements: AVX2 at most 15 past its last step, or the 4..20 whose raw bytes it cannot read
/// 16 at a time.
pub(super) fn expand16_detect(base: &[u32; 256], keys: &[u8], raw: &[u8], out: &mut [u8]) -> usize {
    if std::is_x86_feature_detected!("avx2") {
        let done = match std::is_x86_feature_detected!("avx512vbmi")
            && std::is_x86_feature_detected!("avx512bw")
            && std::is_x86_feature_detected!("avx512f")
        {
            // SAFETY: the CPU has the features `expand16_vbmi` is compiled for.
            true => unsafe { expand16_vbmi(base, keys, raw, out) },
            false => 0,
        };
        // The rest (under 64 elements after AVX-512) in steps of 16; `done` is a multiple of 4.
        // SAFETY: the CPU has the feature `expand16_avx2` is compiled for.
        let rest = unsafe {
            expand16_avx2(
                base,
                &keys[done..],
                &raw[done / 4 * 3..],
                &mut out[2 * done..],
            )
        };
        return done + rest;
    }
    if std::is_x86_feature_detected!("bmi2") {
        // SAFETY: the CPU has the feature `expand16_bmi2` is compiled for.
        return unsafe { expand16_bmi2(base, keys, raw, out) };
    }
    expand16_portable(base, keys, raw, out)
}

#[cfg(test)]
mod tests {
    use super::super::tests::weights;
    use super::super::{encode_raw16, symbol16, words, Census};
    use super::*;

    #[test]
    fn portable_paths_match_the_detected_ones() {
        // Trained-weight-like words (about 60 keys), and words using all 256 keys (exponents
        // 0..64 with every mantissa pair, random signs and low bits) at a length that leaves
        // the AVX2 path steps of its own after the AVX-512 one.
        let wide: Vec<u8> = weights(4149, 5)
            .chunks_exact(2)
            .enumerate()
            .flat_map(|(i, w)| {
                let s = (i * 97 % 256) as u16;
                (u16::from_le_bytes([w[0], w[1]]) & 0x801F | s << 5).to_le_bytes()
            })
            .collect();
        for raw in [weights(4099, 99), wide] {
            expansion_paths_agree(&raw);
        }
    }

    fn expansion_paths_agree(raw: &[u8]) {
        let n = raw.len() / 2;
        let (groups, _) = raw.as_chunks::<8>();
        let mut a = vec![[0u8; 3]; groups.len()];
        let mut b = a.clone();
        assert_eq!(
            pack16_portable(groups, &mut a),
            pack16_detect(groups, &mut b)
        );
        assert_eq!(a, b);
        let census = Census::of16(raw);
        let alphabet = census.alphabet().unwrap();
        let base = alphabet.bases16();
        let key = alphabet.key_table();
        let keys: Vec<u8> = words(raw).map(|w| key[symbol16(w)]).collect();
        let mut r = Vec::new();
        encode_raw16(raw, &mut r);
        let (mut x, mut y) = (vec![0u8; 2 * n], vec![0u8; 2 * n]);
        // Each leaves fewer than 32 elements to the caller's tail (AVX2 goes 16 at a time).
        let done = expand16_portable(&base, &keys, &r, &mut x);
        assert_eq!(done, n / 32 * 32);
        let detected = expand16_detect(&base, &keys, &r, &mut y);
        assert!(n - detected < 32);
        assert_eq!(x[..2 * done], raw[..2 * done]);
        assert_eq!(y[..2 * detected], raw[..2 * detected]);
        // The paths that machines with wider vectors skip.
        if std::is_x86_feature_detected!("bmi2") {
            let mut z = vec![0u8; 2 * n];
            // SAFETY: the CPU has BMI2.
            assert_eq!(unsafe { expand16_bmi2(&base, &keys, &r, &mut z) }, done);
            assert_eq!(z[..2 * done], raw[..2 * done]);
        }
        if std::is_x86_feature_detected!("avx2") {
            let mut z = vec![0u8; 2 * n];
            // SAFETY: the CPU has AVX2.
            let avx2 = unsafe { expand16_avx2(&base, &keys, &r, &mut z) };
            assert!(n - avx2 < 32);
            assert_eq!(z[..2 * avx2], raw[..2 * avx2]);
        }
    }
}
