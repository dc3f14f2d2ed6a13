//! `huffjoint` (id 8): FAST's coder of an `exp16` block's joint symbols (see
//! [`crate::entropy::alphabet`]): the keys Huffman-coded, the other 6 bits of each element as a
//! [`super::raw6`] plane 1. It codes and decodes straight from and into the block's 16-bit
//! words, the transform's split and merge folded in, so each element is written once; the
//! expansion of keys and raw bits into words has AVX-512 VBMI, AVX2 and BMI2 kernels
//! (`x86.rs`) beside the portable code here.
//!
//! Payload: the [`Alphabet`], then the keys as a [`super::huffman`] plane payload.

#[cfg(target_arch = "x86_64")]
mod x86;

use super::spec::{Codec, Decode, Slot, Spec};
use super::{huffman, raw6};
use crate::entropy::alphabet::{Alphabet, MAX_USED, SYMBOLS};
use crate::error::CodecError;
use crate::transform::Transform;
#[cfg(target_arch = "x86_64")]
use x86::{expand16_detect, pack16_detect};
#[cfg(not(target_arch = "x86_64"))]
use {expand16_portable as expand16_detect, pack16_portable as pack16_detect};

/// The `huffjoint` codec: plane 0 of an `exp16` block, with [`raw6`] as plane 1.
pub static SPEC: Spec = Spec {
    id: 8,
    name: "huffjoint",
    fits: |at: Slot, coded_len| {
        at.plane == 0
            && at.transform == Transform::Exp16
            && raw6::pair_fits(coded_len, at.plane_len)
    },
    partner: Some(Codec::Raw6),
    decode: Decode::Pair {
        both: None,
        words: Some(decode),
    },
};

/// The joint symbol of a BF16 word: its bits 14..5, the exponent and mantissa bits 6..5.
#[inline(always)]
pub(crate) fn symbol16(w: u16) -> usize {
    (w >> 5 & 0x3FF) as usize
}

/// The 16-bit words of an `exp16` block `raw` (whose length is even).
pub(crate) fn words(raw: &[u8]) -> impl Iterator<Item = u16> + '_ {
    raw.chunks_exact(2)
        .map(|c| u16::from_le(bytemuck::pod_read_unaligned(c)))
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
/// `alphabet`: the alphabet, then the keys as a Huffman plane payload. `keys` is scratch. Plane 1 is [`encode_raw16`].
pub fn encode(alphabet: &Alphabet, raw: &[u8], keys: &mut Vec<u8>, out: &mut Vec<u8>) {
    alphabet.write(out);
    let key = alphabet.key_table();
    let (pairs, _) = raw.as_chunks::<2>();
    keys.resize(pairs.len(), 0);
    for (k, p) in keys.iter_mut().zip(pairs) {
        *k = key[symbol16(u16::from_le_bytes(*p))];
    }
    huffman::encode(keys, out);
}

