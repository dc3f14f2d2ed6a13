//! The `sc` command line inside Python: the `sc-weights` command, `python -m sc`, and the
//! folder functions, which build its arguments so that they write what `sc` writes.

use super::{run_stoppable, Failure, ScError};
use pyo3::prelude::*;
use std::ffi::OsString;

/// Runs the command line `argv` (the program's name first) as the `sc` program does, without
/// the GIL, and returns its exit status. Meant for a process that is the command line (the
/// `sc-weights` command, `python -m sc`): it takes over the fatal signals, so that an
/// interrupted run removes its unfinished outputs and exits.
#[pyfunction]
pub fn main(py: Python<'_>, argv: Vec<OsString>) -> i32 {
    py.detach(|| sc_cli::main(argv))
}

/// Runs the command line `argv` (the program's name first) inside this interpreter, without
/// the GIL: its signal handlers stay as they are, Ctrl-C stops it (its unfinished outputs
/// removed) and raises `KeyboardInterrupt`, and a failure raises `ScError` with the command
/// line's one-line message.
#[pyfunction]
pub fn run_command(py: Python<'_>, argv: Vec<OsString>) -> PyResult<()> {
    run_stoppable(py, None, None, |stop| {
        sc_cli::run_hosted_until(argv, stop.clone()).map_err(|e| Failure::Py(ScError::new_err(e)))
    })
}
