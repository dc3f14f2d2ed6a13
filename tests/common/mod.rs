//! Helpers shared by the integration tests of the library and of the command line (each test
//! file includes this module; `cli/tests/common` includes it too).
#![allow(dead_code)]

use sc::lab::Header;
use std::ops::Range;

/// SplitMix64: a small, fast, seedable generator for reproducible pseudo-random test data.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(n + 8);
        while v.len() < n {
            v.extend_from_slice(&self.next().to_le_bytes());
        }
        v.truncate(n);
        v
    }
}

/// Encodes `input` (length known) into a new archive.
pub fn encode_to_vec(input: &[u8], opts: &sc::EncodeOptions) -> Vec<u8> {
    sc::encode_to_vec(input, opts).expect("encoding into memory cannot fail")
}

/// Builds a safetensors file from `(name, dtype, shape, bytes)` in that order, with `gap` bytes
/// of padding after each tensor and `meta` (JSON) as `__metadata__`; the JSON is padded to a
/// multiple of 8 bytes, as the reference writer does.
pub fn safetensors(tensors: &[(&str, &str, Vec<u64>, Vec<u8>)], gap: usize, meta: &str) -> Vec<u8> {
    let mut json = format!("{{\"__metadata__\":{meta}");
    let mut payload = Vec::new();
    for (name, dtype, shape, bytes) in tensors {
        let shape: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
        json.push_str(&format!(
            ",\"{name}\":{{\"dtype\":\"{dtype}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}",
            shape.join(","),
            payload.len(),
            payload.len() + bytes.len()
        ));
        payload.extend_from_slice(bytes);
        payload.extend(std::iter::repeat_n(0xA5, gap));
    }
    json.push('}');
    while json.len() % 8 != 0 {
        json.push(' ');
    }
    let mut out = (json.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(json.as_bytes());
    out.extend_from_slice(&payload);
    out
}

/// Where each tensor's bytes are in `file` (safetensors or GGUF), by name, from its own header.
pub fn tensor_ranges(file: &[u8]) -> Vec<(String, Range<usize>)> {
    if file.starts_with(b"GGUF") {
        let h = sc::gguf::GgufHeader::parse(file, file.len() as u64).expect("valid GGUF");
        let range = |r: &Range<u64>| r.start as usize..r.end as usize;
        return h
            .tensors
            .iter()
            .map(|t| (t.name.clone(), range(&t.range)))
            .collect();
    }
    let json_len = u64::from_le_bytes(file[..8].try_into().unwrap()) as usize;
    let h = Header::parse(
        &file[8..8 + json_len],
        Some((file.len() - 8 - json_len) as u64),
    )
    .expect("valid safetensors");
    let base = 8 + json_len;
    h.tensors
        .iter()
        .map(|t| {
            (
                t.name.clone(),
                base + t.begin as usize..base + t.end as usize,
            )
        })
        .collect()
}

/// Reads `ranges` of the original file each into a buffer of its own (filled with garbage
/// first) through one `read_ranges_into`.
pub fn read_each<R: std::io::Read + std::io::Seek + Send>(
    a: &mut sc::Archive<R>,
    ranges: &[Range<usize>],
) -> sc::Result<Vec<Vec<u8>>> {
    let mut bufs: Vec<Vec<u8>> = ranges.iter().map(|r| vec![0x5A; r.len()]).collect();
    let mut parts: Vec<(u64, &mut [u8])> = ranges
        .iter()
        .zip(&mut bufs)
        .map(|(r, b)| (r.start as u64, &mut b[..]))
        .collect();
    a.read_ranges_into(&mut parts)?;
    Ok(bufs)
}

/// Parses an extracted safetensors file and checks its layout: no holes, every tensor aligned
/// to its element size, the header padded to 8 bytes.
pub fn check_layout(file: &[u8]) -> (Header, serde_json::Value) {
    let json_len = u64::from_le_bytes(file[..8].try_into().unwrap()) as usize;
    assert_eq!((8 + json_len) % 8, 0, "data does not start 8-aligned");
    let json = &file[8..8 + json_len];
    let h = Header::parse(json, Some((file.len() - 8 - json_len) as u64)).expect("parses");
    let mut end = 0;
    for t in &h.tensors {
        assert_eq!(t.begin, end, "hole or overlap before {}", t.name);
        assert_eq!(t.begin % t.dtype.map_or(1, |d| d.width()), 0, "{}", t.name);
        end = t.end;
    }
    assert_eq!(end as usize, file.len() - 8 - json_len, "trailing bytes");
    (h, serde_json::from_slice(json).unwrap())
}

/// Decodes `archive` every way the library reads one (in memory, as a stream, as a file
/// through maps, tensor by tensor through the index) and checks each gives `original`.
pub fn decodes_everywhere(archive: &[u8], original: &[u8], base: Option<&sc::Base>) {
    use sc::{decode, decode_file, decode_to_vec, Archive, DecodeOptions};
    use std::io::Cursor;
    let opts = DecodeOptions {
        base,
        check_md5: true,
        ..Default::default()
    };
    assert!(
        decode_to_vec(archive, &opts).unwrap() == original,
        "in memory"
    );
    let mut streamed = Vec::new();
    decode(archive, &mut streamed, &opts).unwrap();
    assert!(streamed == original, "as a stream");
    let mut f = tempfile::tempfile().unwrap();
    std::io::Write::write_all(&mut f, archive).unwrap();
    let mut from_file = Vec::new();
    decode_file(&f, &mut from_file, &opts).unwrap();
    assert!(from_file == original, "as a file");
    let open = || {
        match base {
            Some(b) => Archive::open_with_base(Cursor::new(archive), b.clone()),
            None => Archive::open(Cursor::new(archive)),
        }
        .unwrap()
    };
    let mut a = open();
    for (name, range) in tensor_ranges(original) {
        let got = a.read_tensor(&name).unwrap();
        assert!(got == original[range], "tensor {name} by random access");
    }
    assert!(
        a.read_range(0..original.len() as u64).unwrap() == original,
        "whole range"
    );
    // Many ranges at once, each into its own buffer: every tensor whole, and pieces of them
    // cut at odd places (some left out, some sharing blocks); with repeated tensors, read a
    // piece of the archive at a time, down to a block or less.
    let tensors = tensor_ranges(original);
    let whole: Vec<_> = tensors.iter().map(|(_, r)| r.clone()).collect();
    let mut cuts: Vec<_> = std::iter::once(0..5).collect();
    for (k, r) in whole.iter().enumerate() {
        let third = r.len() / 3;
        let (p, q) = (r.start + third + k, r.end - third + 3 * k);
        cuts.extend([r.start..p.min(r.end), p.min(r.end)..q.min(r.end)]);
        if k % 3 != 0 {
            cuts.push(q.min(r.end)..r.end);
        }
    }
    for piece in [None, Some(1), Some(100 << 10)] {
        for ranges in [&whole, &cuts] {
            let mut a = open();
            if let Some(p) = piece {
                a.set_repeat_piece(p);
            }
            for (r, b) in ranges.iter().zip(read_each(&mut a, ranges).unwrap()) {
                assert!(b[..] == original[r.clone()], "{piece:?}: {r:?} by ranges");
            }
        }
    }
}

/// One GGUF metadata value of every type, arrays of numbers, booleans, strings and arrays
/// (empty ones too) among them, under the keys `k0`, `k1`, ...
pub fn gguf_every_value() -> Vec<(String, sc::gguf::Value)> {
    use sc::gguf::Value;
    let values = vec![
        Value::U8(200),
        Value::I8(-1),
        Value::U16(513),
        Value::I16(-2),
        Value::U32(7),
        Value::I32(-7),
        Value::F32(1.5),
        Value::Bool(true),
        Value::String("tëxt".into()),
        Value::Numbers(
            6,
            2,
            [0.5f32, -1.0]
                .iter()
                .flat_map(|f| f.to_le_bytes())
                .collect(),
        ),
        Value::Numbers(7, 3, vec![1, 0, 1]),
        Value::Numbers(12, 0, vec![]),
        Value::Strings(vec!["<s>".into(), String::new(), "ü".into()]),
        Value::Strings(vec![]),
        Value::Arrays(vec![
            Value::Numbers(2, 1, 9u16.to_le_bytes().to_vec()),
            Value::Strings(vec!["x".into()]),
            Value::Arrays(vec![]),
        ]),
        Value::U64(u64::MAX),
        Value::I64(i64::MIN),
        Value::F64(0.25),
    ];
    values
        .into_iter()
        .enumerate()
        .map(|(k, v)| (format!("k{k}"), v))
        .collect()
}

/// The ggml type called `name`.
pub fn ggml(name: &str) -> &'static sc::gguf::types::GgmlType {
    let found = sc::gguf::types::TYPES.iter().find(|t| t.name == name);
    found.unwrap_or_else(|| panic!("no ggml type {name}"))
}

