//! Nothing lost: failing writers, interrupted runs, `--rm` only after verification.

mod common;

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../testdata/sample.safetensors"
);

fn sc() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sc"))
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// A writer that accepts `left` bytes, then fails every write.
struct FailAfter {
    left: usize,
}

impl Write for FailAfter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.left == 0 {
            return Err(io::Error::other("disk full (simulated)"));
        }
        let n = buf.len().min(self.left);
        self.left -= n;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn failing_writers_give_io_errors_not_panics() {
    let input = std::fs::read(SAMPLE).unwrap();
    let opts = sc::EncodeOptions::default();
    let archive = common::encode_to_vec(&input, &opts);
    for left in [0, 1, 23, 100, 5000, 1 << 20, archive.len() - 1] {
        let r = sc::encode(&input[..], FailAfter { left }, &opts);
        assert!(
            matches!(r, Err(sc::Error::Io(_))),
            "encode, fail after {left}: {r:?}"
        );
    }
    let dopts = sc::DecodeOptions {
        check_md5: true,
        archive_len: Some(archive.len() as u64),
        ..Default::default()
    };
    for left in [0, 1, 5000, 1 << 20, input.len() - 1] {
        let r = sc::decode(&archive[..], FailAfter { left }, &dopts);
        assert!(
            matches!(r, Err(sc::Error::Io(_))),
            "decode, fail after {left}: {r:?}"
        );
    }
}

#[test]
fn unwritable_destination_leaves_nothing_and_keeps_the_input() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("m.safetensors");
    std::fs::copy(SAMPLE, &input).unwrap();
    // A path below a regular file cannot be created, even by root.
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, b"x").unwrap();
    let out = sc()
        .arg("encode")
        .arg(&input)
        .arg("-o")
        .arg(blocker.join("out.sc"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("sc: error:") && !err.contains("panicked"),
        "{err}"
    );
    assert_eq!(files_in(dir.path()), ["file", "m.safetensors"]);
    assert_eq!(
        std::fs::read(&input).unwrap(),
        std::fs::read(SAMPLE).unwrap()
    );
}

#[test]
fn rm_deletes_only_after_a_verified_output() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("m.safetensors");
    std::fs::copy(SAMPLE, &input).unwrap();
    let st = sc()
        .args(["encode", "-q", "--rm"])
        .arg(&input)
        .status()
        .unwrap();
    assert!(st.success());
    assert_eq!(files_in(dir.path()), ["m.safetensors.sc"]);
    let archive = dir.path().join("m.safetensors.sc");
    let st = sc()
        .args(["decode", "-q", "--rm"])
        .arg(&archive)
        .status()
        .unwrap();
    assert!(st.success());
    assert_eq!(files_in(dir.path()), ["m.safetensors"]);
    assert_eq!(
        std::fs::read(&input).unwrap(),
        std::fs::read(SAMPLE).unwrap()
    );

    // --rm cannot verify stdout: refused before anything happens, input kept.
    let out = sc()
        .args(["encode", "--rm", "-c"])
        .arg(&input)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(input.exists());

    // A corrupt archive is never deleted, and leaves no output behind.
    let st = sc().args(["encode", "-q"]).arg(&input).status().unwrap();
    assert!(st.success());
    let mut bytes = std::fs::read(&archive).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    std::fs::write(&archive, &bytes).unwrap();
    std::fs::remove_file(&input).unwrap();
    let out = sc()
        .args(["decode", "--rm"])
        .arg(&archive)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(files_in(dir.path()), ["m.safetensors.sc"]);
}

/// Starts `sc` reading a pipe that stays open, waits until its temporary output exists, then
/// interrupts it with a real SIGINT.
fn interrupt_while_writing(args: &[&str], feed: &[u8], dir: &Path, dest: &Path) {
    let mut child = sc()
        .args(args)
        .arg("-o")
        .arg(dest)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(feed).unwrap();
    stdin.flush().unwrap();
    let start = Instant::now();
    let tmp_exists = || files_in(dir).iter().any(|f| f.ends_with(".sc-tmp"));
    while !tmp_exists() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no temporary output appeared"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let st = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let out = child.wait_with_output().unwrap();
    drop(stdin);
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!dest.exists());
    assert!(
        !tmp_exists(),
        "temporary output left behind: {:?}",
        files_in(dir)
    );
}

#[test]
fn interrupted_encode_and_decode_leave_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let sample = std::fs::read(SAMPLE).unwrap();
    interrupt_while_writing(
        &["encode", "-q", "-"],
        &sample[..100_000],
        dir.path(),
        &dir.path().join("out.sc"),
    );

    let mut archive = Vec::new();
    sc::encode(&sample[..], &mut archive, &sc::EncodeOptions::default()).unwrap();
    let dest: PathBuf = dir.path().join("out.safetensors");
    interrupt_while_writing(
        &["decode", "-q", "-"],
        &archive[..archive.len() / 2],
        dir.path(),
        &dest,
    );
    assert!(
        files_in(dir.path()).is_empty(),
        "{:?}",
        files_in(dir.path())
    );
}
