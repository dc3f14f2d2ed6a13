//! Nothing lost: failing writers, interrupted runs, `--rm` only after verification.

mod common;

use std::io::{self, Read, Write};
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
/// sends it a real `signal` (`INT`, `TERM`, `HUP`): it must exit with 128 + `number` and leave
/// nothing behind.
fn signal_while_writing(
    signal: &str,
    number: i32,
    args: &[&str],
    feed: &[u8],
    dir: &Path,
    dest: &Path,
) {
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
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let out = child.wait_with_output().unwrap();
    drop(stdin);
    assert_eq!(
        out.status.code(),
        Some(128 + number),
        "SIG{signal}: {}",
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
fn interrupted_terminated_and_hung_up_runs_leave_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let sample = std::fs::read(SAMPLE).unwrap();
    for (signal, number) in [("INT", 2), ("TERM", 15), ("HUP", 1)] {
        signal_while_writing(
            signal,
            number,
            &["encode", "-q", "-"],
            &sample[..100_000],
            dir.path(),
            &dir.path().join("out.sc"),
        );
    }

    let mut archive = Vec::new();
    sc::encode(&sample[..], &mut archive, &sc::EncodeOptions::default()).unwrap();
    let dest: PathBuf = dir.path().join("out.safetensors");
    signal_while_writing(
        "INT",
        2,
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

/// Starts `sc encode - -o dest`, feeds it `feed` through a pipe it keeps open, and waits until
/// its temporary output exists.
fn encoding_from_a_pipe(
    feed: &[u8],
    dest: &Path,
) -> (std::process::Child, std::process::ChildStdin) {
    encoding_from_a_pipe_by(sc(), feed, dest)
}

/// [`encoding_from_a_pipe`] by `command` (`sc`, or a program that runs it).
fn encoding_from_a_pipe_by(
    mut command: Command,
    feed: &[u8],
    dest: &Path,
) -> (std::process::Child, std::process::ChildStdin) {
    let mut child = command
        .args(["encode", "-q", "-", "-o"])
        .arg(dest)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(feed).unwrap();
    stdin.flush().unwrap();
    let start = Instant::now();
    let dir = dest.parent().unwrap();
    while !files_in(dir).iter().any(|f| f.ends_with(".sc-tmp")) {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no temporary output"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    (child, stdin)
}

/// SIGPIPE is ignored: sent to a run, the run still finishes its output; a closed pipe on
/// stdout is an error like any other write failure.
#[test]
fn sigpipe_neither_kills_nor_leaves_a_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let sample = std::fs::read(SAMPLE).unwrap();
    let dest = dir.path().join("out.sc");
    let (child, mut stdin) = encoding_from_a_pipe(&sample[..100_000], &dest);
    kill("PIPE", child.id());
    stdin.write_all(&sample[100_000..]).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(files_in(dir.path()), ["out.sc"]);

    // Stdout closed by its reader after a few bytes: an error, exit 1, no panic.
    let mut child = sc()
        .args(["decode", "-c", "-q"])
        .arg(&dest)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut head = [0u8; 10];
    child.stdout.take().unwrap().read_exact(&mut head).unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with("sc: error:") && err.contains("Broken pipe"),
        "{err}"
    );
}

/// `ulimit -f` makes writes past the limit fail: the run reports it and removes its output
/// instead of being killed by SIGXFSZ.
#[test]
fn a_file_size_limit_is_an_error_not_a_kill() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("m.safetensors");
    std::fs::copy(SAMPLE, &input).unwrap();
    let out = common::sh(
        dir.path(),
        r#"ulimit -f 256 && exec "$0" encode "$1""#,
        &[input.as_os_str()],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{:?}: {err}", out.status);
    assert!(
        err.starts_with("sc: error:") && err.contains("File too large"),
        "{err}"
    );
    // The destination is named, not the temporary file that was removed.
    let dest = dir.path().join("m.safetensors.sc");
    assert!(
        err.contains(&format!("writing {}: File too large", dest.display()))
            && !err.contains("sc-tmp"),
        "{err}"
    );
    assert_eq!(files_in(dir.path()), ["m.safetensors"]);
}

/// The start time of this process, field 22 of `/proc/self/stat`.
fn own_start_time() -> String {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 1..];
    after.split_whitespace().nth(19).unwrap().to_string()
}

/// `name` (`.NAME.PID.START.TAG.INODE.RANDOM.sc-tmp`) with its pid, start time and inode
/// replaced where given.
fn renamed(name: &str, pid: Option<&str>, start: Option<&str>, ino: Option<u64>) -> String {
    let mut parts: Vec<String> = name.split('.').map(String::from).collect();
    let n = parts.len();
    let ino = ino.map(|i| i.to_string());
    for (at, new) in [(n - 6, pid), (n - 5, start), (n - 3, ino.as_deref())] {
        if let Some(new) = new {
            parts[at] = new.to_string();
        }
    }
    parts.join(".")
}

/// Writes `bytes` to `dir/name` where `name` is a temporary file's name given the inode it gets
/// (`name(inode)`): a file that has the inode its name records. Returns the name.
fn write_named_after_inode(dir: &Path, bytes: &[u8], name: impl Fn(u64) -> String) -> String {
    use std::os::unix::fs::MetadataExt;
    let scratch = dir.join("scratch");
    std::fs::write(&scratch, bytes).unwrap();
    let name = name(std::fs::metadata(&scratch).unwrap().ino());
    std::fs::rename(&scratch, dir.join(&name)).unwrap();
    name
}

/// A run killed where it cannot clean up (SIGKILL) leaves its temporary file; the next run
/// writing in that folder removes it, and only what it can tell is such a file: not the
/// temporary files of live processes, not a copy of a leftover (another inode than its name
/// records), nor files merely ending in `.sc-tmp`.
#[test]
fn the_next_run_removes_temporary_files_of_dead_runs() {
    let dir = tempfile::tempdir().unwrap();
    let sample = std::fs::read(SAMPLE).unwrap();
    let (mut child, stdin) = encoding_from_a_pipe(&sample[..100_000], &dir.path().join("out.sc"));
    kill("KILL", child.id());
    child.wait().unwrap();
    drop(stdin);
    let stale: Vec<String> = files_in(dir.path())
        .into_iter()
        .filter(|f| f.ends_with(".sc-tmp"))
        .collect();
    assert_eq!(stale.len(), 1, "{stale:?}");
    let stale = &stale[0];
    // A leftover copied into another folder under its name: not the file its name records.
    let other = tempfile::tempdir().unwrap();
    std::fs::copy(dir.path().join(stale), other.path().join(stale)).unwrap();
    // The name of a live process (this one, with its start time), for its own inode; and the
    // same with this pid but another start time, as if the pid had been reused.
    let me = std::process::id().to_string();
    let start = own_start_time();
    let live = write_named_after_inode(dir.path(), b"live", |ino| {
        renamed(stale, Some(&me), Some(&start), Some(ino))
    });
    let reused = write_named_after_inode(dir.path(), b"reused", |ino| {
        let other_start = format!("{}", start.parse::<u64>().unwrap() + 1);
        renamed(stale, Some(&me), Some(&other_start), Some(ino))
    });
    std::fs::write(dir.path().join(".notes.sc-tmp"), b"mine").unwrap();
    let input = dir.path().join("m.safetensors");
    std::fs::write(&input, &sample).unwrap();
    for d in [dir.path(), other.path()] {
        let st = sc()
            .args(["encode", "-q", "-f"])
            .arg(&input)
            .arg("-o")
            .arg(d.join("m.sc"))
            .status();
        assert!(st.unwrap().success());
    }
    let mut want = vec![
        ".notes.sc-tmp".to_string(),
        live,
        "m.safetensors".into(),
        "m.sc".into(),
    ];
    want.sort();
    assert_eq!(files_in(dir.path()), want, "{reused} should have gone");
    let mut want = vec![stale.clone(), "m.sc".into()];
    want.sort();
    assert_eq!(files_in(other.path()), want);
}

/// An output given as a symbolic link replaces the file the link names, not the link; a link
/// to nothing is refused.
#[test]
fn outputs_write_through_symbolic_links() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("m.safetensors");
    std::fs::copy(SAMPLE, &input).unwrap();
    std::fs::create_dir(dir.path().join("real")).unwrap();
    let target = dir.path().join("real/m.sc");
    std::fs::write(&target, b"old").unwrap();
    let link = dir.path().join("link.sc");
    std::os::unix::fs::symlink("real/m.sc", &link).unwrap();
    let st = sc()
        .args(["encode", "-q", "-f"])
        .arg(&input)
        .arg("-o")
        .arg(&link)
        .status()
        .unwrap();
    assert!(st.success());
    assert_eq!(std::fs::read_link(&link).unwrap(), Path::new("real/m.sc"));
    let archive = std::fs::read(&target).unwrap();
    let restored = sc::decode_to_vec(&archive, &sc::DecodeOptions::default()).unwrap();
    assert!(restored == std::fs::read(&input).unwrap());

    let dangling = dir.path().join("dangling.sc");
    std::os::unix::fs::symlink("missing.sc", &dangling).unwrap();
    let err = common::fails(
        sc().args(["encode", "-f"])
            .arg(&input)
            .arg("-o")
            .arg(&dangling)
            .output()
            .unwrap(),
        "symbolic link to a missing file",
    );
    assert!(err.contains("dangling.sc"), "{err}");
    assert!(std::fs::symlink_metadata(&dangling).unwrap().is_symlink());
    assert_eq!(
        files_in(dir.path()),
        ["dangling.sc", "link.sc", "m.safetensors", "real"]
    );
}

