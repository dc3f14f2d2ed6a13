//! End-to-end round trips through `sc::encode` / `sc::decode`: the committed real-weights
//! excerpt, the full shared checkpoint when present, synthesised safetensors edge cases,
//! non-safetensors inputs, and determinism across thread counts.

use md5::{Digest, Md5};
use proptest::prelude::*;
use sc::{
    decode, encode, inspect, DecodeOptions, EncodeOptions, EncodeReport, Kind, Mode, SignModels,
};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

const MODES: [Mode; 2] = [Mode::Fast, Mode::Best];
const DEFAULT_BLOCK: u32 = 1 << 20;

fn crate_path(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

mod common;
use common::Rng;

impl Rng {
    /// BF16 weights of a `rows` x `cols` matrix whose rows and columns have scales of their
    /// own (as trained weights do), plus a few exact zeros.
    fn bf16_matrix(&mut self, rows: usize, cols: usize) -> Vec<u8> {
        let row_scale: Vec<u16> = (0..rows).map(|_| (self.next() % 5) as u16).collect();
        let col_scale: Vec<u16> = (0..cols).map(|_| (self.next() % 3) as u16).collect();
        let mut v = Vec::with_capacity(rows * cols * 2);
        for &r in &row_scale {
            for &c in &col_scale {
                let x = self.next();
                let exp = 0x72 + r + c - ((x % 8).min((x >> 3) % 8)) as u16;
                let w = match x >> 60 {
                    0 => 0,
                    _ => ((x >> 16) as u16 & 0x8000) | (exp << 7) | ((x >> 32) as u16 & 0x7F),
                };
                v.extend_from_slice(&w.to_le_bytes());
            }
        }
        v
    }

    /// BF16 values shaped like trained weights: sign random, exponent near 2^-6, mantissa random.
    fn bf16_weights(&mut self, n: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(n * 2);
        for _ in 0..n {
            let r = self.next();
            let exp = 0x78 + (r % 7) as u16 - ((r >> 3) % 5) as u16;
            let w = ((r >> 16) as u16 & 0x8000) | (exp << 7) | ((r >> 32) as u16 & 0x7F);
            v.extend_from_slice(&w.to_le_bytes());
        }
        v
    }
}

/// A reader that hands out at most `chunk` bytes per call and is interrupted now and then,
/// like a pipe: the pipeline must not depend on full reads.
struct Trickle<'a> {
    data: &'a [u8],
    chunk: usize,
    calls: usize,
}

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.calls += 1;
        if self.calls.is_multiple_of(5) {
            return Err(io::Error::new(io::ErrorKind::Interrupted, "try again"));
        }
        let n = buf.len().min(self.chunk).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

fn encode_with(
    input: &[u8],
    len: Option<u64>,
    mode: Mode,
    block_size: u32,
) -> (Vec<u8>, EncodeReport) {
    let opts = EncodeOptions {
        block_size,
        ..EncodeOptions::new(mode)
    };
    encode_opts(input, len, &opts)
}

/// Encodes `input` with `opts` and the input length `len`.
fn encode_opts(input: &[u8], len: Option<u64>, opts: &EncodeOptions) -> (Vec<u8>, EncodeReport) {
    let mut archive = Vec::new();
    let opts = EncodeOptions {
        input_len: len,
        ..*opts
    };
    let report = encode(input, &mut archive, &opts).expect("encode");
    (archive, report)
}

/// Decodes `archive` (with and without the archive length) and checks it gives `input` back,
/// with the MD5 the encoder reported as recorded (or none).
fn check_decode(archive: &[u8], input: &[u8], recorded: Option<[u8; 16]>, what: &str) {
    for archive_len in [Some(archive.len() as u64), None] {
        let mut out = Vec::new();
        let opts = DecodeOptions {
            check_md5: true,
            archive_len,
            ..Default::default()
        };
        let report = decode(archive, &mut out, &opts)
            .unwrap_or_else(|e| panic!("{what}: decode failed: {e}"));
        assert!(out == input, "{what}: decoded bytes differ from the input");
        assert_eq!(report.original_len, input.len() as u64, "{what}");
        assert_eq!(report.archive_len, archive.len() as u64, "{what}");
        let md5: [u8; 16] = Md5::digest(input).into();
        assert_eq!(report.md5, Some(md5), "{what}: MD5 of the output");
        assert_eq!(report.stored_md5, recorded, "{what}: recorded MD5");
    }
}

/// The MD5 an archive of `input` records with `mode`'s default settings.
fn default_md5(mode: Mode, input: &[u8]) -> Option<[u8; 16]> {
    (mode == Mode::Best).then(|| Md5::digest(input).into())
}

/// Encodes `input` (length known), checks the report and the round trip; returns the archive.
fn roundtrip(input: &[u8], mode: Mode, block_size: u32) -> (Vec<u8>, EncodeReport) {
    let opts = EncodeOptions {
        block_size,
        ..EncodeOptions::new(mode)
    };
    roundtrip_opts(input, &opts)
}

/// [`roundtrip`] with the settings `opts`.
fn roundtrip_opts(input: &[u8], opts: &EncodeOptions) -> (Vec<u8>, EncodeReport) {
    let (mode, block_size) = (opts.mode, opts.block_size);
    let what = format!(
        "{mode:?} (sign models {:?}), block {block_size}, {} bytes",
        opts.sign_models,
        input.len()
    );
    let (archive, report) = encode_opts(input, Some(input.len() as u64), opts);
    assert_eq!(report.original_len, input.len() as u64, "{what}");
    assert_eq!(report.archive_len, archive.len() as u64, "{what}");
    assert_eq!(
        report.kind == Kind::Generic,
        report.generic_reason.is_some(),
        "{what}: generic_reason {:?}",
        report.generic_reason
    );
    // BEST records the MD5 by default, FAST does not.
    assert_eq!(report.md5.is_some(), mode == Mode::Best, "{what}");
    check_decode(&archive, input, report.md5, &what);
    check_inspect(
        &archive,
        input,
        &report,
        opts.sign_models != SignModels::Off,
        &what,
    );
    (archive, report)
}

