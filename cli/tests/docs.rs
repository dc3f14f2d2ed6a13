//! Output for scripts and help for people: `info --json` and `list --json` against the archive,
//! shell completions sourced by bash, man pages, `sc help formats` against the planner, and
//! README's usage section against `sc --help`.

mod common;

use common::{ok, sc};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;
use std::process::Command;

const SAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../testdata/sample.safetensors"
);

fn json_of(dir: &Path, args: &[&str]) -> Value {
    let out = ok(sc(dir, args, None));
    let text = String::from_utf8(out.stdout).expect("UTF-8 JSON");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{args:?}: {e}:\n{text}"))
}

fn text_of(dir: &Path, args: &[&str]) -> String {
    String::from_utf8(ok(sc(dir, args, None)).stdout).unwrap()
}

fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// A folder with the sample encoded in BEST mode with 256 KiB blocks, as `m.safetensors.sc`.
fn encoded() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    fs::copy(SAMPLE, tmp.path().join("m.safetensors")).unwrap();
    let args = ["encode", "-q", "-m", "best", "-b", "256K", "m.safetensors"];
    ok(sc(tmp.path(), &args, None));
    tmp
}

/// Names to numbers, as an object of objects of numbers in a JSON document holds them.
type Numbers = BTreeMap<String, Vec<u64>>;

/// The numbers under `keys` of each object in the object `v`, by name.
fn numbers(v: &Value, keys: &[&str]) -> Numbers {
    let object = v
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"));
    object
        .iter()
        .map(|(name, o)| {
            let n = keys.iter().map(|k| o[*k].as_u64().unwrap()).collect();
            (name.clone(), n)
        })
        .collect()
}

#[test]
fn info_json_matches_the_archive() {
    let tmp = encoded();
    let d = tmp.path();
    let path = d.join("m.safetensors.sc");
    let info = sc::inspect(&mut fs::File::open(&path).unwrap()).unwrap();
    let archive = sc::Archive::open(fs::File::open(&path).unwrap()).unwrap();
    let doc = json_of(d, &["info", "--json", "m.safetensors.sc"]);
    assert_eq!(doc["file"], "m.safetensors.sc");
    assert_eq!(doc["format_version"], info.format_version);
    assert_eq!(doc["mode"], "best");
    assert_eq!(doc["kind"], "safetensors");
    assert_eq!(doc["block_size"], 262144);
    assert_eq!(doc["original_bytes"], fs::metadata(SAMPLE).unwrap().len());
    assert_eq!(doc["archive_bytes"], fs::metadata(&path).unwrap().len());
    assert_eq!(doc["blocks"], info.blocks);
    assert_eq!(doc["md5"], hex(&info.md5.unwrap()));
    assert_eq!(doc["kept_header_bytes"], info.kept_header_len);
    assert_eq!(doc["kept_header_stored_bytes"], info.kept_header_stored);
    assert!(info.kept_header_stored < info.kept_header_len);
    assert_eq!(doc["tensors"], 10);
    let transforms: Numbers = info
        .transforms
        .iter()
        .map(|(n, u)| (n.to_string(), vec![u.blocks, u.original]))
        .collect();
    assert_eq!(
        numbers(&doc["transforms"], &["blocks", "original_bytes"]),
        transforms
    );
    let codecs: Numbers = info
        .codecs
        .iter()
        .map(|(n, u)| (n.to_string(), vec![u.planes, u.original, u.coded]))
        .collect();
    let keys = ["planes", "original_bytes", "stored_bytes"];
    assert_eq!(numbers(&doc["codecs"], &keys), codecs);
    // Dtypes: tensors and bytes, as the header gives them.
    let mut dtypes = Numbers::new();
    for t in archive.tensors() {
        let e = dtypes.entry(t.dtype_name.clone()).or_insert(vec![0, 0]);
        e[0] += 1;
        e[1] += t.len();
    }
    assert_eq!(numbers(&doc["dtypes"], &["tensors", "bytes"]), dtypes);
    assert_eq!(dtypes["BF16"][0], 6);
    let metadata: BTreeMap<String, String> =
        serde_json::from_value(doc["metadata"].clone()).unwrap();
    assert_eq!(Some(&metadata), archive.metadata());
    assert!(doc.get("header").is_none());
    // --header adds the kept header as the JSON value it is.
    let doc = json_of(d, &["info", "--json", "--header", "m.safetensors.sc"]);
    let header: Value = serde_json::from_str(archive.header_json().unwrap()).unwrap();
    assert_eq!(doc["header"], header);

    // A generic archive: no tensors, no dtypes.
    fs::write(d.join("g.bin"), vec![7u8; 10000]).unwrap();
    ok(sc(d, &["encode", "-q", "g.bin"], None));
    let doc = json_of(d, &["info", "--json", "g.bin.sc"]);
    assert_eq!(doc["kind"], "generic");
    assert_eq!(doc["original_bytes"], 10000);
    assert!(doc["tensors"].is_null() && doc["dtypes"].is_null() && doc["md5"].is_null());
}

