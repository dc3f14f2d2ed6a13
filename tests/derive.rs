//! Quants coded against their seed (reference kind 2, `sc::derive`): a synthetic ladder (an F16
//! seed with widths of 256 and of 32, its quants made with the library's own quantizers, some
//! blocks perturbed as an importance matrix or a fused build would) round-trips exactly and
//! costs little; edge blocks; a seed of another model; a missing or changed seed; every byte of
//! the new section mutated.
//!
//! `cargo test -p sc --test derive -- --ignored write_testdata` writes the synthetic pair the
//! golden archive `testdata/golden/v7-*` and the fuzz target are made from.

use sc::gguf::quant::{half, quantize_rows};
use sc::gguf::types::{GgmlType, TYPES};
use sc::gguf::write::file;
use sc::{Base, DecodeOptions, EncodeOptions, Error, Mode, Reference};

fn ty(name: &str) -> &'static GgmlType {
    TYPES.iter().find(|t| t.name == name).unwrap()
}

/// Normal-ish weights from a seeded generator, scaled by `scale`.
fn weights(n: usize, seed: u32, scale: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2_654_435_761).max(1);
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        s as f32 / u32::MAX as f32
    };
    (0..n)
        .map(|_| (next() + next() + next() - 1.5) * scale)
        .collect()
}

/// Rows of 256 values at the edges of the quantizers: zeros, a constant, one huge value among
/// small ones, NaN and infinities, subnormals, values near F16's largest.
fn edge_rows(model: u32) -> Vec<f32> {
    let mut v = vec![0f32; 256];
    v.extend([0.25f32 * model as f32; 256]);
    let mut huge = weights(256, 7 + model, 0.01);
    huge[77] = 60000.0;
    v.extend(huge);
    let mut odd = weights(256, 8 + model, 1.0);
    odd[3] = f32::NAN;
    odd[40] = f32::INFINITY;
    odd[41] = f32::NEG_INFINITY;
    v.extend(odd);
    v.extend((0..256).map(|i| (i as f32 - 128.0) * 6.0e-8));
    v.extend((0..256).map(|i| 65504.0 - i as f32 * 3.0));
    v
}

/// The values of an F16 seed tensor as stored (F16 bits).
fn f16_bytes(v: &[f32]) -> Vec<u8> {
    v.iter()
        .flat_map(|&x| half::f32_to_f16(x).to_le_bytes())
        .collect()
}

/// The f32 values an F16 tensor holds.
fn widened(bytes: &[u8]) -> Vec<f32> {
    sc::gguf::quant::seed_to_f32(ty("F16"), bytes).unwrap()
}

/// A synthetic seed: name, dims (innermost first), type, bytes.
struct Tensor {
    name: &'static str,
    dims: Vec<u64>,
    ty: &'static GgmlType,
    data: Vec<u8>,
}

fn gguf(tensors: &[Tensor]) -> Vec<u8> {
    let list: Vec<(&str, &[u64], &GgmlType, &[u8])> = tensors
        .iter()
        .map(|t| (t.name, &t.dims[..], t.ty, &t.data[..]))
        .collect();
    file(3, &[], &list)
}

/// The seed's tensors: widths of 256 and of 32, edge rows, an F32 norm.
fn seed_tensors(model: u32) -> Vec<Tensor> {
    let f16 = ty("F16");
    vec![
        Tensor {
            name: "blk.0.attn.weight",
            dims: vec![512, 24],
            ty: f16,
            data: f16_bytes(&weights(512 * 24, model, 0.08)),
        },
        Tensor {
            name: "blk.0.ffn.weight",
            dims: vec![96, 40],
            ty: f16,
            data: f16_bytes(&weights(96 * 40, model + 1, 0.05)),
        },
        Tensor {
            name: "blk.0.norm.weight",
            dims: vec![96],
            ty: ty("F32"),
            data: weights(96, model + 2, 1.0)
                .iter()
                .flat_map(|x| x.to_le_bytes())
                .collect(),
        },
        Tensor {
            name: "edge.weight",
            dims: vec![256, 6],
            ty: f16,
            data: f16_bytes(&edge_rows(model)),
        },
        Tensor {
            name: "token_embd.weight",
            dims: vec![64, 20],
            ty: f16,
            data: f16_bytes(&weights(64 * 20, model + 3, 0.5)),
        },
    ]
}

