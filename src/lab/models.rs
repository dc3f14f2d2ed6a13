//! Measurements that guide the codec's design: bits per value of each model variant on a real
//! file, next to the order-0 entropies they are bounded by (`sc models`).

use super::read_file_header;
use super::Tally;
use crate::choice::{ctx_parts, SignModels};
use crate::codec::ctxjoint::{self, Variant};
use crate::codec::{adaptive, context, huffjoint, huffman, joint, range, raw6, signs};
use crate::entropy::rows::{Part, Rows, TensorRows};
use crate::error::{Error, Result};
use crate::pipeline::encode::EncodeOptions;
use crate::pipeline::plan::Planner;
use crate::pipeline::refs::Spans;
use crate::read::read_exact_or;
use crate::safetensors::{Dtype, Header};
use crate::stats::{entropy_bits, histogram};
use crate::transform::Transform;
use crate::Mode;
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
    /// Blocks they were coded in, a tensor's values to a block.
    pub blocks: u64,
    /// Blocks BEST plans for them, several tensors to a block (the last row's).
    pub best_blocks: u64,
    /// Order-0 bounds first, then the coders, in the order of the variants.
    pub rows: Vec<ModelRow>,
}

impl ModelReport {
    /// Bits per value of a row.
    pub fn bits_per_value(&self, row: &ModelRow) -> f64 {
        row.bytes * 8.0 / self.values.max(1) as f64
    }
}

/// The coder variants measured in blocks of one tensor, in the order of [`variant_sizes`];
/// "(sc fast)" marks the one FAST chooses for trained weights.
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
    "ctxjoint: row x column magnitude, rows = last dimension, a block per tensor (sc best of format 3)",
];

/// The variant BEST chooses for trained weights, measured in its own blocks
/// ([`ctx_tensors_size`]), without sign models, and with them as BEST and `-9` use them.
const CTX_TENSORS: [&str; 3] = [
    "ctxtensors: blocks of several tensors as BEST plans them, each tensor in its rows, models shared (sc -6)",
    "ctxsigns: ctxtensors, and the signs modelled per column of each tensor where that saves 1 bit in 64 (sc best)",
    "ctxsigns: ctxtensors, and the signs modelled per column of each tensor where that is smaller (sc -9)",
];

/// Coded size of a plane as the pipeline would store it (const, coded, or raw if smaller).
pub(super) fn stored(plane: &[u8], coded: usize) -> usize {
    if plane.len() > 1 && plane.iter().all(|&b| b == plane[0]) {
        1
    } else {
        coded.min(plane.len())
    }
}

/// Plane `p` coded adaptively as the pipeline would store it.
pub(super) fn adaptive_size(p: &[u8]) -> usize {
    let mut out = Vec::new();
    let ok = adaptive::encode(p, &mut out);
    stored(p, if ok { out.len() } else { p.len() })
}

/// Exponent and sign/mantissa planes `exp` coded apart: the exponents adaptively, the
/// sign/mantissa plane modelled on them.
fn modelled_apart(exp: &[Vec<u8>]) -> usize {
    let mut ctx = Vec::new();
    context::encode_context(&exp[1], &exp[0], &mut ctx);
    adaptive_size(&exp[0]) + stored(&exp[1], ctx.len())
}

/// Planes `exp` as a `joint`/`raw6` pair, or coded apart where `joint` does not apply.
fn joint_size(exp: &[Vec<u8>]) -> usize {
    with_raw6(
        exp,
        |out| joint::encode_joint(&exp[0], &exp[1], out),
        || modelled_apart(exp),
    )
}

