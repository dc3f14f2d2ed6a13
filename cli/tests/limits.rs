//! Bounded resources, measured on whole `sc` processes (peak resident memory from `wait4`):
//! blocks in flight stay within the memory budget whatever `-T` and the block size, and a
//! large safetensors header costs a small multiple of its size.

mod common;

use common::{measure, tensor_ranges};

const MIB: u64 = 1 << 20;
const BUDGET: u64 = 256 * MIB;

/// An archive of `blocks` blocks of 64 MiB of one repeated byte: a few kilobytes that decode to
/// gigabytes, the worst case for memory per block in flight.
fn constant_blocks(blocks: usize) -> Vec<u8> {
    use sc::container::{Footer, IndexEntry};
    let block = 64u32 << 20;
    let opts = sc::EncodeOptions {
        block_size: block,
        ..sc::EncodeOptions::default()
    };
    let one = common::encode_to_vec(&vec![7u8; block as usize], &opts);
    let info = sc::inspect(&mut std::io::Cursor::new(&one)).unwrap();
    let header_len = info.header().encoded_len() as usize;
    let e = info.footer().index[0];
    let record = &one[e.offset as usize..(e.offset + e.stored_len as u64) as usize];
    let mut archive = one[..header_len].to_vec();
    let mut index = Vec::new();
    for k in 0..blocks as u64 {
        index.push(IndexEntry {
            offset: archive.len() as u64,
            raw_offset: k * block as u64,
            ..e
        });
        archive.extend_from_slice(record);
    }
    let footer = Footer {
        end_offset: archive.len() as u64,
        original_len: blocks as u64 * block as u64,
        index,
        ..info.footer().clone()
    };
    footer.write(&mut archive).unwrap();
    archive
}

/// Decoding 20 constant 64 MiB blocks at `-T 16` (1.3 GB of output) stays within the default
/// 256 MiB budget, and so does verifying them (which also hashes them); a budget too small for
/// one block is refused in one line.
#[test]
fn decoding_huge_blocks_stays_within_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("c.sc"), constant_blocks(20)).unwrap();
    for args in [
        &["decode", "-q", "-T", "16", "-c", "c.sc"][..],
        &["decode", "-q", "-T", "16", "--md5", "-c", "c.sc"],
        &["verify", "-q", "-T", "16", "c.sc"],
    ] {
        let m = measure(d, args);
        assert_eq!(m.code, Some(0), "{args:?}: {}", m.stderr);
        assert!(m.peak < BUDGET, "{args:?}: peak {} MiB", m.peak / MIB);
    }
    let m = measure(d, &["decode", "-q", "--memory", "100M", "-c", "c.sc"]);
    assert_eq!(m.code, Some(1), "{}", m.stderr);
    assert!(
        m.stderr.contains("too small for blocks of 67108864 bytes"),
        "{}",
        m.stderr
    );
}

/// Encoding with 64 MiB blocks at `-T 16` stays within the default budget, in BEST mode also
/// for a safetensors file of weights.
#[test]
fn encoding_huge_blocks_stays_within_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // 256 MiB of real weights: the sample over and over.
    let sample = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../testdata/sample.safetensors"
    ))
    .unwrap();
    let mut big = Vec::with_capacity(256 << 20);
    while big.len() < 256 << 20 {
        big.extend_from_slice(&sample);
    }
    big.truncate(256 << 20);
    std::fs::write(d.join("big.bin"), &big).unwrap();
    // The sample's token embeddings over and over as one BF16 tensor of rows of 384 in a
    // safetensors file: BEST codes its blocks with the context models and the sign models.
    let (_, embeddings) = tensor_ranges(&sample)
        .into_iter()
        .find(|(name, _)| name == "embeddings.word_embeddings.weight")
        .unwrap();
    let values: Vec<u8> = sample[embeddings]
        .iter()
        .copied()
        .cycle()
        .take(big.len() / 768 * 768)
        .collect();
    drop(big);
    let json = format!(
        r#"{{"w":{{"dtype":"BF16","shape":[{},384],"data_offsets":[0,{}]}}}}"#,
        values.len() / 768,
        values.len()
    );
    let mut st = (json.len() as u64).to_le_bytes().to_vec();
    st.extend_from_slice(json.as_bytes());
    st.extend_from_slice(&values);
    drop(values);
    std::fs::write(d.join("big.safetensors"), &st).unwrap();
    drop(st);
    for args in [
        &["encode", "-q", "-b", "64M", "-T", "16", "big.bin"][..],
        &[
            "encode", "-q", "-f", "-b", "64M", "-T", "16", "-m", "best", "big.bin",
        ],
        &[
            "encode",
            "-q",
            "-b",
            "64M",
            "-T",
            "16",
            "-m",
            "best",
            "big.safetensors",
        ],
    ] {
        let m = measure(d, args);
        assert_eq!(m.code, Some(0), "{args:?}: {}", m.stderr);
        assert!(m.peak < BUDGET, "{args:?}: peak {} MiB", m.peak / MIB);
    }
}

/// `-T` above the core count is capped, with a note under `-v`.
#[test]
fn threads_above_the_cores_are_capped_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("x"), b"some bytes").unwrap();
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let many = (4 * cores).to_string();
    let note = format!("-T {many} is more than the {cores} cores here; using {cores}");
    let m = measure(d, &["encode", "-v", "-T", &many, "x"]);
    assert_eq!(m.code, Some(0), "{}", m.stderr);
    assert!(m.stderr.contains(&note), "{}", m.stderr);
    let m = measure(d, &["encode", "-f", "-T", &many, "x"]);
    assert_eq!(m.code, Some(0), "{}", m.stderr);
    assert!(!m.stderr.contains("cores here"), "{}", m.stderr);
}

/// A safetensors header of 200 000 tensors (about 13 MB of JSON): `encode`, `info`, `list` and
/// `extract` each stay within 8 times the header plus the fixed cost of a run.
#[test]
fn a_large_header_costs_a_small_multiple_of_its_size() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let n = 200_000u64;
    let mut json = String::from("{\"__metadata__\":{\"format\":\"pt\"}");
    for i in 0..n {
        json.push_str(&format!(
            ",\"layers.{i}.w\":{{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[{},{}]}}",
            2 * i,
            2 * i + 2
        ));
    }
    json.push('}');
    let mut file = (json.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(json.as_bytes());
    file.extend(common::Rng(1).bytes(2 * n as usize));
    std::fs::write(d.join("h.safetensors"), &file).unwrap();
    let limit = 8 * json.len() as u64 + 48 * MIB;
    for args in [
        &["encode", "-q", "h.safetensors"][..],
        &["info", "h.safetensors.sc"],
        &["list", "h.safetensors.sc"],
        &[
            "extract",
            "-q",
            "h.safetensors.sc",
            "-t",
            "layers.77.w",
            "-c",
        ],
    ] {
        let m = measure(d, args);
        assert_eq!(m.code, Some(0), "{args:?}: {}", m.stderr);
        assert!(
            m.peak < limit,
            "{args:?}: peak {} MiB for a {} MiB header",
            m.peak / MIB,
            json.len() as u64 / MIB
        );
    }
}
