//! GGUF files and their archives on the command line: folders of split GGUF files, `sc info`,
//! `sc list` and `sc extract` of GGUF archives (extracts read back as GGUF), verify, `--base`.

mod common;

use common::{fails, gguf_of, gguf_pair, odd_gguf, ok, sc};
use sc::gguf::{GgufHeader, Value};
use serde_json::Value as Json;
use std::fs;
use std::path::{Path, PathBuf};

const SAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../testdata/sample.safetensors"
);
const TINY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/tiny.safetensors");
const EXCERPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/excerpt.gguf");

fn read(path: &str) -> Vec<u8> {
    fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The metadata llama.cpp's `gguf-split` gives shard `no` of `count`.
fn split(no: u16, count: u16) -> Vec<(String, Value)> {
    vec![
        ("general.architecture".into(), Value::String("llama".into())),
        ("split.no".into(), Value::U16(no)),
        ("split.count".into(), Value::U16(count)),
        ("split.tensors.count".into(), Value::I32(3)),
    ]
}

/// A folder of a GGUF checkpoint split in three (two converted from the safetensors test
/// files, the last the real excerpt), a config and a file that only looks like weights by name.
fn model(root: &Path) -> PathBuf {
    let m = root.join("model");
    fs::create_dir_all(m.join("sub")).unwrap();
    let name = |k| format!("m-0000{k}-of-00003.gguf");
    fs::write(m.join(name(1)), gguf_of(&read(SAMPLE), &split(0, 3))).unwrap();
    fs::write(m.join(name(2)), gguf_of(&read(TINY), &split(1, 3))).unwrap();
    fs::copy(EXCERPT, m.join("sub").join(name(3))).unwrap();
    fs::write(m.join("config.json"), b"{}\n").unwrap();
    fs::write(m.join("notes.gguf.txt"), b"not weights").unwrap();
    m
}

/// Every file below `dir`, relative, sorted, with its bytes.
fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            match p.is_dir() {
                true => todo.push(p),
                false => {
                    let rel = p.strip_prefix(dir).unwrap().display().to_string();
                    out.push((rel, fs::read(&p).unwrap()));
                }
            }
        }
    }
    out.sort();
    out
}

/// `sc encode DIR` archives every GGUF file, split files each on its own, copies the rest,
/// and `sc decode` gives the folder back byte for byte.
#[test]
fn a_folder_of_split_gguf_files_round_trips() {
    let tmp = tempfile::tempdir().unwrap();
    let m = model(tmp.path());
    let before = tree(&m);
    let out = ok(sc(tmp.path(), &["encode", "model", "-o", "packed"], None));
    let table = String::from_utf8_lossy(&out.stderr);
    assert!(table.contains("5 files, 3 fast, 0 failed"), "{table}");
    let packed = tree(&tmp.path().join("packed"));
    let names: Vec<&str> = packed.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "config.json",
            "m-00001-of-00003.gguf.sc",
            "m-00002-of-00003.gguf.sc",
            "notes.gguf.txt",
            "sub/m-00003-of-00003.gguf.sc",
        ]
    );
    let listing = String::from_utf8(ok(sc(tmp.path(), &["list", "packed"], None)).stdout).unwrap();
    for shown in [
        "m-00001-of-00003.gguf.sc",
        "sub/m-00003-of-00003.gguf.sc",
        "Q4_K",
        "BF16",
    ] {
        assert!(listing.contains(shown), "{shown} in {listing}");
    }
    ok(sc(
        tmp.path(),
        &["decode", "packed", "-o", "back", "--md5"],
        None,
    ));
    assert_eq!(tree(&tmp.path().join("back")), before);
    ok(sc(tmp.path(), &["encode", "-q", "model"], None));
    assert_eq!(tree(&m).len(), before.len() + 3);
}

fn parse(bytes: &[u8]) -> GgufHeader {
    GgufHeader::parse(bytes, bytes.len() as u64).expect("valid GGUF")
}

fn stdout(out: std::process::Output) -> String {
    String::from_utf8(ok(out).stdout).unwrap()
}

/// `odd_gguf()` and the excerpt written in `d` as `odd.gguf` and `x.gguf`, and archived.
fn archives(d: &Path) {
    fs::write(d.join("odd.gguf"), odd_gguf()).unwrap();
    fs::copy(EXCERPT, d.join("x.gguf")).unwrap();
    ok(sc(d, &["encode", "-q", "odd.gguf", "x.gguf"], None));
}

