//! ggml's tensor types as GGUF files name them: the block each quantized type packs its values
//! in, and the fields of that block.
//!
//! The layouts are those of ggml's `ggml-common.h` (the `block_*` structs), little-endian. A
//! field is a run of bytes at the same place in every block; [`Packing`] says how its bytes
//! hold symbols, so that a field can be measured or coded as what it is (F16 scales as 16-bit
//! values, 4-bit quants as nibbles) instead of as bytes.

/// How the bytes of a block field hold its symbols.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Packing {
    /// Little-endian IEEE half floats (scales, mins).
    F16,
    /// Little-endian IEEE single floats.
    F32,
    /// Little-endian 16-bit integers.
    I16,
    /// One symbol a byte (8-bit quants, packed 6-bit scales).
    Bytes,
    /// Two 4-bit symbols a byte, low nibble first.
    Nibbles,
    /// Four 2-bit symbols a byte, lowest bits first.
    Crumbs,
    /// Eight 1-bit symbols a byte (the high bits of 5-bit quants, Q3_K's mask).
    Bits,
}

impl Packing {
    /// Bits of one symbol.
    pub fn symbol_bits(self) -> u32 {
        match self {
            Packing::F32 => 32,
            Packing::F16 | Packing::I16 => 16,
            Packing::Bytes => 8,
            Packing::Nibbles => 4,
            Packing::Crumbs => 2,
            Packing::Bits => 1,
        }
    }
}

/// One field of a quantized block: `len` bytes at `offset` in every block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    /// What the field holds, as ggml names it (`d`, `dmin`, `scales`, `qs`, `qh`, ...).
    pub name: &'static str,
    /// Offset in the block, in bytes.
    pub offset: usize,
    /// Length in bytes.
    pub len: usize,
    /// How its bytes hold symbols.
    pub packing: Packing,
}

const fn field(name: &'static str, offset: usize, len: usize, packing: Packing) -> Field {
    Field {
        name,
        offset,
        len,
        packing,
    }
}

use crate::tensor::Dtype;
use Packing::{Bits, Bytes, Crumbs, Nibbles, F16, F32, I16};

/// A ggml tensor type: its id in GGUF files, name, and block geometry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GgmlType {
    /// The id GGUF files store (`ggml_type`).
    pub id: u32,
    /// ggml's name for it (`Q4_K`, `F16`, ...).
    pub name: &'static str,
    /// Values in one block (1 for plain numbers).
    pub block_values: u32,
    /// Bytes of one block.
    pub block_bytes: u32,
    /// The block's fields, in order, covering it exactly; empty where the layout is not
    /// described (the block is then one run of bytes).
    pub fields: &'static [Field],
}

const fn plain(id: u32, name: &'static str, bytes: u32) -> GgmlType {
    GgmlType {
        id,
        name,
        block_values: 1,
        block_bytes: bytes,
        fields: &[],
    }
}

const fn quant(
    id: u32,
    name: &'static str,
    block_values: u32,
    block_bytes: u32,
    fields: &'static [Field],
) -> GgmlType {
    GgmlType {
        id,
        name,
        block_values,
        block_bytes,
        fields,
    }
}

