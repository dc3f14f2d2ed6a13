//! `--base`: a fine-tune encoded against its base, decoded, verified and extracted with it;
//! a missing, wrong, truncated or changed base refused in one line that names the base needed,
//! with no output left behind; `info` and `list` showing the dependency; model folders whose
//! base and tune are sharded differently; repeated tensors stored once.

mod common;

use common::{fails, ok, safetensors, sc, tensor_ranges};
use std::fs;
use std::path::{Path, PathBuf};

const BASE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../testdata/tune-base.safetensors"
);
const TUNE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/tune.safetensors");

/// The excerpt pair copied into `dir` as `base.safetensors` and `tune.safetensors`.
fn pair(dir: &Path) -> (PathBuf, PathBuf) {
    let (b, t) = (dir.join("base.safetensors"), dir.join("tune.safetensors"));
    fs::copy(BASE, &b).unwrap();
    fs::copy(TUNE, &t).unwrap();
    (b, t)
}

/// The excerpt pair copied into `dir`, the tune encoded against the base as `t.sc`.
fn encoded_pair(dir: &Path) -> (PathBuf, PathBuf) {
    let files = pair(dir);
    let args = [
        "encode",
        "--base",
        "base.safetensors",
        "tune.safetensors",
        "-o",
        "t.sc",
    ];
    ok(sc(dir, &args, None));
    files
}

fn text(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn encode_decode_verify_extract_with_the_base() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    pair(d);
    for m in ["fast", "best"] {
        let archive = format!("tune.{m}.sc");
        let out = ok(sc(
            d,
            &[
                "encode",
                "-m",
                m,
                "--base",
                "base.safetensors",
                "tune.safetensors",
                "-o",
                &archive,
            ],
            None,
        ));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("7 tensors against base \"base.safetensors\""),
            "{err}"
        );
        let plain = fs::metadata(d.join("tune.safetensors")).unwrap().len();
        assert!(fs::metadata(d.join(&archive)).unwrap().len() * 5 < plain);
        ok(sc(
            d,
            &[
                "decode",
                "--base",
                "base.safetensors",
                &archive,
                "-o",
                "back",
            ],
            None,
        ));
        assert_eq!(fs::read(d.join("back")).unwrap(), fs::read(TUNE).unwrap());
        fs::remove_file(d.join("back")).unwrap();
        let out = ok(sc(
            d,
            &[
                "verify",
                "--base",
                "base.safetensors",
                &archive,
                "tune.safetensors",
            ],
            None,
        ));
        assert!(text(&out).contains("OK"), "{}", text(&out));
        let name = "encoder.layer.0.attention.self.query.weight";
        ok(sc(
            d,
            &[
                "extract",
                "--base",
                "base.safetensors",
                "-t",
                name,
                "--raw",
                &archive,
                "-o",
                "q.bin",
            ],
            None,
        ));
        let tune = fs::read(TUNE).unwrap();
        let range = tensor_ranges(&tune)
            .into_iter()
            .find(|(n, _)| n == name)
            .unwrap()
            .1;
        assert_eq!(fs::read(d.join("q.bin")).unwrap(), tune[range]);
        fs::remove_file(d.join("q.bin")).unwrap();
        // The dependency shows without the base.
        let info = text(&ok(sc(d, &["info", &archive], None)));
        // References and a deflated kept header: version 3; BEST on safetensors, its sign
        // models allowed: version 5.
        let version = if m == "best" { 5 } else { 3 };
        let format = format!("format:      sc version {version}");
        assert!(info.contains(&format), "{info}");
        assert!(info.contains("kept:        safetensors header of 720 bytes, stored deflated"));
        assert!(
            info.contains("7 tensors coded against \"base.safetensors\""),
            "{info}"
        );
        let list = text(&ok(sc(d, &["list", &archive], None)));
        assert!(list.contains("coded against"), "{list}");
        assert!(
            list.lines().filter(|l| l.ends_with("  base")).count() == 7,
            "{list}"
        );
        assert!(
            list.contains("base: coded against \"base.safetensors\""),
            "{list}"
        );
    }
    // Decoding from a pipe works too.
    let out = ok(sc(
        d,
        &["decode", "--base", "base.safetensors", "-", "-c"],
        Some(&d.join("tune.fast.sc")),
    ));
    assert_eq!(out.stdout, fs::read(TUNE).unwrap());
}