/// A quant of `seed` as llama-quantize lays one out: tensors in another order, the wide
/// tensors in `main` (K-quants need widths of 256), the narrow ones in Q8_0 or Q5_0, the
/// embedding in F32 (a conversion), the norm kept; then every `perturb`-th ggml block of the
/// quantized tensors has a byte changed (an importance matrix, a fused build).
fn quant_of(seed: &[Tensor], main: &str, perturb: usize) -> Vec<Tensor> {
    let mut out: Vec<Tensor> = Vec::new();
    for t in seed.iter().rev() {
        let to = match t.name {
            "blk.0.norm.weight" => None,
            "token_embd.weight" => Some(ty("F32")),
            _ if t.dims[0] % 256 == 0 => Some(ty(main)),
            _ if main.ends_with("_K") => Some(ty("Q5_0")),
            _ => Some(ty(main)),
        };
        let Some(to) = to else {
            out.push(Tensor {
                name: t.name,
                dims: t.dims.clone(),
                ty: t.ty,
                data: t.data.clone(),
            });
            continue;
        };
        let mut data = quantize_rows(to, &widened(&t.data), t.dims[0] as usize).unwrap();
        if perturb > 0 && !to.is_plain() {
            let bb = to.block_bytes as usize;
            for (k, b) in data.chunks_exact_mut(bb).enumerate() {
                if k % perturb == 1 {
                    b[bb - 1] ^= 0x11;
                }
            }
        }
        out.push(Tensor {
            name: t.name,
            dims: t.dims.clone(),
            ty: to,
            data,
        });
    }
    out
}

fn encode(quant: &[u8], seed: Option<&Base>, mode: Mode) -> Vec<u8> {
    let opts = EncodeOptions {
        base: seed,
        block_size: 16 << 10,
        ..EncodeOptions::new(mode)
    };
    sc::encode_to_vec(quant, &opts).unwrap()
}

fn decode(archive: &[u8], seed: Option<&Base>) -> sc::Result<Vec<u8>> {
    let opts = DecodeOptions {
        base: seed,
        ..DecodeOptions::default()
    };
    sc::decode_to_vec(archive, &opts)
}

fn seed_base(model: u32) -> (Vec<u8>, Base) {
    let bytes = gguf(&seed_tensors(model));
    let base = Base::from_bytes("seed.gguf", bytes.clone()).unwrap();
    (bytes, base)
}

const TYPES_MADE: &[&str] = &[
    "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K",
];

#[test]
fn a_ladder_round_trips_and_costs_next_to_nothing() {
    let (_, seed) = seed_base(1);
    for main in TYPES_MADE {
        let quant = gguf(&quant_of(&seed_tensors(1), main, 0));
        for mode in [Mode::Fast, Mode::Best] {
            let archive = encode(&quant, Some(&seed), mode);
            assert_eq!(decode(&archive, Some(&seed)).unwrap(), quant, "{main}");
            let alone = encode(&quant, None, mode);
            // The kept header and framing dominate a file this small.
            assert!(
                archive.len() * 4 < alone.len(),
                "{main} {mode:?}: {} against the seed, {} alone",
                archive.len(),
                alone.len()
            );
            let info = sc::inspect(&mut std::io::Cursor::new(&archive)).unwrap();
            assert_eq!(info.format_version, 7);
            // Four quantized or converted tensors; the norm is the seed's own (kind 0).
            assert_eq!((info.derived_tensors, info.based_tensors), (4, 5), "{main}");
            let a = sc::Archive::open_with_base(std::io::Cursor::new(&archive[..]), seed.clone())
                .unwrap();
            for t in a.tensors() {
                match a.reference(&t.name) {
                    Some(Reference::Derived { blocks, exact, .. }) => {
                        assert!(blocks > 0 && exact == blocks, "{main} {}", t.name)
                    }
                    Some(Reference::Base(_)) => assert_eq!(t.name, "blk.0.norm.weight"),
                    other => panic!("{main} {}: {other:?}", t.name),
                }
            }
        }
    }
}

