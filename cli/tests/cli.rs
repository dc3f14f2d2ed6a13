//! The `sc` command line, run as a process: output naming, overwrite protection, stdin/stdout,
//! verify, info, error messages and exit codes, and cleanup after failures.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const SAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../testdata/sample.safetensors"
);

/// What one run of `sc` did.
struct Run {
    code: Option<i32>,
    stdout: Vec<u8>,
    stderr: String,
    what: String,
}

impl Run {
    fn ok(&self) -> &Self {
        assert_eq!(
            self.code,
            Some(0),
            "`{}` failed:\n{}",
            self.what,
            self.stderr
        );
        self.no_panic()
    }

    /// A failure reported by `sc` itself: exit 1 and exactly one line `sc: error: ...`.
    fn fails(&self) -> &Self {
        assert_eq!(
            self.code,
            Some(1),
            "`{}` should fail with exit 1; stderr:\n{}",
            self.what,
            self.stderr
        );
        self.no_panic();
        let lines: Vec<&str> = self.stderr.lines().collect();
        assert_eq!(
            lines.len(),
            1,
            "`{}`: want one error line, got:\n{}",
            self.what,
            self.stderr
        );
        assert!(
            lines[0].starts_with("sc: error: "),
            "`{}`: error line is {:?}",
            self.what,
            lines[0]
        );
        self
    }

    fn no_panic(&self) -> &Self {
        assert!(
            !self.stderr.contains("panicked") && !self.stderr.contains("RUST_BACKTRACE"),
            "`{}` panicked:\n{}",
            self.what,
            self.stderr
        );
        self
    }

    fn stderr_has(&self, needle: &str) -> &Self {
        assert!(
            self.stderr.to_lowercase().contains(&needle.to_lowercase()),
            "`{}`: stderr lacks {needle:?}:\n{}",
            self.what,
            self.stderr
        );
        self
    }

    fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
}

/// Runs `sc args...` in `dir`, feeding `stdin` if given (else an empty stdin).
fn sc_in(dir: &Path, args: &[&str], stdin: Option<&[u8]>) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sc"))
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start sc");
    let mut pipe = child.stdin.take().expect("stdin");
    let data = stdin.map(|d| d.to_vec()).unwrap_or_default();
    // Fed from a thread: sc may fail (and stop reading) before it has read everything.
    let feeder = std::thread::spawn(move || {
        let _ = pipe.write_all(&data);
    });
    let out = child.wait_with_output().expect("wait for sc");
    feeder.join().expect("stdin feeder");
    Run {
        code: out.status.code(),
        stdout: out.stdout,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        what: format!("sc {}", args.join(" ")),
    }
}

fn sc(dir: &Path, args: &[&str]) -> Run {
    sc_in(dir, args, None)
}

fn sample() -> Vec<u8> {
    std::fs::read(SAMPLE).expect("testdata/sample.safetensors")
}

/// A temporary directory holding a copy of the sample as `model.safetensors`.
fn workdir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("model.safetensors");
    std::fs::copy(SAMPLE, &path).expect("copy sample");
    (dir, path)
}

