//! Random access: tensors and byte ranges read through the index (`sc::Archive`), and how many
//! blocks a read decodes. `sc list` and `sc extract` are tested in `cli/tests/access.rs`.

mod common;

use common::{check_layout, encode_to_vec, read_each, safetensors, tensor_ranges, Rng};
use md5::Digest;
use sc::container::{FileHeader, Footer};
use sc::{Archive, EncodeOptions, Error, Kind, Mode};
use std::io::Cursor;
use std::ops::Range;

const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/sample.safetensors");
const MIB: usize = 1 << 20;

fn sample() -> Vec<u8> {
    std::fs::read(SAMPLE).expect("testdata/sample.safetensors")
}

fn open(archive: &[u8]) -> Archive<Cursor<&[u8]>> {
    Archive::open(Cursor::new(archive)).expect("open a good archive")
}

/// BF16 values looking like trained weights: random sign and mantissa, exponents near 2^-4.
fn weights(rng: &mut Rng, n: usize) -> Vec<u8> {
    (0..n)
        .flat_map(|_| {
            let r = rng.next();
            let exp = 119 + (r % 5) as u16;
            let v = ((r >> 8) as u16 & 0x807F) | (exp << 7);
            v.to_le_bytes()
        })
        .collect()
}

/// About 20 MB: 1.5 MiB BF16 matrices with small tensors (norms, biases, an F32 and an I64
/// one) between them, the way transformer checkpoints interleave them.
fn model_20mb() -> Vec<u8> {
    let mut rng = Rng(7);
    let names: Vec<[String; 4]> = (0..13)
        .map(|l| ["weight", "bias", "scale", "shift"].map(|p| format!("layer.{l}.{p}")))
        .collect();
    let mut tensors = Vec::new();
    for [w, b, s, i] in &names {
        tensors.push((
            &w[..],
            "BF16",
            vec![768, 1024],
            weights(&mut rng, 768 * 1024),
        ));
        tensors.push((&b[..], "BF16", vec![1000], weights(&mut rng, 1000)));
        tensors.push((&s[..], "F32", vec![300], rng.bytes(1200)));
        // Same transform as the scale before it, so the two share a block.
        tensors.push((&i[..], "F32", vec![14], rng.bytes(56)));
    }
    safetensors(&tensors, 0, r#"{"format":"pt"}"#)
}

#[test]
fn every_tensor_and_range_at_every_block_size_and_mode() {
    let original = sample();
    let tensors = tensor_ranges(&original);
    for mode in [Mode::Fast, Mode::Best] {
        for block_size in [4 << 10, 64 << 10, 1 << 20] {
            let what = format!("{mode:?} {block_size}");
            let archive = encode_to_vec(
                &original,
                &EncodeOptions {
                    block_size,
                    ..EncodeOptions::new(mode)
                },
            );
            let mut a = open(&archive);
            assert_eq!(a.tensors().len(), tensors.len(), "{what}");
            for (name, range) in &tensors {
                let before = a.stats();
                let got = a.read_tensor(name).unwrap();
                assert!(
                    got == original[range.clone()],
                    "{what}: tensor {name} differs"
                );
                let mut into = vec![0x5A; range.len()];
                open(&archive).read_tensor_into(name, &mut into).unwrap();
                assert!(into == got, "{what}: tensor {name} into a buffer differs");
                // A tensor never costs more blocks than its length needs, plus one.
                let blocks = a.stats().blocks_decoded - before.blocks_decoded;
                let most = range.len().div_ceil(block_size as usize) + 1;
                assert!(
                    blocks as usize <= most,
                    "{what}: {name} decoded {blocks} blocks"
                );
            }
            // Ranges starting in the kept header, crossing block boundaries, empty, whole file.
            let len = original.len() as u64;
            let mut rng = Rng(block_size as u64);
            let mut ranges = vec![0..len, 0..3, 5..len / 2, len - 1..len, 100..100];
            for _ in 0..20 {
                let a = rng.next() % len;
                let b = a + rng.next() % (len - a).min(3 * block_size as u64);
                ranges.push(a..b);
            }
            for r in ranges {
                let got = a.read_range(r.clone()).unwrap();
                let want = &original[r.start as usize..r.end as usize];
                assert!(got == want, "{what}: range {r:?} differs");
                // Into a buffer (whole blocks decoded in place), over garbage, from a fresh
                // archive and from one whose kept block may serve the first part.
                for fresh in [true, false] {
                    let mut b = open(&archive);
                    if !fresh {
                        b.read_range(r.start.saturating_sub(1)..r.start).unwrap();
                    }
                    let mut into = vec![0xA5; want.len()];
                    b.read_range_into(r.clone(), &mut into).unwrap();
                    assert!(into == want, "{what}: range {r:?} into a buffer differs");
                }
            }
            let mut short = vec![0u8; 9];
            assert!(matches!(
                a.read_range_into(0..10, &mut short),
                Err(Error::InvalidArgument(_))
            ));
            assert!(matches!(
                a.read_range(len - 1..len + 1),
                Err(Error::InvalidArgument(_))
            ));
            assert!(matches!(
                a.read_tensor("no such tensor"),
                Err(Error::NoSuchTensor(n)) if n == "no such tensor"
            ));
        }
    }
}

#[test]
fn a_tensor_decodes_only_its_blocks() {
    let original = model_20mb();
    assert!(original.len() > 20_000_000);
    let opts = EncodeOptions {
        block_size: MIB as u32,
        ..EncodeOptions::new(Mode::Fast)
    };
    let archive = encode_to_vec(&original, &opts);
    let mut a = open(&archive);
    let index_len = a.footer().index.len();
    let opened = a.stats();
    // Opening reads the header, index and trailer only (the trailer twice).
    assert_eq!(opened.blocks_decoded, 0);
    let container = a.header().encoded_len() + Footer::encoded_len(index_len as u64);
    assert!(opened.archive_bytes_read <= container + 52, "{opened:?}");
    let want = &tensor_ranges(&original);
    let (_, range) = want.iter().find(|(n, _)| n == "layer.6.weight").unwrap();
    let got = a.read_tensor("layer.6.weight").unwrap();
    assert_eq!(got.len(), 1_572_864);
    assert!(got == original[range.clone()]);
    let s = a.stats();
    assert_eq!(s.blocks_decoded, 2, "{s:?}");
    assert!(s.bytes_decoded < 3_000_000, "{s:?}");
    assert!(s.block_bytes_read < 3_000_000, "{s:?}");
    assert!(
        s.archive_bytes_read - opened.archive_bytes_read == s.block_bytes_read,
        "{s:?}"
    );
    // Small tensors share a block: reading one costs that block, and its neighbour in the same
    // block comes from the block kept from the last read.
    let mut a = open(&archive);
    a.read_tensor("layer.3.scale").unwrap();
    let one = a.stats();
    assert_eq!(one.blocks_decoded, 1, "{one:?}");
    assert!(one.bytes_decoded <= MIB as u64, "{one:?}");
    assert_eq!(
        a.read_tensor("layer.3.shift").unwrap(),
        original[want
            .iter()
            .find(|(n, _)| n == "layer.3.shift")
            .unwrap()
            .1
            .clone()]
    );
    assert_eq!(a.stats().blocks_decoded, 1);
}

#[test]
fn ranges_into_their_own_buffers() {
    // Every tensor of a 20 MB model into a buffer of its own: every block decoded once.
    let original = model_20mb();
    let opts = EncodeOptions {
        block_size: MIB as u32,
        ..EncodeOptions::new(Mode::Fast)
    };
    let archive = encode_to_vec(&original, &opts);
    let tensors = tensor_ranges(&original);
    let ranges: Vec<Range<usize>> = tensors.iter().map(|(_, r)| r.clone()).collect();
    let mut a = open(&archive);
    for (r, b) in ranges.iter().zip(read_each(&mut a, &ranges).unwrap()) {
        assert!(b[..] == original[r.clone()], "{r:?} differs");
    }
    let s = a.stats();
    assert_eq!(s.blocks_decoded, a.blocks(), "{s:?}");
    let data_start = ranges[0].start as u64;
    assert_eq!(s.bytes_decoded, original.len() as u64 - data_start, "{s:?}");
    // Two tensors far apart cost their own blocks only, not the ones between them.
    let mut a = open(&archive);
    let far: Vec<Range<usize>> = tensors
        .iter()
        .filter(|(n, _)| n == "layer.2.weight" || n == "layer.9.weight")
        .map(|(_, r)| r.clone())
        .collect();
    for (r, b) in far.iter().zip(read_each(&mut a, &far).unwrap()) {
        assert!(b[..] == original[r.clone()], "{r:?} differs");
    }
    assert_eq!(a.stats().blocks_decoded, 4, "{:?}", a.stats());

    // Random sorted, disjoint ranges of the sample (some in the kept header, some sharing a
    // block, some empty) at several block sizes, fresh and after a read that keeps a block.
    let original = sample();
    let len = original.len();
    for block_size in [4 << 10, 64 << 10] {
        let archive = encode_to_vec(
            &original,
            &EncodeOptions {
                block_size,
                ..EncodeOptions::new(Mode::Best)
            },
        );
        let mut rng = Rng(block_size as u64);
        for round in 0..20 {
            let mut cuts: Vec<usize> = (0..2 + rng.next() % 12)
                .map(|_| (rng.next() % len as u64) as usize)
                .collect();
            cuts.sort_unstable();
            let ranges: Vec<Range<usize>> = cuts.chunks_exact(2).map(|c| c[0]..c[1]).collect();
            let mut a = open(&archive);
            if round % 2 == 1 {
                let r = ranges[0].start as u64;
                a.read_range(r.saturating_sub(1)..r).unwrap();
            }
            for (r, b) in ranges.iter().zip(read_each(&mut a, &ranges).unwrap()) {
                assert!(b[..] == original[r.clone()], "{block_size}: {r:?} differs");
            }
        }
        // Overlapping, out of order, past the end.
        let mut a = open(&archive);
        for ranges in [
            [1000..1100, 1050..1150],
            [5000..5100, 1000..1100],
            [len - 50..len + 50, len..len],
        ] {
            assert!(matches!(
                read_each(&mut a, &ranges),
                Err(Error::InvalidArgument(_))
            ));
        }
    }
}

#[test]
fn extracted_safetensors_parse_and_match() {
    let original = sample();
    let source = tensor_ranges(&original);
    let archive = encode_to_vec(
        &original,
        &EncodeOptions {
            block_size: 64 << 10,
            ..EncodeOptions::new(Mode::Best)
        },
    );
    let mut a = open(&archive);
    // What the archive says of itself, the kept header's metadata included.
    assert_eq!(
        (a.mode(), a.kind(), a.block_size()),
        (Mode::Best, Kind::Safetensors, 64 << 10)
    );
    assert_eq!(a.original_len(), original.len() as u64);
    assert_eq!(a.archive_len(), archive.len() as u64);
    let md5: [u8; 16] = md5::Md5::digest(&original).into();
    assert_eq!(a.recorded_md5().unwrap(), Some(md5));
    let meta = a.metadata().expect("the sample has __metadata__");
    assert_eq!(meta.get("format").map(String::as_str), Some("pt"));
    assert_eq!(meta.len(), 2);
    assert!(original.starts_with(&(a.header_json().unwrap().len() as u64).to_le_bytes()));
    let picks: &[&[&str]] = &[
        &["embeddings.LayerNorm.bias"],
        // Mixed widths (BF16 768 bytes before an I64 and an F32), and a name given twice.
        &[
            "embeddings.LayerNorm.bias",
            "f32.pooler.dense.weight",
            "embeddings.position_ids",
            "embeddings.LayerNorm.bias",
            "f16.embedding.weight",
        ],
        &source.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
    ];
    for names in picks {
        let mut out = Vec::new();
        let written = a.write_safetensors(names, &mut out).unwrap();
        assert_eq!(written, out.len() as u64);
        let (h, json) = check_layout(&out);
        let mut unique = names.to_vec();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(h.tensors.len(), unique.len());
        assert_eq!(json["__metadata__"]["format"], "pt", "metadata kept");
        let base = 8 + h.json_len as usize;
        for t in &h.tensors {
            let (_, range) = source.iter().find(|(n, _)| *n == t.name).unwrap();
            let orig = a.tensor(&t.name).unwrap();
            assert_eq!((&t.dtype_name, &t.shape), (&orig.dtype_name, &orig.shape));
            let got = &out[base + t.begin as usize..base + t.end as usize];
            assert!(got == &original[range.clone()], "{} differs", t.name);
        }
        // The encoder takes the result for safetensors, as it would any valid file.
        let again = encode_to_vec(&out, &EncodeOptions::default());
        assert_eq!(open(&again).tensors().len(), unique.len());
    }
    assert!(matches!(
        a.write_safetensors(&["embeddings.LayerNorm.bias", "nope"], &mut Vec::new()),
        Err(Error::NoSuchTensor(m)) if m == "nope"
    ));
}

#[test]
fn stored_bytes_account_for_the_whole_archive() {
    let mut rng = Rng(3);
    let names: Vec<String> = (0..40).map(|k| format!("t{k}")).collect();
    let tensors: Vec<(&str, &str, Vec<u64>, Vec<u8>)> = names
        .iter()
        .map(|name| {
            let n = 1 + (rng.next() % 9000) as usize;
            (&name[..], "BF16", vec![n as u64], weights(&mut rng, n))
        })
        .collect();
    // With padding between tensors, and without.
    for (gap, file) in [(6, safetensors(&tensors, 6, "{}")), (0, sample())] {
        for block_size in [4096, 64 << 10] {
            let archive = encode_to_vec(
                &file,
                &EncodeOptions {
                    block_size,
                    ..EncodeOptions::new(Mode::Fast)
                },
            );
            let a = open(&archive);
            let s = a.stored_bytes();
            let total: u64 = s.per_tensor.iter().sum::<u64>() + s.between_tensors + s.container;
            assert_eq!(total, archive.len() as u64);
            let header = FileHeader::read(&mut &archive[..], None).unwrap();
            let blocks = a.footer().index.len() as u64;
            assert_eq!(
                s.container,
                header.encoded_len() + Footer::encoded_len(blocks)
            );
            assert_eq!(s.between_tensors > 0, gap > 0, "gap {gap}");
            for (t, &stored) in a.tensors().iter().zip(&s.per_tensor) {
                // Its bytes, give or take compression and a share of record overhead.
                let len = t.end - t.begin;
                assert!(len < 64 || stored > 0, "{}", t.name);
                assert!(stored <= len + 64 * len.div_ceil(512), "{}", t.name);
            }
        }
    }
}

#[test]
fn generic_archives_have_no_tensors() {
    let data = Rng(5).bytes(100_000);
    let archive = encode_to_vec(&data, &EncodeOptions::default());
    let mut a = open(&archive);
    assert!(a.tensors().is_empty());
    assert_eq!(a.kind(), Kind::Generic);
    assert!(a.metadata().is_none() && a.header_json().is_none());
    assert_eq!(a.read_range(10..70_000).unwrap(), &data[10..70_000]);
    assert_eq!(a.stored_bytes().per_tensor.len(), 0);
}

/// A stream cut short inside its tensor data still makes a safetensors archive (the file is
/// kept as it was); the tensors it lacks are errors, the others read normally.
#[test]
fn tensors_missing_from_a_truncated_original() {
    let original = sample();
    let ranges = tensor_ranges(&original);
    let (cut_name, cut) = ranges.last().unwrap().clone();
    let short = &original[..cut.start + 10];
    let mut archive = Vec::new();
    sc::encode(short, &mut archive, &EncodeOptions::default()).unwrap();
    let mut a = open(&archive);
    assert_eq!(a.tensors().len(), ranges.len());
    let (name, range) = &ranges[0];
    assert!(a.read_tensor(name).unwrap() == original[range.clone()]);
    assert!(
        matches!(a.read_tensor(&cut_name), Err(Error::Corrupt(m)) if m.contains("past the end"))
    );
    assert!(a
        .write_safetensors(&[name, &cut_name], &mut Vec::new())
        .is_err());
    let s = a.stored_bytes();
    let total: u64 = s.per_tensor.iter().sum::<u64>() + s.between_tensors + s.container;
    assert_eq!(total, archive.len() as u64);
}

/// Every single-byte change and every truncation of a small archive: opening and reading every
/// tensor must give the original bytes or an error, never a panic.
#[test]
fn corrupt_archives_give_errors() {
    let tiny = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/testdata/tiny.safetensors"
    ))
    .unwrap();
    let names: Vec<String> = tensor_ranges(&tiny).into_iter().map(|(n, _)| n).collect();
    for mode in [Mode::Fast, Mode::Best] {
        let archive = encode_to_vec(
            &tiny,
            &EncodeOptions {
                block_size: 4096,
                ..EncodeOptions::new(mode)
            },
        );
        let read_all = |bytes: &[u8]| -> sc::Result<Vec<u8>> {
            let mut a = Archive::open(Cursor::new(bytes))?;
            let mut out = Vec::new();
            for n in &names {
                out.extend(a.read_tensor(n)?);
            }
            out.extend(a.read_range(0..a.original_len())?);
            Ok(out)
        };
        let good = read_all(&archive).unwrap();
        let (mut failed, mut same) = (0, 0);
        for pos in 0..archive.len() {
            for flip in [1 << (pos % 8), 0xFF] {
                let mut bad = archive.clone();
                bad[pos] ^= flip;
                let r = std::panic::catch_unwind(|| read_all(&bad))
                    .unwrap_or_else(|_| panic!("{mode:?}: panic with byte {pos} ^ {flip:#x}"));
                match r {
                    Err(_) => failed += 1,
                    Ok(out) if out == good => same += 1,
                    Ok(_) => panic!("{mode:?}: wrong bytes with byte {pos} ^ {flip:#x}"),
                }
            }
        }
        // Only slack bits of entropy-coded payloads may go unnoticed.
        eprintln!("{mode:?}: {failed} errors, {same} unnoticed");
        assert!(
            same * 50 < failed,
            "{mode:?}: {same} unnoticed, {failed} errors"
        );
        for len in 0..archive.len() {
            assert!(read_all(&archive[..len]).is_err(), "truncated to {len}");
        }
    }
}

