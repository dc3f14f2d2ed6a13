//! Joint symbols for exponent-aligned float planes, shared by BEST's `joint` codec
//! (adaptive range coding) and FAST's `huffjoint` codec (Huffman coding).
//!
//! The exponent byte `e` and the top two mantissa bits `m` (bits 6..5 of the sign/mantissa
//! byte) form the symbol `e * 4 + m`; the distribution of those mantissa bits depends on the
//! exponent, so coding the pair as one symbol captures what a separate exponent coder misses,
//! at one decode step per element. A block's symbols are replaced by their rank ("key") in the
//! block's alphabet, at most [`MAX_USED`] of them, so keys are bytes and the byte coders apply.
//! The other six bits (the sign and bits 4..0) are close to uniform and go to a `raw6` plane,
//! 6 bits per element.
//!
//! Payloads (see docs/FORMAT.md): the alphabet (a 32-byte bitmap of the exponents used, then a
//! 4-bit mask of the mantissa pairs used per used exponent, two per byte, low nibble first),
//! followed by the keys as coded by the codec.

use crate::entropy::huffman;
use crate::error::CodecError;

/// Number of joint symbols `e * 4 + m`.
const SYMBOLS: usize = 1024;
/// Most joint symbols one block may use: keys stay bytes.
pub const MAX_USED: usize = 256;

/// The joint symbol of exponent byte `e` and sign/mantissa byte `x`.
#[inline(always)]
pub(crate) fn symbol(e: u8, x: u8) -> usize {
    (e as usize) << 2 | (x >> 5 & 3) as usize
}

/// The joint symbols a block uses, ascending; an element's key is its symbol's rank here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Alphabet {
    used: Vec<u16>,
}

impl Alphabet {
    /// The alphabet of the planes `exps`/`mans` (as long as each other), when they use
    /// 2 ..= [`MAX_USED`] joint symbols.
    pub fn of(exps: &[u8], mans: &[u8]) -> Option<Alphabet> {
        let mut seen = [false; SYMBOLS];
        for (&e, &x) in exps.iter().zip(mans) {
            seen[symbol(e, x)] = true;
        }
        Alphabet::from_used(&seen)
    }

    /// The alphabet of the symbols flagged in `seen`, when there are 2 ..= [`MAX_USED`].
    fn from_used(seen: &[bool; SYMBOLS]) -> Option<Alphabet> {
        let used: Vec<u16> = (0..SYMBOLS as u16).filter(|&s| seen[s as usize]).collect();
        (2..=MAX_USED)
            .contains(&used.len())
            .then_some(Alphabet { used })
    }

    /// Number of symbols used.
    pub fn len(&self) -> usize {
        self.used.len()
    }

    /// Always false: an alphabet has at least two symbols.
    pub fn is_empty(&self) -> bool {
        self.used.is_empty()
    }

    /// The key of every joint symbol (0 for those not used).
    pub(crate) fn key_table(&self) -> [u8; SYMBOLS] {
        let mut key = [0u8; SYMBOLS];
        for (k, &s) in self.used.iter().enumerate() {
            key[s as usize] = k as u8;
        }
        key
    }

    /// The exponent byte and the mantissa bits 6..5 (in place) of every key.
    pub(crate) fn expansion(&self) -> ([u8; 256], [u8; 256]) {
        let (mut te, mut tm) = ([0u8; 256], [0u8; 256]);
        for (k, &s) in self.used.iter().enumerate() {
            te[k] = (s >> 2) as u8;
            tm[k] = ((s & 3) << 5) as u8;
        }
        (te, tm)
    }

    /// The BF16 word bits of every key: the exponent at bits 14..7, mantissa bits 6..5 in place
    /// (the sign and bits 4..0 come from the raw fields).
    pub(crate) fn bases16(&self) -> [u32; 256] {
        let mut base = [0u32; 256];
        for (b, &s) in base.iter_mut().zip(&self.used) {
            *b = (s as u32) << 5;
        }
        base
    }