fn read(p: impl AsRef<Path>) -> Vec<u8> {
    let p = p.as_ref();
    std::fs::read(p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
}

/// Names of the files in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Byte equality without printing megabytes on failure.
fn assert_same(got: &[u8], want: &[u8], what: &str) {
    if got != want {
        let first = got.iter().zip(want).position(|(a, b)| a != b);
        panic!(
            "{what}: {} bytes vs {} expected, first difference at {first:?}",
            got.len(),
            want.len()
        );
    }
}

/// Encodes the sample with the library and corrupts one payload byte of block `k`.
fn corrupt_archive(k: usize) -> Vec<u8> {
    let input = sample();
    let opts = sc::EncodeOptions {
        block_size: 64 << 10,
        ..sc::EncodeOptions::new(sc::Mode::Fast)
    };
    let mut archive = common::encode_to_vec(&input, &opts);
    let info = sc::inspect(&mut std::io::Cursor::new(&archive)).unwrap();
    let e = info.footer().index[k];
    // Records are 16 bytes + 8 per plane + 4; the last byte of the block is payload.
    let at = (e.offset + e.stored_len as u64 - 1) as usize;
    archive[at] ^= 0x10;
    archive
}

#[test]
fn default_names_and_byte_identical_round_trip() {
    let (dir, input) = workdir();
    let d = dir.path();
    let original = read(&input);
    sc(d, &["encode", "model.safetensors"]).ok();
    let archive = d.join("model.safetensors.sc");
    assert!(archive.is_file(), "encode did not write INPUT.sc");
    assert!(read(&archive).len() < original.len());
    // Move the original away so decode recreates it from the archive alone.
    std::fs::rename(&input, d.join("original")).unwrap();
    sc(d, &["decode", "model.safetensors.sc"]).ok();
    assert_same(&read(&input), &original, "decode of INPUT.sc");
    assert_eq!(
        listing(d),
        ["model.safetensors", "model.safetensors.sc", "original"]
    );
    // Paths outside the working directory name outputs next to the input.
    let sub = d.join("sub");
    std::fs::create_dir(&sub).unwrap();
    std::fs::copy(&input, sub.join("w.safetensors")).unwrap();
    let (other, _) = workdir();
    let arg = sub.join("w.safetensors");
    sc(other.path(), &["encode", "-q", arg.to_str().unwrap()]).ok();
    assert!(sub.join("w.safetensors.sc").is_file());
}

#[test]
fn round_trip_with_modes_block_sizes_and_threads() {
    let (dir, _) = workdir();
    let d = dir.path();
    let original = sample();
    let cases: &[&[&str]] = &[
        &["-m", "fast"],
        &["-m", "best"],
        &["--block-size", "12290"],
        &["-m", "best", "--block-size", "12290"],
        &["-T", "1"],
        &["-T", "4"],
        &["-m", "best", "-b", "4K", "-T", "2"],
        &["--mode", "fast", "--block-size", "64M", "--threads", "1"],
    ];
    let mut sizes = Vec::new();
    for (n, opts) in cases.iter().enumerate() {
        let arc = format!("a{n}.sc");
        let back = format!("b{n}");
        let mut args = vec!["encode", "model.safetensors", "-o", &arc];
        args.extend_from_slice(opts);
        sc(d, &args).ok();
        // Decode with the same thread setting and the MD5 check.
        let mut args = vec!["decode", "--md5", &arc, "-o", &back];
        args.extend(
            opts.iter()
                .skip_while(|a| **a != "-T" && **a != "--threads"),
        );
        sc(d, &args).ok();
        assert_same(
            &read(d.join(&back)),
            &original,
            &format!("round trip {opts:?}"),
        );
        let info = sc(d, &["info", &arc]).ok().stdout_text();
        let mode = if opts.contains(&"best") {
            "best"
        } else {
            "fast"
        };
        assert!(
            info.contains(&format!("mode:        {mode}")),
            "{opts:?}:\n{info}"
        );
        if opts.contains(&"12290") {
            assert!(info.contains("block size:  12290 bytes"), "{info}");
        }
        sizes.push(read(d.join(&arc)).len());
    }
    // Threads change nothing in the output.
    assert_same(
        &read(d.join("a4.sc")),
        &read(d.join("a0.sc")),
        "-T 1 vs default",
    );
    assert_same(
        &read(d.join("a5.sc")),
        &read(d.join("a4.sc")),
        "-T 4 vs -T 1",
    );
    assert!(
        sizes[1] < sizes[0],
        "BEST should be smaller than FAST: {sizes:?}"
    );
}

#[test]
fn existing_output_needs_force() {
    let (dir, _) = workdir();
    let d = dir.path();
    let archive = d.join("model.safetensors.sc");
    std::fs::write(&archive, b"keep me").unwrap();
    sc(d, &["encode", "model.safetensors"])
        .fails()
        .stderr_has("already exists");
    assert_eq!(read(&archive), b"keep me", "existing output was touched");
    assert_eq!(listing(d), ["model.safetensors", "model.safetensors.sc"]);
    sc(d, &["encode", "-f", "model.safetensors"]).ok();
    assert_ne!(read(&archive), b"keep me");
    // Decode refuses to overwrite too, and -f lets it.
    std::fs::write(d.join("out"), b"keep me too").unwrap();
    sc(d, &["decode", "model.safetensors.sc", "-o", "out"])
        .fails()
        .stderr_has("already exists");
    assert_eq!(read(d.join("out")), b"keep me too");
    sc(
        d,
        &["decode", "model.safetensors.sc", "-o", "out", "--force"],
    )
    .ok();
    assert_same(&read(d.join("out")), &sample(), "decode -f");
    // The input itself is never an output, even with -f.
    sc(d, &["decode", "-f", "out", "-o", "out"]).fails();
    assert_same(&read(d.join("out")), &sample(), "input used as output");
}

#[test]
fn stdout_and_stdin() {
    let (dir, _) = workdir();
    let d = dir.path();
    let original = sample();
    let from_file = {
        sc(d, &["encode", "-q", "model.safetensors", "-o", "file.sc"]).ok();
        read(d.join("file.sc"))
    };
    // encode -c: the archive on stdout, nothing written next to the input.
    let enc = sc(d, &["encode", "-c", "model.safetensors"]);
    enc.ok();
    assert_same(&enc.stdout, &from_file, "encode -c");
    assert!(!d.join("model.safetensors.sc").exists());
    // decode from stdin to stdout.
    let dec = sc_in(d, &["decode", "-", "-c"], Some(&enc.stdout));
    dec.ok();
    assert_same(&dec.stdout, &original, "decode - -c");
    // -o - is stdout too, for both commands.
    let enc2 = sc(d, &["encode", "model.safetensors", "-o", "-", "-m", "best"]);
    enc2.ok();
    let dec2 = sc_in(d, &["decode", "-", "-o", "-", "--md5"], Some(&enc2.stdout));
    dec2.ok();
    assert_same(&dec2.stdout, &original, "-o - round trip");
    // Stdin input: a stream of unknown length, same archive as from the file.
    sc_in(d, &["encode", "-", "-o", "in.sc"], Some(&original)).ok();
    assert_same(&read(d.join("in.sc")), &from_file, "encode from stdin");
    // Stdin with no -o goes to stdout, for both commands.
    let enc3 = sc_in(d, &["encode", "-"], Some(&original));
    enc3.ok();
    assert_same(&enc3.stdout, &from_file, "encode - without -o");
    let dec3 = sc_in(d, &["decode", "-"], Some(&from_file));
    dec3.ok();
    assert_same(&dec3.stdout, &original, "decode - without -o");
    // A stream decode checks everything a file decode does.
    let bad = corrupt_archive(2);
    sc_in(d, &["decode", "-", "-c"], Some(&bad))
        .fails()
        .stderr_has("corrupt block 2");
}

#[test]
fn decode_needs_sc_suffix_or_output_name() {
    let (dir, _) = workdir();
    let d = dir.path();
    sc(
        d,
        &["encode", "-q", "model.safetensors", "-o", "archive.bin"],
    )
    .ok();
    let before = listing(d);
    sc(d, &["decode", "archive.bin"])
        .fails()
        .stderr_has("no .sc suffix")
        .stderr_has("-o");
    assert_eq!(listing(d), before);
    sc(d, &["decode", "archive.bin", "-o", "restored"]).ok();
    assert_same(&read(d.join("restored")), &sample(), "decode -o");
}

/// A file that is not an archive is told so whatever its name, before `decode` asks for a
/// name for its output; alone or among several inputs.
#[test]
fn decode_says_not_an_archive_before_asking_for_a_name() {
    let (dir, _) = workdir();
    let d = dir.path();
    std::fs::write(d.join("notes"), b"hi\n").unwrap();
    let before = listing(d);
    for input in ["model.safetensors", "notes"] {
        let said = sc(d, &["decode", input]).fails().stderr.clone();
        assert!(
            said.contains("not an sc archive") && !said.contains("suffix"),
            "{said}"
        );
        // The same words as with -o.
        let named = sc(d, &["decode", input, "-o", "out"])
            .fails()
            .stderr
            .clone();
        assert_eq!(said, named);
    }
    let several = sc(d, &["decode", "model.safetensors", "notes"]);
    assert_eq!(several.code, Some(1), "{}", several.stderr);
    several
        .no_panic()
        .stderr_has("decoding model.safetensors: not an sc archive")
        .stderr_has("decoding notes: not an sc archive");
    assert_eq!(listing(d), before);
}

/// A FIFO without the `.sc` suffix is not read to see whether it is an archive: with no writer
/// that would block, and what was read would be lost.
#[test]
fn decode_does_not_read_a_fifo_to_name_its_output() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let made = Command::new("mkfifo").arg(d.join("pipe")).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo");
    let mut child = Command::new(env!("CARGO_BIN_EXE_sc"))
        .args(["decode", "pipe"])
        .current_dir(d)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() && start.elapsed().as_secs() < 20 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let done = child.try_wait().unwrap().is_some();
    if !done {
        let _ = child.kill();
    }
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(done, "sc decode of a FIFO blocked");
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("no .sc suffix"), "{err}");
}

