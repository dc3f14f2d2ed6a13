//! zstd's and gzip's habits, where they fit a subcommand command line: several inputs in one
//! run, `-z`/`-d` and `compress`/`decompress`, `-k`, global `-v`/`-q`, levels, conflicting
//! flags as usage errors, archives skipped by `encode`, binary refused on a terminal.

mod common;

use common::{fails, ok, sc};
use std::fs;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

const SAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../testdata/sample.safetensors"
);
const TINY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/tiny.safetensors");

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts a usage error: exit 2, clap's message containing `needle`, no output files.
fn usage_error(out: Output, needle: &str) {
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.starts_with("error: ") && err.contains(needle), "{err}");
    assert!(err.contains("Usage: sc"), "{err}");
}

/// The archive `path` decoded with the library.
fn decoded(path: &Path) -> Vec<u8> {
    let archive = fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    sc::decode_to_vec(&archive, &sc::DecodeOptions::default()).unwrap()
}

/// The mode an archive records.
fn mode(path: &Path) -> sc::Mode {
    let mut f = fs::File::open(path).unwrap();
    sc::inspect(&mut f).unwrap().mode
}

/// A folder with `a`, `b` and `c.safetensors` (copies of the sample and the tiny file).
fn three(dir: &Path) {
    fs::copy(SAMPLE, dir.join("a.safetensors")).unwrap();
    fs::copy(TINY, dir.join("b.safetensors")).unwrap();
    fs::copy(SAMPLE, dir.join("c.safetensors")).unwrap();
}

/// The rows of a run's table: (file, result), from `file` to `total`.
fn table(err: &str) -> Vec<(String, String)> {
    err.lines()
        .skip_while(|l| !l.starts_with("file "))
        .skip(1)
        .take_while(|l| !l.starts_with("total "))
        .map(|l| {
            let name = l.split_whitespace().next().unwrap().to_string();
            let result = match l.find("FAILED") {
                Some(at) => l[at..].to_string(),
                None => l.split_whitespace().last().unwrap().to_string(),
            };
            (name, result)
        })
        .collect()
}

#[test]
fn several_inputs_with_a_bad_one_in_the_middle() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    three(d);
    let run = sc(
        d,
        &[
            "encode",
            "a.safetensors",
            "missing.safetensors",
            "b.safetensors",
        ],
        None,
    );
    let err = stderr(&run);
    assert_eq!(run.status.code(), Some(1), "{err}");
    assert_eq!(
        table(&err),
        [
            ("a.safetensors".into(), "fast".into()),
            (
                "missing.safetensors".into(),
                "FAILED: cannot open missing.safetensors: No such file or directory (os error 2)"
                    .into()
            ),
            ("b.safetensors".into(), "fast".into()),
        ]
    );
    assert!(err.contains("3 files, 2 fast, 1 failed"), "{err}");
    assert!(
        err.trim_end()
            .ends_with("sc: error: 1 of 3 files in 3 inputs failed"),
        "{err}"
    );
    assert_eq!(
        decoded(&d.join("a.safetensors.sc")),
        fs::read(SAMPLE).unwrap()
    );
    assert_eq!(
        decoded(&d.join("b.safetensors.sc")),
        fs::read(TINY).unwrap()
    );
    assert!(!d.join("missing.safetensors.sc").exists());

    // Decoding: a corrupt archive in the middle fails alone and leaves no output.
    fs::create_dir(d.join("back")).unwrap();
    let mut bad = fs::read(d.join("a.safetensors.sc")).unwrap();
    let mid = bad.len() / 2;
    bad[mid] ^= 0x40;
    fs::write(d.join("bad.safetensors.sc"), bad).unwrap();
    let run = sc(
        d,
        &[
            "decode",
            "a.safetensors.sc",
            "bad.safetensors.sc",
            "b.safetensors.sc",
            "-o",
            "back",
        ],
        None,
    );
    let err = stderr(&run);
    assert_eq!(run.status.code(), Some(1), "{err}");
    let rows = table(&err);
    assert_eq!(rows.len(), 3, "{err}");
    assert!(
        rows[1].1.starts_with("FAILED: decoding bad.safetensors.sc"),
        "{err}"
    );
    assert_eq!(
        (rows[0].1.as_str(), rows[2].1.as_str()),
        ("decoded", "decoded")
    );
    assert_eq!(
        fs::read(d.join("back/a.safetensors")).unwrap(),
        fs::read(SAMPLE).unwrap()
    );
    assert_eq!(
        fs::read(d.join("back/b.safetensors")).unwrap(),
        fs::read(TINY).unwrap()
    );
    let mut left: Vec<_> = fs::read_dir(d.join("back"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, ["a.safetensors", "b.safetensors"]);
}

