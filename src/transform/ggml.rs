//! The planes of ggml's quantized blocks (format version 6): each field of the block gathered
//! across the blocks of a block of the archive, so that scales, mins and quants each meet a
//! coder of their own.
//!
//! An F16 scale becomes two planes, its high byte (sign, exponent, top mantissa bits) and its
//! low byte; 4-bit quants stay as the bytes that pack them in pairs; 5- and 6-bit quants are
//! joined with their high bits into one byte per value ([`Joining`]); packed 6-bit scales
//! and the other fields stay bytes. One ggml block is the transform's unit: plane `k` holds
//! `bytes(k)` bytes per unit. Planes 0 and 1 are the high and low bytes of the block's (first)
//! scale, or of Q8_K's F32 scale the top two, so that BEST may code the low byte given the
//! high one (codec `byctx`).

use crate::gguf::types::{GgmlType, Joining, JOIN_Q5_0, JOIN_Q5_1, JOIN_Q5_K, JOIN_Q6_K, TYPES};

/// One plane of a ggml block layout.
#[derive(Clone, Copy, Debug)]
pub enum Piece {
    /// `len` bytes of each block, from offset `at` on, every `step` bytes.
    Bytes {
        /// Offset of the first byte in the block.
        at: u16,
        /// Bytes taken.
        len: u16,
        /// Distance between them.
        step: u8,
    },
    /// The block's quants joined with their high bits, one byte per value, as the type's
    /// joining does it.
    Joined(Joining),
}

const fn bytes(at: u16, len: u16) -> Piece {
    Piece::Bytes { at, len, step: 1 }
}

/// The high byte of the 16-bit value at `at`.
const fn hi(at: u16) -> Piece {
    Piece::Bytes {
        at: at + 1,
        len: 1,
        step: 1,
    }
}

/// The low byte of the 16-bit value at `at`.
const fn lo(at: u16) -> Piece {
    bytes(at, 1)
}

/// A quantized ggml type's planes.
#[derive(Debug)]
pub struct Layout {
    /// The ggml type.
    ty: &'static GgmlType,
    /// The planes, in order.
    pub planes: &'static [Piece],
}

/// The layouts of the types the ggml transforms code, in transform id order (from
/// [`FIRST_ID`]).
pub const LAYOUTS: [Layout; 12] = [
    Layout {
        ty: named("Q4_0"),
        planes: &[hi(0), lo(0), bytes(2, 16)],
    },
    Layout {
        ty: named("Q4_1"),
        planes: &[hi(0), lo(0), hi(2), lo(2), bytes(4, 16)],
    },
    Layout {
        ty: named("Q5_0"),
        planes: &[hi(0), lo(0), Piece::Joined(JOIN_Q5_0)],
    },
    Layout {
        ty: named("Q5_1"),
        planes: &[hi(0), lo(0), hi(2), lo(2), Piece::Joined(JOIN_Q5_1)],
    },
    Layout {
        ty: named("Q8_0"),
        planes: &[hi(0), lo(0), bytes(2, 32)],
    },
    Layout {
        ty: named("Q8_1"),
        planes: &[hi(0), lo(0), hi(2), lo(2), bytes(4, 32)],
    },
    Layout {
        ty: named("Q2_K"),
        planes: &[hi(80), lo(80), hi(82), lo(82), bytes(0, 16), bytes(16, 64)],
    },
    Layout {
        ty: named("Q3_K"),
        planes: &[hi(108), lo(108), bytes(0, 32), bytes(32, 64), bytes(96, 12)],
    },
    Layout {
        ty: named("Q4_K"),
        planes: &[hi(0), lo(0), hi(2), lo(2), bytes(4, 12), bytes(16, 128)],
    },
    Layout {
        ty: named("Q5_K"),
        planes: &[
            hi(0),
            lo(0),
            hi(2),
            lo(2),
            bytes(4, 12),
            Piece::Joined(JOIN_Q5_K),
        ],
    },
    Layout {
        ty: named("Q6_K"),
        planes: &[hi(208), lo(208), Piece::Joined(JOIN_Q6_K), bytes(192, 16)],
    },
    Layout {
        ty: named("Q8_K"),
        planes: &[
            bytes(3, 1),
            bytes(2, 1),
            bytes(1, 1),
            bytes(0, 1),
            bytes(4, 256),
            Piece::Bytes {
                at: 261,
                len: 16,
                step: 2,
            },
            Piece::Bytes {
                at: 260,
                len: 16,
                step: 2,
            },
        ],
    },
];