/// Every type this build knows, by id. Ids 4, 5 and 31 to 33, 36 to 38 were retired by ggml.
pub const TYPES: &[GgmlType] = &[
    plain(0, "F32", 4),
    plain(1, "F16", 2),
    quant(
        2,
        "Q4_0",
        32,
        18,
        &[field("d", 0, 2, F16), field("qs", 2, 16, Nibbles)],
    ),
    quant(
        3,
        "Q4_1",
        32,
        20,
        &[
            field("d", 0, 2, F16),
            field("m", 2, 2, F16),
            field("qs", 4, 16, Nibbles),
        ],
    ),
    quant(
        6,
        "Q5_0",
        32,
        22,
        &[
            field("d", 0, 2, F16),
            field("qh", 2, 4, Bits),
            field("qs", 6, 16, Nibbles),
        ],
    ),
    quant(
        7,
        "Q5_1",
        32,
        24,
        &[
            field("d", 0, 2, F16),
            field("m", 2, 2, F16),
            field("qh", 4, 4, Bits),
            field("qs", 8, 16, Nibbles),
        ],
    ),
    quant(
        8,
        "Q8_0",
        32,
        34,
        &[field("d", 0, 2, F16), field("qs", 2, 32, Bytes)],
    ),
    quant(
        9,
        "Q8_1",
        32,
        36,
        &[
            field("d", 0, 2, F16),
            field("s", 2, 2, F16),
            field("qs", 4, 32, Bytes),
        ],
    ),
    quant(
        10,
        "Q2_K",
        256,
        84,
        &[
            field("scales", 0, 16, Nibbles),
            field("qs", 16, 64, Crumbs),
            field("d", 80, 2, F16),
            field("dmin", 82, 2, F16),
        ],
    ),
    quant(
        11,
        "Q3_K",
        256,
        110,
        &[
            field("hmask", 0, 32, Bits),
            field("qs", 32, 64, Crumbs),
            field("scales", 96, 12, Bytes),
            field("d", 108, 2, F16),
        ],
    ),
    quant(
        12,
        "Q4_K",
        256,
        144,
        &[
            field("d", 0, 2, F16),
            field("dmin", 2, 2, F16),
            field("scales", 4, 12, Bytes),
            field("qs", 16, 128, Nibbles),
        ],
    ),
    quant(
        13,
        "Q5_K",
        256,
        176,
        &[
            field("d", 0, 2, F16),
            field("dmin", 2, 2, F16),
            field("scales", 4, 12, Bytes),
            field("qh", 16, 32, Bits),
            field("qs", 48, 128, Nibbles),
        ],
    ),
    quant(
        14,
        "Q6_K",
        256,
        210,
        &[
            field("ql", 0, 128, Nibbles),
            field("qh", 128, 64, Crumbs),
            field("scales", 192, 16, Bytes),
            field("d", 208, 2, F16),
        ],
    ),
    quant(
        15,
        "Q8_K",
        256,
        292,
        &[
            field("d", 0, 4, F32),
            field("qs", 4, 256, Bytes),
            field("bsums", 260, 32, I16),
        ],
    ),
    quant(16, "IQ2_XXS", 256, 66, &[]),
    quant(17, "IQ2_XS", 256, 74, &[]),
    quant(18, "IQ3_XXS", 256, 98, &[]),
    quant(19, "IQ1_S", 256, 50, &[]),
    quant(20, "IQ4_NL", 32, 18, &[]),
    quant(21, "IQ3_S", 256, 110, &[]),
    quant(22, "IQ2_S", 256, 82, &[]),
    quant(23, "IQ4_XS", 256, 136, &[]),
    plain(24, "I8", 1),
    plain(25, "I16", 2),
    plain(26, "I32", 4),
    plain(27, "I64", 8),
    plain(28, "F64", 8),
    quant(29, "IQ1_M", 256, 56, &[]),
    plain(30, "BF16", 2),
    quant(34, "TQ1_0", 256, 54, &[]),
    quant(35, "TQ2_0", 256, 66, &[]),
    quant(39, "MXFP4", 32, 17, &[]),
];

impl GgmlType {
    /// The type of id `id`, if this build knows it.
    pub fn from_id(id: u32) -> Option<&'static GgmlType> {
        TYPES.iter().find(|t| t.id == id)
    }

    /// The safetensors dtype of a plain type that has one (`F32`, `F16`, `BF16`, the integers,
    /// `F64`), else `None`.
    pub fn dtype(&self) -> Option<Dtype> {
        Some(match self.name {
            "F32" => Dtype::F32,
            "F16" => Dtype::F16,
            "BF16" => Dtype::BF16,
            "F64" => Dtype::F64,
            "I8" => Dtype::I8,
            "I16" => Dtype::I16,
            "I32" => Dtype::I32,
            "I64" => Dtype::I64,
            _ => return None,
        })
    }

    /// Whether this is a plain number type (one value a block).
    pub fn is_plain(&self) -> bool {
        self.block_values == 1
    }

    /// Bytes of a row of `values` values, or `None` when `values` is not a whole number of
    /// blocks or the size overflows.
    pub fn row_bytes(&self, values: u64) -> Option<u64> {
        if !values.is_multiple_of(u64::from(self.block_values)) {
            return None;
        }
        (values / u64::from(self.block_values)).checked_mul(u64::from(self.block_bytes))
    }
}