#[test]
fn verify_checks_archive_and_original() {
    let (dir, _) = workdir();
    let d = dir.path();
    sc(d, &["encode", "-q", "model.safetensors"]).ok();
    let v = sc(d, &["verify", "model.safetensors.sc"]);
    v.ok();
    assert!(v.stdout_text().contains("OK"), "{}", v.stdout_text());
    let v = sc(d, &["verify", "model.safetensors.sc", "model.safetensors"]);
    v.ok();
    assert!(v.stdout_text().contains("matches"), "{}", v.stdout_text());
    // -q: silent success.
    let v = sc(
        d,
        &["verify", "-q", "model.safetensors.sc", "model.safetensors"],
    );
    v.ok();
    assert!(v.stdout.is_empty() && v.stderr.is_empty());
    // An ORIGINAL that differs in one byte.
    let mut other = sample();
    let mid = other.len() / 2;
    other[mid] ^= 1;
    std::fs::write(d.join("other.safetensors"), &other).unwrap();
    sc(d, &["verify", "model.safetensors.sc", "other.safetensors"])
        .fails()
        .stderr_has("does not match");
    // A truncated ORIGINAL.
    std::fs::write(d.join("short"), &other[..mid]).unwrap();
    sc(d, &["verify", "model.safetensors.sc", "short"])
        .fails()
        .stderr_has("does not match");
    // A missing ORIGINAL.
    sc(d, &["verify", "model.safetensors.sc", "missing"]).fails();
    // A corrupted archive names the block.
    std::fs::write(d.join("bad.sc"), corrupt_archive(5)).unwrap();
    sc(d, &["verify", "bad.sc"])
        .fails()
        .stderr_has("corrupt block 5");
    sc(d, &["verify", "bad.sc", "model.safetensors"])
        .fails()
        .stderr_has("corrupt block");
    // verify writes nothing.
    assert_eq!(
        listing(d),
        [
            "bad.sc",
            "model.safetensors",
            "model.safetensors.sc",
            "other.safetensors",
            "short"
        ]
    );
}