/// `sc::inspect` agrees with the encode report and accounts for every input byte; the archive
/// was coded with sign models allowed if `sign_models`.
fn check_inspect(
    archive: &[u8],
    input: &[u8],
    report: &EncodeReport,
    sign_models: bool,
    what: &str,
) {
    let info = inspect(&mut io::Cursor::new(archive)).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(info.archive_len, archive.len() as u64, "{what}");
    assert_eq!(info.header().kind, report.kind, "{what}");
    assert_eq!(info.footer().original_len, input.len() as u64, "{what}");
    assert_eq!(info.header().md5, report.md5.is_some(), "{what}");
    assert_eq!(info.footer().md5, report.md5.unwrap_or_default(), "{what}");
    assert_eq!(info.footer().index.len() as u64, report.blocks, "{what}");
    let prefix = info.header().prefix.len();
    assert_eq!(&input[..prefix], &info.header().prefix[..], "{what}");
    match report.kind {
        Kind::Safetensors => {
            assert_eq!(
                info.header_json().map(str::as_bytes),
                std::str::from_utf8(&input[8..prefix])
                    .ok()
                    .map(str::as_bytes),
                "{what}"
            );
            assert!(info.tensors.is_some(), "{what}");
        }
        Kind::Gguf => {
            assert_eq!(&input[..4], b"GGUF", "{what}");
            assert!(info.tensors.is_some(), "{what}");
        }
        Kind::Generic => assert_eq!(prefix, 0, "{what}"),
    }
    // Blocks tile the rest of the input exactly, and the planes cover the blocks.
    let mut at = prefix as u64;
    for e in &info.footer().index {
        assert_eq!(e.raw_offset, at, "{what}");
        at += e.raw_len as u64;
    }
    assert_eq!(at, input.len() as u64, "{what}");
    let planes: u64 = info.codecs.values().map(|c| c.original).sum();
    assert_eq!(planes, (input.len() - prefix) as u64, "{what}");
    check_version(&info, sign_models, what);
}

/// The archive says the lowest format version that holds it (docs/FORMAT.md, Versioning), and
/// uses nothing newer; `sign_models`: it was coded with sign models.
fn check_version(info: &sc::ArchiveInfo, sign_models: bool, what: &str) {
    let h = info.header();
    let want = if h.kind == Kind::Gguf {
        sc::container::GGUF_VERSION
    } else if h.mode == Mode::Best && h.kind == Kind::Safetensors {
        match sign_models {
            true => sc::container::SIGNS_VERSION,
            false => 4,
        }
    } else if h.packed.is_some() {
        3
    } else if h.refs.is_some() || h.mode == Mode::Best {
        2
    } else {
        1
    };
    assert_eq!(h.version, want, "{what}");
    let version_2 = ["ctxjoint", "sparse", "basectx"]
        .iter()
        .any(|c| info.codecs.contains_key(c))
        || ["xor8", "xor16", "sub16", "xor32", "sub32"]
            .iter()
            .any(|t| info.transforms.contains_key(t));
    assert!(
        h.version >= 2 || !version_2,
        "{what}: {:?} {:?}",
        info.codecs.keys(),
        info.transforms.keys()
    );
    assert!(
        h.version >= 4 || !info.codecs.contains_key("ctxtensors"),
        "{what}: {:?}",
        info.codecs.keys()
    );
    assert!(
        h.version >= 5
            || !["ctxsigns", "signs"]
                .iter()
                .any(|c| info.codecs.contains_key(c)),
        "{what}: {:?}",
        info.codecs.keys()
    );
    // Real headers (a tensor entry is some 60 bytes of JSON) always deflate smaller.
    if h.kind == Kind::Safetensors && h.prefix.len() > 200 {
        assert!(h.packed.is_some(), "{what}");
        assert!(info.kept_header_stored < info.kept_header_len, "{what}");
    }
}

/// Round trip in both modes, with the length known and as a stream; returns the FAST and BEST
/// reports for the known-length encodes.
fn roundtrip_all(input: &[u8]) -> [EncodeReport; 2] {
    MODES.map(|mode| {
        let (archive, report) = roundtrip(input, mode, DEFAULT_BLOCK);
        // Streamed: the header can only be checked without the payload length. For inputs whose
        // header survives that check either way, the archive is the same.
        let (streamed, sreport) = encode_with(input, None, mode, DEFAULT_BLOCK);
        check_decode(&streamed, input, sreport.md5, &format!("{mode:?} streamed"));
        if sreport.kind == report.kind {
            assert!(streamed == archive, "{mode:?}: streamed archive differs");
        }
        report
    })
}

/// One tensor for [`safetensors`]: name, dtype, shape, data.
type Tensor<'a> = (&'a str, &'a str, &'a [u64], Vec<u8>);

/// A safetensors file: 8-byte little-endian length, the JSON text, then `data`.
fn st_file(json: &str, data: &[u8]) -> Vec<u8> {
    let mut f = (json.len() as u64).to_le_bytes().to_vec();
    f.extend_from_slice(json.as_bytes());
    f.extend_from_slice(data);
    f
}

/// A valid safetensors file holding `tensors` back to back in the given order.
fn safetensors(tensors: &[Tensor]) -> Vec<u8> {
    let mut entries = Vec::new();
    let mut data = Vec::new();
    for (name, dtype, shape, bytes) in tensors {
        let shape: Vec<String> = shape.iter().map(u64::to_string).collect();
        entries.push(format!(
            "\"{name}\":{{\"dtype\":\"{dtype}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}",
            shape.join(","),
            data.len(),
            data.len() + bytes.len()
        ));
        data.extend_from_slice(bytes);
    }
    st_file(&format!("{{{}}}", entries.join(",")), &data)
}

fn entry(name: &str, dtype: &str, shape: &[u64], begin: usize, end: usize) -> String {
    let shape: Vec<String> = shape.iter().map(u64::to_string).collect();
    format!(
        "\"{name}\":{{\"dtype\":\"{dtype}\",\"shape\":[{}],\"data_offsets\":[{begin},{end}]}}",
        shape.join(",")
    )
}