#[test]
fn perturbed_blocks_are_residuals_and_counted() {
    let (_, seed) = seed_base(2);
    for main in ["Q4_K", "Q5_1", "Q2_K"] {
        let quant_t = quant_of(&seed_tensors(2), main, 7);
        let quant = gguf(&quant_t);
        let archive = encode(&quant, Some(&seed), Mode::Best);
        assert_eq!(decode(&archive, Some(&seed)).unwrap(), quant);
        let alone = encode(&quant, None, Mode::Best);
        assert!(archive.len() * 2 < alone.len(), "{main}");
        let mut a =
            sc::Archive::open_with_base(std::io::Cursor::new(&archive[..]), seed.clone()).unwrap();
        let Some(Reference::Derived { blocks, exact, .. }) = a.reference("blk.0.attn.weight")
        else {
            panic!("not derived");
        };
        let q = ty(main);
        let expect = (
            512 * 24 / q.block_values as u64,
            (512 * 24 / q.block_values as u64) / 7,
        );
        assert_eq!((blocks, blocks - exact), (expect.0, expect.1 + 1));
        // Random access: one tensor read alone.
        let want = &quant_t
            .iter()
            .find(|t| t.name == "edge.weight")
            .unwrap()
            .data;
        assert_eq!(&a.read_tensor("edge.weight").unwrap(), want);
    }
}

#[test]
fn a_seed_of_another_model_is_coded_correctly_and_costs_little() {
    let (_, other) = seed_base(99);
    for main in ["Q4_K", "Q8_0"] {
        let quant = gguf(&quant_of(&seed_tensors(1), main, 0));
        let archive = encode(&quant, Some(&other), Mode::Best);
        assert_eq!(decode(&archive, Some(&other)).unwrap(), quant);
        let alone = encode(&quant, None, Mode::Best);
        // Only the edge rows of zeros re-derive: no other tensor is coded against the wrong
        // seed but the F32 norm's namesake (kind 0), which the block coder leaves plain when
        // the delta does not pay.
        let info = sc::inspect(&mut std::io::Cursor::new(&archive)).unwrap();
        assert_eq!(info.derived_tensors, 1);
        assert!(
            archive.len() as f64 <= alone.len() as f64 * 1.01 + 200.0,
            "{} against {}",
            archive.len(),
            alone.len()
        );
    }
}

#[test]
fn a_missing_or_changed_seed_is_one_error_before_any_output() {
    let (seed_bytes, seed) = seed_base(3);
    let quant = gguf(&quant_of(&seed_tensors(3), "Q4_K", 0));
    let archive = encode(&quant, Some(&seed), Mode::Fast);
    match decode(&archive, None) {
        Err(Error::BaseNeeded { needed }) => assert_eq!(needed, "seed.gguf"),
        other => panic!("{other:?}"),
    }
    // One bit of one seed tensor changed.
    let mut changed = seed_bytes.clone();
    let at = changed.len() - 1000;
    changed[at] ^= 1;
    let changed = Base::from_bytes("seed.gguf", changed).unwrap();
    match decode(&archive, Some(&changed)) {
        Err(e @ Error::BaseMismatch { .. }) => {
            let text = e.to_string();
            assert!(!text.contains('\n') && text.contains("seed.gguf"), "{text}")
        }
        other => panic!("{other:?}"),
    }
    // Nothing is written before the seed is checked.
    let opts = DecodeOptions {
        base: Some(&changed),
        ..DecodeOptions::default()
    };
    let mut out = Vec::new();
    assert!(sc::decode(&archive[..], &mut out, &opts).is_err());
    assert!(out.is_empty());
    // Random access too, where the tensor read needs the changed one (the last).
    let mut a = sc::Archive::open_with_base(std::io::Cursor::new(&archive[..]), changed).unwrap();
    assert!(matches!(
        a.read_tensor("token_embd.weight"),
        Err(Error::BaseMismatch { .. })
    ));
}

#[test]
fn the_seed_may_be_an_archive() {
    let (seed_bytes, seed) = seed_base(4);
    let quant = gguf(&quant_of(&seed_tensors(4), "Q6_K", 5));
    let archive = encode(&quant, Some(&seed), Mode::Fast);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seed.gguf.sc");
    std::fs::write(&path, encode(&seed_bytes, None, Mode::Best)).unwrap();
    let from_archive = Base::open(&path).unwrap();
    assert_eq!(decode(&archive, Some(&from_archive)).unwrap(), quant);
}