#[test]
fn info_shows_mode_block_size_dtypes_and_header() {
    let (dir, _) = workdir();
    let d = dir.path();
    sc(
        d,
        &[
            "encode",
            "-q",
            "-m",
            "best",
            "-b",
            "256K",
            "model.safetensors",
        ],
    )
    .ok();
    let run = sc(d, &["info", "model.safetensors.sc"]);
    run.ok();
    let out = run.stdout_text();
    for want in [
        "mode:        best",
        "block size:  262144 bytes",
        "safetensors",
        "tensors:     10",
        "range",
        "BF16",
        "F32",
        "I64",
        "F16",
        "largest:",
        "embeddings.word_embeddings.weight BF16 [2048, 384] 1572864 bytes",
        "metadata:    format, source",
        &format!("md5 {}", md5_hex(&sample())),
    ] {
        assert!(out.contains(want), "info lacks {want:?}:\n{out}");
    }
    // The kept header only with --header: pretty-printed, the same JSON in the same order.
    assert!(!out.contains("header:"), "{out}");
    let s = sample();
    let n = u64::from_le_bytes(s[..8].try_into().unwrap()) as usize;
    let json = std::str::from_utf8(&s[8..8 + n]).unwrap().trim_end();
    let run = sc(d, &["info", "--header", "model.safetensors.sc"]);
    let with = run.ok().stdout_text();
    assert!(with.starts_with(&out), "{with}");
    let printed = with[out.len()..]
        .strip_prefix("header:\n")
        .expect("a header: line");
    assert!(
        printed.lines().count() > 20,
        "not pretty-printed:\n{printed}"
    );
    let value = |j: &str| serde_json::from_str::<serde_json::Value>(j).unwrap();
    assert_eq!(value(printed), value(json));
    let keys = |j: &str| -> Vec<usize> {
        let names = [
            "embeddings.position_ids",
            "__metadata__",
            "f16.embedding.weight",
        ];
        names
            .iter()
            .map(|k| j.find(&format!("\"{k}\"")).unwrap())
            .collect()
    };
    let order = |v: Vec<usize>| {
        (0..v.len())
            .map(|k| v.iter().filter(|&&x| x < v[k]).count())
            .collect::<Vec<_>>()
    };
    assert_eq!(order(keys(printed)), order(keys(json)), "key order");
    // The dtype lines carry the byte counts of the sample's tensors.
    for (dtype, bytes) in [("I64", 4096), ("F16", 1048576), ("F32", 591360)] {
        let line = out.lines().find(|l| l.trim_start().starts_with(dtype));
        let want = format!("{bytes} bytes");
        assert!(
            line.is_some_and(|l| l.trim_end().ends_with(&want)),
            "{dtype}: want {want}:\n{out}"
        );
    }
    // Errors: not an archive, missing file.
    sc(d, &["info", "model.safetensors"])
        .fails()
        .stderr_has("bad magic");
    sc(d, &["info", "nope.sc"]).fails().stderr_has("nope.sc");
}