/// The types whose quants are split into low bits and high bits held apart, with the bits a
/// whole quant has: what [`join_quants`] puts back together.
pub fn joined_quant_bits(t: &GgmlType) -> Option<u32> {
    match t.name {
        "Q5_0" | "Q5_1" | "Q5_K" => Some(5),
        "Q6_K" => Some(6),
        _ => None,
    }
}

/// Puts each quant of `block` (one block of `t`, a type of [`joined_quant_bits`]) back
/// together from its low 4 bits and its high bits, as ggml's dequantization pairs them, into
/// `out` (one entry per value of the block, in the block's value order). Returns `false` for
/// other types.
pub fn join_quants(t: &GgmlType, block: &[u8], out: &mut [u8]) -> bool {
    joining(t).map(|j| (j.join)(block, out)).is_some()
}

/// The inverse of [`join_quants`]: writes the low and high bits of each quant of `values` (one
/// per value of a block of `t`, in the block's value order; bits above the quant's are
/// ignored) into their fields of `block`, leaving its other bytes as they are. Returns `false`
/// for types without joined quants.
pub fn unjoin_quants(t: &GgmlType, values: &[u8], block: &mut [u8]) -> bool {
    joining(t).map(|j| (j.unjoin)(values, block)).is_some()
}

/// How the quants of a type of [`joined_quant_bits`] are joined: one block at a time, by
/// functions found once per type rather than once per block.
#[derive(Clone, Copy, Debug)]
pub struct Joining {
    /// [`join_quants`] for the type: a block, then its values.
    pub join: fn(&[u8], &mut [u8]),
    /// [`unjoin_quants`] for the type: the values, then the block.
    pub unjoin: fn(&[u8], &mut [u8]),
}

/// Q5_0's joining.
pub const JOIN_Q5_0: Joining = Joining {
    join: join_q5::<2>,
    unjoin: unjoin_q5::<2>,
};
/// Q5_1's joining.
pub const JOIN_Q5_1: Joining = Joining {
    join: join_q5::<4>,
    unjoin: unjoin_q5::<4>,
};
/// Q5_K's joining.
pub const JOIN_Q5_K: Joining = Joining {
    join: join_q5_k,
    unjoin: unjoin_q5_k,
};
/// Q6_K's joining.
pub const JOIN_Q6_K: Joining = Joining {
    join: join_q6_k,
    unjoin: unjoin_q6_k,
};

/// The joining of `t`'s quants, `None` for types without joined quants.
pub fn joining(t: &GgmlType) -> Option<Joining> {
    Some(match t.name {
        "Q5_0" => JOIN_Q5_0,
        "Q5_1" => JOIN_Q5_1,
        "Q5_K" => JOIN_Q5_K,
        "Q6_K" => JOIN_Q6_K,
        _ => return None,
    })
}

/// Q5_0 and Q5_1, whose 32 high bits (`u32`) start at byte `AT` and whose 16 bytes of low
/// nibbles follow: value `j` is byte `j`'s low nibble, value `j + 16` its high one.
fn join_q5<const AT: usize>(block: &[u8], out: &mut [u8]) {
    let high = u32::from_le(bytemuck::pod_read_unaligned(&block[AT..AT + 4]));
    let qs = &block[AT + 4..AT + 20];
    let (lo, hi) = out[..32].split_at_mut(16);
    for j in 0..16 {
        lo[j] = (qs[j] & 0xf) | ((high >> j) as u8 & 1) << 4;
        hi[j] = (qs[j] >> 4) | ((high >> (j + 16)) as u8 & 1) << 4;
    }
}