/// A GGUF file (version 3, `metadata`) of the tensors of the safetensors file `file`, each
/// with its name, dtype (as the ggml type of that name) and shape (reversed, as GGUF stores
/// it), in the same order.
pub fn gguf_of(file: &[u8], metadata: &[(String, sc::gguf::Value)]) -> Vec<u8> {
    let json_len = u64::from_le_bytes(file[..8].try_into().unwrap()) as usize;
    let h = Header::parse(&file[8..8 + json_len], None).expect("valid safetensors");
    let data = &file[8 + json_len..];
    let dims: Vec<Vec<u64>> = h
        .tensors
        .iter()
        .map(|t| t.shape.iter().rev().copied().collect())
        .collect();
    let tensors: Vec<_> = h
        .tensors
        .iter()
        .zip(&dims)
        .map(|(t, d)| {
            let bytes = &data[t.begin as usize..t.end as usize];
            (t.name.as_str(), d.as_slice(), ggml(&t.dtype_name), bytes)
        })
        .collect();
    sc::gguf::write::file(3, metadata, &tensors)
}

/// A GGUF file of every metadata value type, alignment 64, with two zero-element tensors (at
/// one offset), F32, F16, BF16 and quantized tensors whose lengths are not multiples of the
/// alignment.
pub fn odd_gguf() -> Vec<u8> {
    let mut metadata = gguf_every_value();
    metadata.push(("general.alignment".into(), sc::gguf::Value::U32(64)));
    let mut rng = Rng(7);
    let (f32s, f16s, bf16s) = (rng.bytes(4 * 40), rng.bytes(2 * 33), rng.bytes(2 * 64));
    let (q8, q4k) = (rng.bytes(34 * 3), rng.bytes(144));
    let tensors: [(&str, &[u64], _, &[u8]); 7] = [
        ("f32", &[40], ggml("F32"), &f32s),
        ("empty", &[0], ggml("F16"), &[]),
        ("empty2", &[32, 0], ggml("Q8_0"), &[]),
        ("f16", &[3, 11], ggml("F16"), &f16s),
        ("q8", &[96], ggml("Q8_0"), &q8),
        ("bf16", &[16, 2, 2], ggml("BF16"), &bf16s),
        ("q4k", &[256], ggml("Q4_K"), &q4k),
    ];
    sc::gguf::write::file(3, &metadata, &tensors)
}