/// `sc list` shows each tensor's ggml type, shape (outermost first), original and coded
/// bytes, in text and JSON, with the GGUF metadata in the JSON.
#[test]
fn list_shows_ggml_types_and_shapes() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    archives(d);
    let h = parse(&odd_gguf());
    let text = stdout(sc(d, &["list", "odd.gguf.sc"], None));
    for t in &h.tensors {
        let dims: Vec<String> = t.dims.iter().rev().map(u64::to_string).collect();
        let row = text
            .lines()
            .find(|l| l.starts_with(&format!("{} ", t.name)));
        let row = row.unwrap_or_else(|| panic!("{} in {text}", t.name));
        let cells: Vec<&str> = row
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        let len = t.range.end - t.range.start;
        assert_eq!(
            cells[1..4],
            [
                t.ggml_type.name,
                &format!("[{}]", dims.join(", ")),
                &len.to_string()
            ],
            "{row}"
        );
    }
    let doc: Json =
        serde_json::from_str(&stdout(sc(d, &["list", "--json", "odd.gguf.sc"], None))).unwrap();
    let tensors = doc["tensors"].as_array().unwrap();
    assert_eq!(tensors.len(), h.tensors.len());
    for t in tensors {
        let orig = h.tensors.iter().find(|o| o.name == t["name"]).unwrap();
        assert_eq!(t["dtype"], orig.ggml_type.name);
        let dims: Vec<u64> = orig.dims.iter().rev().copied().collect();
        assert_eq!(t["shape"], serde_json::json!(dims));
        let (begin, end) = (
            orig.range.start - h.data_start,
            orig.range.end - h.data_start,
        );
        assert_eq!(t["offsets"], serde_json::json!([begin, end]));
        assert_eq!(t["original_bytes"], end - begin);
        assert!(t["stored_bytes"].as_u64().is_some());
    }
    assert_eq!(doc["metadata"]["general.alignment"], "64");
    assert_eq!(doc["metadata"]["k12"], r#"["<s>","","ü"]"#);
}

/// `sc info` names the input GGUF, the kept header, the tensors per ggml type and the
/// metadata keys; `--header` prints each metadata value, cut when long; `--json` has them.
#[test]
fn info_describes_a_gguf_archive() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    archives(d);
    let text = stdout(sc(d, &["info", "x.gguf.sc"], None));
    assert!(text.contains("input:       GGUF, "), "{text}");
    assert!(text.contains("kept:        GGUF header of "), "{text}");
    for ty in ["Q4_K", "Q6_K", "Q8_0", "F32"] {
        assert!(text.contains(&format!("  {ty} ")), "{ty} in {text}");
    }
    assert!(text.contains("tokenizer.ggml.tokens"), "{text}");
    let header = stdout(sc(d, &["info", "--header", "x.gguf.sc"], None));
    let line = header
        .lines()
        .find(|l| l.starts_with("  tokenizer.ggml.tokens = ["))
        .unwrap();
    assert!(line.ends_with(" values)"), "{line}");
    assert!(
        header.contains("  general.architecture = llama\n"),
        "{header}"
    );
    let doc: Json =
        serde_json::from_str(&stdout(sc(d, &["info", "--json", "x.gguf.sc"], None))).unwrap();
    assert_eq!(doc["kind"], "gguf");
    assert!(doc["dtypes"]["Q6_K"]["tensors"].as_u64().unwrap() > 0);
    assert_eq!(doc["metadata"]["general.architecture"], "llama");
    let tokens: Vec<String> =
        serde_json::from_str(doc["metadata"]["tokenizer.ggml.tokens"].as_str().unwrap()).unwrap();
    assert_eq!(tokens.len(), 64);
    let folder = stdout(sc(d, &["info", "."], None));
    assert!(
        folder.contains("x.gguf.sc") && folder.contains("tensors"),
        "{folder}"
    );
}