fn assert_kind(reports: &[EncodeReport], kind: Kind, what: &str) {
    for r in reports {
        assert_eq!(r.kind, kind, "{what}: {:?}", r.generic_reason);
    }
}

// ---------------------------------------------------------------------------------------------
// Real weights
// ---------------------------------------------------------------------------------------------

#[test]
fn sample_excerpt_all_block_sizes() {
    let input = std::fs::read(crate_path("testdata/sample.safetensors")).expect("testdata");
    assert!(input.len() > 3_000_000);
    for mode in MODES {
        let mut sizes = Vec::new();
        for block_size in [4096u32, 1 << 20, 12 * 1024 + 2, 16 << 20] {
            let (archive, report) = roundtrip(&input, mode, block_size);
            assert_eq!(
                report.kind,
                Kind::Safetensors,
                "{:?}",
                report.generic_reason
            );
            // Real weights compress: BF16/F16 planes well, F32/I64 a little.
            assert!(
                archive.len() < input.len() * 9 / 10,
                "{mode:?} block {block_size}: {} of {}",
                archive.len(),
                input.len()
            );
            // Streamed: same bytes, the same archive.
            let (streamed, sreport) = encode_with(&input, None, mode, block_size);
            assert_eq!(sreport.kind, Kind::Safetensors);
            assert!(
                streamed == archive,
                "{mode:?} block {block_size}: stream differs"
            );
            sizes.push(archive.len());
        }
        eprintln!(
            "sample {mode:?}: {} -> {sizes:?} (blocks 4K, 1M, 12K+2, 16M)",
            input.len()
        );
    }
}

/// Every power-of-two block size from 4 KiB to 64 MiB, on tensors of one, two and three
/// dimensions that blocks cut at every kind of row position, and the excerpt of real weights;
/// BEST also with sign models (the widest matrix's columns lean to a sign, as trained weights'
/// often do).
#[test]
fn every_block_size_from_4k_to_64m() {
    let mut rng = Rng(41);
    let (mut a, b, c) = (
        rng.bf16_matrix(700, 384),
        rng.bf16_matrix(96, 31),
        rng.bf16_matrix(3, 1000),
    );
    // Each column's chance of a negative weight, in 1/8.
    let lean: Vec<u64> = (0..384)
        .map(|_| [1, 2, 6, 7][rng.next() as usize % 4])
        .collect();
    for (i, w) in a.chunks_mut(2).enumerate() {
        w[1] = w[1] & 0x7F | ((rng.next() % 8 < lean[i % 384]) as u8) << 7;
    }
    let f32s: Vec<u8> = rng
        .bf16_matrix(300, 77)
        .chunks(2)
        .flat_map(|w| [0x55, 0xAA, w[0], w[1]])
        .collect();
    let synthetic = safetensors(&[
        ("bias", "BF16", &[384], rng.bf16_weights(384)),
        ("wide", "BF16", &[700, 384], a),
        ("conv", "BF16", &[32, 3, 31], b),
        ("one", "BF16", &[3000], c),
        ("f32", "F32", &[300, 1, 77], f32s),
    ]);
    let sample = std::fs::read(crate_path("testdata/sample.safetensors")).expect("testdata");
    for input in [&synthetic, &sample] {
        // BEST codes a block of one tensor with ctxjoint, of several with ctxtensors, and with
        // sign models ctxsigns where the signs pay.
        let mut seen = [false; 3];
        for shift in 12..=26 {
            for (mode, sign_models) in [
                (Mode::Fast, SignModels::Off),
                (Mode::Best, SignModels::Off),
                (Mode::Best, SignModels::Paying),
                (Mode::Best, SignModels::Everywhere),
            ] {
                let opts = EncodeOptions {
                    block_size: 1 << shift,
                    sign_models,
                    ..EncodeOptions::new(mode)
                };
                let (archive, _) = roundtrip_opts(input, &opts);
                if mode == Mode::Best {
                    let info = inspect(&mut io::Cursor::new(&archive)).expect("inspect");
                    let has =
                        ["ctxjoint", "ctxtensors", "ctxsigns"].map(|c| info.codecs.contains_key(c));
                    assert!(has.iter().any(|&h| h), "block {}", 1 << shift);
                    assert!(
                        sign_models != SignModels::Off || !has[2],
                        "block {}",
                        1 << shift
                    );
                    seen = std::array::from_fn(|k| seen[k] || has[k]);
                }
            }
        }
        assert_eq!(seen, [true, true, true]);
    }
}

#[test]
fn sample_excerpt_best_beats_fast() {
    let input = std::fs::read(crate_path("testdata/sample.safetensors")).expect("testdata");
    let [fast, best] = roundtrip_all(&input);
    assert!(best.archive_len < fast.archive_len);
    let md5: [u8; 16] = Md5::digest(&input).into();
    assert_eq!((fast.md5, best.md5), (None, Some(md5)));
    // FAST records it when asked, and the decoder then checks it.
    let mut archive = Vec::new();
    let opts = EncodeOptions {
        md5: true,
        ..EncodeOptions::new(Mode::Fast)
    };
    let report = encode(&input[..], &mut archive, &opts).unwrap();
    assert_eq!(report.md5, Some(md5));
    check_decode(&archive, &input, Some(md5), "FAST with --md5");
}

#[test]
fn sample_excerpt_from_a_trickling_reader() {
    let input = std::fs::read(crate_path("testdata/sample.safetensors")).expect("testdata");
    let (reference, _) = encode_with(&input, Some(input.len() as u64), Mode::Fast, 64 << 10);
    for len in [Some(input.len() as u64), None] {
        let reader = Trickle {
            data: &input,
            chunk: 4099,
            calls: 0,
        };
        let mut archive = Vec::new();
        let opts = EncodeOptions {
            block_size: 64 << 10,
            input_len: len,
            ..EncodeOptions::new(Mode::Fast)
        };
        encode(reader, &mut archive, &opts).expect("encode");
        assert!(archive == reference);
        let reader = Trickle {
            data: &archive,
            chunk: 777,
            calls: 0,
        };
        let mut out = Vec::new();
        let opts = DecodeOptions {
            check_md5: true,
            archive_len: None,
            ..Default::default()
        };
        decode(reader, &mut out, &opts).expect("decode");
        assert!(out == input);
    }
}