#[test]
fn a_missing_wrong_truncated_or_changed_base_is_one_line_and_no_output() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let (base, tune) = encoded_pair(d);
    let bytes = fs::read(&base).unwrap();
    // Wrong: the tune as its own base. Changed: one bit of one tensor. Truncated: cut short.
    fs::copy(&tune, d.join("wrong.safetensors")).unwrap();
    let mut changed = bytes.clone();
    let (name, range) = tensor_ranges(&bytes)[3].clone();
    changed[range.start + 7] ^= 0x10;
    fs::write(d.join("changed.safetensors"), changed).unwrap();
    fs::write(d.join("cut.safetensors"), &bytes[..bytes.len() / 2]).unwrap();
    let needed = "\"base.safetensors\"";
    let cases: [(&[&str], &str); 4] = [
        (&[], "which was not given (give it with --base)"),
        (&["--base", "wrong.safetensors"], "holds other bytes"),
        (&["--base", "changed.safetensors"], &name),
        (&["--base", "cut.safetensors"], "cut.safetensors"),
    ];
    for (base_args, why) in cases {
        for cmd in [
            &["decode", "t.sc", "-o", "out"][..],
            &["verify", "t.sc"],
            &["extract", "-t", &name, "t.sc", "-o", "out"],
        ] {
            let mut args: Vec<&str> = cmd.to_vec();
            args.extend_from_slice(base_args);
            let err = fails(sc(d, &args, None), why);
            assert!(err.contains(needed), "{args:?}: {err}");
            assert!(!d.join("out").exists(), "{args:?} left its output");
        }
    }
    // Nothing else was left behind either (temporary files).
    let mut names: Vec<String> = fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "base.safetensors",
            "changed.safetensors",
            "cut.safetensors",
            "t.sc",
            "tune.safetensors",
            "wrong.safetensors"
        ]
    );
    // Encoding against a base that cannot be read fails the same way.
    fails(
        sc(
            d,
            &[
                "encode",
                "--base",
                "cut.safetensors",
                "tune.safetensors",
                "-o",
                "x.sc",
            ],
            None,
        ),
        "cut.safetensors",
    );
    assert!(!d.join("x.sc").exists());
}

/// Writes `tensors` of `file` (name, byte range) as shards of `per` tensors each into `dir`,
/// keeping dtypes and shapes.
fn shard(file: &[u8], dir: &Path, per: usize) {
    fs::create_dir_all(dir).unwrap();
    let json_len = u64::from_le_bytes(file[..8].try_into().unwrap()) as usize;
    let json: serde_json::Value = serde_json::from_slice(&file[8..8 + json_len]).unwrap();
    let tensors = tensor_ranges(file);
    let count = tensors.len().div_ceil(per);
    for (k, part) in tensors.chunks(per).enumerate() {
        let mut owned = Vec::new();
        for (name, range) in part {
            let t = &json[name];
            let shape: Vec<u64> = t["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_u64().unwrap())
                .collect();
            owned.push((
                name.clone(),
                t["dtype"].as_str().unwrap().to_string(),
                shape,
                file[range.clone()].to_vec(),
            ));
        }
        let refs: Vec<(&str, &str, Vec<u64>, Vec<u8>)> = owned
            .iter()
            .map(|(n, d, s, b)| (n.as_str(), d.as_str(), s.clone(), b.clone()))
            .collect();
        let name = format!("model-{:05}-of-{count:05}.safetensors", k + 1);
        fs::write(dir.join(name), safetensors(&refs, 0, "{}")).unwrap();
    }
}

#[test]
fn folders_pair_tensors_across_different_shard_layouts() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // The base in four shards, the tune in two, with a config beside them.
    shard(&fs::read(BASE).unwrap(), &d.join("base"), 2);
    shard(&fs::read(TUNE).unwrap(), &d.join("tune"), 4);
    fs::write(d.join("tune/config.json"), b"{\"tuned\":true}\n").unwrap();
    let out = ok(sc(
        d,
        &["encode", "--base", "base", "tune", "-o", "packed"],
        None,
    ));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("3 files, 2 fast, 0 failed"), "{err}");
    for f in [
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    ] {
        let tune = fs::metadata(d.join("tune").join(f)).unwrap().len();
        let packed = fs::metadata(d.join("packed").join(format!("{f}.sc")))
            .unwrap()
            .len();
        assert!(packed * 4 < tune, "{f}: {packed} of {tune}");
        let info = text(&ok(sc(d, &["info", &format!("packed/{f}.sc")], None)));
        assert!(info.contains("coded against \"base\""), "{info}");
    }
    // Without the base the folder does not decode; with it, it comes back whole.
    let out = sc(d, &["decode", "packed", "-o", "nothing"], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("which was not given"));
    ok(sc(
        d,
        &["decode", "--base", "base", "packed", "-o", "back"],
        None,
    ));
    for f in [
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "config.json",
    ] {
        assert_eq!(
            fs::read(d.join("back").join(f)).unwrap(),
            fs::read(d.join("tune").join(f)).unwrap(),
            "{f}"
        );
    }
    // The base given as one file serves the folder's archives as well.
    ok(sc(d, &["verify", "--base", BASE, "packed"], None));
}