#[test]
fn several_inputs_mix_files_and_folders_into_one_output_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    three(d);
    fs::create_dir_all(d.join("model/sub")).unwrap();
    fs::copy(TINY, d.join("model/sub/w.safetensors")).unwrap();
    fs::write(d.join("model/config.json"), b"{}").unwrap();
    fs::create_dir(d.join("out")).unwrap();
    let run = ok(sc(
        d,
        &[
            "encode",
            "a.safetensors",
            "model",
            "b.safetensors",
            "-o",
            "out",
            "--best",
        ],
        None,
    ));
    let err = stderr(&run);
    let names: Vec<String> = table(&err).into_iter().map(|r| r.0).collect();
    assert_eq!(
        names,
        [
            "a.safetensors",
            "model/config.json",
            "model/sub/w.safetensors",
            "b.safetensors"
        ],
        "{err}"
    );
    assert!(err.contains("4 files, 3 best, 0 failed"), "{err}");
    for (archive, original) in [
        ("out/a.safetensors.sc", SAMPLE),
        ("out/b.safetensors.sc", TINY),
        ("out/model/sub/w.safetensors.sc", TINY),
    ] {
        assert_eq!(
            decoded(&d.join(archive)),
            fs::read(original).unwrap(),
            "{archive}"
        );
        assert_eq!(mode(&d.join(archive)), sc::Mode::Best, "{archive}");
    }
    assert_eq!(fs::read(d.join("out/model/config.json")).unwrap(), b"{}");
    // And back: the archives and the mirrored folder into another folder.
    fs::create_dir(d.join("back")).unwrap();
    ok(sc(
        d,
        &[
            "decode",
            "-q",
            "out/a.safetensors.sc",
            "out/model",
            "-o",
            "back",
        ],
        None,
    ));
    assert_eq!(
        fs::read(d.join("back/a.safetensors")).unwrap(),
        fs::read(SAMPLE).unwrap()
    );
    assert_eq!(
        fs::read(d.join("back/model/sub/w.safetensors")).unwrap(),
        fs::read(TINY).unwrap()
    );
}

#[test]
fn several_inputs_need_a_folder_and_never_meet() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    three(d);
    // -o must name a folder, not a file.
    fs::write(d.join("file"), b"x").unwrap();
    fails(
        sc(
            d,
            &["encode", "a.safetensors", "b.safetensors", "-o", "file"],
            None,
        ),
        "with several inputs or a folder, -o names the folder",
    );
    assert_eq!(fs::read(d.join("file")).unwrap(), b"x");
    // Two inputs with one output name, from two folders into one: refused, nothing written.
    fs::create_dir_all(d.join("p")).unwrap();
    fs::create_dir_all(d.join("q")).unwrap();
    fs::create_dir_all(d.join("out")).unwrap();
    fs::copy(TINY, d.join("p/m.safetensors")).unwrap();
    fs::copy(SAMPLE, d.join("q/m.safetensors")).unwrap();
    let err = fails(
        sc(
            d,
            &[
                "encode",
                "a.safetensors",
                "p/m.safetensors",
                "q/m.safetensors",
                "-o",
                "out",
            ],
            None,
        ),
        "nothing was written",
    );
    assert!(err.contains("p/m.safetensors and q/m.safetensors"), "{err}");
    assert_eq!(fs::read_dir(d.join("out")).unwrap().count(), 0);
    assert!(!d.join("a.safetensors.sc").exists());
    // A file named on its own and again inside a folder given too.
    fails(
        sc(d, &["encode", "p", "p/m.safetensors"], None),
        "nothing was written",
    );
    assert!(!d.join("p/m.safetensors.sc").exists());
    // stdin and stdout are for one input only: usage errors.
    usage_error(
        sc(d, &["encode", "a.safetensors", "b.safetensors", "-c"], None),
        "stdout",
    );
    usage_error(sc(d, &["encode", "-", "b.safetensors"], None), "stdin");
    usage_error(
        sc(d, &["decode", "a.sc", "b.sc", "-o", "-"], None),
        "stdout",
    );
}

