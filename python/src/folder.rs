//! `sc.compress_folder` and `sc.decompress_folder`: the library's folder runs
//! ([`sc::folder`]), planned, run and totalled as `sc encode DIR -o OUT` and
//! `sc decode DIR -o OUT` do, each output written as the package writes its files.

use super::{
    base_for, decode_to, encode_options, open_options, open_options_until, remote, run_stoppable,
    stoppable, thread_pool, write_to, Failure, Res, ScError, Threads,
};
use pyo3::prelude::*;
use sc::folder::{Given, Job, Naming, Note, Outcome, Steps, Summary};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// Writes `dst`, a file or a remote location, with `write`: a file through a temporary file
/// renamed into place, a remote object uploaded; without `overwrite`, an existing one fails.
fn write_output<T>(
    dst: &Path,
    overwrite: bool,
    stop: &AtomicBool,
    write: impl FnOnce(&mut (dyn Write + Send)) -> Res<T>,
) -> Res<T> {
    write_to(dst, overwrite, |w| write(&mut stoppable(w, stop)))
}

/// Copies the file or remote object of `job` as it is; returns the bytes copied.
fn copy(job: &Job, overwrite: bool, stop: &AtomicBool) -> Res<u64> {
    let mut src = sc::Source::open(&sc::Location::parse(&job.src), &open_options())?;
    write_output(&job.dest, overwrite, stop, |w| {
        Ok(io::copy(&mut src, w).map_err(sc::Error::from)?)
    })
}

/// What a failure of one job says in the run's error.
fn message(e: Failure, job: &Job) -> String {
    let e = e.into_py(Some(&job.src));
    Python::attach(|py| e.value(py).to_string())
}

/// Codes one job given its memory: the bytes read and written.
type Code<'a> = &'a (dyn Fn(&Job, u64) -> Res<(u64, u64)> + Sync);

/// Runs `jobs` with `code` under `stop`, and fails naming every job that failed.
fn run_jobs(
    what: &str,
    jobs: &[Job],
    memory: u64,
    overwrite: bool,
    stop: &AtomicBool,
    needed: &(dyn Fn(&Job) -> u64 + Sync),
    code: Code<'_>,
) -> Res<()> {
    let steps = Steps {
        needed,
        code: &|job, memory, _| code(job, memory).map_err(|e| message(e, job)),
        copy: &|job| copy(job, overwrite, stop).map_err(|e| message(e, job)),
        stopped: &|| stop.load(Ordering::Relaxed),
        progress: &|_| {},
    };
    let outcomes: Vec<Outcome> = sc::folder::run(jobs, memory, &steps);
    let summary = Summary::of(jobs, &outcomes);
    if summary.failed == 0 {
        return Ok(());
    }
    let failures: Vec<String> = jobs
        .iter()
        .zip(&outcomes)
        .filter_map(|(j, o)| o.as_ref().err().map(|e| format!("{}: {e}", j.shown)))
        .collect();
    Err(Failure::Py(ScError::new_err(format!(
        "{} of {} files in {what} failed: {}",
        summary.failed,
        summary.jobs,
        failures.join("; ")
    ))))
}

/// Plans a run over the folder `src` into `dst` with `found` naming the coded files.
fn plan(src: &Path, dst: &Path, found: &dyn Fn(&Path) -> Option<PathBuf>) -> Res<Vec<Job>> {
    let naming = Naming {
        found,
        given: &|p| Given::Fail(format!("{} is not a folder", p.display())),
        refuse: &|_| Ok(()),
    };
    let quiet = &mut |_: Note| {};
    Ok(sc::folder::plan(
        &[src.to_path_buf()],
        Some(dst),
        &naming,
        quiet,
    )?)
}