/// The type of the table named `name`, found when the layouts are compiled: a name missing
/// from the table fails the build, not a run.
const fn named(name: &str) -> &'static GgmlType {
    let mut k = 0;
    while k < TYPES.len() {
        let (a, b) = (TYPES[k].name.as_bytes(), name.as_bytes());
        let mut same = a.len() == b.len();
        let mut i = 0;
        while same && i < a.len() {
            same = a[i] == b[i];
            i += 1;
        }
        if same {
            return &TYPES[k];
        }
        k += 1;
    }
    panic!("a ggml layout names a type missing from the table")
}

/// The transform id of the first layout.
pub const FIRST_ID: u8 = 14;

impl Layout {
    /// The ggml type.
    pub fn ggml(&self) -> &'static GgmlType {
        self.ty
    }

    /// Bytes of plane `k` per block.
    pub fn bytes(&self, k: usize) -> usize {
        match self.planes[k] {
            Piece::Bytes { len, .. } => len as usize,
            Piece::Joined(_) => self.ggml().block_values as usize,
        }
    }

    /// Splits whole blocks `raw` into the layout's planes (each resized to its length).
    pub fn split(&self, raw: &[u8], planes: &mut [Vec<u8>]) {
        let t = self.ggml();
        let width = t.block_bytes as usize;
        let units = raw.len() / width;
        // The planes of one byte per block (a scale's high and low bytes) are gathered in one
        // pass: a pass each cost a quarter of a Q4_1 file's encode.
        let mut singles: Vec<(usize, &mut [u8])> = Vec::new();
        for (k, (piece, plane)) in self.planes.iter().zip(planes.iter_mut()).enumerate() {
            let n = self.bytes(k);
            plane.resize(units * n, 0);
            let blocks = raw.chunks_exact(width).zip(plane.chunks_exact_mut(n));
            match *piece {
                Piece::Bytes { at, len: 1, .. } => singles.push((at as usize, &mut plane[..])),
                Piece::Bytes { at, len, step: 1 } => gather(blocks, at as usize, len as usize),
                Piece::Bytes { at, step, .. } => blocks.for_each(|(b, p)| {
                    let from = b[at as usize..].iter().step_by(step as usize);
                    p.iter_mut().zip(from).for_each(|(o, &v)| *o = v);
                }),
                Piece::Joined(Joining { join, .. }) => blocks.for_each(|(b, p)| join(b, p)),
            }
        }
        match &mut singles[..] {
            [(a, pa), (b, pb)] => {
                let planes = pa.iter_mut().zip(pb.iter_mut());
                for (blk, (x, y)) in raw.chunks_exact(width).zip(planes) {
                    (*x, *y) = (blk[*a], blk[*b]);
                }
            }
            [(a, pa), (b, pb), (c, pc), (d, pd)] => {
                let planes = pa
                    .iter_mut()
                    .zip(pb.iter_mut())
                    .zip(pc.iter_mut().zip(pd.iter_mut()));
                for (blk, ((x, y), (z, w))) in raw.chunks_exact(width).zip(planes) {
                    (*x, *y, *z, *w) = (blk[*a], blk[*b], blk[*c], blk[*d]);
                }
            }
            singles => {
                for (i, blk) in raw.chunks_exact(width).enumerate() {
                    singles.iter_mut().for_each(|(at, p)| p[i] = blk[*at]);
                }
            }
        }
    }

    /// The inverse of [`Layout::split`]: `planes` must have the lengths it gives `out`.
    pub fn merge(&self, planes: &[&[u8]], out: &mut [u8]) {
        let t = self.ggml();
        let width = t.block_bytes as usize;
        for (k, (piece, plane)) in self.planes.iter().zip(planes).enumerate() {
            let n = self.bytes(k);
            let blocks = out.chunks_exact_mut(width).zip(plane.chunks_exact(n));
            match *piece {
                Piece::Bytes { at, len, step: 1 } => {
                    blocks.for_each(|(b, p)| copy(&mut b[at as usize..], p, len as usize))
                }
                Piece::Bytes { at, step, .. } => blocks.for_each(|(b, p)| {
                    let to = b[at as usize..].iter_mut().step_by(step as usize);
                    to.zip(p).for_each(|(o, &v)| *o = v);
                }),
                Piece::Joined(Joining { unjoin, .. }) => blocks.for_each(|(b, p)| unjoin(p, b)),
            }
        }
    }
}