#[test]
fn progress_is_monotonic_and_complete() {
    let input = std::fs::read(crate_path("testdata/sample.safetensors")).expect("testdata");
    let seen = std::sync::Mutex::new(Vec::new());
    let note = |n| seen.lock().unwrap().push(n);
    let mut archive = Vec::new();
    let opts = EncodeOptions {
        block_size: 64 << 10,
        progress: Some(&note),
        ..EncodeOptions::new(Mode::Fast)
    };
    encode(&input[..], &mut archive, &opts).unwrap();
    let got = std::mem::take(&mut *seen.lock().unwrap());
    assert!(got.windows(2).all(|w| w[0] <= w[1]));
    assert_eq!(got.last().copied(), Some(input.len() as u64));
    let mut out = Vec::new();
    let opts = DecodeOptions {
        progress: Some(&note),
        ..Default::default()
    };
    decode(&archive[..], &mut out, &opts).unwrap();
    let got = std::mem::take(&mut *seen.lock().unwrap());
    assert!(got.windows(2).all(|w| w[0] <= w[1]));
    assert!(*got.last().unwrap() <= archive.len() as u64);
    assert!(out == input);
}

#[test]
fn shared_minilm_bf16_ratios() {
    let path = crate_path("../shared/data/all-MiniLM-L6-v2.BF16.safetensors");
    let Ok(input) = std::fs::read(&path) else {
        eprintln!("note: {} is missing; skipping", path.display());
        return;
    };
    let mut ratios = Vec::new();
    for (mode, limit) in [(Mode::Fast, 0.673), (Mode::Best, 0.670)] {
        let (archive, report) = roundtrip(&input, mode, DEFAULT_BLOCK);
        assert_eq!(report.kind, Kind::Safetensors);
        let ratio = archive.len() as f64 / input.len() as f64;
        assert!(
            ratio <= limit,
            "{mode:?}: archive is {:.3}% of the input, over {:.1}%",
            100.0 * ratio,
            100.0 * limit
        );
        ratios.push(ratio);
    }
    eprintln!(
        "MiniLM BF16: FAST {:.3}%, BEST {:.3}%",
        100.0 * ratios[0],
        100.0 * ratios[1]
    );
}

// ---------------------------------------------------------------------------------------------
// Synthesised safetensors edge cases
// ---------------------------------------------------------------------------------------------

#[test]
fn empty_header_no_tensors() {
    let input = st_file("{}", &[]);
    assert_kind(&roundtrip_all(&input), Kind::Safetensors, "{}");
    // Padded the way writers pad headers, and with stray bytes after it.
    let input = st_file("{}      ", b"leftover bytes!");
    assert_kind(&roundtrip_all(&input), Kind::Safetensors, "{} + data");
}

#[test]
fn single_bf16_element() {
    let input = safetensors(&[("x", "BF16", &[1], vec![0x80, 0x3F])]);
    assert_kind(&roundtrip_all(&input), Kind::Safetensors, "one BF16");
    let input = safetensors(&[("x", "BF16", &[], vec![0x12, 0x34])]);
    assert_kind(&roundtrip_all(&input), Kind::Safetensors, "scalar BF16");
}

#[test]
fn odd_trailing_bytes_after_tensor_data() {
    let mut rng = Rng(1);
    for trailing in [1usize, 3, 7, 4097] {
        let mut input = safetensors(&[("w", "BF16", &[3000], rng.bf16_weights(3000))]);
        input.extend_from_slice(&rng.bytes(trailing));
        assert_kind(&roundtrip_all(&input), Kind::Safetensors, "trailing");
        // Small blocks: the trailing bytes get their own block.
        for mode in MODES {
            roundtrip(&input, mode, 4096);
        }
    }
}

#[test]
fn gap_between_tensors() {
    let mut rng = Rng(2);
    let a = rng.bf16_weights(5000);
    let b = rng.bf16_weights(4000);
    for gap in [1usize, 5, 4096, 9001] {
        let json = format!(
            "{{{},{}}}",
            entry("a", "BF16", &[5000], 0, a.len()),
            entry(
                "b",
                "BF16",
                &[40, 100],
                a.len() + gap,
                a.len() + gap + b.len()
            )
        );
        let mut data = a.clone();
        data.extend_from_slice(&rng.bytes(gap));
        data.extend_from_slice(&b);
        let input = st_file(&json, &data);
        assert_kind(&roundtrip_all(&input), Kind::Safetensors, "gap");
        for mode in MODES {
            roundtrip(&input, mode, 4096);
            roundtrip(&input, mode, 12 * 1024 + 2);
        }
    }
    // Data that starts after a gap at offset 0, too.
    let json = format!("{{{}}}", entry("a", "BF16", &[5000], 3, 3 + a.len()));
    let mut data = vec![1, 2, 3];
    data.extend_from_slice(&a);
    assert_kind(
        &roundtrip_all(&st_file(&json, &data)),
        Kind::Safetensors,
        "lead gap",
    );
}

#[test]
fn metadata_entry() {
    let mut rng = Rng(3);
    let w = rng.bf16_weights(1000);
    let json = format!(
        "{{\"__metadata__\":{{\"format\":\"pt\",\"note\":\"{{\\\"nested\\\": 1}}\"}},{}}}",
        entry("w", "BF16", &[10, 100], 0, w.len())
    );
    assert_kind(
        &roundtrip_all(&st_file(&json, &w)),
        Kind::Safetensors,
        "metadata",
    );
}

