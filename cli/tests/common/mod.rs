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