/// Compresses the checkpoint folder `src` into the folder (or remote prefix) `dst` as
/// `sc encode SRC -o DST` does.
#[pyfunction]
#[pyo3(signature = (src, dst, mode=None, block_size=None, md5=None, threads=None, overwrite=false, base=None, level=None, base_from=None))]
#[allow(clippy::too_many_arguments)]
pub fn compress_folder(
    py: Python<'_>,
    src: PathBuf,
    dst: PathBuf,
    mode: Option<&str>,
    block_size: Option<u64>,
    md5: Option<bool>,
    threads: Option<Threads>,
    overwrite: bool,
    base: Option<PathBuf>,
    level: Option<i64>,
    base_from: Option<Vec<PathBuf>>,
) -> PyResult<()> {
    let opts = encode_options(mode, level, block_size, md5)?;
    let auto = base.as_deref() == Some(Path::new("auto"));
    if base_from.is_some() && !auto {
        return Err(ScError::new_err(
            "invalid argument: base_from offers bases to base=\"auto\": give base=\"auto\" too",
        ));
    }
    let pool = thread_pool(threads)?;
    run_stoppable(py, pool.as_deref(), Some(&src), |stop| {
        let mut jobs = plan(&src, &dst, &sc::folder::encoded_name)?;
        // With base="auto", each file's base is the one of the others and `base_from` that
        // codes it smallest.
        if auto {
            let relate = sc::RelateOptions {
                mode: opts.mode,
                ..sc::RelateOptions::default()
            };
            let candidates = base_from.as_deref().unwrap_or_default();
            sc::folder::relate_jobs(&mut jobs, candidates, &relate)?;
        }
        let base = base_for(base.as_deref().filter(|_| !auto), None)?;
        // Any file may hold repeated tensors, which take the memory of references.
        let needed = sc::memory_needed_with_references(opts.block_size);
        let cancel = sc::Cancel::from_flag(stop.clone());
        let code = |job: &Job, memory: u64| {
            let own = job.base.as_deref().map(sc::Base::open).transpose()?;
            let at = sc::Location::parse(&job.src);
            let f = sc::Source::open(&at, &open_options_until(&cancel))?.to_file()?;
            let opts = sc::EncodeOptions {
                base: own.as_ref().or(base.as_ref()),
                memory,
                cancel: Some(&cancel),
                ..opts
            };
            let r = write_output(&job.dest, overwrite, stop, |w| {
                Ok(sc::encode_file(&f, w, &opts)?)
            })?;
            Ok((r.original_len, r.archive_len))
        };
        let memory = sc::DEFAULT_MEMORY.max(needed);
        let what = src.display().to_string();
        run_jobs(&what, &jobs, memory, overwrite, stop, &|_| needed, &code)
    })
}

/// Restores the folder (or remote prefix) `src` made by `compress_folder` into the folder
/// `dst` as `sc decode SRC -o DST` does.
#[pyfunction]
#[pyo3(signature = (src, dst, threads=None, check_md5=false, overwrite=false, base=None))]
pub fn decompress_folder(
    py: Python<'_>,
    src: PathBuf,
    dst: PathBuf,
    threads: Option<Threads>,
    check_md5: bool,
    overwrite: bool,
    base: Option<PathBuf>,
) -> PyResult<()> {
    let pool = thread_pool(threads)?;
    run_stoppable(py, pool.as_deref(), Some(&src), |stop| {
        let at = sc::Location::parse(&src);
        let jobs = match at.url() {
            Some(url) => {
                let prefix = match url.ends_with('/') {
                    true => url.to_string(),
                    false => format!("{url}/"),
                };
                let listed = sc::remote::list(&prefix, &remote::options())?;
                let jobs = sc::folder::plan_prefix(&prefix, &dst, &listed, &mut |_| {})?;
                std::fs::create_dir_all(&dst).map_err(|e| Failure::Os(e, dst.clone()))?;
                jobs
            }
            None => plan(&src, &dst, &sc::folder::original_name)?,
        };
        let mut jobs = jobs;
        // Archives coded against another file of the run are restored after it, against its
        // output.
        if base.is_none() {
            sc::folder::restore_bases(&mut jobs)?;
        }
        let code = |job: &Job, _memory: u64| {
            let base = job.base.as_deref().or(base.as_deref());
            let r = write_output(&job.dest, overwrite, stop, |w| {
                decode_to(&job.src, w, check_md5, base, stop)
            })?;
            Ok((r.archive_len, r.original_len))
        };
        let memory = sc::DEFAULT_MEMORY;
        let what = src.display().to_string();
        run_jobs(&what, &jobs, memory, overwrite, stop, &|_| 0, &code)
    })
}
