//! The per-element loops of the transforms: the sign-magnitude order and zigzag codes of the
//! delta transforms, and the loops that split elements into planes and merge them back.

/// Maps a 16-bit float's bits to an integer in the order of the values: negative values
/// (sign set) reversed below `0x8000`, positive ones from `0x8000` up, so `-0` and `+0` are
/// neighbours and the difference of two maps counts units in the last place. A bijection on
/// all 65536 words (NaNs included).
pub fn order16(w: u16) -> u16 {
    let negative = ((w as i16) >> 15) as u16;
    w ^ (negative | 0x8000)
}

/// The inverse of [`order16`].
pub fn unorder16(m: u16) -> u16 {
    let positive = ((m as i16) >> 15) as u16;
    m ^ (!positive | 0x8000)
}

/// [`order16`] for 32-bit floats.
pub fn order32(w: u32) -> u32 {
    let negative = ((w as i32) >> 31) as u32;
    w ^ (negative | 0x8000_0000)
}

/// The inverse of [`order32`].
pub fn unorder32(m: u32) -> u32 {
    let positive = ((m as i32) >> 31) as u32;
    m ^ (!positive | 0x8000_0000)
}

/// Zigzag code of a wrapping 16-bit difference: 0, -1, 1, -2, ... become 0, 1, 2, 3, ...
pub fn zigzag16(d: u16) -> u16 {
    (d << 1) ^ (((d as i16) >> 15) as u16)
}

/// The inverse of [`zigzag16`].
pub fn unzigzag16(z: u16) -> u16 {
    (z >> 1) ^ (z & 1).wrapping_neg()
}

/// [`zigzag16`] for 32-bit differences.
pub fn zigzag32(d: u32) -> u32 {
    (d << 1) ^ (((d as i32) >> 31) as u32)
}

/// The inverse of [`zigzag32`].
pub fn unzigzag32(z: u32) -> u32 {
    (z >> 1) ^ (z & 1).wrapping_neg()
}

// The delta transforms' loops below index plain slices cut to length first, so that the
// compiler drops the bounds checks and vectorises them: they run once per element of every
// block of a fine-tune, on the decode path.

/// `out[i] = f(raw[i], base[i])` (an empty `base` is zeros).
#[inline(always)]
pub(super) fn split8(raw: &[u8], base: &[u8], out: &mut [u8], f: impl Fn(u8, u8) -> u8) {
    let n = raw.len();
    let out = &mut out[..n];
    match base.len() == n {
        true => {
            let base = &base[..n];
            for i in 0..n {
                out[i] = f(raw[i], base[i]);
            }
        }
        false => out.iter_mut().zip(raw).for_each(|(o, &w)| *o = f(w, 0)),
    }
}

/// `out[i] = f(planes[0][i], base[i])` (an empty `base` is zeros).
#[inline(always)]
pub(super) fn merge8(plane: &[u8], base: &[u8], out: &mut [u8], f: impl Fn(u8, u8) -> u8) {
    split8(plane, base, out, f)
}

/// Splits 16-bit words `w` against base words `b` into the byte planes of `f(w, b)`, most
/// significant first.
#[inline(always)]
pub(super) fn split16(
    raw: &[u8],
    base: &[u8],
    planes: &mut [Vec<u8>],
    f: impl Fn(u16, u16) -> u16,
) {
    let n = raw.len() / 2;
    let [p0, p1, ..] = planes else {
        unreachable!("every transform gets MAX_PLANES planes")
    };
    let (p0, p1, raw) = (&mut p0[..n], &mut p1[..n], &raw[..2 * n]);
    let zeros = base.len() != raw.len();
    let base = if zeros { raw } else { &base[..2 * n] };
    for i in 0..n {
        let w = u16::from_le_bytes([raw[2 * i], raw[2 * i + 1]]);
        let b = u16::from_le_bytes([base[2 * i], base[2 * i + 1]]);
        let d = f(w, if zeros { 0 } else { b });
        p0[i] = (d >> 8) as u8;
        p1[i] = d as u8;
    }
}

/// The inverse of [`split16`]: `out` words from planes of `d` and base words `b` by
/// `f(d, b)`.
#[inline(always)]
pub(super) fn merge16(planes: &[&[u8]], base: &[u8], out: &mut [u8], f: impl Fn(u16, u16) -> u16) {
    let n = out.len() / 2;
    let (p0, p1, out) = (&planes[0][..n], &planes[1][..n], &mut out[..2 * n]);
    let words = |i: usize| u16::from_be_bytes([p0[i], p1[i]]);
    if base.len() != out.len() {
        for i in 0..n {
            out[2 * i..2 * i + 2].copy_from_slice(&f(words(i), 0).to_le_bytes());
        }
        return;
    }
    // Whole words where both buffers are aligned to them (pool buffers are): loads and stores
    // the width of a vector, where byte pairs would be gathered one by one.
    let aligned = (
        bytemuck::try_cast_slice::<u8, u16>(&base[..2 * n]),
        bytemuck::try_cast_slice_mut::<u8, u16>(out),
    );
    if let (Ok(base), Ok(out)) = aligned {
        return merge16_words(p0, p1, base, out, f);
    }
    let (base, out) = (&base[..2 * n], &mut out[..2 * n]);
    for i in 0..n {
        let b = u16::from_le_bytes([base[2 * i], base[2 * i + 1]]);
        out[2 * i..2 * i + 2].copy_from_slice(&f(words(i), b).to_le_bytes());
    }
}

/// `out[i] = f(word i of the planes, base[i])`, for word-aligned buffers.
#[inline(always)]
pub(super) fn merge16_words(
    p0: &[u8],
    p1: &[u8],
    base: &[u16],
    out: &mut [u16],
    f: impl Fn(u16, u16) -> u16,
) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        return wide::merge16(p0, p1, base, out, f);
    }
    merge16_loop(p0, p1, base, out, f)
}