#[test]
fn list_json_matches_the_archive() {
    let tmp = encoded();
    let d = tmp.path();
    let path = d.join("m.safetensors.sc");
    let archive = sc::Archive::open(fs::File::open(&path).unwrap()).unwrap();
    let sizes = archive.stored_bytes();
    let doc = json_of(d, &["list", "--json", "m.safetensors.sc"]);
    let tensors = doc["tensors"].as_array().unwrap();
    assert_eq!(tensors.len(), archive.tensors().len());
    for ((t, got), stored) in archive.tensors().iter().zip(tensors).zip(&sizes.per_tensor) {
        assert_eq!(got["name"], t.name.as_str());
        assert_eq!(got["dtype"], t.dtype_name.as_str());
        assert_eq!(got["shape"], Value::from(t.shape.clone()));
        assert_eq!(got["offsets"], Value::from(vec![t.begin, t.end]));
        assert_eq!(got["original_bytes"], t.len());
        assert_eq!(got["stored_bytes"], *stored);
    }
    let sum = |k: &str| tensors.iter().map(|t| t[k].as_u64().unwrap()).sum::<u64>();
    assert_eq!(doc["tensor_bytes"], sum("original_bytes"));
    assert_eq!(doc["stored_bytes"], sum("stored_bytes"));
    assert_eq!(doc["archive_bytes"], fs::metadata(&path).unwrap().len());
    assert_eq!(doc["original_bytes"], fs::metadata(SAMPLE).unwrap().len());
    assert_eq!(doc["between_tensors_bytes"], sizes.between_tensors);
    assert_eq!(doc["container_bytes"], sizes.container);
    assert_eq!(
        sum("stored_bytes") + sizes.between_tensors + sizes.container,
        fs::metadata(&path).unwrap().len()
    );
}

/// Names with control characters come out escaped, and parse back to the same names.
#[test]
fn json_escapes_control_characters() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let evil = "x\\u001b[2J\\r\u{9b}m\u{7f}";
    let st = common::safetensors(
        &[(evil, "BF16", vec![2], vec![1, 2, 3, 4])],
        0,
        "{\"n\u{85}\":\"\\u0007\"}",
    );
    fs::write(d.join("e.safetensors"), st).unwrap();
    ok(sc(d, &["encode", "-q", "e.safetensors"], None));
    for args in [
        &["list", "--json", "e.safetensors.sc"][..],
        &["info", "--json", "--header", "e.safetensors.sc"],
    ] {
        let text = text_of(d, args);
        let raw: Vec<char> = text
            .chars()
            .filter(|&c| c.is_control() && c != '\n')
            .collect();
        assert!(raw.is_empty(), "{args:?} printed {raw:?}");
        let doc: Value = serde_json::from_str(&text).unwrap();
        let name = "x\u{1b}[2J\r\u{9b}m\u{7f}";
        match args[0] {
            "list" => assert_eq!(doc["tensors"][0]["name"], name),
            _ => {
                assert!(doc["header"].get(name).is_some(), "{text}");
                assert_eq!(doc["metadata"]["n\u{85}"], "\u{7}");
            }
        }
    }
}

/// The completion script, as `sc completions SHELL` prints it.
fn completions(dir: &Path, shell: &str) -> String {
    text_of(dir, &["completions", shell])
}

