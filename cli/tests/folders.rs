//! Model folders: `sc encode DIR` and `sc decode DIR` over sharded checkpoints, in place or
//! mirrored into an output folder, with per-file failures reported and the exit code set.

mod common;

use common::{fails, ok, sc};
use std::fs;
use std::path::{Path, PathBuf};

const SAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../testdata/sample.safetensors"
);
const TINY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/tiny.safetensors");

/// A sharded checkpoint folder: two shards, an index, a config in a subfolder with a third
/// safetensors file, and a file that only looks like weights by name.
fn model(root: &Path) -> PathBuf {
    let m = root.join("model");
    fs::create_dir_all(m.join("sub")).unwrap();
    fs::copy(SAMPLE, m.join("model-00001-of-00002.safetensors")).unwrap();
    fs::copy(TINY, m.join("model-00002-of-00002.safetensors")).unwrap();
    fs::write(
        m.join("model.safetensors.index.json"),
        br#"{"metadata":{},"weight_map":{}}"#,
    )
    .unwrap();
    fs::write(m.join("sub/config.json"), b"{}\n").unwrap();
    fs::copy(TINY, m.join("sub/adapter.safetensors")).unwrap();
    fs::write(m.join("notes.txt"), b"not weights").unwrap();
    m
}

/// Every file below `dir`, relative, sorted, with its bytes.
fn tree(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
        for e in fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                out.push((p.strip_prefix(base).unwrap().into(), fs::read(&p).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

fn names(t: &[(PathBuf, Vec<u8>)]) -> Vec<String> {
    t.iter().map(|(p, _)| p.display().to_string()).collect()
}

#[test]
fn mirrored_folder_round_trips_and_copies_the_rest() {
    let tmp = tempfile::tempdir().unwrap();
    let m = model(tmp.path());
    let before = tree(&m);
    let out = ok(sc(
        tmp.path(),
        &["encode", "model", "-o", "packed", "--mode", "best"],
        None,
    ));
    let table = String::from_utf8_lossy(&out.stderr);
    assert!(table.contains("6 files, 3 best, 0 failed"), "{table}");
    let packed = tree(&tmp.path().join("packed"));
    assert_eq!(
        names(&packed),
        [
            "model-00001-of-00002.safetensors.sc",
            "model-00002-of-00002.safetensors.sc",
            "model.safetensors.index.json",
            "notes.txt",
            "sub/adapter.safetensors.sc",
            "sub/config.json",
        ]
    );
    // Copied files are identical; archives are smaller than their originals.
    for (p, bytes) in &packed {
        let orig = before.iter().find(|(q, _)| {
            q.as_os_str() == p.as_os_str() || p.to_str() == Some(&format!("{}.sc", q.display()))
        });
        let (q, orig) = orig.expect("every output comes from an input");
        if p == q {
            assert_eq!(bytes, orig, "{}", p.display());
        } else {
            assert!(bytes.len() < orig.len(), "{}", p.display());
        }
    }
    ok(sc(
        tmp.path(),
        &["decode", "packed", "-o", "back", "--md5"],
        None,
    ));
    assert_eq!(tree(&tmp.path().join("back")), before);
    assert_eq!(tree(&m), before, "the input folder is left alone");
}

#[test]
fn in_place_writes_beside_and_refuses_to_overwrite() {
    let tmp = tempfile::tempdir().unwrap();
    let m = model(tmp.path());
    let before = tree(&m);
    ok(sc(tmp.path(), &["encode", "-q", "model"], None));
    let after = tree(&m);
    assert_eq!(after.len(), before.len() + 3);
    for (p, bytes) in &before {
        let kept = after.iter().find(|(q, _)| q == p).expect("originals stay");
        assert_eq!(&kept.1, bytes);
    }
    // A second run finds every archive in place: each file fails, the run exits 1 and leaves
    // the archives as they were.
    let again = sc(tmp.path(), &["encode", "-q", "model"], None);
    assert_eq!(again.status.code(), Some(1));
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(err.contains("already exists"), "{err}");
    assert!(err
        .trim_end()
        .lines()
        .last()
        .unwrap()
        .starts_with("sc: error: 3 of 3 files"));
    assert_eq!(tree(&m), after);
    ok(sc(tmp.path(), &["encode", "-q", "-f", "model"], None));
    // Decoding in place restores next to the archives; with --rm the archives go.
    for (p, _) in &before {
        if p.extension().is_some_and(|e| e == "safetensors") {
            fs::remove_file(m.join(p)).unwrap();
        }
    }
    ok(sc(tmp.path(), &["decode", "-q", "--rm", "model"], None));
    assert_eq!(tree(&m), before);
}

#[test]
fn one_bad_archive_fails_the_run_but_not_the_others() {
    let tmp = tempfile::tempdir().unwrap();
    let m = model(tmp.path());
    let before = tree(&m);
    ok(sc(
        tmp.path(),
        &["encode", "-q", "model", "-o", "packed"],
        None,
    ));
    let bad = tmp.path().join("packed/sub/adapter.safetensors.sc");
    let mut bytes = fs::read(&bad).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x55;
    fs::write(&bad, bytes).unwrap();
    let run = sc(tmp.path(), &["decode", "packed", "-o", "back"], None);
    assert_eq!(run.status.code(), Some(1));
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(err.contains("sub/adapter.safetensors.sc"), "{err}");
    assert!(err.contains("FAILED"), "{err}");
    let back = tree(&tmp.path().join("back"));
    let mut want: Vec<_> = before
        .into_iter()
        .filter(|(p, _)| !p.ends_with("adapter.safetensors"))
        .collect();
    want.sort();
    assert_eq!(
        back, want,
        "the others are restored, the bad one leaves nothing"
    );
}

#[test]
fn folder_usage_errors() {
    let tmp = tempfile::tempdir().unwrap();
    model(tmp.path());
    fails(sc(tmp.path(), &["encode", "model", "-c"], None), "stdout");
    fails(sc(tmp.path(), &["decode", "model"], None), "nothing to do");
    fs::write(tmp.path().join("file"), b"x").unwrap();
    fails(
        sc(tmp.path(), &["encode", "model", "-o", "file"], None),
        "not a directory",
    );
    // An output folder inside the input is not walked into.
    ok(sc(
        tmp.path(),
        &["encode", "-q", "model", "-o", "model/packed"],
        None,
    ));
    ok(sc(
        tmp.path(),
        &["encode", "-q", "-f", "model", "-o", "model/packed"],
        None,
    ));
    assert!(!tmp.path().join("model/packed/packed").exists());
}