#[test]
fn shorthands_and_aliases() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    three(d);
    ok(sc(d, &["-z", "-q", "a.safetensors"], None));
    assert_eq!(
        decoded(&d.join("a.safetensors.sc")),
        fs::read(SAMPLE).unwrap()
    );
    ok(sc(
        d,
        &["compress", "-q", "b.safetensors", "c.safetensors"],
        None,
    ));
    assert!(d.join("b.safetensors.sc").is_file() && d.join("c.safetensors.sc").is_file());
    fs::rename(d.join("a.safetensors"), d.join("a.orig")).unwrap();
    ok(sc(d, &["-d", "a.safetensors.sc"], None));
    assert_eq!(
        fs::read(d.join("a.safetensors")).unwrap(),
        fs::read(SAMPLE).unwrap()
    );
    ok(sc(
        d,
        &["decompress", "b.safetensors.sc", "-o", "b.back"],
        None,
    ));
    assert_eq!(fs::read(d.join("b.back")).unwrap(), fs::read(TINY).unwrap());
    // `-dc`, as `zstd -dc`: to stdout; global flags may come first.
    let out = ok(sc(d, &["-q", "-dc", "c.safetensors.sc"], None));
    assert_eq!(out.stdout, fs::read(SAMPLE).unwrap());
    assert!(out.stderr.is_empty());
    ok(sc(d, &["--decompress", "-f", "c.safetensors.sc"], None));
    // A name that is neither a command nor a file stays a usage error.
    let run = sc(d, &["a.safetensor"], None);
    assert_eq!(run.status.code(), Some(2), "{}", stderr(&run));
}

#[test]
fn zstd_spellings_of_the_commands() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    fs::copy(TINY, d.join("t.safetensors")).unwrap();
    // `sc FILE` compresses, as `zstd FILE` does; a level first does too.
    ok(sc(d, &["-q", "t.safetensors"], None));
    assert_eq!(
        decoded(&d.join("t.safetensors.sc")),
        fs::read(TINY).unwrap()
    );
    ok(sc(
        d,
        &["-9", "-f", "-q", "t.safetensors", "-o", "t9.sc"],
        None,
    ));
    assert_eq!(mode(&d.join("t9.sc")), sc::Mode::Best);
    // `sc ARCHIVE` says how to restore it.
    fails(sc(d, &["t.safetensors.sc"], None), "sc -d t.safetensors.sc");
    // `-t`/`--test` verify, `-l`/`--list` describe.
    for test in ["-t", "--test"] {
        let run = ok(sc(d, &[test, "t.safetensors.sc", "t9.sc"], None));
        let out = String::from_utf8_lossy(&run.stdout);
        assert!(
            out.contains("t.safetensors.sc: OK") && out.contains("t9.sc: OK"),
            "{out}"
        );
    }
    fs::create_dir(d.join("one")).unwrap();
    fs::copy(d.join("t9.sc"), d.join("one/t9.sc")).unwrap();
    let run = ok(sc(d, &["-t", "one"], None));
    let out = String::from_utf8_lossy(&run.stdout);
    assert!(out.contains("total: 1 archive, 1 OK, 0 failed"), "{out}");
    fs::write(d.join("bad.sc"), b"not an archive").unwrap();
    let run = sc(d, &["-t", "bad.sc"], None);
    assert_eq!(run.status.code(), Some(1), "{}", stderr(&run));
    let help = ok(sc(d, &["--help"], None));
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("`sc -t` verifies, `sc -l` is `sc info`"),
        "{help}"
    );
    for list in ["-l", "--list"] {
        let run = ok(sc(d, &["-q", list, "t9.sc"], None));
        let out = String::from_utf8_lossy(&run.stdout);
        assert!(out.contains("mode:        best"), "{out}");
    }
}

/// Runs `sc args...` in `dir`, its stdin read from `stdin` (else empty), and returns its
/// stdout and stderr.
fn piped(dir: &Path, args: &[&str], stdin: &Path) -> (Vec<u8>, String) {
    let run = ok(sc(dir, args, Some(stdin)));
    let err = stderr(&run);
    (run.stdout, err)
}

