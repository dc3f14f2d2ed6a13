//! `--base auto`: each input coded against the base that codes it smallest, among the run's
//! other inputs and `--base-from`; folder decode restoring each base before the archives that
//! need it; a missing base named in one line.

mod common;

use common::{fails, ok, sc};
use std::fs;
use std::path::Path;

const BASE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../testdata/tune-base.safetensors"
);
const TUNE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/tune.safetensors");
const OTHER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../testdata/sample.safetensors"
);

fn err(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A folder `in` with the excerpt pair, a copy of the tune and an unrelated model.
fn folder(d: &Path) {
    let i = d.join("in");
    fs::create_dir(&i).unwrap();
    fs::copy(BASE, i.join("base.safetensors")).unwrap();
    fs::copy(TUNE, i.join("tune.safetensors")).unwrap();
    fs::copy(TUNE, i.join("tune-copy.safetensors")).unwrap();
    fs::copy(OTHER, i.join("other.safetensors")).unwrap();
}

#[test]
fn a_folder_codes_each_file_against_its_relative_and_decodes_bases_first() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    folder(d);
    let args = ["encode", "--base", "auto", "-v", "in", "-o", "out"];
    let said = err(&ok(sc(d, &args, None)));
    let unrelated = "in/other.safetensors: no base makes it smaller";
    assert!(said.contains(unrelated), "{said}");
    // The three relatives form one tree: two take a base among them, one is its root.
    let based = ["base", "tune", "tune-copy"]
        .iter()
        .filter(|n| said.contains(&format!("in/{n}.safetensors: base in/")))
        .count();
    assert_eq!(based, 2, "{said}");
    // The copy costs next to nothing: one of the two identical files codes against the other.
    let len = |n: &str| fs::metadata(d.join("out").join(n)).unwrap().len();
    let (tune, copy) = (len("tune.safetensors.sc"), len("tune-copy.safetensors.sc"));
    let original = fs::metadata(TUNE).unwrap().len();
    assert!(
        tune.min(copy) * 50 < original,
        "{tune} {copy} of {original}"
    );
    // The chain decodes in one run, each base restored first.
    ok(sc(d, &["decode", "out", "-o", "back"], None));
    for n in ["base", "tune", "tune-copy", "other"] {
        let name = format!("{n}.safetensors");
        let back = fs::read(d.join("back").join(&name)).unwrap();
        assert!(
            back == fs::read(d.join("in").join(&name)).unwrap(),
            "{name}"
        );
    }
}

/// An archive of `out` that needs a base, and the name of that base, as `sc info` says.
fn needing(d: &Path) -> (String, String) {
    let needs = ["base", "tune", "tune-copy"].iter().find_map(|n| {
        let a = format!("out/{n}.safetensors.sc");
        let info = String::from_utf8_lossy(&sc(d, &["info", &a], None).stdout).into_owned();
        let name = info.split("coded against \"").nth(1)?.split('"').next()?;
        Some((a, name.to_string()))
    });
    needs.expect("an archive coded against another file of the run")
}

#[test]
fn a_base_missing_at_decode_is_one_line_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    folder(d);
    let args = ["encode", "--base", "auto", "-q", "in", "-o", "out"];
    ok(sc(d, &args, None));
    let (archive, base) = needing(d);
    fs::remove_file(d.join("out").join(format!("{base}.sc"))).unwrap();
    fails(sc(d, &["decode", &archive, "-o", "t"], None), &base);
    assert!(!d.join("t").exists());
}

#[test]
fn base_from_offers_candidates_to_one_input() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    folder(d);
    let from = ["--base-from", "in/other.safetensors", "in/base.safetensors"];
    let args = [
        &["encode", "--base", "auto"][..],
        &from[..],
        &["-o", "t.sc", "--", "in/tune.safetensors"][..],
    ];
    let out = ok(sc(d, &args.concat(), None));
    let said = err(&out);
    assert!(said.contains("against base \"base.safetensors\""), "{said}");
    ok(sc(
        d,
        &["decode", "--base", "in/base.safetensors", "t.sc", "-o", "t"],
        None,
    ));
    assert!(fs::read(d.join("t")).unwrap() == fs::read(TUNE).unwrap());
    // Unrelated candidates only: coded alone.
    let alone = [
        "encode",
        "--base",
        "auto",
        "--base-from",
        "in/other.safetensors",
    ];
    let more = ["-o", "u.sc", "--", "in/tune.safetensors"];
    let out = ok(sc(d, &[&alone[..], &more[..]].concat(), None));
    assert!(!err(&out).contains("against base"), "{}", err(&out));
    ok(sc(d, &["decode", "u.sc", "-o", "u"], None));
    // --base-from without --base auto, and with --rm, are refused.
    let e = [
        "encode",
        "--base-from",
        "in/base.safetensors",
        "-o",
        "x.sc",
        "--",
        "in/tune.safetensors",
    ];
    fails(sc(d, &e, None), "--base auto");
    let e = [
        "encode",
        "--base",
        "auto",
        "--rm",
        "in/tune.safetensors",
        "-o",
        "r.sc",
    ];
    fails(sc(d, &e, None), "--rm");
    assert!(d.join("in/tune.safetensors").exists());
}