#[test]
fn verify_derives_tells_tensor_by_tensor() {
    let (_, seed) = seed_base(5);
    let exact = gguf(&quant_of(&seed_tensors(5), "Q3_K", 0));
    let report = sc::verify_derives(&seed, &&exact[..], exact.len() as u64).unwrap();
    assert_eq!(report.len(), 5);
    assert!(report.iter().all(|t| t.derives()), "{report:?}");
    let perturbed = gguf(&quant_of(&seed_tensors(5), "Q3_K", 3));
    let report = sc::verify_derives(&seed, &&perturbed[..], perturbed.len() as u64).unwrap();
    let bad: Vec<&str> = (report.iter())
        .filter(|t| !t.derives())
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(
        bad,
        ["edge.weight", "blk.0.ffn.weight", "blk.0.attn.weight"]
    );
    let (_, other) = seed_base(6);
    let report = sc::verify_derives(&other, &&exact[..], exact.len() as u64).unwrap();
    assert!(report.iter().all(|t| !t.derives()));
    assert!(sc::verify_derives(&seed, &&b"not a gguf"[..], 10).is_err());
}

/// A quant of model `model` in `main` (every `perturb`-th block changed) coded in `mode` against
/// its seed: the seed, the quant, the archive, and where the archive's reference section starts
/// and where its checksum starts.
fn sectioned(
    model: u32,
    main: &str,
    perturb: usize,
    mode: Mode,
) -> (Base, Vec<u8>, Vec<u8>, usize, usize) {
    let (_, seed) = seed_base(model);
    let quant = gguf(&quant_of(&seed_tensors(model), main, perturb));
    let archive = encode(&quant, Some(&seed), mode);
    let start = archive.windows(4).position(|w| w == b"SCRF").unwrap();
    let len = u64::from_le_bytes(archive[start + 4..start + 12].try_into().unwrap()) as usize;
    (seed, quant, archive, start, start + 12 + len)
}

#[test]
fn every_byte_of_the_reference_section_mutated_is_an_error_never_a_panic() {
    let (seed, _, archive, start, end) = sectioned(7, "Q4_0", 0, Mode::Fast);
    for i in start..end + 8 {
        for flip in [0x01u8, 0x80, 0xFF] {
            let mut bad = archive.clone();
            bad[i] ^= flip;
            match decode(&bad, Some(&seed)) {
                Ok(out) => panic!("byte {i} ^ {flip:#x} decoded ({} bytes)", out.len()),
                Err(e) => assert!(!e.to_string().contains('\n')),
            }
        }
    }
}

#[test]
fn every_byte_of_the_section_body_mutated_with_its_checksum_made_right_never_decodes_wrong() {
    let (seed, quant, archive, start, end) = sectioned(8, "Q5_K", 4, Mode::Best);
    let (mut errors, mut same) = (0, 0);
    for i in start + 12..end {
        let mut bad = archive.clone();
        bad[i] ^= 0x21;
        let sum = sc::container::checksum::xxh3(&bad[start..end]);
        bad[end..end + 8].copy_from_slice(&sum.to_le_bytes());
        match decode(&bad, Some(&seed)) {
            Ok(out) => {
                assert_eq!(out, quant, "byte {i} decoded to other bytes");
                same += 1;
            }
            Err(e) => {
                assert!(!e.to_string().contains('\n'));
                errors += 1;
            }
        }
    }
    // Only the counts of exact blocks are free to change (they inform, the blocks decide).
    assert!(
        errors > 0 && same <= 8 * 4 + 8,
        "{errors} errors, {same} decoded"
    );
}

/// Writes `testdata/ladder-seed.gguf` and `testdata/ladder-q4_k.gguf`: the seed and a Q4_K quant
/// of it with one block in seven perturbed.
#[test]
#[ignore]
fn write_testdata() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata");
    std::fs::write(dir.join("ladder-seed.gguf"), gguf(&seed_tensors(11))).unwrap();
    let quant = gguf(&quant_of(&seed_tensors(11), "Q4_K", 7));
    std::fs::write(dir.join("ladder-q4_k.gguf"), quant).unwrap();
}