    /// Appends the alphabet's serialised form.
    pub fn write(&self, out: &mut Vec<u8>) {
        let mut masks = [0u8; 256];
        for &s in &self.used {
            masks[(s >> 2) as usize] |= 1 << (s & 3);
        }
        let mut bitmap = [0u8; 32];
        for (e, &m) in masks.iter().enumerate() {
            if m != 0 {
                bitmap[e / 8] |= 1 << (e % 8);
            }
        }
        out.extend_from_slice(&bitmap);
        let nibbles: Vec<u8> = masks.iter().copied().filter(|&m| m != 0).collect();
        for pair in nibbles.chunks(2) {
            out.push(pair[0] | pair.get(1).map_or(0, |&h| h << 4));
        }
    }

    /// Reads an alphabet written by [`Alphabet::write`] off the front of `payload`; returns
    /// it and the rest of the payload.
    pub fn read(payload: &[u8]) -> Result<(Alphabet, &[u8]), CodecError> {
        const TRUNC: CodecError = CodecError("joint alphabet truncated");
        let bitmap = payload.get(..32).ok_or(TRUNC)?;
        let exps: Vec<u16> = (0..256u16)
            .filter(|&e| bitmap[e as usize / 8] & (1 << (e % 8)) != 0)
            .collect();
        let mask_len = exps.len().div_ceil(2);
        let masks = payload.get(32..32 + mask_len).ok_or(TRUNC)?;
        let mut used = Vec::with_capacity(4 * exps.len());
        for (i, &e) in exps.iter().enumerate() {
            let m = masks[i / 2] >> (4 * (i % 2)) & 0xF;
            if m == 0 {
                return Err(CodecError("joint alphabet has an exponent without symbols"));
            }
            used.extend((0..4u16).filter(|b| m & (1 << b) != 0).map(|b| e << 2 | b));
        }
        if exps.len() % 2 == 1 && masks[mask_len - 1] >> 4 != 0 {
            return Err(CodecError("joint alphabet padding is not zero"));
        }
        if !(2..=MAX_USED).contains(&used.len()) {
            return Err(CodecError("joint alphabet size out of range"));
        }
        Ok((Alphabet { used }, &payload[32 + mask_len..]))
    }
}

/// Checks that `raw` is a raw6 payload of `n` elements: its length, and padding bits of zero
/// (so that every bit of an archive is significant).
pub(crate) fn check_raw6(raw: &[u8], n: usize) -> Result<(), CodecError> {
    if raw.len() != raw6_len(n) {
        return Err(CodecError("raw mantissa payload has the wrong length"));
    }
    let spare = raw.len() * 8 - n * 6;
    if raw.last().is_some_and(|&b| (b as u32) >> (8 - spare) != 0) {
        return Err(CodecError("raw mantissa payload has padding bits set"));
    }
    Ok(())
}

/// Bits of a sign/mantissa byte that are stored raw: the sign (bit 7) and bits 4..0.
#[inline(always)]
fn raw_bits(x: u8) -> u64 {
    (((x >> 2) & 0x20) | (x & 0x1F)) as u64
}

/// The raw fields of four elements, packed in the 3 bytes `b`, spread to one byte each (sign
/// to bit 7, bits 4..0 in place, bits 6 and 5 clear), as a little-endian word.
#[inline(always)]
fn spread4(b: &[u8]) -> u32 {
    let w = b[0] as u32 | (b[1] as u32) << 8 | (b[2] as u32) << 16;
    let t = (w & 0x3F) | (w & 0xFC0) << 2 | (w & 0x3_F000) << 4 | (w & 0xFC_0000) << 6;
    (t & 0x2020_2020) << 2 | (t & 0x1F1F_1F1F)
}