#[test]
fn no_input_reads_stdin_and_writes_stdout() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    fs::copy(TINY, d.join("t.safetensors")).unwrap();
    // `cat F | sc -z > F.sc`, `sc -d < F.sc > F`, `sc -t < F.sc`.
    let (archive, _) = piped(d, &["-z", "-q"], &d.join("t.safetensors"));
    fs::write(d.join("piped.sc"), &archive).unwrap();
    assert_eq!(decoded(&d.join("piped.sc")), fs::read(TINY).unwrap());
    let (back, _) = piped(d, &["-d", "-q"], &d.join("piped.sc"));
    assert_eq!(back, fs::read(TINY).unwrap());
    let (back, _) = piped(d, &["decompress"], &d.join("piped.sc"));
    assert_eq!(back, fs::read(TINY).unwrap());
    let (out, _) = piped(d, &["-t"], &d.join("piped.sc"));
    assert!(String::from_utf8_lossy(&out).starts_with("stdin: OK"));
    // -o still names the output.
    piped(d, &["-z", "-q", "-o", "o.sc"], &d.join("t.safetensors"));
    assert_eq!(decoded(&d.join("o.sc")), fs::read(TINY).unwrap());
    // A terminal on stdin is not read: a usage error, as before.
    for args in [&["-z"][..], &["decode"], &["-t"]] {
        let (code, err) = sc_with_terminal(d, args, Tty::Stdin);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains("no INPUT given"), "{err}");
    }
}

#[test]
fn levels_are_numbers() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    fs::copy(TINY, d.join("t.safetensors")).unwrap();
    ok(sc(
        d,
        &["encode", "-q", "-9", "t.safetensors", "-o", "9.sc"],
        None,
    ));
    ok(sc(
        d,
        &["encode", "-q", "-1", "t.safetensors", "-o", "1.sc"],
        None,
    ));
    // A level above 9 is the highest, -9, with a note under -v; `-12` is not `-1 -2`.
    for (args, name) in [
        (&["-z", "-12"][..], "12.sc"),
        (&["-z", "-19"], "19.sc"),
        (&["-22", "-z"], "22.sc"),
        (&["-z19"], "z19.sc"),
        (&["encode", "--level", "40"], "40.sc"),
    ] {
        let mut all = args.to_vec();
        all.extend(["-v", "t.safetensors", "-o", name]);
        let err = stderr(&ok(sc(d, &all, None)));
        assert!(
            err.contains("above sc's highest level; coding with -9"),
            "{err}"
        );
        assert_eq!(
            fs::read(d.join(name)).unwrap(),
            fs::read(d.join("9.sc")).unwrap()
        );
    }
    let err = stderr(&ok(sc(
        d,
        &["-z", "-19", "-f", "t.safetensors", "-o", "q.sc"],
        None,
    )));
    assert!(!err.contains("note"), "the note is for -v: {err}");
    // Digits beside other flags, and values of options, are read as clap reads them.
    ok(sc(
        d,
        &["-z", "-1q", "-T1", "t.safetensors", "-o", "1q.sc"],
        None,
    ));
    assert_eq!(
        fs::read(d.join("1q.sc")).unwrap(),
        fs::read(d.join("1.sc")).unwrap()
    );
    // sc's levels are named by the errors for the ones it has not.
    for level in ["-0", "--ultra", "--fast=3", "-00"] {
        usage_error(sc(d, &["-z", level, "t.safetensors"], None), "-1 to -5");
    }
    assert!(!d.join("t.safetensors.sc").exists());
    let help = String::from_utf8_lossy(&ok(sc(d, &["encode", "--help"], None)).stdout).into_owned();
    assert!(help.contains("-19 mean -9"), "{help}");
}

/// A new folder holding the tiny sample as `t.safetensors` and its archive `t.safetensors.sc`.
fn tiny_encoded() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    fs::copy(TINY, tmp.path().join("t.safetensors")).unwrap();
    ok(sc(tmp.path(), &["encode", "-q", "t.safetensors"], None));
    tmp
}

/// A mode or level given to a command other than encode is a usage error that says the flag
/// is encode's, not clap's tip to pass it as a value.
#[test]
fn modes_and_levels_belong_to_encode() {
    let tmp = tiny_encoded();
    let d = tmp.path();
    for (args, flag) in [
        (&["decode", "--best", "t.safetensors.sc"][..], "--best"),
        (&["-d", "-9", "t.safetensors.sc"], "-9"),
        (&["decode", "-m", "fast", "t.safetensors.sc"], "-m"),
        (&["verify", "--fast", "t.safetensors.sc"], "--fast"),
    ] {
        let out = sc(d, args, None);
        let err = stderr(&out);
        assert!(!err.contains("tip:"), "{args:?}: {err}");
        usage_error(out, &format!("{flag} applies to encode only"));
    }
    assert!(!d.join("t.safetensors").with_extension("").exists());
}

