//! Helpers shared by the integration tests (each test file includes this module).
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output, Stdio};

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
    let mut archive = Vec::new();
    sc::encode(
        input,
        Some(input.len() as u64),
        &mut archive,
        opts,
        &mut |_| {},
    )
    .expect("encoding into memory cannot fail");
    archive
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

/// Runs `sc args...` in `dir`, its stdin read from the file `stdin` (else empty).
pub fn sc(dir: &Path, args: &[&str], stdin: Option<&Path>) -> Output {
    let input = match stdin {
        Some(p) => Stdio::from(std::fs::File::open(p).unwrap()),
        None => Stdio::null(),
    };
    let out = Command::new(env!("CARGO_BIN_EXE_sc"))
        .args(args)
        .current_dir(dir)
        .stdin(input)
        .output()
        .expect("run sc");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "sc {args:?} panicked: {err}");
    out
}

/// Asserts that a run succeeded.
pub fn ok(out: Output) -> Output {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Asserts that a run failed with exit 1 and one error line containing `needle`.
pub fn fails(out: Output, needle: &str) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with("sc: error: ") && err.lines().count() == 1,
        "{err}"
    );
    assert!(err.contains(needle), "{needle:?} not in {err}");
    err
}
