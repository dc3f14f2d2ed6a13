//! GGUF files and their archives on the command line: folders of split GGUF files, `sc info`,
//! `sc list` and `sc extract` of GGUF archives (extracts read back as GGUF), verify, `--base`.

mod common;

use common::{gguf_of, ok, sc};
use sc::gguf::Value;
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
    ok(sc(
        tmp.path(),
        &["decode", "packed", "-o", "back", "--md5"],
        None,
    ));
    assert_eq!(tree(&tmp.path().join("back")), before);
    ok(sc(tmp.path(), &["encode", "-q", "model"], None));
    assert_eq!(tree(&m).len(), before.len() + 3);
}