#[test]
fn tensors_out_of_offset_order_in_json() {
    let mut rng = Rng(4);
    let a = rng.bf16_weights(3000);
    let b = rng.bytes(4 * 777);
    let c = rng.bf16_weights(5);
    let (ab, bb, cb) = (0, a.len(), a.len() + b.len());
    let json = format!(
        "{{{},{},{}}}",
        entry("z_last", "F16", &[5], cb, cb + c.len()),
        entry("a_first", "BF16", &[3000], ab, ab + a.len()),
        entry("m_mid", "F32", &[777], bb, bb + b.len())
    );
    let mut data = a;
    data.extend_from_slice(&b);
    data.extend_from_slice(&c);
    let input = st_file(&json, &data);
    assert_kind(&roundtrip_all(&input), Kind::Safetensors, "out of order");
    for mode in MODES {
        roundtrip(&input, mode, 4096);
    }
}

#[test]
fn duplicate_tensor_names_in_json() {
    // JSON parsers keep one of two equal keys; the other tensor's bytes become a gap.
    let w = Rng(15).bf16_weights(2000);
    let json = format!(
        "{{{},{}}}",
        entry("w", "BF16", &[1000], 0, 2000),
        entry("w", "BF16", &[1000], 2000, 4000)
    );
    let input = st_file(&json, &w);
    roundtrip_all(&input);
    for mode in MODES {
        roundtrip(&input, mode, 4096);
    }
}

#[test]
fn zero_size_tensors() {
    let mut rng = Rng(5);
    let a = rng.bf16_weights(100);
    let json = format!(
        "{{{},{},{},{}}}",
        entry("empty0", "BF16", &[0], 0, 0),
        entry("a", "BF16", &[100], 0, a.len()),
        entry("empty1", "F32", &[4, 0, 3], a.len(), a.len()),
        entry("empty2", "I64", &[0], a.len(), a.len())
    );
    let input = st_file(&json, &a);
    assert_kind(&roundtrip_all(&input), Kind::Safetensors, "zero size");
    // Only zero-size tensors: no data at all.
    let json = format!("{{{}}}", entry("e", "BF16", &[0, 7], 0, 0));
    assert_kind(
        &roundtrip_all(&st_file(&json, &[])),
        Kind::Safetensors,
        "only empty",
    );
}

#[test]
fn all_equal_bf16_is_tiny() {
    let n = 1 << 19; // 1 MiB of BF16 1.0
    let data: Vec<u8> = [0x80u8, 0x3F].repeat(n);
    let input = safetensors(&[("ones", "BF16", &[512, 1024], data)]);
    for r in roundtrip_all(&input) {
        assert_eq!(r.kind, Kind::Safetensors);
        assert!(
            (r.archive_len as f64) < input.len() as f64 * 0.01,
            "{} bytes for {} equal values",
            r.archive_len,
            n
        );
    }
    // Same with small blocks: still tiny (constant planes cost one byte each).
    for mode in MODES {
        let (archive, _) = roundtrip(&input, mode, 64 << 10);
        assert!(archive.len() < input.len() / 100);
    }
}

#[test]
fn random_bf16_does_not_expand() {
    let mut rng = Rng(6);
    for (n, block) in [
        (1usize << 20, DEFAULT_BLOCK),
        (3 << 19, 64 << 10),
        (5000, DEFAULT_BLOCK),
    ] {
        let input = safetensors(&[("r", "BF16", &[n as u64 / 2], rng.bytes(n))]);
        for mode in MODES {
            let (archive, report) = roundtrip(&input, mode, block);
            assert_eq!(report.kind, Kind::Safetensors);
            let limit = input.len() as f64 * 1.01 + 200.0;
            assert!(
                archive.len() as f64 <= limit,
                "{mode:?} block {block}: {} bytes for {} random bytes",
                archive.len(),
                input.len()
            );
        }
    }
}

#[test]
fn unknown_dtype_string() {
    let mut rng = Rng(7);
    let q = rng.bytes(1001);
    let w = rng.bf16_weights(500);
    let json = format!(
        "{{{},{}}}",
        entry("q", "Q4_K", &[7, 11], 0, q.len()),
        entry("w", "BF16", &[500], q.len(), q.len() + w.len())
    );
    let mut data = q;
    data.extend_from_slice(&w);
    let input = st_file(&json, &data);
    assert_kind(&roundtrip_all(&input), Kind::Safetensors, "unknown dtype");
    for mode in MODES {
        roundtrip(&input, mode, 4096);
    }
}

#[test]
fn every_known_dtype() {
    let mut rng = Rng(8);
    let dtypes: [(&str, usize); 15] = [
        ("BOOL", 1),
        ("U8", 1),
        ("I8", 1),
        ("F8_E5M2", 1),
        ("F8_E4M3", 1),
        ("I16", 2),
        ("U16", 2),
        ("F16", 2),
        ("BF16", 2),
        ("I32", 4),
        ("U32", 4),
        ("F32", 4),
        ("I64", 8),
        ("U64", 8),
        ("F64", 8),
    ];
    let shape = [3u64, 37];
    let tensors: Vec<Tensor> = dtypes
        .iter()
        .map(|&(d, w)| (d, d, &shape[..], rng.bytes(w * 3 * 37)))
        .collect();
    let input = safetensors(&tensors);
    assert_kind(&roundtrip_all(&input), Kind::Safetensors, "all dtypes");
    for mode in MODES {
        roundtrip(&input, mode, 4096);
    }
}