#[test]
fn verbose_output_to_a_device_is_not_read_back() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    fs::copy(TINY, d.join("t.safetensors")).unwrap();
    for args in [
        &["-v", "-z", "t.safetensors", "-o", "/dev/null"][..],
        &["-v", "-z", "-c", "t.safetensors"],
    ] {
        let err = stderr(&ok(sc(d, args, None)));
        assert!(!err.contains("cannot be read back"), "{err}");
        assert!(
            err.contains("codecs:  not shown: the archive is not a local file"),
            "{err}"
        );
    }
    // A FIFO input is not read before it is decoded.
    ok(sc(d, &["-q", "-z", "t.safetensors"], None));
    let fifo = d.join("fifo.sc");
    let made = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo only reads the path.
    assert_eq!(unsafe { libc::mkfifo(made.as_ptr(), 0o600) }, 0);
    let archive = fs::read(d.join("t.safetensors.sc")).unwrap();
    let writer = std::thread::spawn(move || {
        let _ = fs::write(&fifo, archive);
    });
    let err = stderr(&ok(sc(d, &["-v", "-d", "fifo.sc", "-o", "back"], None)));
    writer.join().unwrap();
    assert_eq!(
        fs::read(d.join("back")).unwrap(),
        fs::read(TINY).unwrap(),
        "{err}"
    );
}

#[test]
fn output_folder_is_one_rule() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    three(d);
    // One input: an existing folder, or a name ending in '/', is the folder to write in.
    fs::create_dir(d.join("out")).unwrap();
    ok(sc(d, &["-z", "-q", "b.safetensors", "-o", "out"], None));
    assert_eq!(
        decoded(&d.join("out/b.safetensors.sc")),
        fs::read(TINY).unwrap()
    );
    ok(sc(
        d,
        &["-z", "-q", "b.safetensors", "-o", "new/deeper/"],
        None,
    ));
    assert!(d.join("new/deeper/b.safetensors.sc").is_file());
    ok(sc(
        d,
        &["-d", "-q", "out/b.safetensors.sc", "-o", "back/"],
        None,
    ));
    assert_eq!(
        fs::read(d.join("back/b.safetensors")).unwrap(),
        fs::read(TINY).unwrap()
    );
    // Otherwise a file, as before.
    ok(sc(d, &["-z", "-q", "b.safetensors", "-o", "b.sc"], None));
    assert_eq!(decoded(&d.join("b.sc")), fs::read(TINY).unwrap());
    // stdin has no name to write in a folder.
    let run = sc(d, &["-z", "-o", "out/"], Some(&d.join("b.safetensors")));
    fails(run, "give -o a file name");
    // Several inputs: the folder is made when missing, as for a folder input.
    ok(sc(
        d,
        &["-z", "-q", "a.safetensors", "b.safetensors", "-o", "many"],
        None,
    ));
    assert_eq!(
        decoded(&d.join("many/a.safetensors.sc")),
        fs::read(SAMPLE).unwrap()
    );
    assert!(d.join("many/b.safetensors.sc").is_file());
    // The help states the rule.
    let help = ok(sc(d, &["encode", "--help"], None));
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("when OUT ends in '/' or is a folder"),
        "{help}"
    );
}