fn kill(signal: &str, pid: u32) {
    let st = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(st.success());
}

/// Runs `sc encode --rm` on `input`, stops it (SIGSTOP) while it is writing the archive, lets
/// `change` alter the input, and lets it go on. `None` when the run finished before it could
/// be stopped in time (the caller retries with a larger input).
fn change_during_rm(input: &Path, change: &dyn Fn(&Path)) -> Option<std::process::Output> {
    let dir = input.parent().unwrap();
    let mut child = sc()
        .args(["encode", "-q", "-T", "1", "--rm"])
        .arg(input)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    loop {
        if child.try_wait().unwrap().is_some() {
            return None;
        }
        if files_in(dir).iter().any(|f| f.ends_with(".sc-tmp")) {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    kill("STOP", child.id());
    // Still writing its archive, so nothing is removed yet: the change comes first.
    let in_time = files_in(dir).iter().any(|f| f.ends_with(".sc-tmp"));
    if in_time {
        change(input);
    }
    kill("CONT", child.id());
    let out = child.wait_with_output().unwrap();
    in_time.then_some(out)
}

/// Retries [`change_during_rm`] with larger inputs until a run was caught in time.
fn rm_with_change(dir: &Path, change: &dyn Fn(&Path)) -> (PathBuf, std::process::Output) {
    let input = dir.join("g.bin");
    for size in [24usize << 20, 64 << 20, 160 << 20] {
        let _ = std::fs::remove_file(dir.join("g.bin.sc"));
        std::fs::write(&input, common::Rng(size as u64).bytes(size)).unwrap();
        if let Some(out) = change_during_rm(&input, change) {
            return (input, out);
        }
    }
    panic!("sc finished every time before it could be stopped");
}

#[test]
fn rm_keeps_an_input_that_changed_while_it_was_read() {
    let dir = tempfile::tempdir().unwrap();
    let tail = vec![0x5Au8; 1 << 20];
    let append = |p: &Path| {
        let mut f = std::fs::OpenOptions::new().append(true).open(p).unwrap();
        f.write_all(&tail).unwrap();
    };
    let (input, out) = rm_with_change(dir.path(), &append);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("changed while it was being read"), "{err}");
    let kept = std::fs::read(&input).expect("the appended input is kept");
    assert!(kept.ends_with(&tail));

    let replacement = b"a new file put in place of the input".to_vec();
    let replace = |p: &Path| {
        let new = p.with_extension("new");
        std::fs::write(&new, &replacement).unwrap();
        std::fs::rename(&new, p).unwrap();
    };
    let (input, out) = rm_with_change(dir.path(), &replace);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("changed while it was being read"), "{err}");
    assert_eq!(std::fs::read(&input).unwrap(), replacement);
}