/// The spread fields of the last `n % 4` of `n` elements, which start right after the whole
/// groups of 3 bytes in `raw`.
fn tail_fields(raw: &[u8], n: usize) -> [u8; 4] {
    let mut b = [0u8; 3];
    for (d, &r) in b.iter_mut().zip(raw.iter().skip(n / 4 * 3)) {
        *d = r;
    }
    spread4(&b).to_le_bytes()
}

/// Fills `out` with the raw fields (sign to bit 7, bits 4..0), leaving bits 6 and 5 clear.
/// `raw` holds `ceil(6 * out.len() / 8)` bytes (checked by the caller); a separate pass keeps
/// bit unpacking out of the serial decode loop.
pub(crate) fn unpack_raw(raw: &[u8], out: &mut [u8]) {
    let fields = tail_fields(raw, out.len());
    let (head, tail) = out.split_at_mut(out.len() / 4 * 4);
    for (q, b) in head.chunks_exact_mut(4).zip(raw.chunks_exact(3)) {
        q.copy_from_slice(&spread4(b).to_le_bytes());
    }
    tail.copy_from_slice(&fields[..tail.len()]);
}

/// The raw6 payload (plane 1) of a sign/mantissa plane, as the joint codecs and the context
/// codec store it: the raw fields of `plane` (see `raw_bits`), 6 bits per element from the
/// least significant bit up, `ceil(6 * plane.len() / 8)` bytes; the inverse of `unpack_raw`.
pub fn encode_raw6(plane: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    out.resize(start + raw6_len(plane.len()), 0);
    let dst = &mut out[start..];
    let whole = plane.len() / 4;
    let (head, tail) = plane.split_at(whole * 4);
    let (dst_head, dst_tail) = dst.split_at_mut(whole * 3);
    for (q, b) in head.chunks_exact(4).zip(dst_head.chunks_exact_mut(3)) {
        // Four fields a word: each byte's sign moved down to bit 5, then the 6-bit fields
        // packed together.
        let x = u32::from_le_bytes([q[0], q[1], q[2], q[3]]);
        let t = (x & 0x8080_8080) >> 2 | (x & 0x1F1F_1F1F);
        let w = (t & 0x3F) | (t >> 2 & 0xFC0) | (t >> 4 & 0x3_F000) | (t >> 6 & 0xFC_0000);
        b.copy_from_slice(&w.to_le_bytes()[..3]);
    }
    let mut w = 0u64;
    for (i, &x) in tail.iter().enumerate() {
        w |= raw_bits(x) << (6 * i);
    }
    let n = dst_tail.len();
    dst_tail.copy_from_slice(&w.to_le_bytes()[..n]);
}

/// Length of the raw payload of `n` sign/mantissa bytes.
pub fn raw6_len(n: usize) -> usize {
    (n * 6).div_ceil(8)
}

/// Turns decoded keys in `exps` into exponents and fills `mans` from the raw fields `raw`
/// (`ceil(6 * len / 8)` bytes) and the keys' mantissa bits. `te[k]` is the exponent of key `k`,
/// `tm[k]` its bits 6..5, in place.
pub(crate) fn expand(te: &[u8; 256], tm: &[u8; 256], raw: &[u8], exps: &mut [u8], mans: &mut [u8]) {
    let n = exps.len().min(mans.len());
    let whole = n / 4 * 4;
    let (eh, et) = exps[..n].split_at_mut(whole);
    let (mh, mt) = mans[..n].split_at_mut(whole);
    for ((e, m), b) in eh
        .chunks_exact_mut(4)
        .zip(mh.chunks_exact_mut(4))
        .zip(raw.chunks_exact(3))
    {
        let (k0, k1, k2, k3) = (e[0] as usize, e[1] as usize, e[2] as usize, e[3] as usize);
        let bits = u32::from_le_bytes([tm[k0], tm[k1], tm[k2], tm[k3]]);
        e.copy_from_slice(&[te[k0], te[k1], te[k2], te[k3]]);
        m.copy_from_slice(&(spread4(b) | bits).to_le_bytes());
    }
    let fields = tail_fields(raw, n);
    for ((e, m), f) in et.iter_mut().zip(mt).zip(fields) {
        *m = f | tm[*e as usize];
        *e = te[*e as usize];
    }
}

