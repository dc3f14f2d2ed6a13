//! Joint symbols for exponent-aligned float planes, shared by BEST's [`crate::codec::joint`] codec
//! (adaptive range coding) and FAST's [`crate::codec::huffjoint`] codec (Huffman coding).
//!
//! The exponent byte `e` and the top two mantissa bits `m` (bits 6..5 of the sign/mantissa
//! byte) form the symbol `e * 4 + m`; the distribution of those mantissa bits depends on the
//! exponent, so coding the pair as one symbol captures what a separate exponent coder misses,
//! at one decode step per element. A block's symbols are replaced by their rank ("key") in the
//! block's alphabet, at most [`MAX_USED`] of them, so keys are bytes and the byte coders apply.
//! The other six bits (the sign and bits 4..0) are close to uniform and go to a
//! [`crate::codec::raw6`] plane, 6 bits per element.
//!
//! Serialised alphabet (see docs/FORMAT.md): a 32-byte bitmap of the exponents used, then a
//! 4-bit mask of the mantissa pairs used per used exponent, two per byte, low nibble first.

use crate::error::CodecError;

/// Number of joint symbols `e * 4 + m`.
pub const SYMBOLS: usize = 1024;
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
    pub(crate) used: Vec<u16>,
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
    pub(crate) fn from_used(seen: &[bool; SYMBOLS]) -> Option<Alphabet> {
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
    #[cfg(feature = "internals")]
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