/// A shared library for LD_PRELOAD that logs fsync, fdatasync and unlink calls (with the file
/// each concerns) to the file `$SC_SYNC_LOG`.
const SYNC_SHIM: &str = r#"
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void note(const char *what, int fd, const char *path) {
    const char *log = getenv("SC_SYNC_LOG");
    char target[4096];
    if (!log) return;
    if (fd >= 0) {
        char link[64];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, target, sizeof target - 1);
        target[n < 0 ? 0 : n] = 0;
        path = target;
    }
    int out = open(log, O_WRONLY | O_APPEND | O_CREAT, 0644);
    dprintf(out, "%s %s\n", what, path);
    close(out);
}

int fsync(int fd) {
    note("sync", fd, 0);
    return ((int (*)(int))dlsym(RTLD_NEXT, "fsync"))(fd);
}

int fdatasync(int fd) {
    note("sync", fd, 0);
    return ((int (*)(int))dlsym(RTLD_NEXT, "fdatasync"))(fd);
}

int unlink(const char *p) {
    note("unlink", -1, p);
    return ((int (*)(const char *))dlsym(RTLD_NEXT, "unlink"))(p);
}
"#;

/// `--rm` syncs the output file, then its directory, and only then removes the input.
#[cfg(target_os = "linux")]
#[test]
fn rm_syncs_the_output_and_its_directory_before_removing_the_input() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().canonicalize().unwrap();
    let shim = d.join("shim.so");
    std::fs::write(d.join("shim.c"), SYNC_SHIM).unwrap();
    let st = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&shim)
        .arg(d.join("shim.c"))
        .arg("-ldl")
        .status()
        .expect("a C compiler (cc) builds the test's LD_PRELOAD shim");
    assert!(st.success());
    let work = d.join("work");
    std::fs::create_dir(&work).unwrap();
    let input = work.join("m.safetensors");
    std::fs::copy(SAMPLE, &input).unwrap();
    let run = |args: &[&str], log: &Path| -> Vec<String> {
        let st = sc()
            .args(args)
            .env("LD_PRELOAD", &shim)
            .env("SC_SYNC_LOG", log)
            .status()
            .unwrap();
        assert!(st.success());
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect()
    };
    let check = |log: &[String], output: &str, input: &Path| {
        let at = |want: &dyn Fn(&str) -> bool, what: &str| {
            log.iter()
                .position(|l| want(l))
                .unwrap_or_else(|| panic!("no {what} in {log:#?}"))
        };
        let file = at(
            &|l| l.starts_with("sync ") && l.contains(&format!("/.{output}.")),
            "sync of the output",
        );
        let directory = at(
            &|l| l == format!("sync {}", work.display()),
            "directory sync",
        );
        let unlink = at(
            &|l| l == format!("unlink {}", input.display()),
            "removal of the input",
        );
        assert!(file < directory && directory < unlink, "{log:#?}");
    };
    let archive = work.join("m.safetensors.sc");
    let log = run(
        &["encode", "-q", "--rm", input.to_str().unwrap()],
        &d.join("encode.log"),
    );
    check(&log, "m.safetensors.sc", &input);
    let log = run(
        &["decode", "-q", "--rm", archive.to_str().unwrap()],
        &d.join("decode.log"),
    );
    check(&log, "m.safetensors", &archive);
    assert_eq!(
        std::fs::read(&input).unwrap(),
        std::fs::read(SAMPLE).unwrap()
    );
}