/// The joint symbol of a BF16 word: its bits 14..5, the exponent and mantissa bits 6..5.
#[inline(always)]
fn symbol16(w: u16) -> usize {
    (w >> 5 & 0x3FF) as usize
}

/// The 16-bit words of an `exp16` block `raw` (whose length is even).
fn words(raw: &[u8]) -> impl Iterator<Item = u16> + '_ {
    raw.chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
}

/// Whether every 64th word of the `exp16` block `raw` already uses more than [`MAX_USED`]
/// joint symbols, so that counting them all would be wasted (F16 data: its exponent plane holds
/// 3 mantissa bits, and its joint symbols number in the hundreds).
pub fn sampled_too_many16(raw: &[u8]) -> bool {
    let mut seen = [false; SYMBOLS];
    for w in words(raw).step_by(64) {
        seen[symbol16(w)] = true;
    }
    seen.iter().filter(|&&s| s).count() > MAX_USED
}

/// Counts of the joint symbols of an `exp16` block, from which FAST estimates both ways of
/// coding it before coding either.
pub struct Census {
    counts: Vec<u32>,
}

impl Census {
    /// Counts the joint symbols of the 16-bit words of `raw` (whose length is even).
    pub fn of16(raw: &[u8]) -> Census {
        // Two sub-histograms: neighbouring elements often share a symbol, and one table would
        // serialise on the store-to-load of the same counter.
        let mut h = Box::new([[0u32; SYMBOLS]; 2]);
        let [h0, h1] = &mut *h;
        let (pairs, tail) = raw.as_chunks::<4>();
        for p in pairs {
            h0[symbol16(u16::from_le_bytes([p[0], p[1]]))] += 1;
            h1[symbol16(u16::from_le_bytes([p[2], p[3]]))] += 1;
        }
        for w in words(tail) {
            h0[symbol16(w)] += 1;
        }
        let counts = h0.iter().zip(h1.iter()).map(|(a, b)| a + b).collect();
        Census { counts }
    }

    /// The alphabet of the symbols counted, when there are 2 ..= [`MAX_USED`].
    pub fn alphabet(&self) -> Option<Alphabet> {
        let seen: [bool; SYMBOLS] = std::array::from_fn(|s| self.counts[s] > 0);
        Alphabet::from_used(&seen)
    }

    /// The histogram of the keys of `alphabet` (which must be this census's).
    pub fn keys(&self, alphabet: &Alphabet) -> [u32; 256] {
        let mut h = [0u32; 256];
        for (k, &s) in alphabet.used.iter().enumerate() {
            h[k] = self.counts[s as usize];
        }
        h
    }

    /// The histogram of the exponent bytes.
    pub fn exponents(&self) -> [u32; 256] {
        std::array::from_fn(|e| self.counts[4 * e..4 * e + 4].iter().sum())
    }
}

/// FAST's `huffjoint` payload (plane 0) of the `exp16` block `raw`, given its census's
/// `alphabet` and key histogram `hist`: the alphabet, then the keys as a Huffman plane
/// payload. `keys` is scratch. Plane 1 is [`encode_raw16`].
pub fn encode_huffman16(
    alphabet: &Alphabet,
    hist: &[u32; 256],
    raw: &[u8],
    keys: &mut Vec<u8>,
    out: &mut Vec<u8>,
) {
    alphabet.write(out);
    let key = alphabet.key_table();
    let (pairs, _) = raw.as_chunks::<2>();
    keys.resize(pairs.len(), 0);
    for (k, p) in keys.iter_mut().zip(pairs) {
        *k = key[symbol16(u16::from_le_bytes(*p))];
    }
    huffman::encode(keys, hist, out);
}