fn md5_hex(data: &[u8]) -> String {
    use md5::{Digest, Md5};
    Md5::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn errors_are_one_line_and_never_panic() {
    let (dir, _) = workdir();
    let d = dir.path();
    // Missing input.
    sc(d, &["encode", "missing.safetensors"])
        .fails()
        .stderr_has("missing.safetensors");
    sc(d, &["decode", "missing.sc"])
        .fails()
        .stderr_has("missing.sc");
    // A directory as input.
    std::fs::create_dir(d.join("adir.sc")).unwrap();
    sc(d, &["decode", "adir.sc", "-o", "x"]).fails();
    // Not an archive.
    std::fs::copy(d.join("model.safetensors"), d.join("plain.sc")).unwrap();
    sc(d, &["decode", "plain.sc"])
        .fails()
        .stderr_has("bad magic");
    std::fs::write(d.join("empty.sc"), b"").unwrap();
    sc(d, &["decode", "empty.sc"]).fails();
    // Truncated archives, at several lengths, as files and as streams.
    sc(d, &["encode", "-q", "model.safetensors"]).ok();
    let full = read(d.join("model.safetensors.sc"));
    for cut in [10, 2000, full.len() / 2, full.len() - 30, full.len() - 1] {
        std::fs::write(d.join("cut.sc"), &full[..cut]).unwrap();
        sc(d, &["decode", "cut.sc"]).fails().stderr_has("truncated");
        sc_in(d, &["decode", "-", "-c"], Some(&full[..cut]))
            .fails()
            .stderr_has("truncated");
        sc(d, &["verify", "cut.sc"]).fails();
        sc(d, &["info", "cut.sc"]).fails();
    }
    assert!(!d.join("cut").exists());
    // Garbage after the end.
    let mut long = full.clone();
    long.extend_from_slice(b"junk");
    std::fs::write(d.join("long.sc"), &long).unwrap();
    sc(d, &["decode", "long.sc"])
        .fails()
        .stderr_has("after the end");
}

/// Argument errors are reported by the argument parser: exit 2, a usage message, no panic.
#[test]
fn invalid_block_sizes_are_rejected() {
    let (dir, _) = workdir();
    let d = dir.path();
    for bad in [
        "1000",
        "3145729",
        "4094",
        "65M",
        "0",
        "abc",
        "4x",
        "5000000000",
    ] {
        let r = sc(d, &["encode", "model.safetensors", "--block-size", bad]);
        assert_eq!(r.code, Some(2), "--block-size {bad}: {}", r.stderr);
        r.no_panic();
        assert!(r.stderr.starts_with("error:"), "{}", r.stderr);
        assert!(
            r.stderr.to_lowercase().contains("size"),
            "--block-size {bad}: {}",
            r.stderr
        );
    }
    assert_eq!(listing(d), ["model.safetensors"], "nothing may be written");
    // The limits themselves are accepted.
    for good in ["4096", "4K", "64M", "12290", "1MiB"] {
        sc(d, &["encode", "-q", "-f", "model.safetensors", "-b", good]).ok();
    }
}

#[test]
fn failed_decode_leaves_nothing_behind() {
    let (dir, _) = workdir();
    let d = dir.path();
    std::fs::write(d.join("bad.sc"), corrupt_archive(40)).unwrap();
    let before = listing(d);
    // Default name, explicit name, and --md5.
    sc(d, &["decode", "bad.sc"])
        .fails()
        .stderr_has("corrupt block 40");
    sc(d, &["decode", "bad.sc", "-o", "restored"]).fails();
    sc(
        d,
        &["decode", "--md5", "-T", "1", "bad.sc", "-o", "sub_restored"],
    )
    .fails();
    assert_eq!(listing(d), before, "output or temporary file left behind");
    assert!(!listing(d).iter().any(|n| n.ends_with(".sc-tmp")));
    // With -f over an existing file, the old file survives a failed decode.
    std::fs::write(d.join("bad"), b"previous").unwrap();
    sc(d, &["decode", "-f", "bad.sc"]).fails();
    assert_eq!(read(d.join("bad")), b"previous");
    assert!(!listing(d).iter().any(|n| n.ends_with(".sc-tmp")));
    // A truncated archive: same.
    sc(d, &["encode", "-q", "model.safetensors", "-o", "good.sc"]).ok();
    let good = read(d.join("good.sc"));
    std::fs::write(d.join("half.sc"), &good[..good.len() / 2]).unwrap();
    sc(d, &["decode", "half.sc"]).fails();
    assert!(!d.join("half").exists());
    assert!(!listing(d).iter().any(|n| n.ends_with(".sc-tmp")));
}

#[test]
fn quiet_prints_nothing() {
    let (dir, _) = workdir();
    let d = dir.path();
    let r = sc(d, &["encode", "-q", "model.safetensors"]);
    r.ok();
    assert!(r.stderr.is_empty(), "encode -q printed: {}", r.stderr);
    assert!(r.stdout.is_empty());
    let r = sc(
        d,
        &["decode", "--quiet", "model.safetensors.sc", "-o", "back"],
    );
    r.ok();
    assert!(r.stderr.is_empty() && r.stdout.is_empty(), "{}", r.stderr);
    // Without -q there is a one-line summary on stderr, and stdout stays clean.
    let r = sc(d, &["encode", "model.safetensors", "-o", "loud.sc"]);
    r.ok();
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
    assert!(r.stderr.contains("->"), "{}", r.stderr);
    assert!(r.stdout.is_empty());
}

/// `/dev/full` opened for writing, when it is what the tests below rely on: a character device
/// on which every write fails with ENOSPC. Otherwise (a container or machine without it) `None`,
/// with a note on stderr, and those tests are skipped rather than failing like an `sc` bug.
#[cfg(target_os = "linux")]
fn dev_full() -> Option<std::fs::File> {
    use std::os::unix::fs::FileTypeExt;
    let skip = |why: String| {
        eprintln!("skipped: /dev/full {why}; this test needs a device where every write fails");
        None
    };
    match std::fs::metadata("/dev/full") {
        Ok(m) if m.file_type().is_char_device() => {}
        Ok(_) => return skip("is not a character device".into()),
        Err(e) => return skip(format!("cannot be read ({e})")),
    }
    let mut full = match std::fs::OpenOptions::new().write(true).open("/dev/full") {
        Ok(f) => f,
        Err(e) => return skip(format!("cannot be opened ({e})")),
    };
    match full.write_all(b"x").and_then(|()| full.flush()) {
        Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => Some(full),
        Err(e) => skip(format!("fails writes with another error ({e})")),
        Ok(()) => skip("accepts writes".into()),
    }
}

/// Runs `sc args...` in `dir` with stdout on `/dev/full`, where every write fails (ENOSPC);
/// `None` (the test skipped) where `/dev/full` is not such a device.
#[cfg(target_os = "linux")]
fn sc_to_full_stdout(dir: &Path, args: &[&str]) -> Option<Run> {
    let full = dev_full()?;
    let out = Command::new(env!("CARGO_BIN_EXE_sc"))
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(full)
        .stderr(Stdio::piped())
        .output()
        .expect("run sc");
    Some(finished(out, format!("sc {} >/dev/full", args.join(" "))))
}

/// The [`Run`] of a finished process.
fn finished(out: std::process::Output, what: String) -> Run {
    Run {
        code: out.status.code(),
        stdout: out.stdout,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        what,
    }
}

/// Binary output to a stdout that cannot be written: a one-line error, no panic.
#[cfg(target_os = "linux")]
#[test]
fn unwritable_stdout_is_an_error_for_encode_and_decode() {
    let (dir, _) = workdir();
    let d = dir.path();
    sc(d, &["encode", "-q", "model.safetensors"]).ok();
    let Some(r) = sc_to_full_stdout(d, &["encode", "-c", "model.safetensors"]) else {
        return;
    };
    r.fails().stderr_has("no space left");
    let Some(r) = sc_to_full_stdout(d, &["decode", "-c", "model.safetensors.sc"]) else {
        return;
    };
    r.fails().stderr_has("no space left");
}

/// `info` and `verify` report a full stdout (or a closed pipe, as in `sc info x.sc | head -1`)
/// as an error, not a panic.
#[cfg(target_os = "linux")]
#[test]
fn unwritable_stdout_is_an_error_for_info_and_verify() {
    let (dir, _) = workdir();
    let d = dir.path();
    sc(d, &["encode", "-q", "model.safetensors"]).ok();
    for args in [
        ["info", "model.safetensors.sc"],
        ["verify", "model.safetensors.sc"],
    ] {
        let Some(r) = sc_to_full_stdout(d, &args) else {
            return;
        };
        r.fails().stderr_has("no space left");
    }
}

/// An I/O error is printed once: `Error::Io` is transparent, so anyhow's `{:#}` chain does not
/// repeat the message ("No space left on device (os error 28)").
#[cfg(target_os = "linux")]
#[test]
fn io_errors_are_not_repeated() {
    let (dir, _) = workdir();
    let d = dir.path();
    sc(d, &["encode", "-q", "model.safetensors"]).ok();
    let Some(r) = sc_to_full_stdout(d, &["decode", "-c", "model.safetensors.sc"]) else {
        return;
    };
    r.fails();
    assert_eq!(
        r.stderr.matches("No space left on device").count(),
        1,
        "{}",
        r.stderr
    );
}

#[test]
fn md5_is_recorded_by_best_and_on_request() {
    let (dir, _) = workdir();
    let d = dir.path();
    let md5 = md5_hex(&sample());
    // (encode flags, whether the archive records the MD5)
    let cases: [(&[&str], bool); 5] = [
        (&[], false),
        (&["--md5"], true),
        (&["-m", "best"], true),
        (&["-m", "best", "--no-md5"], false),
        (&["--rm"], true),
    ];
    for (k, (flags, recorded)) in cases.iter().enumerate() {
        let input = format!("m{k}.safetensors");
        std::fs::write(d.join(&input), sample()).unwrap();
        let mut args = vec!["encode", "-q"];
        args.extend_from_slice(flags);
        args.push(&input);
        sc(d, &args).ok();
        let archive = format!("{input}.sc");
        let info = sc(d, &["info", &archive]);
        info.ok();
        let want = match recorded {
            true => format!("md5 {md5}"),
            false => "md5 not recorded".to_string(),
        };
        assert!(
            info.stdout_text().contains(&want),
            "{flags:?}: {}",
            info.stdout_text()
        );
        // verify prints the restored file's MD5 either way, and says when it was only computed.
        let v = sc(d, &["verify", &archive]);
        v.ok();
        let line = v.stdout_text();
        assert!(line.contains(&format!("md5 {md5}")), "{flags:?}: {line}");
        assert_eq!(
            line.contains("none recorded"),
            !recorded,
            "{flags:?}: {line}"
        );
        // Comparing with the original works with or without a recorded MD5, and catches a
        // different original.
        std::fs::write(d.join("orig"), sample()).unwrap();
        sc(d, &["verify", &archive, "orig"]).ok();
        let mut other = sample();
        other[100] ^= 1;
        std::fs::write(d.join("orig"), other).unwrap();
        sc(d, &["verify", &archive, "orig"])
            .fails()
            .stderr_has("does not match");
    }
}

/// `decode --md5` on an archive that records no MD5 says so (with the MD5 it computed) instead
/// of claiming a match.
#[test]
fn decode_md5_says_when_none_was_recorded() {
    let (dir, _) = workdir();
    let d = dir.path();
    let md5 = md5_hex(&sample());
    sc(d, &["encode", "-q", "model.safetensors"]).ok();
    let r = sc(d, &["decode", "--md5", "model.safetensors.sc", "-o", "a"]);
    r.ok();
    assert!(!r.stderr.contains("MD5 OK"), "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!("MD5 {md5} (not recorded")),
        "{}",
        r.stderr
    );
    sc(d, &["encode", "-q", "-f", "--md5", "model.safetensors"]).ok();
    let r = sc(d, &["decode", "--md5", "model.safetensors.sc", "-o", "b"]);
    r.ok();
    assert!(r.stderr.contains("MD5 OK"), "{}", r.stderr);
}

/// Output names up to the 255 bytes a file system allows work: the temporary file's name,
/// longer than the output's, is shortened to fit.
#[test]
fn long_output_names_work() {
    let (dir, _) = workdir();
    let d = dir.path();
    let long = format!("{}.sc", "n".repeat(252));
    sc(d, &["encode", "-q", "model.safetensors", "-o", &long]).ok();
    let back = format!("{}é", "r".repeat(253));
    sc(d, &["decode", "-q", &long, "-o", &back]).ok();
    assert_same(&read(d.join(&back)), &sample(), "long names");
}

/// Runs `sc args...` in `dir` with stdout closed (`>&-`).
fn sc_stdout_closed(dir: &Path, args: &[&str]) -> Run {
    let args_os: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_ref()).collect();
    let out = common::sh(dir, r#"exec "$0" "$@" >&-"#, &args_os);
    finished(out, format!("sc {} >&-", args.join(" ")))
}

/// A closed stdout is an error, not output silently thrown away (or written into whatever file
/// was opened next and took its number).
#[test]
fn closed_stdout_is_an_error() {
    let (dir, _) = workdir();
    let d = dir.path();
    sc(d, &["encode", "-q", "model.safetensors"]).ok();
    for args in [
        &["encode", "-c", "model.safetensors"][..],
        &["decode", "-c", "model.safetensors.sc"],
        &["info", "model.safetensors.sc"],
        &["list", "model.safetensors.sc"],
    ] {
        sc_stdout_closed(d, args)
            .fails()
            .stderr_has("standard output is closed");
    }
    assert_same(&read(d.join("model.safetensors")), &sample(), "input");
}

/// A missing output directory is reported with the path asked for.
#[test]
fn missing_output_directory_names_the_output() {
    let (dir, _) = workdir();
    let d = dir.path();
    let r = sc(d, &["encode", "model.safetensors", "-o", "nodir/out.sc"]);
    r.fails().stderr_has("cannot create nodir/out.sc");
    assert!(!r.stderr.contains("sc-tmp"), "{}", r.stderr);
}

/// Tensor names and metadata with control characters are printed escaped: they cannot drive
/// the terminal.
#[test]
fn list_and_info_escape_control_characters() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // JSON escapes for C0 characters, a raw C1 character (CSI), which JSON allows as it is.
    let evil = "x\\u001b[2J\\r\\n\u{9b}more";
    let st = common::safetensors(
        &[
            (evil, "BF16", vec![2], vec![1, 2, 3, 4]),
            ("y", "Q\\u001b[1m", vec![4], vec![5, 6, 7, 8]),
        ],
        0,
        "{\"note\":\"\\u001b]0;title\\u0007\u{9b}\"}",
    );
    std::fs::write(d.join("e.safetensors"), st).unwrap();
    sc(d, &["encode", "-q", "e.safetensors"]).ok();
    for cmd in ["list", "info"] {
        let r = sc(d, &[cmd, "e.safetensors.sc"]);
        r.ok();
        let bad: Vec<u8> = r
            .stdout_text()
            .chars()
            .filter(|&c| c.is_control() && c != '\n')
            .map(|c| c as u8)
            .collect();
        assert!(bad.is_empty(), "{cmd} printed control characters {bad:?}");
        assert!(
            r.stdout_text().contains("\\u{9b}more"),
            "{cmd}: {}",
            r.stdout_text()
        );
    }
    let list = sc(d, &["list", "e.safetensors.sc"]).stdout_text();
    assert!(list.contains("x\\u{1b}[2J\\r\\n\\u{9b}more"), "{list}");
    assert!(list.contains("Q\\u{1b}[1m"), "{list}");
}

/// Threads that cannot start (a thread stack larger than any address space) give one line
/// that says why once: the pool's error is its own source as well.
#[test]
fn threads_that_cannot_start_are_said_once() {
    let (dir, _) = workdir();
    let out = Command::new(env!("CARGO_BIN_EXE_sc"))
        .args(["encode", "-T", "2", "model.safetensors"])
        .current_dir(dir.path())
        .env("RUST_MIN_STACK", (1u64 << 62).to_string())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with("sc: error: cannot start 2 worker threads: ") && err.lines().count() == 1,
        "{err}"
    );
    let cause = err.trim_end().rsplit(": ").next().unwrap();
    assert_eq!(err.matches(cause).count(), 1, "{err}");
    assert!(!dir.path().join("model.safetensors.sc").exists());
}