#[test]
fn info_and_list_take_folders() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    three(d);
    fs::create_dir_all(d.join("m/sub")).unwrap();
    fs::copy(TINY, d.join("m/b.safetensors")).unwrap();
    fs::copy(SAMPLE, d.join("m/sub/a.safetensors")).unwrap();
    ok(sc(d, &["-z", "-q", "m", "-o", "packed"], None));
    ok(sc(
        d,
        &[
            "-z",
            "-q",
            "-m",
            "best",
            "m/b.safetensors",
            "-o",
            "packed/best.sc",
        ],
        None,
    ));
    let run = ok(sc(d, &["info", "packed"], None));
    let out = String::from_utf8_lossy(&run.stdout);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    assert!(
        lines[0].starts_with("packed/b.safetensors.sc: fast, 7544 -> "),
        "{out}"
    );
    assert!(
        lines[1].starts_with("packed/best.sc: best, 7544 -> "),
        "{out}"
    );
    assert!(
        lines[2].starts_with("packed/sub/a.safetensors.sc: fast, 3908400 -> "),
        "{out}"
    );
    assert!(lines[2].ends_with(", 7 blocks, 10 tensors"), "{out}");
    assert!(
        lines[3].starts_with("total: 3 archives, 3923488 -> "),
        "{out}"
    );
    let run = ok(sc(d, &["list", "packed"], None));
    let out = String::from_utf8_lossy(&run.stdout);
    let single = ok(sc(d, &["list", "packed/sub/a.safetensors.sc"], None));
    let single = String::from_utf8_lossy(&single.stdout);
    assert!(
        out.contains(&format!("packed/sub/a.safetensors.sc:\n{single}")),
        "{out}"
    );
    assert_eq!(out.matches("\nname ").count(), 3, "{out}");
    // A damaged archive is a line of its own, and the run fails at the end.
    fs::write(d.join("packed/bad.sc"), b"not an archive").unwrap();
    let run = sc(d, &["info", "packed"], None);
    assert_eq!(run.status.code(), Some(1));
    let out = String::from_utf8_lossy(&run.stdout);
    assert!(out.contains("packed/bad.sc: FAILED: "), "{out}");
    assert!(
        stderr(&run).contains("1 of 4 archives could not be read"),
        "{}",
        stderr(&run)
    );
    fails(
        sc(d, &["info", "--json", "packed"], None),
        "--json describes one archive",
    );
    fs::create_dir(d.join("empty")).unwrap();
    fails(
        sc(d, &["list", "empty"], None),
        "no .sc archives found in empty",
    );
}

#[test]
fn keep_is_the_default_and_conflicts_are_usage_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    three(d);
    ok(sc(d, &["encode", "-q", "-k", "a.safetensors"], None));
    assert!(d.join("a.safetensors").is_file() && d.join("a.safetensors.sc").is_file());
    ok(sc(
        d,
        &["decode", "-q", "--keep", "a.safetensors.sc", "-o", "x"],
        None,
    ));
    assert!(d.join("a.safetensors.sc").is_file());
    let help = ok(sc(d, &["encode", "--help"], None));
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("-k, --keep") && help.contains("the default"),
        "{help}"
    );
    for (args, needle) in [
        (
            &["encode", "-c", "-o", "x.sc", "b.safetensors"][..],
            "--stdout",
        ),
        (
            &["encode", "--md5", "--no-md5", "b.safetensors"],
            "--no-md5",
        ),
        (&["encode", "-k", "--rm", "b.safetensors"], "--rm"),
        (&["decode", "-c", "-o", "y", "a.safetensors.sc"], "--output"),
        (&["decode", "--rm", "-k", "a.safetensors.sc"], "--keep"),
        (
            &["encode", "-9", "-m", "fast", "b.safetensors"],
            "-9 means -m best",
        ),
        (
            &["encode", "--fast", "-m", "best", "b.safetensors"],
            "--fast means -m fast",
        ),
        (
            &["extract", "-c", "-o", "z", "-t", "w", "a.safetensors.sc"],
            "--output",
        ),
    ] {
        usage_error(sc(d, args, None), needle);
    }
    assert!(!d.join("b.safetensors.sc").exists() && !d.join("x.sc").exists());
}

#[test]
fn levels_map_onto_the_modes() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    fs::copy(TINY, d.join("t.safetensors")).unwrap();
    let cases: [(&[&str], sc::Mode); 9] = [
        (&[], sc::Mode::Fast),
        (&["-1"], sc::Mode::Fast),
        (&["-5"], sc::Mode::Fast),
        (&["-6"], sc::Mode::Best),
        (&["-9"], sc::Mode::Best),
        (&["--best"], sc::Mode::Best),
        (&["-9", "--fast"], sc::Mode::Fast),
        (&["-1", "-9"], sc::Mode::Best),
        (&["-9", "-m", "best"], sc::Mode::Best),
    ];
    for (flags, want) in cases {
        let mut args = vec!["encode", "-q", "-f", "t.safetensors"];
        args.extend_from_slice(flags);
        ok(sc(d, &args, None));
        assert_eq!(mode(&d.join("t.safetensors.sc")), want, "{flags:?}");
    }
    // BEST's levels: -6 leaves the sign models out (format version 4), the others allow them
    // (version 5).
    let versions: [(&[&str], u16); 5] = [
        (&["-6"], 4),
        (&["-7"], 5),
        (&["--best"], 5),
        (&["-m", "best"], 5),
        (&["-9"], 5),
    ];
    for (flags, want) in versions {
        let mut args = vec!["encode", "-q", "-f", "t.safetensors"];
        args.extend_from_slice(flags);
        ok(sc(d, &args, None));
        let mut f = fs::File::open(d.join("t.safetensors.sc")).unwrap();
        let version = sc::inspect(&mut f).unwrap().format_version;
        assert_eq!(version, want, "{flags:?}");
    }
    let help = ok(sc(d, &["encode", "--help"], None));
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("-1 to -5") && help.contains("-6 to -9"),
        "{help}"
    );
}

