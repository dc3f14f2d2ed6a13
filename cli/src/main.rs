//! `sc` binary: runs the command line of the `sc_cli` library; the work is in the `sc` library.

use std::process::ExitCode;

fn main() -> ExitCode {
    // Exit statuses are 0 to 2 and 128 + a signal, all below 256.
    ExitCode::from(sc_cli::main(std::env::args_os()) as u8)
}