/// `sc extract` of a GGUF archive writes a GGUF file of the chosen tensors and the original
/// metadata (`--raw`: their bytes back to back, in the order given); all of them in order
/// give back the original file.
#[test]
fn extract_writes_a_gguf_file() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    archives(d);
    let file = odd_gguf();
    let h = parse(&file);
    ok(sc(
        d,
        &["extract", "-q", "odd.gguf.sc", "-t", "q4k", "-t", "f16"],
        None,
    ));
    let out = fs::read(d.join("odd.extract.gguf")).unwrap();
    let got = parse(&out);
    assert_eq!(got.metadata, h.metadata);
    let names: Vec<&str> = got.tensors.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["f16", "q4k"], "in the file's order");
    for t in &got.tensors {
        let o = h.tensors.iter().find(|o| o.name == t.name).unwrap();
        assert_eq!((&t.dims, t.ggml_type), (&o.dims, o.ggml_type));
        let (r, q) = (&t.range, &o.range);
        assert_eq!(
            out[r.start as usize..r.end as usize],
            file[q.start as usize..q.end as usize]
        );
    }
    let raw = ok(sc(
        d,
        &[
            "extract",
            "odd.gguf.sc",
            "-t",
            "q4k",
            "-t",
            "f16",
            "--raw",
            "-c",
        ],
        None,
    ))
    .stdout;
    let bytes = |n: &str| {
        let t = h.tensors.iter().find(|t| t.name == n).unwrap();
        file[t.range.start as usize..t.range.end as usize].to_vec()
    };
    assert_eq!(raw, [bytes("q4k"), bytes("f16")].concat());
    let x = parse(&read(EXCERPT));
    let mut args = vec!["extract", "x.gguf.sc", "-o", "all.gguf"];
    for t in &x.tensors {
        args.extend(["-t", t.name.as_str()]);
    }
    ok(sc(d, &args, None));
    assert_eq!(fs::read(d.join("all.gguf")).unwrap(), read(EXCERPT));
    fails(
        sc(d, &["extract", "odd.gguf.sc", "-t", "q4"], None),
        "did you mean \"q4k\"",
    );
    let again = sc(d, &["extract", "-q", "odd.gguf.sc", "-t", "q8"], None);
    assert_eq!(again.status.code(), Some(1), "the output exists: -f needed");
}

/// `sc verify` checks a GGUF archive's MD5 (alone and against the original), and finds a
/// corrupt one.
#[test]
fn verify_checks_gguf_archives() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    archives(d);
    ok(sc(
        d,
        &["encode", "-q", "-f", "--md5", "odd.gguf", "x.gguf"],
        None,
    ));
    for (a, file) in [("odd.gguf.sc", odd_gguf()), ("x.gguf.sc", read(EXCERPT))] {
        use md5::Digest;
        let want: String = md5::Md5::digest(&file)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let doc: Json = serde_json::from_str(&stdout(sc(d, &["info", "--json", a], None))).unwrap();
        assert_eq!(
            (&doc["kind"], &doc["md5"]),
            (&Json::from("gguf"), &Json::from(want.clone()))
        );
        let said = stdout(sc(d, &["verify", a], None));
        assert!(
            said.contains(&format!("OK, {} bytes, md5 {want}", file.len())),
            "{said}"
        );
    }
    ok(sc(d, &["verify", "odd.gguf.sc", "x.gguf.sc"], None));
    ok(sc(d, &["verify", "x.gguf.sc", "x.gguf"], None));
    let out = sc(d, &["verify", "x.gguf.sc", "odd.gguf"], None);
    assert_eq!(out.status.code(), Some(1));
    let mut bad = fs::read(d.join("x.gguf.sc")).unwrap();
    let at = bad.len() / 2;
    bad[at] ^= 0x10;
    fs::write(d.join("bad.sc"), bad).unwrap();
    let out = sc(d, &["verify", "bad.sc"], None);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `--base` with a GGUF base: a GGUF fine-tune's float tensors (and a quantized one of the
/// same type and shape) coded against it, listed as such, decoded and extracted with it.
#[test]
fn a_gguf_fine_tune_against_a_gguf_base() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let base = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../testdata/tune-base.safetensors"
    );
    let tune = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/tune.safetensors");
    let (b, t) = gguf_pair(&read(base), &read(tune));
    fs::write(d.join("base.gguf"), &b).unwrap();
    fs::write(d.join("tune.gguf"), &t).unwrap();
    ok(sc(
        d,
        &["encode", "-q", "--base", "base.gguf", "tune.gguf"],
        None,
    ));
    let listing = stdout(sc(d, &["list", "tune.gguf.sc"], None));
    let based = listing.lines().filter(|l| l.ends_with("  base")).count();
    assert_eq!(based, 8, "{listing}");
    ok(sc(
        d,
        &[
            "decode",
            "-q",
            "--base",
            "base.gguf",
            "tune.gguf.sc",
            "-o",
            "back.gguf",
            "--md5",
        ],
        None,
    ));
    assert_eq!(fs::read(d.join("back.gguf")).unwrap(), t);
    ok(sc(
        d,
        &[
            "extract",
            "-q",
            "--base",
            "base.gguf",
            "tune.gguf.sc",
            "-t",
            "q8",
        ],
        None,
    ));
    let got = parse(&fs::read(d.join("tune.extract.gguf")).unwrap());
    assert_eq!(got.tensors.len(), 1);
    let out = sc(
        d,
        &["extract", "tune.gguf.sc", "-t", "q8", "-o", "x.gguf"],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--base"));
}