/// A GGUF checkpoint of the tensors of the safetensors file `base` and a quantized one `q8`, and
/// its fine-tune's: the tensors of `tune`, the quantized one changed in one block.
pub fn gguf_pair(base: &[u8], tune: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let mut rng = Rng(3);
    let q8 = rng.bytes(34 * 64);
    let mut q8_tuned = q8.clone();
    q8_tuned[40..60].copy_from_slice(&rng.bytes(20));
    let with_q8 = |st: &[u8], q: &[u8]| {
        let file = gguf_of(st, &[]);
        let h = sc::gguf::GgufHeader::parse(&file, file.len() as u64).unwrap();
        let mut tensors: Vec<(String, Vec<u64>, _, Vec<u8>)> = Vec::new();
        for t in &h.tensors {
            let bytes = file[t.range.start as usize..t.range.end as usize].to_vec();
            tensors.push((t.name.clone(), t.dims.clone(), t.ggml_type, bytes));
        }
        tensors.push(("q8".into(), vec![32 * 64], ggml("Q8_0"), q.to_vec()));
        let refs: Vec<_> = tensors
            .iter()
            .map(|(n, d, t, b)| (n.as_str(), d.as_slice(), *t, b.as_slice()))
            .collect();
        sc::gguf::write::file(3, &gguf_every_value(), &refs)
    };
    (with_q8(base, &q8), with_q8(tune, &q8_tuned))
}
