//! Measurements that guide the codec's design: bits per value of each model variant on a real
//! file, next to the order-0 entropies they are bounded by (`sc models`).

use super::read_file_header;
use crate::codec::ctxjoint::{self, Rows, Variant};
use crate::codec::{adaptive, context, huffjoint, huffman, joint, range, raw6};
use crate::error::{Error, Result};
use crate::pipeline::plan::TensorRows;
use crate::read::read_exact_or;
use crate::safetensors::Dtype;
use crate::stats::{entropy_bits, histogram};
use crate::transform::Transform;
use std::io::{Read, Seek, SeekFrom};

/// One model variant and what it costs.
#[derive(Clone, Debug)]
pub struct ModelRow {
    /// What is measured.
    pub name: &'static str,
    /// Bytes of the 16-bit float data under this variant (fractional for entropy bounds).
    pub bytes: f64,
}

/// Model comparison over the 16-bit float tensors of one file.
#[derive(Clone, Debug)]
pub struct ModelReport {
    /// 16-bit float values measured.
    pub values: u64,
    /// Blocks they were coded in.
    pub blocks: u64,
    /// Order-0 bounds first, then the coders, in the order of the variants.
    pub rows: Vec<ModelRow>,
}

impl ModelReport {
    /// Bits per value of a row.
    pub fn bits_per_value(&self, row: &ModelRow) -> f64 {
        row.bytes * 8.0 / self.values.max(1) as f64
    }
}

/// The coder variants, in the order of [`variant_sizes`]; "(sc fast)" and "(sc best)" mark
/// the ones the modes choose for trained weights.
const VARIANTS: [&str; 16] = [
    "huffman split16: high byte coded, low byte raw",
    "huffman exp16: exponent coded, sign/mantissa raw",
    "huffjoint: exponent and mantissa bits 6..5 coded, 6 bits raw (sc fast)",
    "static range split16: high + low byte",
    "static range exp16: exponent + sign/mantissa",
    "adaptive exponent, sign/mantissa raw",
    "adaptive exponent + adaptive order-0 sign/mantissa",
    "adaptive exponent + context: sign/mantissa bits 6..5 modelled on the exponent",
    "joint: exponent and mantissa bits 6..5 adaptive, 6 bits raw (sc best of format 1)",
    "joint symbols in 16 contexts: mean exponent of the previous 64 (half-exponent steps)",
    "joint symbols in 16 contexts: that (4 steps) x exponent one row up (4 steps)",
    "joint symbols in 16 contexts: running mean magnitude of the row (quarter octaves)",
    "joint symbols in 16 contexts: mean magnitude of the column, relative to the block",
    "joint symbols in 16 contexts: row x column magnitude, models starting uniform",
    "ctxjoint: row x column magnitude, rows = dimensions after the first",
    "ctxjoint: row x column magnitude, rows = last dimension (sc best)",
];

/// Coded size of a plane as the pipeline would store it (const, coded, or raw if smaller).
fn stored(plane: &[u8], coded: usize) -> usize {
    if plane.len() > 1 && plane.iter().all(|&b| b == plane[0]) {
        1
    } else {
        coded.min(plane.len())
    }
}

/// Sizes of every variant for one block of 16-bit elements, whose rows are `rows` for the
/// tensor's last dimension and for all its dimensions after the first.
fn variant_sizes(raw: &[u8], rows: [Rows; 2]) -> [usize; 16] {
    let mut split = vec![Vec::new(), Vec::new()];
    let mut exp = vec![Vec::new(), Vec::new()];
    Transform::Split16.split(raw, &mut split);
    Transform::Exp16.split(raw, &mut exp);
    let huff = |p: &[u8]| {
        let mut out = Vec::new();
        huffman::encode(p, &histogram(p), &mut out);
        stored(p, out.len())
    };
    let range = |p: &[u8]| {
        let mut out = Vec::new();
        let ok = range::encode(p, &histogram(p), &mut out);
        stored(p, if ok { out.len() } else { p.len() })
    };
    let adapt = |p: &[u8]| {
        let mut out = Vec::new();
        let ok = adaptive::encode(p, &mut out);
        stored(p, if ok { out.len() } else { p.len() })
    };
    let mut ctx = Vec::new();
    context::encode_context(&exp[1], &exp[0], &mut ctx);
    let n = exp[0].len();
    let joint = {
        let mut out = Vec::new();
        if joint::encode_joint(&exp[0], &exp[1], &mut out) {
            out.len() + raw6::len(n)
        } else {
            adapt(&exp[0]) + stored(&exp[1], ctx.len())
        }
    };
    let ctx_joint = |r: Rows, v: Variant| {
        let mut out = Vec::new();
        let whole = [ctxjoint::Part { len: n, rows: r }];
        if ctxjoint::encode_variant(&exp[0], &exp[1], &whole, v, &mut out) {
            out.len() + raw6::len(n)
        } else {
            joint
        }
    };
    let census = huffjoint::Census::of16(raw);
    let huffjoint = match census.alphabet() {
        Some(a) => {
            let mut out = Vec::new();
            huffjoint::encode(&a, &census.keys(&a), raw, &mut Vec::new(), &mut out);
            out.len() + raw6::len(n)
        }
        None => huff(&exp[0]) + n,
    };
    [
        huff(&split[0]) + n,
        huff(&exp[0]) + n,
        huffjoint,
        range(&split[0]) + range(&split[1]),
        range(&exp[0]) + range(&exp[1]),
        adapt(&exp[0]) + n,
        adapt(&exp[0]) + adapt(&exp[1]),
        adapt(&exp[0]) + stored(&exp[1], ctx.len()),
        joint,
        ctx_joint(rows[0], Variant::RecentExponent),
        ctx_joint(rows[0], Variant::RecentExponentAndUp),
        ctx_joint(rows[0], Variant::Rows),
        ctx_joint(rows[0], Variant::Columns),
        ctx_joint(rows[0], Variant::Uninherited),
        ctx_joint(rows[1], Variant::RowsAndColumns),
        ctx_joint(rows[0], Variant::RowsAndColumns),
    ]
}