/// Names and dtypes longer than `format!`'s widths reach (65,535 characters) are listed in
/// columns like any other.
#[test]
fn list_takes_names_of_any_length() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (name, dtype) = ("n".repeat(70_000), "D".repeat(66_000));
    let st = common::safetensors(
        &[
            (name.as_str(), "BF16", vec![2], vec![1, 2, 3, 4]),
            ("y", dtype.as_str(), vec![4], vec![5, 6, 7, 8]),
        ],
        0,
        "{}",
    );
    std::fs::write(d.join("long.safetensors"), st).unwrap();
    sc(d, &["encode", "-q", "long.safetensors"]).ok();
    let run = sc(d, &["list", "long.safetensors.sc"]);
    let out = run.ok().stdout_text();
    let row = |first: &str| {
        out.lines()
            .find(|l| l.starts_with(first))
            .unwrap_or_else(|| panic!("no row for {}", &first[..1]))
            .to_string()
    };
    assert!(row(&name).starts_with(&format!("{name}  BF16 ")));
    let y = row("y ");
    assert_eq!(y.find("  D"), Some(name.len()), "y's dtype column");
    assert!(y.contains(&format!("  {dtype}  [4]")));
    assert_eq!(sc(d, &["info", "long.safetensors.sc"]).code, Some(0));
}