/// The raw6 payload (plane 1) of the `exp16` block `raw`: each word's sign and bits 4..0, the
/// fields [`encode_raw6`] takes from the sign/mantissa plane, taken from the words directly.
pub fn encode_raw16(raw: &[u8], out: &mut Vec<u8>) {
    let n = raw.len() / 2;
    let start = out.len();
    out.resize(start + raw6_len(n), 0);
    let dst = &mut out[start..];
    let (groups, tail) = raw.as_chunks::<8>();
    let (dst_groups, _) = dst.as_chunks_mut::<3>();
    let packed = pack16_detect(groups, dst_groups);
    // The last 0..3 words as a group padded with zero words, whose fields are zero padding.
    let mut group = [0u8; 8];
    group[..tail.len()].copy_from_slice(tail);
    let mut fields = [[0u8; 3]];
    pack16_portable(&[group], &mut fields);
    let rest = &mut dst[3 * packed..];
    let len = rest.len();
    rest.copy_from_slice(&fields[0][..len]);
}

/// The masks of the raw fields in four 16-bit lanes: the sign and bits 4..0 of each.
#[cfg(target_arch = "x86_64")]
const RAW16_MASK: u64 = 0x801F_801F_801F_801F;

/// Packs the raw fields of 4-word `groups` into 3 bytes each of `dst`; returns the groups done.
/// `extract` gathers the bits under [`RAW16_MASK`] of a 64-bit word into its low 24 bits.
#[inline(always)]
fn pack16(groups: &[[u8; 8]], dst: &mut [[u8; 3]], extract: impl Fn(u64) -> u64) -> usize {
    for (g, d) in groups.iter().zip(dst.iter_mut()) {
        let f = extract(u64::from_le_bytes(*g));
        d.copy_from_slice(&f.to_le_bytes()[..3]);
    }
    groups.len().min(dst.len())
}

/// [`pack16`] with shifts and masks.
fn pack16_portable(groups: &[[u8; 8]], dst: &mut [[u8; 3]]) -> usize {
    pack16(groups, dst, |x| {
        // Each lane's sign down to bit 5, then the four 6-bit fields packed together.
        let t = (x & 0x8000_8000_8000_8000) >> 10 | (x & 0x001F_001F_001F_001F);
        (t & 0x3F) | (t >> 10 & 0xFC0) | (t >> 20 & 0x3_F000) | (t >> 30 & 0xFC_0000)
    })
}

/// [`pack16`] with one BMI2 `pext`: the fields lie in the payload's bit order already.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "bmi2")]
unsafe fn pack16_bmi2(groups: &[[u8; 8]], dst: &mut [[u8; 3]]) -> usize {
    pack16(groups, dst, |x| std::arch::x86_64::_pext_u64(x, RAW16_MASK))
}

/// [`pack16`] as compiled for this CPU.
fn pack16_detect(groups: &[[u8; 8]], dst: &mut [[u8; 3]]) -> usize {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("bmi2") {
        // SAFETY: the CPU has the feature `pack16_bmi2` is compiled for.
        return unsafe { pack16_bmi2(groups, dst) };
    }
    pack16_portable(groups, dst)
}

/// Decodes a `huffjoint` payload and its raw6 payload `raw` of an `exp16` block straight into
/// the block's bytes `out`, with `keys` as scratch: the split's merge folded into the
/// expansion of keys, so the elements are written once.
pub fn decode_huffman16(
    payload: &[u8],
    raw: &[u8],
    keys: &mut Vec<u8>,
    out: &mut [u8],
) -> Result<(), CodecError> {
    if !out.len().is_multiple_of(2) {
        return Err(CodecError("16-bit block of odd length"));
    }
    let n = out.len() / 2;
    // Never shrunk: a short last block would make the next full one zero the difference.
    if keys.len() < n {
        keys.resize(n, 0);
    }
    let keys = &mut keys[..n];
    check_raw6(raw, n)?;
    let (alphabet, coded) = Alphabet::read(payload)?;
    huffman::decode_below(coded, keys, alphabet.len())?;
    let base = alphabet.bases16();
    let done = expand16_detect(&base, keys, raw, out);
    // The rest, fewer than 32 elements (at most 24 raw bytes), as one run padded with zeros.
    let rest = n - done;
    let (mut k, mut r, mut w) = ([0u8; 32], [0u8; 24], [0u8; 64]);
    k[..rest].copy_from_slice(&keys[done..]);
    let tail = &raw[done / 4 * 3..];
    r[..tail.len()].copy_from_slice(tail);
    expand16_portable(&base, &k, &r, &mut w);
    out[2 * done..].copy_from_slice(&w[..2 * rest]);
    Ok(())
}