/// An index rewritten consistently (its checksum recomputed) but describing other blocks.
#[test]
fn index_that_disagrees_with_the_blocks_is_rejected() {
    let original = sample();
    let archive = encode_to_vec(
        &original,
        &EncodeOptions {
            block_size: 64 << 10,
            ..EncodeOptions::new(Mode::Fast)
        },
    );
    let footer = Footer::read_from_end(&mut Cursor::new(&archive), archive.len() as u64).unwrap();
    type Edit = fn(&mut Footer);
    let edits: [(&str, Edit); 6] = [
        ("swapped blocks", |f| f.index.swap(3, 4)),
        ("longer block", |f| f.index[2].raw_len += 2),
        ("stored length", |f| f.index[5].stored_len -= 1),
        ("offset", |f| f.index[1].offset += 1),
        ("original length", |f| f.original_len += 1),
        ("raw offset", |f| f.index[7].raw_offset -= 2),
    ];
    for (what, edit) in edits {
        let mut f = footer.clone();
        edit(&mut f);
        let mut bad = archive[..footer.end_offset as usize].to_vec();
        f.write(&mut bad).unwrap();
        let err = Archive::open(Cursor::new(&bad[..])).err();
        assert!(matches!(err, Some(Error::Corrupt(_))), "{what}: {err:?}");
    }
    // Two neighbouring blocks of equal raw length swapped in the index only: the index is
    // consistent, the record it points at is not.
    let mut f = footer.clone();
    let i = (0..f.index.len() - 1)
        .find(|&i| {
            let (a, b) = (f.index[i], f.index[i + 1]);
            a.raw_len == b.raw_len && a.stored_len != b.stored_len
        })
        .expect("the sample has two neighbouring blocks of equal length");
    let (a, b) = (f.index[i], f.index[i + 1]);
    f.index[i].stored_len = b.stored_len;
    f.index[i + 1].offset = a.offset + b.stored_len as u64;
    f.index[i + 1].stored_len = a.stored_len;
    let mut bad = archive[..footer.end_offset as usize].to_vec();
    f.write(&mut bad).unwrap();
    let mut arc = Archive::open(Cursor::new(&bad[..])).unwrap();
    let first = a.raw_offset..a.raw_offset + 10;
    assert!(matches!(
        arc.read_range(first),
        Err(Error::CorruptBlock { index, .. }) if index == i as u64
    ));
}

/// Random access keeps to a memory budget: an archive of 64 MiB blocks opens and reads with
/// the default, a budget too small for one block is refused (and the old one kept), and a
/// read under the tightest budget gives the same bytes.
#[test]
fn huge_blocks_read_within_the_memory_budget() {
    let block = 64 << 20;
    let data: Vec<u8> = (0..block + 3 * MIB).map(|i| (i / 4096) as u8).collect();
    let opts = EncodeOptions {
        block_size: block as u32,
        ..EncodeOptions::new(Mode::Fast)
    };
    let archive = encode_to_vec(&data, &opts);
    let mut a = open(&archive);
    let range = 100..block as u64 + 10;
    assert_eq!(a.read_range(range.clone()).unwrap(), &data[100..block + 10]);
    let err = a.set_memory(100 << 20).unwrap_err();
    assert!(err.to_string().contains("too small"), "{err}");
    a.set_memory(sc::memory_needed(block as u32)).unwrap();
    assert_eq!(a.read_range(range).unwrap(), &data[100..block + 10]);
}