#[inline(always)]
pub(super) fn merge16_loop(
    p0: &[u8],
    p1: &[u8],
    base: &[u16],
    out: &mut [u16],
    f: impl Fn(u16, u16) -> u16,
) {
    let n = out.len();
    let (p0, p1, base) = (&p0[..n], &p1[..n], &base[..n]);
    for i in 0..n {
        out[i] = f(u16::from_be_bytes([p0[i], p1[i]]), u16::from_le(base[i])).to_le();
    }
}

/// The undoing of [`Transform::Sub16`](super::Transform::Sub16) for one word: the base word `b` moved by the zigzagged
/// difference `d`.
#[inline(always)]
pub(super) fn unsub16(d: u16, b: u16) -> u16 {
    unorder16(order16(b).wrapping_add(unzigzag16(d)))
}

/// The merge loop compiled for AVX2 (16 words per instruction where the baseline has 8), for
/// processors that have it: it runs once per element of every block of a fine-tune.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod wide {
    #[target_feature(enable = "avx2")]
    fn merge16_avx2(
        p0: &[u8],
        p1: &[u8],
        base: &[u16],
        out: &mut [u16],
        f: impl Fn(u16, u16) -> u16,
    ) {
        super::merge16_loop(p0, p1, base, out, f)
    }

    /// [`super::merge16_loop`], on a processor with AVX2 (the caller checked).
    #[inline(always)]
    pub(super) fn merge16(
        p0: &[u8],
        p1: &[u8],
        base: &[u16],
        out: &mut [u16],
        f: impl Fn(u16, u16) -> u16,
    ) {
        // SAFETY: the caller detected AVX2 at run time.
        unsafe { merge16_avx2(p0, p1, base, out, f) }
    }
}

/// [`split16`] for 32-bit words.
#[inline(always)]
pub(super) fn split32(
    raw: &[u8],
    base: &[u8],
    planes: &mut [Vec<u8>],
    f: impl Fn(u32, u32) -> u32,
) {
    let n = raw.len() / 4;
    let [p0, p1, p2, p3, ..] = planes else {
        unreachable!("every transform gets MAX_PLANES planes")
    };
    let (p0, p1, p2, p3) = (&mut p0[..n], &mut p1[..n], &mut p2[..n], &mut p3[..n]);
    let raw = &raw[..4 * n];
    let zeros = base.len() != raw.len();
    let base = if zeros { raw } else { &base[..4 * n] };
    for i in 0..n {
        let w = u32::from_le_bytes([raw[4 * i], raw[4 * i + 1], raw[4 * i + 2], raw[4 * i + 3]]);
        let b = u32::from_le_bytes([
            base[4 * i],
            base[4 * i + 1],
            base[4 * i + 2],
            base[4 * i + 3],
        ]);
        let d = f(w, if zeros { 0 } else { b }).to_be_bytes();
        (p0[i], p1[i], p2[i], p3[i]) = (d[0], d[1], d[2], d[3]);
    }
}

/// [`merge16`] for 32-bit words.
#[inline(always)]
pub(super) fn merge32(planes: &[&[u8]], base: &[u8], out: &mut [u8], f: impl Fn(u32, u32) -> u32) {
    let n = out.len() / 4;
    let (p0, p1, p2, p3) = (
        &planes[0][..n],
        &planes[1][..n],
        &planes[2][..n],
        &planes[3][..n],
    );
    let out = &mut out[..4 * n];
    let zeros = base.len() != out.len();
    for i in 0..n {
        let b = match zeros {
            true => 0,
            false => u32::from_le_bytes([
                base[4 * i],
                base[4 * i + 1],
                base[4 * i + 2],
                base[4 * i + 3],
            ]),
        };
        let w = f(u32::from_be_bytes([p0[i], p1[i], p2[i], p3[i]]), b).to_le_bytes();
        out[4 * i..4 * i + 4].copy_from_slice(&w);
    }
}

/// Splits `W`-byte little-endian elements into `W` planes with `f(element) -> plane bytes`.
///
/// The plane slices are cut to exactly `n` first so the compiler can drop the bounds checks
/// in the loop.
#[inline(always)]
pub(super) fn split_with<const W: usize>(
    raw: &[u8],
    planes: &mut [Vec<u8>],
    mut f: impl FnMut([u8; W]) -> [u8; W],
) {
    let n = raw.len() / W;
    let mut it = planes.iter_mut();
    let outs: [&mut [u8]; W] = std::array::from_fn(|_| match it.next() {
        Some(p) => &mut p[..n],
        None => unreachable!("every transform gets MAX_PLANES planes"),
    });
    for (i, c) in raw.chunks_exact(W).enumerate().take(n) {
        // chunks_exact(W) yields W-byte chunks only: the else branch is never taken.
        let Ok(elem) = <[u8; W]>::try_from(c) else {
            continue;
        };
        let v = f(elem);
        for k in 0..W {
            outs[k][i] = v[k];
        }
    }
}

/// Rebuilds `W`-byte little-endian elements from `W` planes with `f(plane bytes) -> element`.
#[inline(always)]
pub(super) fn merge_with<const W: usize>(
    planes: &[&[u8]],
    out: &mut [u8],
    mut f: impl FnMut([u8; W]) -> [u8; W],
) {
    let n = out.len() / W;
    let ins: [&[u8]; W] = std::array::from_fn(|k| &planes[k][..n]);
    for (i, c) in out.chunks_exact_mut(W).enumerate().take(n) {
        c.copy_from_slice(&f(std::array::from_fn(|k| ins[k][i])));
    }
}