#[test]
fn a_repeated_tensor_is_stored_once() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let tune = fs::read(TUNE).unwrap();
    let tensors = tensor_ranges(&tune);
    let (_, emb) = tensors
        .iter()
        .find(|(n, _)| n.contains("position_embeddings"))
        .unwrap();
    let w = tune[emb.clone()].to_vec();
    let n = (w.len() / 2) as u64;
    let with = safetensors(
        &[
            ("emb", "BF16", vec![n], w.clone()),
            ("head", "BF16", vec![n], w.clone()),
        ],
        0,
        "{}",
    );
    let without = safetensors(&[("emb", "BF16", vec![n], w)], 0, "{}");
    fs::write(d.join("tied.safetensors"), &with).unwrap();
    fs::write(d.join("once.safetensors"), &without).unwrap();
    let out = ok(sc(d, &["encode", "tied.safetensors"], None));
    assert!(String::from_utf8_lossy(&out.stderr).contains("1 repeated tensors stored once"));
    ok(sc(d, &["encode", "once.safetensors"], None));
    let tied = fs::metadata(d.join("tied.safetensors.sc")).unwrap().len();
    let once = fs::metadata(d.join("once.safetensors.sc")).unwrap().len();
    assert!(tied < once + 200, "{tied} vs {once}");
    // The file's unique bytes: everything but the second copy.
    let unique = (with.len() - (n as usize) * 2) as u64;
    assert!(tied < unique, "{tied} vs {unique} unique bytes");
    let list = text(&ok(sc(d, &["list", "tied.safetensors.sc"], None)));
    assert!(
        list.lines()
            .any(|l| l.starts_with("head") && l.ends_with("= emb")),
        "{list}"
    );
    ok(sc(
        d,
        &["decode", "tied.safetensors.sc", "-o", "back"],
        None,
    ));
    assert_eq!(fs::read(d.join("back")).unwrap(), with);
    // From a pipe, the repeated tensor's source is kept as it passes.
    let out = ok(sc(
        d,
        &["decode", "-", "-c"],
        Some(&d.join("tied.safetensors.sc")),
    ));
    assert_eq!(out.stdout, with);
}

