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
        "-o names the folder the outputs go in, and it is a file",
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

/// The data-loss case: a stale archive beside its source, mirrored with `-f --rm`. Both jobs
/// would write `out/m.safetensors.sc`; the run is refused before anything is written.
#[test]
fn two_sources_for_one_output_are_refused_before_anything_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    fs::create_dir(&src).unwrap();
    fs::copy(TINY, src.join("m.safetensors")).unwrap();
    fs::copy(SAMPLE, tmp.path().join("big.safetensors")).unwrap();
    ok(sc(
        tmp.path(),
        &[
            "encode",
            "-q",
            "big.safetensors",
            "-o",
            "src/m.safetensors.sc",
        ],
        None,
    ));
    // Each run is refused with nothing written; returns the error.
    let refused = |args: &[&str]| {
        let before = tree(&src);
        let err = fails(sc(tmp.path(), args, None), "nothing was written");
        assert_eq!(tree(&src), before, "{args:?}");
        assert!(!tmp.path().join("out").exists(), "{args:?}");
        err
    };
    let err = refused(&["encode", "-f", "--rm", "src", "-o", "out"]);
    assert!(
        err.contains("src/m.safetensors ") && err.contains("src/m.safetensors.sc"),
        "{err}"
    );
    // Decoding: `m.safetensors.sc` restores to `out/m.safetensors`, where the copy of
    // `m.safetensors` would go too.
    let err = refused(&["decode", "-f", "--rm", "src", "-o", "out"]);
    assert!(
        err.contains("would both be written to out/m.safetensors"),
        "{err}"
    );
    // In place, `a.sc.sc` would be restored over `a.sc`, which the run also decodes.
    let archive = fs::read(src.join("m.safetensors.sc")).unwrap();
    fs::write(src.join("a.sc"), &archive).unwrap();
    fs::write(src.join("a.sc.sc"), &archive).unwrap();
    let err = refused(&["decode", "-f", "--rm", "src"]);
    assert!(err.contains("which this run reads"), "{err}");
    // An output folder that is the input folder would copy every file over itself.
    let err = refused(&["encode", "-f", "src", "-o", "src/../src"]);
    assert!(err.contains("over itself"), "{err}");
}

/// What one random folder run should do with each file.
struct Plan {
    /// Source (relative) -> output path (relative to the output base), and whether it is coded.
    jobs: Vec<(String, String, bool)>,
    collision: bool,
}

fn plan_of(files: &[String], decode: bool, mirrored: bool) -> Plan {
    let mut jobs = Vec::new();
    for f in files {
        let coded = match decode {
            true => f.strip_suffix(".sc").map(String::from),
            false => f.ends_with(".safetensors").then(|| format!("{f}.sc")),
        };
        match coded {
            Some(dest) => jobs.push((f.clone(), dest, true)),
            None if mirrored => jobs.push((f.clone(), f.clone(), false)),
            None => {}
        }
    }
    let mut dests: Vec<&String> = jobs.iter().map(|j| &j.1).collect();
    dests.sort();
    let twice = dests.windows(2).any(|w| w[0] == w[1]);
    let over_source = !mirrored && jobs.iter().any(|j| jobs.iter().any(|k| k.0 == j.1));
    Plan {
        collision: twice || over_source,
        jobs,
    }
}