#[test]
fn bash_sources_the_completions_and_they_offer_every_command() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    fs::write(d.join("sc.bash"), completions(d, "bash")).unwrap();
    // `_sc COMMAND WORD PREVIOUS` is the completion function bash calls.
    let script = r#"
        set -eu
        source ./sc.bash
        complete -p sc
        complete_at() { COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); _sc sc "${!#}" "${@: -2:1}"; echo "${COMPREPLY[*]}"; }
        complete_at sc ""
        complete_at sc an
        complete_at sc help fo
        complete_at sc encode --b
        complete_at sc completions p
    "#;
    let out = Command::new("bash")
        .arg("-c")
        .arg(script)
        .current_dir(d)
        .output()
        .expect("bash");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && err.is_empty(), "{err}");
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].contains(" -F _sc ") && lines[0].ends_with(" sc"),
        "{text}"
    );
    let all: BTreeSet<&str> = lines[1].split(' ').collect();
    for want in [
        "encode",
        "compress",
        "decode",
        "info",
        "list",
        "completions",
        "manpage",
        "help",
    ] {
        assert!(all.contains(want), "{want}: {text}");
    }
    // The experiment commands are offered too, though `sc --help` lists them apart.
    for want in [
        "models",
        "analyze",
        "sweep",
        "bench",
        "shuffle",
        "--verbose",
        "--quiet",
    ] {
        assert!(all.contains(want), "{want}: {text}");
    }
    assert_eq!(
        &lines[2..],
        [
            "analyze",
            "formats",
            "--best --block-size --base --base-from --base-depth",
            "powershell"
        ]
    );
}

#[test]
fn other_shells_and_other_names() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    for shell in ["zsh", "fish", "powershell", "elvish"] {
        let script = completions(d, shell);
        for want in ["encode", "analyze", "formats", "block-size"] {
            assert!(script.contains(want), "{shell} lacks {want}");
        }
    }
    // A copy installed under another name completes that name.
    let scw = d.join("scw");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_sc"), &scw).unwrap();
    let out = Command::new(&scw)
        .args(["completions", "bash"])
        .output()
        .unwrap();
    let script = String::from_utf8(out.stdout).unwrap();
    assert!(
        script.contains("complete -F _scw") && script.trim_end().ends_with(" scw\nfi"),
        "{script}"
    );
    let named = text_of(d, &["completions", "fish", "--name", "sc2"]);
    assert!(named.contains("complete -c sc2"), "{named}");
    let bad = sc(d, &["completions", "bash", "--name", "a;b"], None);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn man_pages_come_from_the_same_definitions() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let page = text_of(d, &["manpage"]);
    assert!(page.contains(".TH sc 1"), "{page}");
    for want in [
        ".SH SUBCOMMANDS",
        ".SH FORMATS",
        "encode",
        "analyze",
        "split16",
        "\\-\\-verbose",
    ] {
        assert!(page.contains(want), "man page lacks {want}");
    }
    ok(sc(d, &["manpage", "--dir", "."], None));
    for name in [
        "sc.1",
        "sc-encode.1",
        "sc-decode.1",
        "sc-info.1",
        "sc-analyze.1",
    ] {
        let text = fs::read_to_string(d.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(text.contains(".TH"), "{name}");
    }
    assert_eq!(fs::read_to_string(d.join("sc.1")).unwrap(), page);
    let encode = fs::read_to_string(d.join("sc-encode.1")).unwrap();
    assert!(
        encode.contains("\\-\\-best") && encode.contains("\\-\\-keep"),
        "{encode}"
    );
    // Pages are outputs like any other: not overwritten without -f.
    common::fails(sc(d, &["manpage", "--dir", "."], None), "already exists");
    ok(sc(d, &["manpage", "--dir", ".", "-f"], None));
}

