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
    // -o must name an existing folder.
    fails(
        sc(
            d,
            &["encode", "a.safetensors", "b.safetensors", "-o", "x.sc"],
            None,
        ),
        "with several inputs, -o names the folder",
    );
    fs::write(d.join("file"), b"x").unwrap();
    fails(
        sc(
            d,
            &["encode", "a.safetensors", "b.safetensors", "-o", "file"],
            None,
        ),
        "-o names the folder",
    );
    assert!(!d.join("x.sc").exists());
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
    // Plain `sc FILE` stays an error.
    let run = sc(d, &["a.safetensors"], None);
    assert_eq!(run.status.code(), Some(2), "{}", stderr(&run));
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
    assert!(err.contains("1 files, 1 fast, 0 failed"), "{err}");
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

#[test]
fn binary_output_is_refused_on_a_terminal_unless_forced() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    fs::copy(TINY, d.join("t.safetensors")).unwrap();
    ok(sc(d, &["encode", "-q", "t.safetensors"], None));
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