#[test]
fn verbose_and_quiet_anywhere() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    three(d);
    for args in [
        &["-v", "encode", "a.safetensors"][..],
        &["encode", "a.safetensors", "-f", "--verbose"],
    ] {
        let run = ok(sc(d, args, None));
        let err = stderr(&run);
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 4, "{err}");
        assert!(lines[0].starts_with("a.safetensors: 3908400 -> "), "{err}");
        assert!(
            lines[1].starts_with("  blocks:  7 fast,") && lines[1].contains("exp16 5"),
            "{err}"
        );
        assert!(
            lines[2].starts_with("  codecs:  ") && lines[2].contains("huffjoint"),
            "{err}"
        );
        assert!(
            lines[3].starts_with("  time:    ") && lines[3].ends_with(" s"),
            "{err}"
        );
    }
    // Decoding names the archive's codecs too; several inputs: one set of lines per file.
    let run = ok(sc(
        d,
        &["decode", "-v", "a.safetensors.sc", "-o", "a.back"],
        None,
    ));
    assert!(stderr(&run).contains("huffjoint"), "{}", stderr(&run));
    let run = ok(sc(
        d,
        &[
            "encode",
            "-v",
            "-m",
            "best",
            "b.safetensors",
            "c.safetensors",
        ],
        None,
    ));
    let err = stderr(&run);
    assert_eq!(err.matches("  codecs:  ").count(), 2, "{err}");
    assert!(
        err.contains("joint") && err.contains("2 files, 2 best, 0 failed"),
        "{err}"
    );
    // -q anywhere silences everything but errors.
    for args in [
        &["-q", "decode", "a.safetensors.sc", "-o", "q1"][..],
        &["decode", "a.safetensors.sc", "-o", "q2", "--quiet"],
        &["encode", "-f", "b.safetensors", "c.safetensors", "-q"],
    ] {
        let run = ok(sc(d, args, None));
        assert!(
            run.stderr.is_empty() && run.stdout.is_empty(),
            "{args:?}: {}",
            stderr(&run)
        );
    }
}

#[test]
fn archives_are_skipped_by_encode_unless_forced() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    three(d);
    ok(sc(d, &["encode", "-q", "a.safetensors"], None));
    // The only input: an error, nothing written.
    let err = fails(
        sc(d, &["encode", "a.safetensors.sc"], None),
        "already ends in .sc",
    );
    assert!(err.contains("-f"), "{err}");
    assert!(!d.join("a.safetensors.sc.sc").exists());
    // Among others: a warning, the others done, exit 0.
    let run = ok(sc(
        d,
        &["encode", "a.safetensors.sc", "b.safetensors"],
        None,
    ));
    let err = stderr(&run);
    assert!(
        err.starts_with("sc: warning: a.safetensors.sc already ends in .sc: skipped"),
        "{err}"
    );
    assert!(err.contains("1 file, 1 fast, 0 failed"), "{err}");
    assert!(d.join("b.safetensors.sc").is_file() && !d.join("a.safetensors.sc.sc").exists());
    // Every input skipped: exit 1.
    let run = sc(d, &["encode", "a.safetensors.sc", "b.safetensors.sc"], None);
    assert_eq!(run.status.code(), Some(1), "{}", stderr(&run));
    assert!(
        stderr(&run).contains("every input was skipped"),
        "{}",
        stderr(&run)
    );
    // -f compresses it all the same, and it round-trips.
    ok(sc(d, &["encode", "-q", "-f", "a.safetensors.sc"], None));
    assert_eq!(
        decoded(&d.join("a.safetensors.sc.sc")),
        fs::read(d.join("a.safetensors.sc")).unwrap()
    );
}

/// A pseudo-terminal: the controller and the path of its terminal end.
struct Pty {
    controller: fs::File,
    terminal: String,
}