/// `sc help formats` says, for every dtype, the transform the planner gives it.
#[test]
fn help_formats_matches_the_planner() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let text = text_of(d, &["help", "formats"]);
    let table: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("dtype "))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| !l.starts_with("   "))
        .collect();
    let mut said: BTreeMap<String, String> = BTreeMap::new();
    for row in &table {
        // Columns: dtypes (comma-separated), transform, planes.
        let (dtypes, rest) = row.trim().split_once("  ").unwrap();
        let transform = rest.split_whitespace().next().unwrap();
        for dtype in dtypes.split(", ") {
            said.insert(dtype.to_string(), transform.to_string());
        }
    }
    for dtype in sc::Dtype::ALL {
        let planned = sc::pipeline::plan::transform_for(Some(dtype)).name();
        assert_eq!(
            said.get(dtype.name()).map(String::as_str),
            Some(planned),
            "{}",
            dtype.name()
        );
    }
    let other = sc::pipeline::plan::transform_for(None).name();
    assert_eq!(said.get("other dtypes").map(String::as_str), Some(other));
    assert_eq!(said.len(), sc::Dtype::ALL.len() + 1, "{said:?}");
    // `sc help COMMAND` is that command's help; an unknown topic is a usage error.
    let encode = text_of(d, &["help", "encode"]);
    assert_eq!(encode, text_of(d, &["encode", "--help"]));
    assert!(
        encode.contains("a folder") && encode.contains("'-' for stdin"),
        "{encode}"
    );
    let run = sc(d, &["help", "nonsense"], None);
    assert_eq!(run.status.code(), Some(2));
}

/// GGUF is documented where safetensors is: `sc help formats` names every ggml type that has a
/// transform of its own and the transform `sc info` shows for it; `sc --help`, the man page and
/// the packages' descriptions name both formats.
#[test]
fn gguf_is_documented_beside_safetensors() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let formats = text_of(d, &["help", "formats"]);
    assert!(formats.contains("GGUF"), "{formats}");
    for layout in &sc::transform::ggml::LAYOUTS {
        let name = layout.ggml().name;
        assert!(formats.contains(name), "{name} in {formats}");
    }
    let first = sc::transform::ggml::LAYOUTS[0].ggml().name.to_lowercase();
    let last = sc::transform::ggml::LAYOUTS.last().unwrap().ggml().name;
    assert!(
        formats.contains(&format!("{first} to")) && formats.contains(&last.to_lowercase()),
        "{formats}"
    );
    let help = text_of(d, &["--help"]);
    let page = text_of(d, &["manpage"]);
    let about = "LLM weight files (safetensors and GGUF)";
    assert!(help.lines().next().unwrap().ends_with(about), "{help}");
    assert!(page.contains(about), "{page}");
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    for manifest in [
        "Cargo.toml",
        "cli/Cargo.toml",
        "python/Cargo.toml",
        "python/pyproject.toml",
    ] {
        let text = fs::read_to_string(format!("{root}/{manifest}")).unwrap();
        let description = text.lines().find(|l| l.starts_with("description")).unwrap();
        assert!(
            description.contains("safetensors") && description.contains("GGUF"),
            "{manifest}: {description}"
        );
    }
}

/// The installed binary carries no debug info; profiling builds have a profile of their own
/// that keeps it, and the docs that mention profiling name that profile.
#[test]
fn release_is_lean_and_profiling_has_its_own_profile() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let manifest = fs::read_to_string(format!("{root}/Cargo.toml")).unwrap();
    let section = |name: &str| -> Vec<String> {
        let head = format!("[profile.{name}]");
        manifest
            .lines()
            .skip_while(|l| l.trim() != head)
            .skip(1)
            .take_while(|l| !l.starts_with('['))
            .map(|l| l.split('#').next().unwrap().replace(' ', ""))
            .filter(|l| !l.is_empty())
            .collect()
    };
    let release = section("release");
    assert!(release.contains(&"strip=true".to_string()), "{release:?}");
    assert!(
        !release.iter().any(|l| l.starts_with("debug=")),
        "{release:?}"
    );
    let profiling = section("profiling");
    for want in ["inherits=\"release\"", "debug=1", "strip=false"] {
        assert!(profiling.contains(&want.to_string()), "{profiling:?}");
    }
    let design = fs::read_to_string(format!("{root}/docs/DESIGN.md")).unwrap();
    assert!(
        design.contains("--profile profiling"),
        "DESIGN.md says how to profile"
    );
}