/// The raw6 payload (plane 1) of the `exp16` block `raw`: each word's sign and bits 4..0, the
/// fields [`encode_raw6`] takes from the sign/mantissa plane, taken from the words directly.
pub fn encode_raw16(raw: &[u8], out: &mut Vec<u8>) {
    let n = raw.len() / 2;
    let start = out.len();
    out.resize(start + raw6::len(n), 0);
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

/// Packs the raw fields of 4-word `groups` into 3 bytes each of `dst`; returns the groups done.
/// `extract` gathers the bits under [`RAW16_MASK`] of a 64-bit word into its low 24 bits.
#[inline(always)]
pub(crate) fn pack16(
    groups: &[[u8; 8]],
    dst: &mut [[u8; 3]],
    extract: impl Fn(u64) -> u64,
) -> usize {
    for (g, d) in groups.iter().zip(dst.iter_mut()) {
        let f = extract(u64::from_le_bytes(*g));
        d.copy_from_slice(&f.to_le_bytes()[..3]);
    }
    groups.len().min(dst.len())
}

/// [`pack16`] with shifts and masks.
pub(crate) fn pack16_portable(groups: &[[u8; 8]], dst: &mut [[u8; 3]]) -> usize {
    pack16(groups, dst, |x| {
        // Each lane's sign down to bit 5, then the four 6-bit fields packed together.
        let t = (x & 0x8000_8000_8000_8000) >> 10 | (x & 0x001F_001F_001F_001F);
        (t & 0x3F) | (t >> 10 & 0xFC0) | (t >> 20 & 0x3_F000) | (t >> 30 & 0xFC_0000)
    })
}

/// Decodes a `huffjoint` payload and its raw6 payload `raw` of an `exp16` block straight into
/// the block's bytes `out`, with `keys` as scratch: the split's merge folded into the
/// expansion of keys, so the elements are written once.
pub fn decode(
    payload: &[u8],
    raw: &[u8],
    keys: &mut Vec<u8>,
    out: &mut [u8],
) -> Result<(), CodecError> {
    decode_words(raw, keys, out, |keys| {
        let (alphabet, coded) = Alphabet::read(payload)?;
        huffman::decode_below(coded, keys, alphabet.len())?;
        Ok(alphabet)
    })
}

/// Decodes the elements of an `exp16` block `out` coded as joint keys and the raw6 payload
/// `raw`: `decode_keys` writes every element's key into the scratch it is given (`keys`,
/// resized to the elements) and returns the block's alphabet; the keys and raw fields are
/// then expanded into the elements (the transform's merge folded in).
pub(crate) fn decode_words(
    raw: &[u8],
    keys: &mut Vec<u8>,
    out: &mut [u8],
    decode_keys: impl FnOnce(&mut [u8]) -> Result<Alphabet, CodecError>,
) -> Result<(), CodecError> {
    let keys = key_scratch(keys, out)?;
    raw6::check(raw, keys.len())?;
    let alphabet = decode_keys(keys)?;
    expand_words(&alphabet, keys, raw, out);
    Ok(())
}

/// The scratch for the keys of the `exp16` block `out`, one an element, from `keys`.
pub(crate) fn key_scratch<'k>(
    keys: &'k mut Vec<u8>,
    out: &[u8],
) -> Result<&'k mut [u8], CodecError> {
    if !out.len().is_multiple_of(2) {
        return Err(CodecError("16-bit block of odd length"));
    }
    let n = out.len() / 2;
    // Never shrunk: a short last block would make the next full one zero the difference.
    if keys.len() < n {
        keys.resize(n, 0);
    }
    Ok(&mut keys[..n])
}

/// Expands the keys `keys` of `alphabet` and the raw6 payload `raw` of as many elements
/// (checked by the caller, [`raw6::check`]) into the elements of the `exp16` block `out`.
pub(crate) fn expand_words(alphabet: &Alphabet, keys: &[u8], raw: &[u8], out: &mut [u8]) {
    let n = keys.len();
    debug_assert_eq!(raw.len(), raw6::len(n));
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
}

/// The words of whole runs of 32 elements, as many as `keys`, `raw` (24 bytes a run) and `out`
/// (64 bytes a run) hold; returns the number of elements done. `spread` deposits the four 6-bit
/// fields in the low 24 bits of its argument under [`RAW16_MASK`] (the inverse of
/// [`pack16`]'s `extract`); bits above 23 are zero.
#[inline(always)]
pub(crate) fn expand16(
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
pub(crate) fn expand16_portable(
    base: &[u32; 256],
    keys: &[u8],
    raw: &[u8],
    out: &mut [u8],
) -> usize {
    expand16(base, keys, raw, out, |w| {
        let x = (w & 0x3F) | (w & 0xFC0) << 10 | (w & 0x3_F000) << 20 | (w & 0xFC_0000) << 30;
        (x & 0x001F_001F_001F_001F) | (x << 10 & 0x8000_8000_8000_8000)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// BF16-like words: exponents around 120, zeros now and then, random sign and mantissa.
    pub(super) fn weights(n: usize, seed: u32) -> Vec<u8> {
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
        encode(&alphabet, raw, &mut Vec::new(), &mut j);
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
            assert_eq!(r.len(), raw6::len(n));
            // The raw6 payload is the one BEST's planes would give.
            let mut planes = vec![Vec::new(), Vec::new()];
            Transform::Exp16.split(&raw, &mut planes);
            let mut r2 = Vec::new();
            raw6::encode(&planes[1], &mut r2);
            assert_eq!(r, r2, "n={n}");
            let mut keys = vec![0xEE; 3];
            let mut out = vec![0xA5u8; 2 * n];
            decode(&j, &r, &mut keys, &mut out).unwrap();
            assert_eq!(out, raw, "n={n}");
            // Wrong lengths are errors, and corrupt payloads never panic.
            assert!(decode(&j, &r[..r.len() - 1], &mut keys, &mut out).is_err());
            assert!(decode(&j, &r, &mut keys, &mut out[..2 * n - 1]).is_err());
            for k in 0..j.len().min(80) {
                let mut bad = j.clone();
                bad[k] ^= 0x24;
                let _ = decode(&bad, &r, &mut keys, &mut out);
                let _ = decode(&j[..k], &r, &mut keys, &mut out);
            }
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
        assert!(decode(&small, &r, &mut Vec::new(), &mut out).is_err());
    }
}