/// Bit 4 of each of the 8 bytes of `x`, gathered into one byte (byte `i`'s bit as bit `i`).
fn bits_4(x: u64) -> u8 {
    // Each byte's bit lands at bit 56 + i of the product, and no two products share a bit.
    (((x >> 4) & 0x0101_0101_0101_0101).wrapping_mul(0x0102_0408_1020_4080) >> 56) as u8
}

fn unjoin_q5<const AT: usize>(values: &[u8], block: &mut [u8]) {
    let v = &values[..32];
    let mut high = [0u8; 4];
    for (h, eight) in high.iter_mut().zip(v.chunks_exact(8)) {
        *h = bits_4(u64::from_le(bytemuck::pod_read_unaligned(eight)));
    }
    let (qh, qs) = block[AT..AT + 20].split_at_mut(4);
    qh.copy_from_slice(&high);
    for j in 0..16 {
        qs[j] = (v[j] & 0xf) | (v[j + 16] & 0xf) << 4;
    }
}

/// Q5_K: 32 bytes of high bits from byte 16, then 128 bytes of low nibbles in 4 groups of 32;
/// group `g` holds values `64 g + l` (low nibble) and `64 g + 32 + l` (high nibble), whose high
/// bits are bits `2 g` and `2 g + 1` of high byte `l`.
fn join_q5_k(block: &[u8], out: &mut [u8]) {
    let (qh, qs) = (&block[16..48], &block[48..176]);
    for (g, ql) in qs.chunks_exact(32).enumerate() {
        for (l, &q) in ql.iter().enumerate() {
            out[64 * g + l] = (q & 0xf) | ((qh[l] >> (2 * g)) & 1) << 4;
            out[64 * g + 32 + l] = (q >> 4) | ((qh[l] >> (2 * g + 1)) & 1) << 4;
        }
    }
}

fn unjoin_q5_k(values: &[u8], block: &mut [u8]) {
    let (qh, qs) = block[16..176].split_at_mut(32);
    qh.fill(0);
    for (g, ql) in qs.chunks_exact_mut(32).enumerate() {
        for (l, q) in ql.iter_mut().enumerate() {
            let (a, b) = (values[64 * g + l], values[64 * g + 32 + l]);
            *q = (a & 0xf) | (b & 0xf) << 4;
            qh[l] |= (a >> 4 & 1) << (2 * g) | (b >> 4 & 1) << (2 * g + 1);
        }
    }
}