/// Random folder layouts full of clashing names (`a.safetensors` beside a stale
/// `a.safetensors.sc`, `b` beside `b.sc`, `c.sc` beside `c.sc.sc`), encoded or decoded in place
/// or mirrored, with or without `-f` and `--rm`: a clash is refused with nothing written, and
/// otherwise every source's content ends in its source or in its output.
#[test]
fn random_clashing_layouts_lose_nothing() {
    let mut rng = common::Rng(0x5AFE);
    for case in 0..60 {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let src = root.join("src");
        let mut files = Vec::new();
        for base in ["a", "b", "sub/c"] {
            for suffix in [".safetensors", ".safetensors.sc", ".sc", "", ".sc.sc"] {
                if rng.next().is_multiple_of(3) {
                    files.push(format!("{base}{suffix}"));
                }
            }
        }
        for f in &files {
            let p = src.join(f);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            let n = 64 + (rng.next() % 4000) as usize;
            let st =
                common::safetensors(&[("w", "BF16", vec![n as u64], rng.bytes(2 * n))], 0, "{}");
            let bytes = match rng.next() % 3 {
                // A readable archive of something else, a stale copy as it were.
                0 | 1 if f.ends_with(".sc") => {
                    common::encode_to_vec(&st, &sc::EncodeOptions::default())
                }
                _ if f.ends_with(".safetensors") => st,
                _ => rng.bytes(n),
            };
            fs::write(p, bytes).unwrap();
        }
        let decode = rng.next().is_multiple_of(2);
        let mirrored = rng.next().is_multiple_of(2);
        let (force, rm) = (rng.next().is_multiple_of(2), rng.next().is_multiple_of(2));
        let out = root.join("out");
        if mirrored && rng.next().is_multiple_of(2) {
            fs::create_dir_all(out.join("sub")).unwrap();
            fs::write(out.join("a.safetensors.sc"), b"old").unwrap();
            fs::write(out.join("b"), b"old").unwrap();
        }
        let mut args = vec![if decode { "decode" } else { "encode" }, "-q", "src"];
        args.extend(mirrored.then_some(["-o", "out"]).into_iter().flatten());
        args.extend(force.then_some("-f"));
        args.extend(rm.then_some("--rm"));
        let what = format!("case {case}: sc {} with {files:?}", args.join(" "));
        let before = (tree(&src), out.exists().then(|| tree(&out)));
        let plan = plan_of(&files, decode, mirrored);
        let run = sc(root, &args, None);
        let err = String::from_utf8_lossy(&run.stderr).into_owned();
        if !plan.jobs.iter().any(|j| j.2) {
            assert!(err.contains("nothing to do"), "{what}: {err}");
        }
        if plan.collision {
            assert_eq!(run.status.code(), Some(1), "{what}: {err}");
            assert!(err.contains("nothing was written"), "{what}: {err}");
            let after = (tree(&src), out.exists().then(|| tree(&out)));
            assert_eq!(after, before, "{what}: the tree changed");
            continue;
        }
        let base = if mirrored { &out } else { &src };
        let decoded = |bytes: &[u8]| sc::decode_to_vec(bytes, &sc::DecodeOptions::default()).ok();
        for (path, content) in &before.0 {
            let rel = path.display().to_string();
            if fs::read(src.join(path)).ok().as_ref() == Some(content) {
                continue;
            }
            let job = plan.jobs.iter().find(|j| j.0 == rel);
            let output = job.and_then(|j| fs::read(base.join(&j.1)).ok());
            let kept = match (job, output) {
                (Some((_, _, true)), Some(o)) if decode => decoded(content) == Some(o),
                (Some((_, _, true)), Some(o)) => decoded(&o).as_ref() == Some(content),
                _ => false,
            };
            let overwritten =
                !mirrored && force && job.is_none() && plan.jobs.iter().any(|j| j.1 == rel);
            assert!(
                (kept && rm) || overwritten,
                "{what}: {rel} lost its content: {err}"
            );
        }
    }
}

/// Entries of a folder that are neither regular files nor folders (a FIFO, a link to a
/// device, a dangling link, a link to a folder) are left out of a mirror and of an in-place
/// run, each named in one note that says what it is; `-q` keeps quiet.
#[test]
fn special_files_are_left_out_with_a_note_each() {
    let tmp = tempfile::tempdir().unwrap();
    let m = model(tmp.path());
    let fifo = m.join("sub/queue.safetensors");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.unwrap().success());
    std::os::unix::fs::symlink("/dev/null", m.join("null.safetensors")).unwrap();
    std::os::unix::fs::symlink("missing", m.join("gone.safetensors")).unwrap();
    std::os::unix::fs::symlink("/tmp", m.join("tmp")).unwrap();
    let notes = |out: &std::process::Output| -> Vec<String> {
        String::from_utf8_lossy(&out.stderr)
            .lines()
            .filter(|l| l.starts_with("sc: note: skipping "))
            .map(String::from)
            .collect()
    };
    let out = ok(sc(tmp.path(), &["encode", "model", "-o", "mirror"], None));
    let said = notes(&out);
    let expect = [
        ("gone.safetensors", "a dangling link"),
        ("null.safetensors", "a link to a character device"),
        ("sub/queue.safetensors", "a FIFO"),
        ("tmp", "a link to a folder (not followed)"),
    ];
    assert_eq!(said.len(), expect.len(), "{said:?}");
    for ((name, what), line) in expect.iter().zip(&said) {
        let path = Path::new("model").join(name).display().to_string();
        assert!(line.contains(&format!("skipping {path}: {what}")), "{line}");
    }
    assert!(!tmp.path().join("mirror/tmp").exists());
    // In place, only what would be coded: the link to a folder is no weights file.
    let out = ok(sc(tmp.path(), &["encode", "model"], None));
    assert_eq!(notes(&out).len(), 3, "{:?}", notes(&out));
    let out = ok(sc(tmp.path(), &["encode", "-q", "-f", "model"], None));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