/// Planes `exp` as a pair whose plane 0, exponents with mantissa bits 6..5, `code` writes
/// (returning whether its codec applies) and whose plane 1 is `raw6`; `fallback` when the
/// codec does not apply.
fn with_raw6(
    exp: &[Vec<u8>],
    code: impl FnOnce(&mut Vec<u8>) -> bool,
    fallback: impl FnOnce() -> usize,
) -> usize {
    let mut out = Vec::new();
    match code(&mut out) {
        true => out.len() + raw6::len(exp[0].len()),
        false => fallback(),
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
        huffman::encode(p, &mut out);
        stored(p, out.len())
    };
    let range = |p: &[u8]| {
        let mut out = Vec::new();
        let ok = range::encode(p, &histogram(p), &mut out);
        stored(p, if ok { out.len() } else { p.len() })
    };
    let n = exp[0].len();
    let joint = joint_size(&exp);
    let ctx_joint = |r: Rows, v: Variant| {
        let whole = [Part { len: n, rows: r }];
        with_raw6(
            &exp,
            |out| ctxjoint::encode_variant(&exp[0], &exp[1], &whole, v, out),
            || joint,
        )
    };
    let census = huffjoint::Census::of16(raw);
    let huffjoint = match census.alphabet() {
        Some(a) => {
            let mut out = Vec::new();
            huffjoint::encode(&a, raw, &mut Vec::new(), &mut out);
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
        adaptive_size(&exp[0]) + n,
        adaptive_size(&exp[0]) + adaptive_size(&exp[1]),
        modelled_apart(&exp),
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

/// Bytes of the file's 16-bit float data as BEST codes it: blocks of `block_size` planned as
/// BEST plans them, several tensors to a block, each block's planes cut into parts that lie in
/// their tensors' rows and coded with `ctxtensors` (models shared across the parts), plus the
/// `raw6` plane; and those bytes with plane 1 coded as `signs` where BEST's default and `-9`
/// take it ([`SignModels`]). Returns the three sizes, the values they hold and the blocks.
/// Reads one block at a time.
///
/// Only the blocks planned as [`Transform::Exp16`] are coded, and they hold exactly the BF16
/// and F16 tensors' bytes that [`compare_models`] measures apart: the planner gives `Exp16`
/// to BF16/F16 tensors alone (other dtypes, and bytes between tensors, get other transforms),
/// never lets a block mix transforms, and the validated header makes those tensors whole
/// 2-byte values that do not overlap.
fn ctx_tensors_size<R: Read + Seek>(
    r: &mut R,
    tensors: &Tensors,
    block_size: u32,
) -> Result<([usize; 3], u64, u64)> {
    let Tensors { header, base, kind } = *tensors;
    let end = base + header.tensors.last().map_or(0, |t| t.end);
    let plan = Planner::with_refs(
        Some(header),
        base,
        block_size,
        &Spans::default(),
        Mode::Best,
        kind,
    );
    let (mut bytes, mut values, mut blocks) = ([0; 3], 0, 0);
    let (mut raw, mut exp, mut scratch) = (Vec::new(), vec![Vec::new(), Vec::new()], Vec::new());
    for spec in plan.take_while(|b| b.offset < end) {
        if spec.transform != Transform::Exp16 {
            continue;
        }
        raw.resize(spec.len as usize, 0);
        r.seek(SeekFrom::Start(spec.offset))?;
        read_exact_or(r, &mut raw, "tensor data")?;
        Transform::Exp16.split(&raw, &mut exp);
        let parts = ctx_parts(&spec.rows, [&exp[0], &exp[1]], &mut scratch);
        let mut head = Vec::new();
        let codec = ctxjoint::encode_parts(&exp[0], &exp[1], &parts, &mut head);
        let size = match codec {
            Some(_) => head.len() + raw6::len(exp[1].len()),
            None => joint_size(&exp),
        };
        // As BEST and `sc -9` code it: the signed pair where it is smaller by their margins.
        let head_len = codec.and_then(|c| ctxjoint::signed_len(c, head.len()));
        let mut signs = Vec::new();
        let signed = head_len.filter(|_| signs::encode(&exp[1], &parts, &mut signs));
        let with = |models: SignModels| match (signed, models.margin(&exp[1], &parts)) {
            (Some(len), Some(margin)) if len + signs.len() + margin < size => len + signs.len(),
            _ => size,
        };
        bytes[0] += size;
        bytes[1] += with(SignModels::Paying);
        bytes[2] += with(SignModels::Everywhere);
        values += spec.len / 2;
        blocks += 1;
    }
    Ok((bytes, values, blocks))
}

/// Runs every variant over the BF16 and F16 tensors of the safetensors file `r`, in blocks of
/// `block_size` bytes per tensor, and BEST's coding over its own blocks ([`ctx_tensors_size`]).
/// Reads one block at a time, so memory stays bounded.
pub fn compare_models<R: Read + Seek>(r: &mut R, block_size: u32) -> Result<ModelReport> {
    EncodeOptions::check_block_size(block_size)?;
    let (header, _) = read_file_header(r)?;
    let tensors = Tensors {
        header: &header,
        base: header.prefix_len(),
        kind: crate::Kind::Safetensors,
    };
    compare_tensors(r, &tensors, block_size)
}

/// The tensors of a file as the archive plans them: their header (offsets from `base`, where
/// the tensor data starts) and the kind of file they are in.
#[derive(Clone, Copy)]
pub(super) struct Tensors<'h> {
    pub header: &'h Header,
    pub base: u64,
    pub kind: crate::Kind,
}

/// [`compare_models`] over the BF16 and F16 tensors of `tensors`, in the file `r`.
pub(super) fn compare_tensors<R: Read + Seek>(
    r: &mut R,
    tensors: &Tensors,
    block_size: u32,
) -> Result<ModelReport> {
    let Tensors { header, base, .. } = *tensors;
    let block = (block_size & !1) as u64;
    let mut global = [[0u64; 256]; 4];
    // The tensor's histogram is cleared after each tensor: a tensor costs its values, not the
    // 65,536 symbols.
    let (mut joint, mut tensor_joint) = (Tally::new(1 << 16), Tally::new(1 << 16));
    let mut per_tensor_bits = 0.0;
    let mut sizes = [0usize; 16];
    let (mut values, mut blocks) = (0u64, 0u64);
    for t in &header.tensors {
        if !matches!(t.dtype, Some(Dtype::BF16 | Dtype::F16)) {
            continue;
        }
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
                        tensor_joint.add(w as usize, 1);
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
        per_tensor_bits += tensor_joint.entropy_bits() * tensor_joint.total() as f64;
        tensor_joint.add_to(&mut joint);
        tensor_joint.clear();
    }
    if values == 0 {
        return Err(Error::InvalidArgument(
            "the file has no BF16 or F16 tensors to model".into(),
        ));
    }
    let (ctx_sizes, ctx_values, best_blocks) = ctx_tensors_size(r, tensors, block_size)?;
    // The last row compares like for like only over the same values (ctx_tensors_size says
    // why it does); a plan that mixed other bytes into those blocks would be a planner bug.
    debug_assert_eq!(
        ctx_values, values,
        "BEST's planned BF16/F16 blocks hold the BF16/F16 tensors' values, no more, no fewer"
    );
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
            bytes: joint.entropy_bits() * values as f64 / 8.0,
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
    rows.extend(
        CTX_TENSORS
            .iter()
            .zip(ctx_sizes)
            .map(|(&name, b)| ModelRow {
                name,
                bytes: b as f64,
            }),
    );
    Ok(ModelReport {
        values,
        blocks,
        best_blocks,
        rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Many tiny BF16 tensors: the per-tensor histogram of 16-bit words is visited only where
    /// each tensor counted (a dense one would visit 65,536 bins a tensor, 2.6 * 10^7 here).
    #[test]
    fn tiny_tensors_visit_bins_in_proportion_to_their_values() {
        let n = 200;
        let mut rnd = crate::test_rng(5);
        let tensors: Vec<(String, Vec<u8>)> = (0..n)
            .map(|i| (format!("t{i}"), (0..128).map(|_| rnd() as u8).collect()))
            .collect();
        let refs: Vec<(&str, &str, Vec<u64>, Vec<u8>)> = tensors
            .iter()
            .map(|(name, data)| (name.as_str(), "BF16", vec![64], data.clone()))
            .collect();
        let f = file(&refs);
        let before = crate::hook::done(crate::hook::Work::BinsVisited);
        compare_models(&mut std::io::Cursor::new(f), 1 << 20).unwrap();
        let visited = crate::hook::done(crate::hook::Work::BinsVisited) - before;
        let values = 64 * n as u64;
        assert!(visited <= 16 * values, "{visited} bins for {values} values");
    }

    /// A safetensors file of `tensors` (name, dtype, shape, data), laid out in order.
    fn file(tensors: &[(&str, &str, Vec<u64>, Vec<u8>)]) -> Vec<u8> {
        let mut at = 0;
        let entries: Vec<String> = tensors
            .iter()
            .map(|(name, dtype, shape, data)| {
                at += data.len();
                format!(
                    r#""{name}":{{"dtype":"{dtype}","shape":{shape:?},"data_offsets":[{},{at}]}}"#,
                    at - data.len()
                )
            })
            .collect();
        let json = format!("{{{}}}", entries.join(","));
        let mut out = (json.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(json.as_bytes());
        for (.., data) in tensors {
            out.extend_from_slice(data);
        }
        out
    }

    /// `rows` x `cols` BF16 values, roughly Gaussian with a scale per row that is the same in
    /// every tensor `seed` makes.
    fn weights(rows: usize, cols: usize, seed: u64) -> Vec<u8> {
        let mut rnd = crate::test_rng(0x9E37_79B9 ^ seed as u32);
        let mut next = || (rnd() >> 8) as f32 / (1u32 << 24) as f32;
        let mut out = Vec::with_capacity(rows * cols * 2);
        for r in 0..rows {
            let scale = 0.02 * (1.0 + (r % 7) as f32);
            for _ in 0..cols {
                let g: f32 = (0..4).map(|_| next()).sum::<f32>() - 2.0;
                let bf16 = ((g * scale).to_bits() >> 16) as u16;
                out.extend_from_slice(&bf16.to_le_bytes());
            }
        }
        out
    }

    /// The row of `rep` named `name`.
    fn row<'a>(rep: &'a ModelReport, name: &str) -> &'a ModelRow {
        rep.rows.iter().find(|r| r.name == name).unwrap()
    }

    #[test]
    fn entropies_match_a_hand_computed_file() {
        // Four BF16 values: 1.0 (0x3F80) twice, -1.0 (0xBF80), 2.0 (0x4000).
        let vals: [u16; 4] = [0x3F80, 0x3F80, 0xBF80, 0x4000];
        let data: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
        let file = file(&[("t", "BF16", vec![4], data)]);
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

    #[test]
    fn small_tensors_sharing_best_blocks_code_smaller_than_a_block_each() {
        // Eight 32 x 64 tensors drawn alike: BEST plans them into one 64 KiB block, where the
        // models learn once; a block per tensor learns eight times.
        let tensors: Vec<_> = (0..8)
            .map(|k| {
                (
                    ["a", "b", "c", "d", "e", "f", "g", "h"][k],
                    "BF16",
                    vec![32, 64],
                    weights(32, 64, k as u64),
                )
            })
            .collect();
        let rep = compare_models(&mut std::io::Cursor::new(file(&tensors)), 64 << 10).unwrap();
        assert_eq!((rep.values, rep.blocks, rep.best_blocks), (8 * 2048, 8, 1));
        let shared = row(&rep, CTX_TENSORS[0]).bytes;
        let apart = row(&rep, VARIANTS[15]).bytes;
        assert!(
            shared < apart,
            "ctxtensors {shared} vs ctxjoint a block per tensor {apart}"
        );
        assert_eq!(rep.rows[rep.rows.len() - 3].name, CTX_TENSORS[0]);
        // Signs that are coin flips: modelling them saves nothing, and BEST does not try.
        assert!(row(&rep, CTX_TENSORS[2]).bytes >= shared - 16.0);
        assert_eq!(row(&rep, CTX_TENSORS[1]).bytes, shared);
    }

    #[test]
    fn sign_models_pay_on_columns_that_lean() {
        // Every third column of a 128 x 96 matrix mostly negative.
        let mut w = weights(128, 96, 5);
        for (i, v) in w.chunks_exact_mut(2).enumerate() {
            if i % 96 % 3 == 0 && i % 5 != 0 {
                v[1] |= 0x80;
            }
        }
        let file = file(&[("w", "BF16", vec![128, 96], w)]);
        let rep = compare_models(&mut std::io::Cursor::new(file), 64 << 10).unwrap();
        let plain = row(&rep, CTX_TENSORS[0]).bytes;
        // A third of the signs at about H(0.8) = 0.72 bits instead of 1: 128 x 32 x 0.28
        // bits, some 140 bytes (0.09 bits a value, so BEST takes them too), less what the
        // models pay to learn.
        for name in &CTX_TENSORS[1..] {
            let signed = row(&rep, name).bytes;
            assert!(signed < plain - 80.0, "{name}: {signed} vs {plain}");
        }
    }

    #[test]
    fn best_blocks_measure_the_16_bit_floats_alone() {
        // F32 and I64 tensors between the BF16 and F16 ones: BEST's blocks of the 16-bit
        // floats hold the values the other rows measure, no more (compare_models checks).
        let tensors = [
            ("a", "BF16", vec![32, 64], weights(32, 64, 1)),
            ("b", "F32", vec![3], vec![7; 12]),
            ("c", "BF16", vec![5], weights(1, 5, 2)),
            ("d", "I64", vec![1], vec![9; 8]),
            ("e", "F16", vec![16, 64], weights(16, 64, 3)),
        ];
        let rep = compare_models(&mut std::io::Cursor::new(file(&tensors)), 4096).unwrap();
        assert_eq!(
            (rep.values, rep.blocks, rep.best_blocks),
            (2048 + 5 + 1024, 3, 3)
        );
        let best = row(&rep, CTX_TENSORS[0]).bytes;
        assert!(best > 0.0 && best < 2.0 * rep.values as f64, "{best}");
    }
}