/// Q6_K: 128 bytes of low nibbles, then 64 of 2-bit high parts, in two halves of 128 values.
fn join_q6_k(block: &[u8], out: &mut [u8]) {
    for half in 0..2 {
        let ql = &block[64 * half..64 * half + 64];
        let qh = &block[128 + 32 * half..160 + 32 * half];
        let out = &mut out[128 * half..128 * half + 128];
        for l in 0..32 {
            out[l] = (ql[l] & 0xf) | (qh[l] & 3) << 4;
            out[l + 32] = (ql[l + 32] & 0xf) | ((qh[l] >> 2) & 3) << 4;
            out[l + 64] = (ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4;
            out[l + 96] = (ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4;
        }
    }
}

fn unjoin_q6_k(values: &[u8], block: &mut [u8]) {
    for half in 0..2 {
        let v = &values[128 * half..128 * half + 128];
        let (lows, highs) = block.split_at_mut(128);
        let ql = &mut lows[64 * half..64 * half + 64];
        let qh = &mut highs[32 * half..32 * half + 32];
        for l in 0..32 {
            ql[l] = (v[l] & 0xf) | (v[l + 64] & 0xf) << 4;
            ql[l + 32] = (v[l + 32] & 0xf) | (v[l + 96] & 0xf) << 4;
            qh[l] = (v[l] >> 4 & 3)
                | (v[l + 32] >> 4 & 3) << 2
                | (v[l + 64] >> 4 & 3) << 4
                | (v[l + 96] >> 4 & 3) << 6;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Joining then unjoining the quants of any block gives the block back.
    #[test]
    fn unjoin_inverts_join() {
        let mut rnd = crate::test_rng(7);
        for t in TYPES.iter().filter(|t| joined_quant_bits(t).is_some()) {
            for _ in 0..50 {
                let block: Vec<u8> = (0..t.block_bytes).map(|_| rnd() as u8).collect();
                let mut values = vec![0u8; t.block_values as usize];
                assert!(join_quants(t, &block, &mut values));
                let mut back = block.clone();
                back.iter_mut().for_each(|b| *b = !*b);
                // Fields other than the quants are the caller's: copy them.
                for f in t.fields.iter().filter(|f| !f.name.starts_with('q')) {
                    back[f.offset..f.offset + f.len]
                        .copy_from_slice(&block[f.offset..f.offset + f.len]);
                }
                assert!(unjoin_quants(t, &values, &mut back));
                assert_eq!(back, block, "{}", t.name);
            }
        }
    }

    /// Each described block is covered by its fields exactly, in order, and ids are unique.
    #[test]
    fn fields_tile_their_blocks() {
        for t in TYPES {
            assert_eq!(GgmlType::from_id(t.id), Some(t), "{}", t.name);
            if t.fields.is_empty() {
                continue;
            }
            let mut at = 0;
            for f in t.fields {
                assert_eq!(f.offset, at, "{} {}", t.name, f.name);
                assert_eq!(f.len * 8 % f.packing.symbol_bits() as usize, 0);
                at += f.len;
            }
            assert_eq!(at, t.block_bytes as usize, "{}", t.name);
        }
    }

    /// Joining quants uses every bit of the quant fields once: a block whose quants are all
    /// `v` joins to `v` everywhere, for every value a quant can take.
    #[test]
    fn joined_quants_use_each_bit_once() {
        for t in TYPES.iter().filter(|t| joined_quant_bits(t).is_some()) {
            let bits = joined_quant_bits(t).unwrap();
            for v in 0..1u8 << bits {
                let mut block = vec![0u8; t.block_bytes as usize];
                for f in t.fields.iter().filter(|f| f.name.starts_with('q')) {
                    let high = f.name == "qh";
                    let part = if high { v >> 4 } else { v & 0xf };
                    let sym = f.packing.symbol_bits();
                    let mut byte = 0u8;
                    for k in 0..8 / sym {
                        byte |= part << (k * sym);
                    }
                    block[f.offset..f.offset + f.len].fill(byte);
                }
                let mut out = vec![0xffu8; t.block_values as usize];
                assert!(join_quants(t, &block, &mut out));
                assert!(out.iter().all(|&q| q == v), "{} {v}: {out:?}", t.name);
            }
            // One set bit of the high field lands on exactly one quant.
            let qh = t.fields.iter().find(|f| f.name == "qh").unwrap();
            for k in 0..qh.len * 8 {
                let mut block = vec![0u8; t.block_bytes as usize];
                block[qh.offset + k / 8] = 1 << (k % 8);
                let mut out = vec![0u8; t.block_values as usize];
                join_quants(t, &block, &mut out);
                assert_eq!(
                    out.iter().filter(|&&q| q != 0).count(),
                    1,
                    "{} bit {k}",
                    t.name
                );
            }
        }
    }

    /// The quantized integers of each described type count one symbol per value (two for the
    /// 5- and 6-bit types, whose high bits are a field of their own).
    #[test]
    fn quants_hold_one_symbol_per_value() {
        for t in TYPES.iter().filter(|t| !t.fields.is_empty()) {
            let quants: usize = t
                .fields
                .iter()
                .filter(|f| f.name.starts_with('q') && f.packing != Packing::Bits)
                .filter(|f| !(t.name == "Q6_K" && f.name == "qh"))
                .map(|f| f.len * 8 / f.packing.symbol_bits() as usize)
                .sum();
            assert_eq!(quants, t.block_values as usize, "{}", t.name);
        }
    }
}