/// Runs every variant over the BF16 and F16 tensors of the safetensors file `r`, in blocks of
/// `block_size` bytes per tensor. Reads one block at a time, so memory stays bounded.
pub fn compare_models<R: Read + Seek>(r: &mut R, block_size: u32) -> Result<ModelReport> {
    let (header, _) = read_file_header(r)?;
    let base = header.prefix_len();
    let block = (block_size & !1) as u64;
    let mut global = [[0u64; 256]; 4];
    let mut joint = vec![0u64; 1 << 16];
    let mut per_tensor_bits = 0.0;
    let mut sizes = [0usize; 16];
    let (mut values, mut blocks) = (0u64, 0u64);
    for t in &header.tensors {
        if !matches!(t.dtype, Some(Dtype::BF16 | Dtype::F16)) {
            continue;
        }
        let mut tensor_joint = vec![0u64; 1 << 16];
        let lens = TensorRows::lens(&t.shape, (t.end - t.begin) / 2);
        let mut pos = t.begin;
        while pos < t.end {
            let len = (t.end - pos).min(block);
            let mut raw = vec![0u8; len as usize];
            r.seek(SeekFrom::Start(base + pos))?;
            read_exact_or(r, &mut raw, "tensor data")?;
            let at = ((pos - t.begin) / 2) as i64;
            pos += len;
            let rows = lens.map(|len| Rows::at(len, at));
            let (s, ()) = rayon::join(
                || variant_sizes(&raw, rows),
                || {
                    for c in raw.chunks_exact(2) {
                        let w = u16::from_le_bytes([c[0], c[1]]);
                        tensor_joint[w as usize] += 1;
                        global[0][(w >> 8) as usize] += 1;
                        global[1][(w & 0xFF) as usize] += 1;
                        global[2][((w >> 7) & 0xFF) as usize] += 1;
                        global[3][(((w >> 8) & 0x80) | (w & 0x7F)) as usize] += 1;
                    }
                },
            );
            for (acc, v) in sizes.iter_mut().zip(s) {
                *acc += v;
            }
            values += len / 2;
            blocks += 1;
        }
        per_tensor_bits += entropy_bits(&tensor_joint) * tensor_joint.iter().sum::<u64>() as f64;
        for (j, t) in joint.iter_mut().zip(&tensor_joint) {
            *j += t;
        }
    }
    if values == 0 {
        return Err(Error::InvalidArgument(
            "the file has no BF16 or F16 tensors to model".into(),
        ));
    }
    let e = |k: usize| entropy_bits(&global[k]) * values as f64 / 8.0;
    let mut rows = vec![
        ModelRow {
            name: "order-0 entropy: high byte + low byte",
            bytes: e(0) + e(1),
        },
        ModelRow {
            name: "order-0 entropy: exponent + sign/mantissa",
            bytes: e(2) + e(3),
        },
        ModelRow {
            name: "order-0 entropy: whole 16-bit value",
            bytes: entropy_bits(&joint) * values as f64 / 8.0,
        },
        ModelRow {
            name: "order-0 entropy: 16-bit value, per tensor",
            bytes: per_tensor_bits / 8.0,
        },
    ];
    rows.extend(VARIANTS.iter().zip(sizes).map(|(&name, b)| ModelRow {
        name,
        bytes: b as f64,
    }));
    Ok(ModelReport {
        values,
        blocks,
        rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entropies_match_a_hand_computed_file() {
        // Four BF16 values: 1.0 (0x3F80) twice, -1.0 (0xBF80), 2.0 (0x4000).
        let vals: [u16; 4] = [0x3F80, 0x3F80, 0xBF80, 0x4000];
        let data: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
        let json = br#"{"t":{"dtype":"BF16","shape":[4],"data_offsets":[0,8]}}"#;
        let mut file = (json.len() as u64).to_le_bytes().to_vec();
        file.extend_from_slice(json);
        file.extend_from_slice(&data);
        let rep = compare_models(&mut std::io::Cursor::new(file), 4096).unwrap();
        let bits = |i: usize| rep.bits_per_value(&rep.rows[i]);
        // High bytes 3F,3F,BF,40 -> 1.5 bits; low bytes 80,80,80,00 -> H(3/4,1/4) = 0.8113.
        assert!((bits(0) - (1.5 + 0.811_278)).abs() < 1e-4);
        // Exponents 7F,7F,7F,80 -> 0.8113; sign/mantissa 00,00,80,00 -> 0.8113.
        assert!((bits(1) - 2.0 * 0.811_278).abs() < 1e-4);
        // Whole values: 1/2, 1/4, 1/4 -> 1.5 bits.
        assert!((bits(2) - 1.5).abs() < 1e-9);
        assert!((bits(3) - 1.5).abs() < 1e-9);
        assert!(compare_models(&mut std::io::Cursor::new(b"not a model".to_vec()), 4096).is_err());
    }
}
