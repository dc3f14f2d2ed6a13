//! `sc` binary: parses arguments and reports errors; the work is in the library.

mod cli;

use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args = cli::parse();
    match cli::run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Nothing more can be done if stderr itself is gone.
            let _ = writeln!(std::io::stderr(), "sc: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
