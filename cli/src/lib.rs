//! The `sc` command line as a library: the `sc` binary and the Python package (its
//! `sc-weights` command and `sc.compress_folder`) run this one command line, so they cannot
//! drift apart.

mod cli;

use std::ffi::OsString;
use std::io::Write;

/// Runs the command line `args` (the program's name first) as the `sc` program does: fatal
/// signals remove unfinished outputs, help goes to stdout, usage errors and errors to stderr.
/// Returns the exit status: 0, 1 on errors, 2 on usage errors.
pub fn main(args: impl IntoIterator<Item = impl Into<OsString> + Clone>) -> i32 {
    let cli = match cli::parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            // Nothing more can be done if stdout or stderr itself is gone.
            let _ = e.print();
            return e.exit_code();
        }
    };
    match cli::run(cli) {
        Ok(()) => 0,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "sc: error: {e:#}");
            1
        }
    }
}

/// Runs the command line `args` (the program's name first) inside another program, such as
/// the Python interpreter: its signal handlers stay as they are, and a usage error or error
/// comes back as its one-line message instead of being printed.
pub fn run_hosted(
    args: impl IntoIterator<Item = impl Into<OsString> + Clone>,
) -> Result<(), String> {
    let cli = cli::parse_from(args).map_err(|e| {
        let text = e.render().to_string();
        let first = text.lines().next().unwrap_or_default();
        first.strip_prefix("error: ").unwrap_or(first).to_string()
    })?;
    cli::run_hosted(cli).map_err(|e| format!("{e:#}"))
}

/// [`run_hosted`], stopped once `stop` is set: outputs in progress fail at their next write
/// (and are removed, as after any failure) and no further file of a folder run begins. Every
/// hosted run in progress stops when any of their flags is set: the flags stand for the
/// host's signals, which are the whole process's.
pub fn run_hosted_until(
    args: impl IntoIterator<Item = impl Into<OsString> + Clone>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Result<(), String> {
    let _watching = cli::process::watch(stop);
    run_hosted(args)
}