/// The words of whole runs of 32 elements, as many as `keys`, `raw` (24 bytes a run) and `out`
/// (64 bytes a run) hold; returns the number of elements done. `spread` deposits the four 6-bit
/// fields in the low 24 bits of its argument under [`RAW16_MASK`] (the inverse of
/// [`pack16`]'s `extract`); bits above 23 are zero.
#[inline(always)]
fn expand16(
    base: &[u32; 256],
    keys: &[u8],
    raw: &[u8],
    out: &mut [u8],
    spread: impl Fn(u64) -> u64,
) -> usize {
    let (keys, _) = keys.as_chunks::<32>();
    let (raw, _) = raw.as_chunks::<24>();
    let (out, _) = out.as_chunks_mut::<64>();
    let mut runs = 0;
    for ((o, k), r) in out.iter_mut().zip(keys).zip(raw) {
        let word =
            |i: usize| u64::from_le_bytes(r[8 * i..8 * i + 8].try_into().unwrap_or_default());
        let (a, b, c) = (word(0), word(1), word(2));
        // Group g's 24 bits start at bit 24g of the 192-bit run a:b:c.
        let groups = [
            a,
            a >> 24,
            a >> 48 | b << 16,
            b >> 8,
            b >> 32,
            b >> 56 | c << 8,
            c >> 16,
            c >> 40,
        ];
        for (g, &w) in groups.iter().enumerate() {
            let v = spread(w & 0xFF_FFFF);
            let k = &k[4 * g..4 * g + 4];
            let b = base[k[0] as usize] as u64
                | (base[k[1] as usize] as u64) << 16
                | (base[k[2] as usize] as u64) << 32
                | (base[k[3] as usize] as u64) << 48;
            o[8 * g..8 * g + 8].copy_from_slice(&(v | b).to_le_bytes());
        }
        runs += 1;
    }
    runs * 32
}

/// [`expand16`] with the fields spread by shifts and masks.
fn expand16_portable(base: &[u32; 256], keys: &[u8], raw: &[u8], out: &mut [u8]) -> usize {
    expand16(base, keys, raw, out, |w| {
        let x = (w & 0x3F) | (w & 0xFC0) << 10 | (w & 0x3_F000) << 20 | (w & 0xFC_0000) << 30;
        (x & 0x001F_001F_001F_001F) | (x << 10 & 0x8000_8000_8000_8000)
    })
}