/// Writes `archive`'s decoded bytes into the FIFO `-o fifo -f` names, read by `cat`; returns
/// what `cat` got (none if `sc` never opened the FIFO).
#[cfg(unix)]
#[test]
fn fifo_and_device_outputs_are_written_in_place() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let input = d.join("m.safetensors");
    std::fs::copy(SAMPLE, &input).unwrap();
    assert!(sc()
        .args(["encode", "-q"])
        .arg(&input)
        .status()
        .unwrap()
        .success());
    let archive = d.join("m.safetensors.sc");
    let fifo = d.join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let got = d.join("got");
    let mut cat = Command::new("sh")
        .arg("-c")
        .arg(r#"exec cat "$0" > "$1""#)
        .arg(&fifo)
        .arg(&got)
        .spawn()
        .unwrap();
    let out = sc()
        .args(["decode", "-q", "-f"])
        .arg(&archive)
        .arg("-o")
        .arg(&fifo)
        .output()
        .unwrap();
    let start = Instant::now();
    while cat.try_wait().unwrap().is_none() && start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = cat.kill();
    let _ = cat.wait();
    let kind = std::fs::symlink_metadata(&fifo).unwrap().file_type();
    assert!(kind.is_fifo(), "the FIFO was replaced: {kind:?}");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read(&got).unwrap(), std::fs::read(SAMPLE).unwrap());

    // /dev/null takes output without -f, and stays the device it is.
    let out = sc()
        .args(["decode", "-q"])
        .arg(&archive)
        .args(["-o", "/dev/null"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let null = std::fs::metadata("/dev/null").unwrap().file_type();
    assert!(null.is_char_device());
    // --rm cannot read such an output back, so it is refused.
    let out = sc()
        .args(["decode", "-q", "--rm"])
        .arg(&archive)
        .args(["-o", "/dev/null"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(archive.exists());
}

/// Runs `sc args...` in `dir` under umask 022.
fn sc_with_umask(dir: &Path, args: &[&str]) {
    let args_os: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_ref()).collect();
    let out = common::sh(dir, r#"umask 022 && exec "$0" "$@""#, &args_os);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Archives, restored files and folder copies take their input's permission bits and
/// modification time (like gzip and zstd); outputs without such an input follow the umask.
#[cfg(unix)]
#[test]
fn outputs_keep_the_input_mode_and_time_or_follow_the_umask() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    let mtime = |p: &Path| std::fs::metadata(p).unwrap().modified().unwrap();
    let when = std::time::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    let stamp = |p: &Path, m: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
        let f = std::fs::File::options().write(true).open(p).unwrap();
        f.set_times(std::fs::FileTimes::new().set_modified(when))
            .unwrap();
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let input = d.join("m.safetensors");
    std::fs::copy(SAMPLE, &input).unwrap();
    stamp(&input, 0o640);
    sc_with_umask(d, &["encode", "-q", "m.safetensors"]);
    let archive = d.join("m.safetensors.sc");
    assert_eq!((mode(&archive), mtime(&archive)), (0o640, when));
    sc_with_umask(
        d,
        &["decode", "-q", "m.safetensors.sc", "-o", "back.safetensors"],
    );
    let back = d.join("back.safetensors");
    assert_eq!((mode(&back), mtime(&back)), (0o640, when));

    // Made from stdin, or a new file (extract): the umask's 0644.
    let piped = common::sh(
        d,
        r#"umask 022 && exec "$0" encode -q - -o piped.sc < m.safetensors"#,
        &[],
    );
    assert!(piped.status.success());
    assert_eq!(mode(&d.join("piped.sc")), 0o644);
    sc_with_umask(
        d,
        &[
            "extract",
            "-q",
            "m.safetensors.sc",
            "-t",
            "embeddings.LayerNorm.bias",
        ],
    );
    assert_eq!(mode(&d.join("m.extract.safetensors")), 0o644);

    // Folder copies keep a script's execute bit and time.
    let model = d.join("model");
    std::fs::create_dir(&model).unwrap();
    std::fs::copy(SAMPLE, model.join("w.safetensors")).unwrap();
    std::fs::write(model.join("run.sh"), b"#!/bin/sh\necho hi\n").unwrap();
    stamp(&model.join("run.sh"), 0o755);
    stamp(&model.join("w.safetensors"), 0o600);
    sc_with_umask(d, &["encode", "-q", "model", "-o", "packed"]);
    let packed = d.join("packed");
    assert_eq!(
        (mode(&packed.join("run.sh")), mtime(&packed.join("run.sh"))),
        (0o755, when)
    );
    assert_eq!(mode(&packed.join("w.safetensors.sc")), 0o600);
}

#[test]
fn rm_with_a_remote_input_or_output_is_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("m.safetensors");
    std::fs::copy(SAMPLE, &input).unwrap();
    // Port 1 refuses connections: a run that got as far as the network would say so instead.
    let runs: [&[&str]; 4] = [
        &[
            "encode",
            "--rm",
            "m.safetensors",
            "-o",
            "s3://bucket/m.safetensors.sc",
        ],
        &["encode", "--rm", "m.safetensors", "-o", "s3://bucket/dir/"],
        &[
            "decode",
            "--rm",
            "http://127.0.0.1:1/m.safetensors.sc",
            "-o",
            "out",
        ],
        &["decode", "--rm", "s3://bucket/prefix/", "-o", "back"],
    ];
    for args in runs {
        let out = common::sc(dir.path(), args, None);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--rm works on local files only"),
            "{args:?}: {err}"
        );
        assert_eq!(files_in(dir.path()), ["m.safetensors"], "{args:?}");
    }
}

/// A writer in a PID namespace of its own that sees its parent's `/proc` (`unshare -p` without
/// mounting one) cannot tell its pid from `/proc`: its live temporary file is left alone by a
/// run outside, and it takes no leftover for a dead one, while its own output completes.
#[test]
fn a_writer_in_a_pid_namespace_without_its_own_proc_is_left_alone() {
    let unshare = ["-U", "-r", "-p", "--fork"];
    let usable = Command::new("unshare").args(unshare).arg("true").status();
    if !usable.is_ok_and(|s| s.success()) {
        eprintln!("skipped: unshare cannot make a user and PID namespace here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let sample = std::fs::read(SAMPLE).unwrap();
    // A leftover of a dead run outside, for the run inside to leave.
    let (mut dead, stdin) = encoding_from_a_pipe(&sample[..100_000], &dir.path().join("d.sc"));
    kill("KILL", dead.id());
    dead.wait().unwrap();
    drop(stdin);
    let leftover: Vec<String> = files_in(dir.path());
    let mut inside = Command::new("unshare");
    inside.args(unshare).arg(env!("CARGO_BIN_EXE_sc"));
    let out = dir.path().join("inside.sc");
    let (mut writer, mut stdin) = encoding_from_a_pipe_by(inside, &sample[..100_000], &out);
    let live: Vec<String> = files_in(dir.path())
        .into_iter()
        .filter(|f| f.ends_with(".sc-tmp") && !leftover.contains(f))
        .collect();
    assert_eq!(live.len(), 1, "{live:?}");
    assert!(leftover.iter().all(|f| files_in(dir.path()).contains(f)));
    // A run outside, writing in the same folder, sweeps it.
    let input = dir.path().join("m.safetensors");
    std::fs::write(&input, &sample).unwrap();
    let st = sc()
        .args(["encode", "-q", "-f"])
        .arg(&input)
        .arg("-o")
        .arg(dir.path().join("m.sc"))
        .status();
    assert!(st.unwrap().success());
    let now = files_in(dir.path());
    assert!(
        now.contains(&live[0]),
        "the live writer's {} went: {now:?}",
        live[0]
    );
    stdin.write_all(&sample[100_000..]).unwrap();
    drop(stdin);
    assert!(writer.wait().unwrap().success());
    let back = dir.path().join("back.safetensors");
    let st = sc()
        .args(["decode", "-q"])
        .arg(&out)
        .arg("-o")
        .arg(&back)
        .status();
    assert!(st.unwrap().success());
    assert!(std::fs::read(&back).unwrap() == sample);
}