/// Copies `len` bytes from `at` on of each block to its unit of the plane, in a loop compiled
/// for each length the layouts use.
fn gather<'a>(blocks: impl Iterator<Item = (&'a [u8], &'a mut [u8])>, at: usize, len: usize) {
    #[inline(always)]
    fn fixed<'a, const N: usize>(
        blocks: impl Iterator<Item = (&'a [u8], &'a mut [u8])>,
        at: usize,
    ) {
        blocks.for_each(|(b, p)| p[..N].copy_from_slice(&b[at..at + N]));
    }
    match len {
        12 => fixed::<12>(blocks, at),
        16 => fixed::<16>(blocks, at),
        32 => fixed::<32>(blocks, at),
        64 => fixed::<64>(blocks, at),
        128 => fixed::<128>(blocks, at),
        _ => blocks.for_each(|(b, p)| p[..len].copy_from_slice(&b[at..at + len])),
    }
}

/// Copies the first `len` bytes of `from` to `to`. The lengths the layouts use are constants
/// here, so that the copy of each block's field compiles to a few moves instead of a call to
/// `memcpy` (which took a fifth of a Q4_1 file's decode).
#[inline(always)]
fn copy(to: &mut [u8], from: &[u8], len: usize) {
    #[inline(always)]
    fn fixed<const N: usize>(to: &mut [u8], from: &[u8]) {
        to[..N].copy_from_slice(&from[..N]);
    }
    match len {
        1 => to[0] = from[0],
        12 => fixed::<12>(to, from),
        16 => fixed::<16>(to, from),
        32 => fixed::<32>(to, from),
        64 => fixed::<64>(to, from),
        128 => fixed::<128>(to, from),
        _ => to[..len].copy_from_slice(&from[..len]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::types::joining;

    /// Each layout covers every byte of its block once (the joined quants all bits of the
    /// quant fields), so a block of any bytes splits and merges back.
    #[test]
    fn layouts_cover_their_blocks() {
        let mut rnd = crate::test_rng(3);
        for layout in &LAYOUTS {
            let t = layout.ggml();
            assert!(!t.fields.is_empty(), "{}", layout.ggml().name);
            let raw: Vec<u8> = (0..3 * t.block_bytes).map(|_| rnd() as u8).collect();
            let mut planes = vec![Vec::new(); layout.planes.len()];
            layout.split(&raw, &mut planes);
            for (k, p) in planes.iter().enumerate() {
                assert_eq!(
                    p.len(),
                    3 * layout.bytes(k),
                    "{} plane {k}",
                    layout.ggml().name
                );
            }
            // A joined plane joins as its type does.
            for piece in layout.planes {
                if let Piece::Joined(j) = piece {
                    let (mut mine, mut its) = (vec![0; 256], vec![0; 256]);
                    (j.join)(&raw, &mut mine);
                    (joining(t).expect("joined quants").join)(&raw, &mut its);
                    assert_eq!(mine, its, "{}", t.name);
                }
            }
            let views: Vec<&[u8]> = planes.iter().map(|p| &p[..]).collect();
            let mut out = vec![0u8; raw.len()];
            layout.merge(&views, &mut out);
            assert_eq!(out, raw, "{}", layout.ggml().name);
            // A byte flipped anywhere in a block changes some plane.
            for i in 0..t.block_bytes as usize {
                let mut other = raw.clone();
                other[i] ^= 0x10;
                let mut planes2 = vec![Vec::new(); layout.planes.len()];
                layout.split(&other, &mut planes2);
                assert_ne!(planes, planes2, "{} byte {i}", layout.ggml().name);
            }
        }
    }
}