fn pty() -> Pty {
    use std::os::fd::FromRawFd;
    // SAFETY: posix_openpt returns a new descriptor (checked), which the File then owns;
    // grantpt, unlockpt and ptsname_r only act on it and write into the buffer given.
    unsafe {
        let fd = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
        assert!(fd >= 0, "posix_openpt");
        let controller = fs::File::from_raw_fd(fd);
        assert_eq!(libc::grantpt(fd), 0);
        assert_eq!(libc::unlockpt(fd), 0);
        let mut name = [0 as libc::c_char; 128];
        assert_eq!(libc::ptsname_r(fd, name.as_mut_ptr(), name.len()), 0);
        let terminal = std::ffi::CStr::from_ptr(name.as_ptr())
            .to_string_lossy()
            .into_owned();
        Pty {
            controller,
            terminal,
        }
    }
}

/// Runs `sc args...` in `dir` with stdout on a terminal; returns its exit code, stderr, and
/// the bytes the terminal received.
fn sc_on_terminal(dir: &Path, args: &[&str]) -> (Option<i32>, String, usize) {
    let Pty {
        mut controller,
        terminal,
    } = pty();
    let tty = fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOCTTY)
        .open(&terminal)
        .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_sc"))
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(tty)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Drained as the child writes, until its terminal end closes (EIO).
    let reader = std::thread::spawn(move || {
        let (mut n, mut buf) = (0, vec![0u8; 1 << 16]);
        while let Ok(k) = controller.read(&mut buf) {
            if k == 0 {
                break;
            }
            n += k;
        }
        n
    });
    let out = child.wait_with_output().unwrap();
    (out.status.code(), stderr(&out), reader.join().unwrap())
}

/// Which of `sc`'s streams [`sc_with_terminal`] puts on a terminal.
enum Tty {
    Stdin,
    Stderr,
}

/// Runs `sc args...` in `dir` with its stdin or its stderr on a terminal (the other one
/// empty or piped); returns its exit code and its stderr, as the terminal or the pipe got it.
fn sc_with_terminal(dir: &Path, args: &[&str], on: Tty) -> (Option<i32>, String) {
    let Pty {
        mut controller,
        terminal,
    } = pty();
    let tty = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY)
        .open(&terminal)
        .unwrap();
    let (stdin, stderr_to) = match on {
        Tty::Stdin => (Stdio::from(tty), Stdio::piped()),
        Tty::Stderr => (Stdio::null(), Stdio::from(tty)),
    };
    let child = Command::new(env!("CARGO_BIN_EXE_sc"))
        .args(args)
        .current_dir(dir)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(stderr_to)
        .spawn()
        .unwrap();
    // Drained as the child writes, until its terminal end closes (EIO).
    let reader = std::thread::spawn(move || {
        let (mut got, mut buf) = (Vec::new(), vec![0u8; 1 << 16]);
        while let Ok(k) = controller.read(&mut buf) {
            if k == 0 {
                break;
            }
            got.extend_from_slice(&buf[..k]);
        }
        got
    });
    let out = child.wait_with_output().unwrap();
    let on_terminal = String::from_utf8_lossy(&reader.join().unwrap()).into_owned();
    let err = match on {
        Tty::Stdin => stderr(&out),
        Tty::Stderr => on_terminal,
    };
    (out.status.code(), err)
}

#[test]
fn progress_counts_in_the_summary_units() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    fs::copy(SAMPLE, d.join("a.safetensors")).unwrap();
    let (code, err) = sc_with_terminal(d, &["-z", "-m", "best", "a.safetensors"], Tty::Stderr);
    assert_eq!(code, Some(0), "{err}");
    // The bar was drawn (and cleared); it counts in MB and MB/s as the summary does.
    assert!(err.contains(" eta ") && err.contains(" MB/s"), "{err:?}");
    assert!(!err.contains("iB"), "{err:?}");
}

#[test]
fn binary_output_is_refused_on_a_terminal_unless_forced() {
    let tmp = tiny_encoded();
    let d = tmp.path();
    for args in [
        &["decode", "-c", "t.safetensors.sc"][..],
        &["-dc", "t.safetensors.sc"],
        &["decode", "t.safetensors.sc", "-o", "-"],
        &["encode", "-c", "t.safetensors"],
    ] {
        let (code, err, got) = sc_on_terminal(d, args);
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(
            err.contains("refusing to write binary data to a terminal"),
            "{err}"
        );
        assert_eq!(got, 0, "{args:?} wrote to the terminal");
    }
    let (code, err, got) = sc_on_terminal(d, &["decode", "-q", "-f", "-c", "t.safetensors.sc"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(got >= fs::read(TINY).unwrap().len(), "{got} bytes");
}
