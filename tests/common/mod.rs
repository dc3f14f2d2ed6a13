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