#[test]
fn several_inputs_json_help_and_man_page_know_the_base() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    pair(d);
    fs::copy(TUNE, d.join("tune2.safetensors")).unwrap();
    // Several inputs in one run, each coded against the one base, with a shorthand.
    let out = ok(sc(
        d,
        &[
            "-z",
            "-9",
            "--base",
            "base.safetensors",
            "tune.safetensors",
            "tune2.safetensors",
        ],
        None,
    ));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("2 files, 2 best, 0 failed"), "{err}");
    for f in ["tune.safetensors", "tune2.safetensors"] {
        fs::rename(d.join(f), d.join(format!("{f}.orig"))).unwrap();
    }
    // Without the base each file fails in the run's table, naming the base; nothing is left.
    let out = sc(
        d,
        &["-d", "tune.safetensors.sc", "tune2.safetensors.sc"],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.matches("coded against the base \"base.safetensors\", which was not given")
            .count(),
        2,
        "{err}"
    );
    assert!(!d.join("tune.safetensors").exists() && !d.join("tune2.safetensors").exists());
    ok(sc(
        d,
        &[
            "-d",
            "--base",
            "base.safetensors",
            "tune.safetensors.sc",
            "tune2.safetensors.sc",
        ],
        None,
    ));
    for f in ["tune.safetensors", "tune2.safetensors"] {
        assert_eq!(fs::read(d.join(f)).unwrap(), fs::read(TUNE).unwrap(), "{f}");
    }
    // info --json and list --json name the base and what is coded against it.
    let json = |args: &[&str]| -> serde_json::Value {
        serde_json::from_slice(&ok(sc(d, args, None)).stdout).unwrap()
    };
    let info = json(&["info", "--json", "tune.safetensors.sc"]);
    // -9 codes with BEST's sign models: format version 5.
    assert_eq!(info["format_version"], 5);
    assert_eq!(info["base"], "base.safetensors");
    assert_eq!(info["based_tensors"], 7);
    assert_eq!(info["repeated_tensors"], 0);
    assert!(info["codecs"].get("basectx").is_some(), "{info}");
    let list = json(&["list", "--json", "tune.safetensors.sc"]);
    assert_eq!(list["base"], "base.safetensors");
    let tensors = list["tensors"].as_array().unwrap();
    assert!(
        tensors.iter().all(|t| t["coded_against"] == "base"),
        "{list}"
    );
    // Help and man page say how.
    let formats = text(&ok(sc(d, &["help", "formats"], None)));
    assert!(formats.contains("Fine-tunes (--base BASE)"), "{formats}");
    fs::create_dir(d.join("man")).unwrap();
    let man = text(&ok(sc(d, &["manpage", "--dir", "man"], None)));
    assert!(man.is_empty());
    let page = fs::read_to_string(d.join("man/sc-encode.1")).unwrap();
    assert!(page.contains("\\-\\-base"), "{page}");
}

/// A base whose name holds control characters is shown by `info` and `list` with each escaped
/// once (`\u{1b}`), not its escape escaped again.
#[test]
fn a_base_name_with_control_characters_is_escaped_once() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let (b, _) = pair(d);
    let name = "b\u{1b}[2Jase\r.safetensors";
    fs::rename(b, d.join(name)).unwrap();
    ok(sc(
        d,
        &[
            "encode",
            "-q",
            "--base",
            name,
            "tune.safetensors",
            "-o",
            "t.sc",
        ],
        None,
    ));
    let shown = "\"b\\u{1b}[2Jase\\r.safetensors\"";
    for cmd in ["info", "list"] {
        let out = text(&ok(sc(d, &[cmd, "t.sc"], None)));
        assert!(out.contains(shown), "{cmd}: {out}");
        assert!(!out.contains("\\\\"), "{cmd}: {out}");
    }
}

