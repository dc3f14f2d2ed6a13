//! Helpers shared by the command line's integration tests: the library tests' helpers, and
//! running the `sc` binary.
#![allow(dead_code)]

#[path = "../../../tests/common/mod.rs"]
mod shared;

#[allow(unused_imports)]
pub use shared::*;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Runs `sc args...` in `dir`, its stdin read from the file `stdin` (else empty).
pub fn sc(dir: &Path, args: &[&str], stdin: Option<&Path>) -> Output {
    let input = match stdin {
        Some(p) => Stdio::from(std::fs::File::open(p).unwrap()),
        None => Stdio::null(),
    };
    let out = Command::new(env!("CARGO_BIN_EXE_sc"))
        .args(args)
        .current_dir(dir)
        .stdin(input)
        .output()
        .expect("run sc");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "sc {args:?} panicked: {err}");
    out
}

/// Asserts that a run succeeded.
pub fn ok(out: Output) -> Output {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Asserts that a run failed with exit 1 and one error line containing `needle`.
pub fn fails(out: Output, needle: &str) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with("sc: error: ") && err.lines().count() == 1,
        "{err}"
    );
    assert!(err.contains(needle), "{needle:?} not in {err}");
    err
}

/// Compiles the C program `source` (with `flags`, e.g. `-shared -fPIC` for a library) with the
/// system's C compiler into `dir/name`, and returns its path.
pub fn compile_c(dir: &Path, name: &str, source: &str, flags: &[&str]) -> std::path::PathBuf {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, source).unwrap();
    let out = dir.join(name);
    let st = Command::new("cc")
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(&c)
        .status()
        .expect("a C compiler (cc) builds the test's helper");
    assert!(st.success(), "cc {name}.c failed");
    out
}

/// A program that runs its arguments as a child process and prints the child's peak resident
/// set (`wait4`) on stderr. A child of the test process itself would be charged with the test
/// process's own memory from before `exec`.
const PEAK_RSS: &str = r#"
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    pid_t pid = fork();
    if (pid == 0) {
        execv(argv[1], argv + 1);
        _exit(127);
    }
    int status;
    struct rusage ru;
    if (argc < 2 || wait4(pid, &status, 0, &ru) != pid) return 126;
    fprintf(stderr, "\npeak-rss-kib %ld\n", ru.ru_maxrss);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
"#;

/// What a measured run of `sc` did.
pub struct Measured {
    pub code: Option<i32>,
    /// Peak resident memory in bytes.
    pub peak: u64,
    pub stderr: String,
}

/// Runs `sc args...` in `dir` (stdout on /dev/null) and measures its peak resident memory.
pub fn measure(dir: &Path, args: &[&str]) -> Measured {
    let tools = dir.join(".tools");
    std::fs::create_dir_all(&tools).unwrap();
    let peak = tools.join("peak_rss");
    let peak = match peak.exists() {
        true => peak,
        false => compile_c(&tools, "peak_rss", PEAK_RSS, &["-O1"]),
    };
    let out = Command::new(peak)
        .arg(env!("CARGO_BIN_EXE_sc"))
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .output()
        .expect("run sc");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!err.contains("panicked"), "sc {args:?} panicked: {err}");
    let (stderr, kib) = err
        .trim_end()
        .rsplit_once("\npeak-rss-kib ")
        .unwrap_or_else(|| panic!("no peak reported: {err}"));
    Measured {
        code: out.status.code(),
        peak: kib.trim().parse::<u64>().unwrap() * 1024,
        stderr: stderr.to_string(),
    }
}

/// Runs `sh -c SCRIPT` in `dir` with `$0` the `sc` binary and `args` as `$1...`, for what the
/// shell sets up around it (a closed descriptor, a umask, a file size limit).
pub fn sh(dir: &Path, script: &str, args: &[&std::ffi::OsStr]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_sc"))
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("run sh")
}
