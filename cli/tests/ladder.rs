//! A GGUF quant coded against its seed on the command line (`testdata/ladder-q4_k.gguf`, a Q4_K
//! quant of `testdata/ladder-seed.gguf` with one block in seven perturbed): `encode --base`,
//! `decode --base` (the seed a file or an archive), the seed missing or changed (one line,
//! nothing written), `info` and `list` showing the exact blocks, `verify --derives`.

mod common;

use common::{fails, ok, sc};
use std::fs;

const SEED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/ladder-seed.gguf");
const QUANT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/ladder-q4_k.gguf");

#[test]
fn a_quant_against_its_seed_on_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::copy(SEED, d.join("seed.gguf")).unwrap();
    fs::copy(QUANT, d.join("q.gguf")).unwrap();
    ok(sc(
        d,
        &["encode", "-q", "--base", "seed.gguf", "q.gguf"],
        None,
    ));
    let info = ok(sc(d, &["info", "q.gguf.sc"], None));
    let info = String::from_utf8_lossy(&info.stdout);
    assert!(info.contains("format:      sc version 7"), "{info}");
    assert!(info.contains("1429 of 1454 ggml blocks exact"), "{info}");
    let list = ok(sc(d, &["list", "q.gguf.sc"], None));
    let list = String::from_utf8_lossy(&list.stdout);
    assert!(list.contains("seed 41/48"), "{list}");
    // Without the seed, or with it changed: one line, nothing written.
    fails(
        sc(d, &["decode", "q.gguf.sc", "-o", "none.gguf"], None),
        "seed.gguf",
    );
    assert!(!d.join("none.gguf").exists());
    let mut changed = fs::read(SEED).unwrap();
    let at = changed.len() - 100;
    changed[at] ^= 4;
    fs::write(d.join("changed.gguf"), changed).unwrap();
    let args = [
        "decode",
        "--base",
        "changed.gguf",
        "q.gguf.sc",
        "-o",
        "none.gguf",
    ];
    fails(sc(d, &args, None), "seed.gguf");
    assert!(!d.join("none.gguf").exists());
    // The seed as its archive.
    ok(sc(d, &["encode", "-q", "seed.gguf"], None));
    let args = [
        "decode",
        "-q",
        "--base",
        "seed.gguf.sc",
        "q.gguf.sc",
        "-o",
        "back.gguf",
    ];
    ok(sc(d, &args, None));
    assert_eq!(
        fs::read(d.join("back.gguf")).unwrap(),
        fs::read(QUANT).unwrap()
    );
    // One tensor read alone.
    let args = [
        "extract",
        "-q",
        "--base",
        "seed.gguf",
        "-t",
        "edge.weight",
        "q.gguf.sc",
    ];
    ok(sc(d, &args, None));
    // Provenance: the perturbed tensors differ, the exit status says so in one line.
    let out = sc(d, &["verify", "--derives", "seed.gguf", "q.gguf"], None);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.contains("blk.0.attn.weight  Q4_K  41/48 blocks exact  differs"),
        "{text}"
    );
    assert!(
        text.contains("token_embd.weight  F32  1280/1280 blocks exact  derives"),
        "{text}"
    );
    fails(out, "does not derive bit for bit");
}