/// At the default memory budget blocks in flight shrink to one whatever the block size: a
/// fine-tune coded against its base in 64 MiB blocks, one of which in flight needs more than
/// the default 256 MiB, encodes, decodes, verifies and extracts. A `--memory` too small says
/// what one block needs in the terms README counts it in.
#[test]
fn a_base_with_64_mib_blocks_works_at_the_default_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    pair(d);
    let with_base = |args: &[&str]| {
        let mut all = vec![args[0], "-q", "--base", "base.safetensors"];
        all.extend_from_slice(&args[1..]);
        sc(d, &all, None)
    };
    ok(with_base(&[
        "encode",
        "-b",
        "64M",
        "tune.safetensors",
        "-o",
        "t.sc",
    ]));
    ok(with_base(&["decode", "t.sc", "-o", "t.out"]));
    assert_eq!(fs::read(d.join("t.out")).unwrap(), fs::read(TUNE).unwrap());
    ok(with_base(&["verify", "t.sc", "tune.safetensors"]));
    let name = "encoder.layer.0.attention.self.query.weight";
    ok(with_base(&[
        "extract",
        "-t",
        name,
        "t.sc",
        "-o",
        "q.safetensors",
    ]));
    ok(sc(d, &["list", "t.sc"], None));
    let err = fails(
        with_base(&["decode", "--memory", "100M", "t.sc", "-o", "t2.out"]),
        "too small for blocks of 67108864 bytes coded against a base or repeated tensors",
    );
    // "... needs N MiB: 4.5 block sizes of buffers (288 MiB) and F MiB for the program ..."
    let number = |after: &str| -> f64 {
        let at = err
            .find(after)
            .unwrap_or_else(|| panic!("{after:?} not in {err}"))
            + after.len();
        let digits = err[at..].split(|c: char| !c.is_ascii_digit() && c != '.');
        digits.into_iter().next().unwrap().parse().unwrap()
    };
    let (need, blocks) = (number("needs "), number("MiB: "));
    let (buffers, fixed) = (number("buffers ("), number("MiB) and "));
    assert_eq!(blocks, 4.5, "{err}");
    assert_eq!(buffers, 4.5 * 64.0, "{err}");
    assert!(
        need >= buffers + fixed && need < buffers + fixed + 1.0,
        "{err}"
    );
    let readme = fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let readme = readme.split_whitespace().collect::<Vec<_>>().join(" ");
    for says in [
        "4.5 with `--base` or repeated tensors",
        "a run needs 24 MiB besides and 128 KiB per worker thread",
    ] {
        assert!(readme.contains(says), "README lacks {says:?}");
    }
    assert!(fixed >= 24.0, "{err}");
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn rm_never_deletes_or_overwrites_the_base_its_archives_need() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // A folder holding the base and its tune, the base given inside it: the base is coded
    // without itself and kept; the tune against it, and removed.
    fs::create_dir(d.join("models")).unwrap();
    pair(&d.join("models"));
    let out = ok(sc(
        d,
        &[
            "encode",
            "--base",
            "models/base.safetensors",
            "models",
            "--rm",
        ],
        None,
    ));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("models/base.safetensors is the base: coded without it, and kept"),
        "{err}"
    );
    assert_eq!(
        names(&d.join("models")),
        [
            "base.safetensors",
            "base.safetensors.sc",
            "tune.safetensors.sc"
        ]
    );
    assert_eq!(
        fs::read(d.join("models/base.safetensors")).unwrap(),
        fs::read(BASE).unwrap()
    );
    ok(sc(
        d,
        &["decode", "models/base.safetensors.sc", "-o", "b"],
        None,
    ));
    assert_eq!(fs::read(d.join("b")).unwrap(), fs::read(BASE).unwrap());
    ok(sc(
        d,
        &[
            "decode",
            "--base",
            "models/base.safetensors",
            "models/tune.safetensors.sc",
            "-o",
            "t",
        ],
        None,
    ));
    assert_eq!(fs::read(d.join("t")).unwrap(), fs::read(TUNE).unwrap());

    // A folder (of shards) as its own base: every file is part of it, coded without it, kept.
    shard(&fs::read(BASE).unwrap(), &d.join("own"), 4);
    let shards = names(&d.join("own"));
    let out = ok(sc(d, &["encode", "--base", "own", "own", "--rm"], None));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("is part of the base own: coded without it"),
        "{err}"
    );
    let mut all: Vec<String> = shards
        .iter()
        .flat_map(|s| [s.clone(), format!("{s}.sc")])
        .collect();
    all.sort();
    assert_eq!(names(&d.join("own")), all);
    for s in &shards {
        let info = text(&ok(sc(d, &["info", &format!("own/{s}.sc")], None)));
        assert!(!info.contains("coded against"), "{info}");
    }

    // A file as its own base (by another path to it), and outputs over the base or over the
    // archive serving as base: refused, nothing written.
    let (base, tune) = pair(d);
    fs::copy(BASE, d.join("b.safetensors")).unwrap();
    ok(sc(d, &["encode", "b.safetensors"], None));
    let b_sc = fs::read(d.join("b.safetensors.sc")).unwrap();
    let cases: [(&[&str], &str); 4] = [
        (
            &["--base", "./base.safetensors", "base.safetensors", "--rm"],
            "it cannot be coded against itself",
        ),
        (
            &[
                "--base",
                "base.safetensors",
                "tune.safetensors",
                "-o",
                "./base.safetensors",
                "-f",
            ],
            "writing over it would lose the base",
        ),
        (
            &[
                "--base",
                "b.safetensors.sc",
                "tune.safetensors",
                "-o",
                "b.safetensors.sc",
                "-f",
            ],
            "writing over it would lose the base",
        ),
        // Several inputs: refused before the first is written.
        (
            &[
                "--base",
                "b.safetensors.sc",
                "tune.safetensors",
                "b.safetensors",
                "-f",
            ],
            "writing over it would lose the base",
        ),
    ];
    let before = names(d);
    for (args, why) in cases {
        let mut all = vec!["encode"];
        all.extend_from_slice(args);
        fails(sc(d, &all, None), why);
        assert_eq!(names(d), before, "{args:?}");
    }
    assert_eq!(fs::read(&base).unwrap(), fs::read(BASE).unwrap());
    assert_eq!(fs::read(&tune).unwrap(), fs::read(TUNE).unwrap());
    assert_eq!(fs::read(d.join("b.safetensors.sc")).unwrap(), b_sc);
}