/// Plausible contents for a tensor of `dtype`: trained-weight-like floats (a narrow band of
/// exponents, random sign and mantissa), small or sequential integers, mostly-false bools.
fn typical_values(rng: &mut Rng, dtype: &str, n: usize) -> Vec<u8> {
    // Roughly normal with standard deviation ~0.05 (sum of uniforms).
    let normal = |rng: &mut Rng| {
        let s: f64 = (0..4)
            .map(|_| (rng.next() >> 11) as f64 / (1u64 << 53) as f64)
            .sum();
        (s - 2.0) * 0.09
    };
    let mut out = Vec::new();
    for i in 0..n {
        let r = rng.next();
        match dtype {
            "F64" => out.extend_from_slice(&normal(rng).to_le_bytes()),
            "F32" => out.extend_from_slice(&(normal(rng) as f32).to_le_bytes()),
            "BF16" => {
                out.extend_from_slice(&((normal(rng) as f32).to_bits() >> 16).to_le_bytes()[..2])
            }
            // sign, 5 exponent bits near 2^-4, 10 mantissa bits.
            "F16" => {
                let w = (r as u16 & 0x8000)
                    | ((9 + (r >> 16) % 4) as u16) << 10
                    | (r >> 32) as u16 & 0x3FF;
                out.extend_from_slice(&w.to_le_bytes());
            }
            // 4 (E4M3) or 5 (E5M2) exponent bits in a narrow band.
            "F8_E4M3" => {
                out.push((r as u8 & 0x80) | ((4 + (r >> 8) % 3) as u8) << 3 | (r >> 16) as u8 & 7)
            }
            "F8_E5M2" => {
                out.push((r as u8 & 0x80) | ((12 + (r >> 8) % 3) as u8) << 2 | (r >> 16) as u8 & 3)
            }
            "I64" | "U64" => out.extend_from_slice(&(i as u64).to_le_bytes()),
            "I32" | "U32" => out.extend_from_slice(&((r % 1000) as u32).to_le_bytes()),
            "I16" | "U16" => out.extend_from_slice(&((r % 300) as u16).to_le_bytes()),
            "I8" | "U8" => out.push((r % 12) as u8),
            "BOOL" => out.push(r.is_multiple_of(10) as u8),
            _ => unreachable!("{dtype}"),
        }
    }
    out
}

/// Every dtype gets planes that suit it: each kind of tensor, alone in a file, compresses at
/// least as well as its dtype-aware split allows, in both modes, and the mix round-trips at
/// several block sizes.
#[test]
fn every_dtype_gets_dtype_aware_planes() {
    let mut rng = Rng(21);
    // Largest archive/input ratio expected for each dtype's typical values; plain byte-wise
    // coding of the floats would miss these (F32 ~0.92, F64 ~0.96 as bytes).
    let limits: [(&str, f64, &str); 15] = [
        ("F64", 0.89, "exp64"),
        ("F32", 0.86, "exp32"),
        ("BF16", 0.70, "exp16"),
        ("F16", 0.87, "exp16"),
        ("F8_E4M3", 0.85, "bytes"),
        ("F8_E5M2", 0.80, "bytes"),
        ("I64", 0.05, "delta64"),
        ("U64", 0.05, "delta64"),
        ("I32", 0.40, "split32"),
        ("U32", 0.40, "split32"),
        ("I16", 0.70, "split16"),
        ("U16", 0.70, "split16"),
        ("I8", 0.55, "bytes"),
        ("U8", 0.55, "bytes"),
        ("BOOL", 0.25, "bytes"),
    ];
    let n = 20_000;
    let mut all = Vec::new();
    for &(dtype, limit, transform) in &limits {
        let data = typical_values(&mut rng, dtype, n);
        let input = safetensors(&[(dtype, dtype, &[n as u64], data.clone())]);
        for mode in MODES {
            let (archive, _) = roundtrip(&input, mode, DEFAULT_BLOCK);
            let ratio = archive.len() as f64 / input.len() as f64;
            assert!(ratio <= limit, "{dtype} {mode:?}: {ratio:.3} > {limit}");
            let info = sc::inspect(&mut io::Cursor::new(&archive)).expect("inspect");
            assert!(
                info.transforms.contains_key(transform),
                "{dtype} {mode:?}: {:?}",
                info.transforms
            );
        }
        all.push((dtype, dtype, data));
    }
    let shape = [n as u64];
    let tensors: Vec<Tensor> = all
        .iter()
        .map(|(name, dtype, data)| (*name, *dtype, &shape[..], data.clone()))
        .collect();
    let input = safetensors(&tensors);
    for mode in MODES {
        for block in [4096, 65536 + 8, 1 << 20] {
            let (_, report) = roundtrip(&input, mode, block);
            assert_eq!(report.kind, Kind::Safetensors);
        }
    }
}