/// [`expand16`] with the fields spread by one BMI2 `pdep`.
#[cfg(target_arch = "x86_64")]
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
#[cfg(target_arch = "x86_64")]
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
#[cfg(target_arch = "x86_64")]
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
fn expand16_detect(base: &[u32; 256], keys: &[u8], raw: &[u8], out: &mut [u8]) -> usize {
    #[cfg(target_arch = "x86_64")]
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
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("bmi2") {
        // SAFETY: the CPU has the feature `expand16_bmi2` is compiled for.
        return unsafe { expand16_bmi2(base, keys, raw, out) };
    }
    expand16_portable(base, keys, raw, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// BF16-like words: exponents around 120, zeros now and then, random sign and mantissa.
    fn weights(n: usize, seed: u32) -> Vec<u8> {
        let mut x = seed | 1;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        };
        (0..n)
            .flat_map(|_| {
                let r = rnd();
                let e = if r % 97 == 0 { 0 } else { 112 + (r >> 8) % 14 } as u16;
                (((r >> 16) as u16 & 0x807F) | e << 7).to_le_bytes()
            })
            .collect()
    }

    fn encode16(raw: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
        let census = Census::of16(raw);
        let alphabet = census.alphabet()?;
        let (mut j, mut r) = (Vec::new(), Vec::new());
        encode_huffman16(
            &alphabet,
            &census.keys(&alphabet),
            raw,
            &mut Vec::new(),
            &mut j,
        );
        encode_raw16(raw, &mut r);
        Some((j, r))
    }

    #[test]
    fn huffjoint_roundtrip_at_every_tail_length() {
        for n in (0..80).chain([255, 256, 257, 8191, 70_001]) {
            let raw = weights(n, 7 + n as u32);
            let Some((j, r)) = encode16(&raw) else {
                assert!(n < 3, "n={n}");
                continue;
            };
            assert_eq!(r.len(), raw6_len(n));
            // The raw6 payload is the one BEST's planes would give.
            let mut planes = vec![Vec::new(), Vec::new()];
            crate::split::Transform::Exp16.split(&raw, &mut planes);
            let mut r2 = Vec::new();
            encode_raw6(&planes[1], &mut r2);
            assert_eq!(r, r2, "n={n}");
            let mut keys = vec![0xEE; 3];
            let mut out = vec![0xA5u8; 2 * n];
            decode_huffman16(&j, &r, &mut keys, &mut out).unwrap();
            assert_eq!(out, raw, "n={n}");
            // Wrong lengths are errors, and corrupt payloads never panic.
            assert!(decode_huffman16(&j, &r[..r.len() - 1], &mut keys, &mut out).is_err());
            assert!(decode_huffman16(&j, &r, &mut keys, &mut out[..2 * n - 1]).is_err());
            for k in 0..j.len().min(80) {
                let mut bad = j.clone();
                bad[k] ^= 0x24;
                let _ = decode_huffman16(&bad, &r, &mut keys, &mut out);
                let _ = decode_huffman16(&j[..k], &r, &mut keys, &mut out);
            }
        }
    }

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
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("bmi2") {
            let mut z = vec![0u8; 2 * n];
            // SAFETY: the CPU has BMI2.
            assert_eq!(unsafe { expand16_bmi2(&base, &keys, &r, &mut z) }, done);
            assert_eq!(z[..2 * done], raw[..2 * done]);
        }
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") {
            let mut z = vec![0u8; 2 * n];
            // SAFETY: the CPU has AVX2.
            let avx2 = unsafe { expand16_avx2(&base, &keys, &r, &mut z) };
            assert!(n - avx2 < 32);
            assert_eq!(z[..2 * avx2], raw[..2 * avx2]);
        }
    }

    #[test]
    fn alphabets_past_the_key_range_are_refused() {
        // 257 joint symbols: exponents 0..=64 with all four mantissa pairs (260 symbols).
        let raw: Vec<u8> = (0..260u16)
            .flat_map(|s| ((s >> 2) << 7 | (s & 3) << 5).to_le_bytes())
            .collect();
        assert!(Census::of16(&raw).alphabet().is_none());
        assert!(Census::of16(&raw[..512]).alphabet().is_some());
        assert!(Census::of16(&raw[..2]).alphabet().is_none());
        // A Huffman table coding keys past the alphabet is refused.
        let (j, r) = encode16(&raw[..512]).unwrap();
        let (alphabet, coded) = Alphabet::read(&j).unwrap();
        assert_eq!(alphabet.len(), 256);
        let mut small = Vec::new();
        Alphabet {
            used: alphabet.used[..255].to_vec(),
        }
        .write(&mut small);
        small.extend_from_slice(coded);
        let mut out = vec![0u8; 512];
        assert!(decode_huffman16(&small, &r, &mut Vec::new(), &mut out).is_err());
    }
}