/// A shared library for LD_PRELOAD that, at the first fsync (the output synced before
/// `--rm`'s verification, once the encode is done), renames `$SC_SWAP_FROM` over
/// `$SC_SWAP_TO`: the base replaced by another process at the worst moment.
const SWAP_SHIM: &str = r#"
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

static int swapped;

int fsync(int fd) {
    const char *from = getenv("SC_SWAP_FROM"), *to = getenv("SC_SWAP_TO");
    if (!swapped && from && to) {
        swapped = 1;
        rename(from, to);
    }
    return ((int (*)(int))dlsym(RTLD_NEXT, "fsync"))(fd);
}
"#;

#[cfg(target_os = "linux")]
#[test]
fn rm_verifies_against_the_base_on_disk_and_keeps_the_tune_when_it_changed() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let (base, tune) = pair(d);
    let shim = common::compile_c(d, "swap.so", SWAP_SHIM, &["-shared", "-fPIC", "-ldl"]);
    let bytes = fs::read(BASE).unwrap();
    let mut changed = bytes.clone();
    let (name, range) = tensor_ranges(&bytes)[3].clone();
    changed[range.start + 7] ^= 0x10;
    fs::write(d.join("changed"), &changed).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sc"))
        .args([
            "encode",
            "--base",
            "base.safetensors",
            "tune.safetensors",
            "--rm",
        ])
        .current_dir(d)
        .env("LD_PRELOAD", &shim)
        .env("SC_SWAP_FROM", d.join("changed"))
        .env("SC_SWAP_TO", &base)
        .output()
        .unwrap();
    assert_eq!(fs::read(&base).unwrap(), changed, "the shim did not run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("before --rm") && err.contains(&format!("{name:?}")),
        "{err}"
    );
    // The message does not call the base by its own name another base.
    assert!(
        !err.contains("is not the base \"base.safetensors\""),
        "{err}"
    );
    assert_eq!(fs::read(&tune).unwrap(), fs::read(TUNE).unwrap());
    // The archive stays (sound, against the base that was replaced); decoding it with the
    // changed file of the same name says which tensor differs.
    let args = [
        "decode",
        "--base",
        "base.safetensors",
        "tune.safetensors.sc",
        "-o",
        "x",
    ];
    let err = fails(
        sc(d, &args, None),
        &format!("its tensor {name:?} holds other bytes"),
    );
    assert!(
        err.contains("is not the one this was coded against"),
        "{err}"
    );
}

/// Runs `sc args...` in `dir`, failing the test if it is still running after a minute (a hang)
/// instead of waiting for it forever.
fn sc_or_hang(dir: &Path, args: &[&str]) -> std::process::Output {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_sc"))
        .args(args)
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > std::time::Duration::from_secs(60) {
            child.kill().unwrap();
            panic!("sc {args:?} hung");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn a_fifo_as_base_is_refused_in_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    encoded_pair(d);
    assert!(std::process::Command::new("mkfifo")
        .arg(d.join("fifo"))
        .status()
        .unwrap()
        .success());
    for args in [
        &["encode", "--base", "fifo", "tune.safetensors", "-o", "x.sc"][..],
        &["decode", "--base", "fifo", "t.sc", "-o", "x"],
        &["verify", "--base", "fifo", "t.sc"],
    ] {
        fails(
            sc_or_hang(d, args),
            "cannot use fifo as a base: not a regular file or a folder",
        );
        assert!(!d.join("x.sc").exists() && !d.join("x").exists());
    }
}