/// The commands of `sc --help`, both headings.
fn help_commands(help: &str) -> BTreeSet<String> {
    let mut commands = BTreeSet::new();
    let mut listing = false;
    for line in help.lines() {
        if line.ends_with("ommands:") {
            listing = true;
        } else if line.trim().is_empty() || !line.starts_with("  ") {
            listing = false;
        } else if listing {
            let name = line.split_whitespace().next().unwrap();
            commands.insert(name.trim_end_matches(',').to_string());
        }
    }
    commands
}

/// README's usage section lists the commands `sc --help` lists, no more and no fewer.
#[test]
fn readme_usage_matches_help() {
    let readme = fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let usage = readme
        .split("\n## Usage\n")
        .nth(1)
        .and_then(|s| s.split("```").nth(1))
        .expect("a code block under ## Usage");
    let documented: BTreeSet<String> = usage
        .lines()
        .filter_map(|l| l.strip_prefix("sc "))
        .filter_map(|rest| rest.split_whitespace().next())
        .filter(|word| !word.starts_with('-'))
        .map(String::from)
        .collect();
    let tmp = tempfile::tempdir().unwrap();
    let help = text_of(tmp.path(), &["--help"]);
    let listed = help_commands(&help);
    assert!(
        listed.contains("encode") && listed.contains("bench"),
        "{help}"
    );
    assert_eq!(documented, listed, "README usage vs sc --help:\n{help}");
    // The shorthands README shows are the ones help names.
    for shorthand in ["sc -z ", "sc -d "] {
        assert!(
            usage.contains(shorthand) && help.contains(shorthand.trim_end()),
            "{shorthand}"
        );
    }
}

/// Each command's help describes its own options: no `-f` of `encode` in `decode` and
/// `extract`, no several inputs in `extract`, BEST as it codes.
#[test]
fn help_says_what_each_command_does() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let option = |help: &str, flag: &str| -> String {
        let at = help
            .find(flag)
            .unwrap_or_else(|| panic!("{flag} in {help}"));
        help[at..].lines().next().unwrap().to_string()
    };
    for command in ["decode", "extract"] {
        for h in ["-h", "--help"] {
            let help = text_of(d, &[command, h]);
            assert!(!help.contains("encode:"), "{command} {h}: {help}");
            let force = option(&help, "-f, --force");
            assert!(!force.contains("compress"), "{command}: {force}");
        }
    }
    let extract = text_of(d, &["extract", "--help"]);
    assert!(!extract.contains("several inputs"), "{extract}");
    let encode = text_of(d, &["encode", "--help"]);
    assert!(!encode.contains("range coder on every"), "{encode}");
    assert!(
        encode.contains("compress inputs that already end in .sc"),
        "{encode}"
    );
}

/// `sc info` labels its transform and codec lines, points to `sc help formats`, and counts
/// "1 block", "1 plane".
#[test]
fn info_labels_its_lines_and_counts_in_words() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let tiny = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/tiny.safetensors");
    fs::copy(tiny, d.join("t.safetensors")).unwrap();
    ok(sc(
        d,
        &["encode", "-q", "-m", "best", "t.safetensors"],
        None,
    ));
    let info = text_of(d, &["info", "t.safetensors.sc"]);
    let json = json_of(d, &["info", "--json", "t.safetensors.sc"]);
    let label = |name: &str| {
        let at = info
            .find(&format!("\n{name}:"))
            .unwrap_or_else(|| panic!("{info}"));
        info[at + 1..].lines().next().unwrap().to_string()
    };
    assert!(label("transforms").contains("sc help formats"), "{info}");
    assert!(label("codecs").contains("sc help formats"), "{info}");
    // Each transform and codec of the archive is listed under its label.
    let under = |name: &str| -> Vec<String> {
        let at = info.find(&format!("\n{name}:")).unwrap();
        info[at + 1..]
            .lines()
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .map(|l| l.split_whitespace().next().unwrap().to_string())
            .collect()
    };
    let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(under("transforms"), keys(&json["transforms"]), "{info}");
    assert_eq!(under("codecs"), keys(&json["codecs"]), "{info}");
    assert!(
        !info.contains(" 1 blocks") && !info.contains(" 1 planes"),
        "{info}"
    );
    assert!(
        info.contains(" 1 block,") && info.contains(" 1 plane,"),
        "{info}"
    );
}