/// Tensors of every size around the block boundaries, so regions get packed into and cut at
/// block edges in every way.
#[test]
fn many_small_tensors_packed_into_blocks() {
    let mut rng = Rng(9);
    let mut owned: Vec<(String, &str, Vec<u64>, Vec<u8>)> = Vec::new();
    for i in 0..200usize {
        let (dtype, width) = [("BF16", 2), ("F16", 2), ("F32", 4), ("U8", 1)][i % 4];
        let count = (rng.next() % 3000) as usize + usize::from(i % 7 == 0) * 4096;
        let bytes = if width == 2 {
            rng.bf16_weights(count)
        } else {
            rng.bytes(count * width)
        };
        owned.push((format!("t{i}"), dtype, vec![count as u64], bytes));
    }
    let tensors: Vec<Tensor> = owned
        .iter()
        .map(|(n, d, s, b)| (n.as_str(), *d, &s[..], b.clone()))
        .collect();
    let input = safetensors(&tensors);
    for mode in MODES {
        for block in [4096u32, 4098, 12 * 1024 + 2, 1 << 20] {
            let (_, report) = roundtrip(&input, mode, block);
            assert_eq!(report.kind, Kind::Safetensors);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Inputs that are not (valid) safetensors
// ---------------------------------------------------------------------------------------------

fn assert_generic(input: &[u8], what: &str) {
    for r in roundtrip_all(input) {
        assert_eq!(r.kind, Kind::Generic, "{what}");
        assert!(r.generic_reason.is_some(), "{what}");
    }
}

#[test]
fn empty_and_tiny_inputs() {
    assert_generic(&[], "empty");
    for n in 1..=7usize {
        assert_generic(&vec![0x41u8; n], "tiny");
        assert_generic(&(0..n as u8).collect::<Vec<u8>>(), "tiny ramp");
    }
    // Exactly 8 bytes: a header length but nothing after it.
    assert_generic(&2u64.to_le_bytes(), "8 bytes");
    assert_generic(&0u64.to_le_bytes(), "zero header length");
    assert_generic(&st_file("{", &[]), "1-byte header");
}

#[test]
fn text_and_random_bytes() {
    let text = "The quick brown fox jumps over the lazy dog. ".repeat(5000);
    let reports = roundtrip_all(text.as_bytes());
    assert_kind(&reports, Kind::Generic, "text");
    // Text compresses even with order-0 coding.
    assert!(reports[0].archive_len < text.len() as u64 * 7 / 10);
    let mut rng = Rng(10);
    for n in [1usize, 100, 4095, 4096, 4097, 1 << 20, 3_000_001] {
        let input = rng.bytes(n);
        for r in roundtrip_all(&input) {
            assert_eq!(r.kind, Kind::Generic);
            assert!(r.archive_len as f64 <= n as f64 * 1.01 + 200.0);
        }
    }
    for mode in MODES {
        roundtrip(&rng.bytes(50_001), mode, 4096);
    }
}

#[test]
fn huge_header_length_claims() {
    let body = b"not much here".repeat(10);
    for claim in [
        u64::MAX,
        1 << 40,
        (100 << 20) + 1,
        200,
        body.len() as u64 + 1,
    ] {
        let mut input = claim.to_le_bytes().to_vec();
        input.extend_from_slice(&body);
        assert_generic(&input, &format!("claim {claim}"));
    }
    // At the limit of what a header may be: with the length known, rejected at once; streamed,
    // the header is read until the input ends.
    let mut input = (50u64 << 20).to_le_bytes().to_vec();
    input.extend_from_slice(&body);
    assert_generic(&input, "50 MiB claim");
}

#[test]
fn header_length_valid_but_json_invalid() {
    for json in [
        "{\"a\":",
        "not json at all",
        "[1,2,3]",
        "\"string\"",
        "{\"a\":1}",
        "\u{0}\u{0}",
    ] {
        let mut input = st_file(json, &[]);
        input.extend_from_slice(&Rng(11).bytes(5000));
        assert_generic(&input, json);
    }
    // Invalid UTF-8 in the header.
    let mut input = st_file("{\"\u{e9}\":{}}", &[0; 100]);
    input[10] = 0xFF;
    assert_generic(&input, "bad utf-8");
}

#[test]
fn offsets_beyond_the_file() {
    let w = Rng(12).bf16_weights(1000);
    let json = format!("{{{}}}", entry("w", "BF16", &[2000], 0, 4000));
    let input = st_file(&json, &w);
    for mode in MODES {
        // Known length: the header is checked against the payload and rejected.
        let (_, report) = roundtrip(&input, mode, DEFAULT_BLOCK);
        assert_eq!(report.kind, Kind::Generic);
        // Streamed: the payload length is unknown, so the header passes; it must still
        // round-trip although the tensor ends early.
        let (archive, r) = encode_with(&input, None, mode, DEFAULT_BLOCK);
        check_decode(&archive, &input, r.md5, "streamed, short tensor");
        let (archive, r) = encode_with(&input, None, mode, 4096);
        check_decode(
            &archive,
            &input,
            r.md5,
            "streamed, short tensor, small blocks",
        );
    }
    // Streamed, ending at an odd byte inside a BF16 tensor.
    let mut odd = input.clone();
    odd.pop();
    for mode in MODES {
        let (archive, r) = encode_with(&odd, None, mode, 4096);
        check_decode(&archive, &odd, r.md5, "streamed, odd end");
    }
}

#[test]
fn invalid_tensor_entries() {
    let w = Rng(13).bf16_weights(100);
    let bad = [
        // shape x dtype disagrees with the offsets.
        entry("w", "BF16", &[99], 0, 200),
        entry("w", "F32", &[100], 0, 200),
        // Reversed offsets.
        entry("w", "BF16", &[100], 200, 0),
        // Missing fields.
        "\"w\":{\"shape\":[100],\"data_offsets\":[0,200]}".into(),
        "\"w\":{\"dtype\":\"BF16\",\"data_offsets\":[0,200]}".into(),
        "\"w\":{\"dtype\":\"BF16\",\"shape\":[100]}".into(),
        "\"w\":{\"dtype\":\"BF16\",\"shape\":[100],\"data_offsets\":[0]}".into(),
        "\"w\":{\"dtype\":\"BF16\",\"shape\":[-1],\"data_offsets\":[0,200]}".into(),
        "\"w\":{\"dtype\":\"BF16\",\"shape\":[1.5],\"data_offsets\":[0,200]}".into(),
        // Shape overflowing u64.
        "\"w\":{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,200]}"
            .into(),
        // Overlapping tensors.
        format!(
            "{},{}",
            entry("a", "BF16", &[60], 0, 120),
            entry("b", "BF16", &[60], 80, 200)
        ),
    ];
    for e in bad {
        let input = st_file(&format!("{{{e}}}"), &w);
        assert_generic(&input, &e);
    }
}

// ---------------------------------------------------------------------------------------------
// Determinism across thread counts
// ---------------------------------------------------------------------------------------------

fn encode_in_pool(
    threads: usize,
    input: &[u8],
    len: Option<u64>,
    mode: Mode,
    block: u32,
) -> Vec<u8> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    pool.install(|| encode_with(input, len, mode, block).0)
}

#[test]
fn archive_identical_with_1_and_4_threads() {
    let sample = std::fs::read(crate_path("testdata/sample.safetensors")).expect("testdata");
    let random = Rng(14).bytes(700_001);
    for (input, name) in [(&sample, "sample"), (&random, "random")] {
        for mode in MODES {
            for block in [4096u32, 64 << 10, 1 << 20] {
                let one = encode_in_pool(1, input, Some(input.len() as u64), mode, block);
                let four = encode_in_pool(4, input, Some(input.len() as u64), mode, block);
                assert!(
                    one == four,
                    "{name} {mode:?} block {block}: archives differ"
                );
                let four_streamed = encode_in_pool(4, input, None, mode, block);
                assert!(
                    one == four_streamed,
                    "{name} {mode:?} block {block}: stream differs"
                );
                check_decode(&four, input, default_md5(mode, input), name);
            }
        }
    }
    // Decoding inside a one-thread pool works too (no deadlock from nested joins).
    let archive = encode_in_pool(4, &sample, None, Mode::Best, 64 << 10);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let md5 = default_md5(Mode::Best, &sample);
    pool.install(|| check_decode(&archive, &sample, md5, "1-thread decode"));
}

// ---------------------------------------------------------------------------------------------
// Random safetensors layouts
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
struct Layout {
    /// (dtype index, element count, gap before it) per tensor.
    tensors: Vec<(usize, usize, usize)>,
    trailing: usize,
    /// Order the entries appear in the JSON.
    json_order_seed: u64,
    seed: u64,
}

const LAYOUT_DTYPES: [(&str, usize); 6] = [
    ("BF16", 2),
    ("F16", 2),
    ("F32", 4),
    ("I64", 8),
    ("U8", 1),
    ("XX", 3),
];

fn layout_strategy() -> impl Strategy<Value = Layout> {
    let tensor = (
        0..LAYOUT_DTYPES.len(),
        prop_oneof![0usize..=3, 0usize..=3000],
        prop_oneof![3 => Just(0usize), 1 => 0usize..=9],
    );
    (
        prop::collection::vec(tensor, 0..12),
        prop_oneof![Just(0usize), 0usize..=9],
        any::<u64>(),
        any::<u64>(),
    )
        .prop_map(|(tensors, trailing, json_order_seed, seed)| Layout {
            tensors,
            trailing,
            json_order_seed,
            seed,
        })
}

fn build_layout(l: &Layout) -> Vec<u8> {
    let mut rng = Rng(l.seed);
    let mut entries = Vec::new();
    let mut data = Vec::new();
    for (i, &(d, count, gap)) in l.tensors.iter().enumerate() {
        let (dtype, width) = LAYOUT_DTYPES[d];
        data.extend_from_slice(&rng.bytes(gap));
        let bytes = if width == 2 {
            rng.bf16_weights(count)
        } else {
            rng.bytes(count * width)
        };
        entries.push(entry(
            &format!("t{i}"),
            dtype,
            &[count as u64],
            data.len(),
            data.len() + bytes.len(),
        ));
        data.extend_from_slice(&bytes);
    }
    data.extend_from_slice(&rng.bytes(l.trailing));
    let mut order = Rng(l.json_order_seed);
    for i in (1..entries.len()).rev() {
        let j = (order.next() % (i as u64 + 1)) as usize;
        entries.swap(i, j);
    }
    st_file(&format!("{{{}}}", entries.join(",")), &data)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 48,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_layouts_roundtrip(
        layout in layout_strategy(),
        block in prop_oneof![Just(4096u32), (2048u32..=8192).prop_map(|b| b * 2)],
        best in any::<bool>(),
        streamed in any::<bool>(),
        cut in prop::option::weighted(0.2, any::<prop::sample::Index>()),
    ) {
        let mut input = build_layout(&layout);
        // Sometimes cut the file short, so the header points past the data.
        if let Some(c) = cut {
            input.truncate(c.index(input.len() + 1));
        }
        let mode = if best { Mode::Best } else { Mode::Fast };
        let len = (!streamed).then_some(input.len() as u64);
        let (archive, report) = encode_with(&input, len, mode, block);
        if cut.is_none() {
            prop_assert_eq!(report.kind, Kind::Safetensors);
        }
        check_decode(&archive, &input, report.md5, "random layout");
    }
}

// ---------------------------------------------------------------------------------------------
// Cancellation
// ---------------------------------------------------------------------------------------------

/// A writer that counts the bytes written after `cancel` was set.
struct AfterCancel<'a> {
    cancel: &'a sc::Cancel,
    before: usize,
    after: usize,
}

impl io::Write for AfterCancel<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.cancel.is_cancelled() {
            true => self.after += buf.len(),
            false => self.before += buf.len(),
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Runs `run` with a token (set before it starts with `set_at_start`, else by the progress
/// callback, after the first block is written) and a writer: it must end cancelled, writing
/// nothing after the token was set. Returns the bytes written before.
fn cancelled(
    set_at_start: bool,
    run: impl FnOnce(&sc::Cancel, &(dyn Fn(u64) + Sync), &mut AfterCancel) -> sc::Result<()>,
) -> usize {
    let cancel = sc::Cancel::new();
    if set_at_start {
        cancel.cancel();
    }
    let progress = |_: u64| cancel.cancel();
    let mut out = AfterCancel {
        cancel: &cancel,
        before: 0,
        after: 0,
    };
    let e = run(&cancel, &progress, &mut out).unwrap_err();
    assert!(matches!(e, sc::Error::Cancelled), "{e}");
    assert_eq!(out.after, 0, "written after the token was set");
    out.before
}

/// A token set before an encode or decode stops it with nothing written; one set after the
/// first block is written (the progress callback runs then) stops it with nothing more
/// written: no further block, no trailer.
#[test]
fn a_cancel_token_stops_encode_and_decode_with_nothing_more_written() {
    let mut rng = Rng(41);
    let original: Vec<u8> = (0..1 << 20).map(|_| (rng.next() % 7) as u8).collect();
    let block_size = 64 << 10;
    let fast = EncodeOptions {
        block_size,
        ..EncodeOptions::new(Mode::Fast)
    };
    let archive = sc::encode_to_vec(&original, &fast).unwrap();
    for set_at_start in [true, false] {
        let encoded = cancelled(set_at_start, |cancel, progress, out| {
            let opts = EncodeOptions {
                block_size,
                progress: Some(progress),
                cancel: Some(cancel),
                threads: 2,
                ..EncodeOptions::new(Mode::Best)
            };
            encode(&original[..], out, &opts).map(drop)
        });
        assert_eq!(encoded == 0, set_at_start);
        let decoded = cancelled(set_at_start, |cancel, progress, out| {
            let opts = DecodeOptions {
                progress: Some(progress),
                cancel: Some(cancel),
                threads: 2,
                ..Default::default()
            };
            decode(&archive[..], out, &opts).map(drop)
        });
        assert_eq!(decoded == 0, set_at_start);
        assert!(decoded <= block_size as usize, "{decoded} bytes written");
    }
}