/// An archive of no blocks whose kept safetensors header is `json`: only a crafted archive
/// keeps a header that is not a tensor list, nested as deep as it likes.
fn archive_with_header(json: &str) -> Vec<u8> {
    use sc::container::{FileHeader, Footer};
    let mut prefix = (json.len() as u64).to_le_bytes().to_vec();
    prefix.extend_from_slice(json.as_bytes());
    let (mode, kind) = (sc::Mode::Fast, sc::Kind::Safetensors);
    let header = FileHeader::new(mode, kind, 1 << 20, prefix.clone(), false, None, false);
    let mut archive = Vec::new();
    header.write(&mut archive).unwrap();
    let footer = Footer {
        end_offset: archive.len() as u64,
        index: Vec::new(),
        original_len: prefix.len() as u64,
        md5: [0; 16],
    };
    footer.write(&mut archive).unwrap();
    archive
}

/// `sc info --header` prints at most 8 bytes for each byte of the header, however deep it
/// nests (indentation grew with the depth, the output with its square), and what it prints of
/// a header in JSON means the same JSON.
#[test]
fn info_header_stays_within_8_times_the_header() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let deep = 4000;
    let within = |json: &str| {
        std::fs::write(d.join("h.sc"), archive_with_header(json)).unwrap();
        let run = sc(d, &["info", "--header", "h.sc"]);
        let out = run.ok().stdout_text();
        let printed = &out[out.find("\nheader:\n").expect("a header: line") + 9..];
        assert!(
            printed.len() <= 8 * json.len() + 1,
            "{} bytes printed for a header of {}",
            printed.len(),
            json.len()
        );
        assert!(!printed.chars().any(|c| c.is_control() && c != '\n'));
        printed.to_string()
    };
    within(&("[".repeat(deep) + &"]".repeat(deep)));
    within(&("{\"a\":".repeat(deep) + "1" + &"}".repeat(deep)));
    // The most each byte can give: commas and brackets at the deepest indented level, control
    // characters (not JSON) escaped.
    within(&format!("[[[{}[[[]]]]]]", "\u{1},".repeat(500)));
    within(&format!(
        "{{\"a\":{{\"b\":[{}]}}}}",
        "{\"c\":[[{},{}]]},".repeat(300)
    ));
    let json = r#"{"a":{"b":{"c":{"d":[1,{"e":"x, y: \"z\""},[]],"f":{}}}},"g":[[1,2],[3]]}"#;
    let value = |j: &str| serde_json::from_str::<serde_json::Value>(j).unwrap();
    assert_eq!(value(&within(json)), value(json));
    // A million levels print as fast as any header of 2 MB.
    within(&("[".repeat(1 << 20) + &"]".repeat(1 << 20)));
}
