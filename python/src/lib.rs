//! `sc._sc`: the native half of the `sc` Python package.
//!
//! A thin layer over the `sc` library: it opens archives, decodes byte ranges straight into
//! buffers that Python allocated (the memory of the arrays and tensors it returns), and encodes
//! from Python buffers. The GIL is released while the library works, and every entry point turns
//! library errors into `sc.ScError` and a panic into an exception instead of an abort.

mod folder;
mod reader;
mod remote;

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyOSError, PyOverflowError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict};
use rayon::ThreadPool;
use reader::Reader;
use std::io::{self, BufWriter, Read, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

pyo3::create_exception!(
    sc,
    ScError,
    PyValueError,
    "A corrupt, truncated or unreadable archive, or an invalid argument: the message is the \
     one-line message the sc command line prints."
);

/// The failures of the binding: the library's own (with a note to add to its message, if
/// any), a file that cannot be opened (an `OSError` subclass chosen by errno, like `open()`
/// raises), or a Python-side error.
enum Failure {
    Sc(sc::Error),
    Noted(sc::Error, String),
    Os(io::Error, PathBuf),
    Py(PyErr),
}

impl From<sc::Error> for Failure {
    fn from(e: sc::Error) -> Self {
        Failure::Sc(e)
    }
}

impl Failure {
    fn into_py(self, context: Option<&Path>) -> PyErr {
        match self {
            // The package's way to give a missing base, as the command line names --base.
            Failure::Sc(e @ sc::Error::BaseNeeded { .. }) => {
                Failure::Noted(e, " (give it with base=)".into()).into_py(context)
            }
            // A file that cannot be opened or made is an OSError naming it, as `open()` raises.
            Failure::Sc(sc::Error::File {
                location, source, ..
            }) => Failure::Os(source, location.into()).into_py(context),
            Failure::Sc(sc::Error::ForBase { error, needed }) => {
                let note = format!(" (the archive needs the base {needed:?})");
                Failure::Noted(*error, note).into_py(context)
            }
            // A remote error names its location itself.
            Failure::Sc(e @ sc::Error::Remote { .. }) => {
                remote::remote_error(&e).unwrap_or_else(|| ScError::new_err(e.to_string()))
            }
            Failure::Sc(e) => Failure::Noted(e, String::new()).into_py(context),
            Failure::Noted(e, note) => match context {
                Some(p) => ScError::new_err(format!("{}: {e}{note}", p.display())),
                None => ScError::new_err(format!("{e}{note}")),
            },
            Failure::Os(e, path) => {
                // Errors that carry no errno (tempfile's, say) still have a kind.
                let errno = e.raw_os_error().unwrap_or(match e.kind() {
                    io::ErrorKind::NotFound => 2,
                    io::ErrorKind::PermissionDenied => 13,
                    io::ErrorKind::AlreadyExists => 17,
                    io::ErrorKind::IsADirectory => 21,
                    _ => 0,
                });
                // A bare kind reads as the errno's text ("File exists").
                let text = match (e.raw_os_error(), e.get_ref()) {
                    (None, None) if errno != 0 => io::Error::from_raw_os_error(errno).to_string(),
                    _ => e.to_string(),
                };
                // OSError(errno, strerror, filename) picks FileNotFoundError etc. by errno.
                let strerror = text.split(" (os error").next().unwrap_or(&text).to_string();
                PyOSError::new_err((errno, strerror, path.display().to_string()))
            }
            Failure::Py(e) => e,
        }
    }
}

type Res<T> = Result<T, Failure>;

fn invalid(msg: String) -> Failure {
    Failure::Sc(sc::Error::InvalidArgument(msg))
}

/// Runs `f` without the GIL, on a pool of `pool`'s threads when given, turning a panic into an
/// error so that no bytes can abort the interpreter.
fn run<T: Send>(
    py: Python<'_>,
    pool: Option<&ThreadPool>,
    context: Option<&Path>,
    f: impl FnOnce() -> Res<T> + Send,
) -> PyResult<T> {
    let out = py.detach(|| caught(pool, f));
    finished(out, context)
}

/// `f`, on `pool` when given, a panic caught.
fn caught<T: Send>(
    pool: Option<&ThreadPool>,
    f: impl FnOnce() -> Res<T> + Send,
) -> std::thread::Result<Res<T>> {
    catch_unwind(AssertUnwindSafe(|| match pool {
        Some(p) => p.install(f),
        None => f(),
    }))
}

/// How often a long call lets Python run its signal handlers.
const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// [`run`] for the long calls, which Ctrl-C must stop: `f` runs on a thread of its own while
/// this one runs Python's signal handlers every 50 ms. When one raises (`KeyboardInterrupt`),
/// the flag `f` is given is set; `f` stops at its next block (its outputs unfinished, so
/// removed: see [`Stoppable`]), and the handler's exception is raised.
fn run_stoppable<T: Send>(
    py: Python<'_>,
    pool: Option<&ThreadPool>,
    context: Option<&Path>,
    f: impl FnOnce(&Arc<AtomicBool>) -> Res<T> + Send,
) -> PyResult<T> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut raised = None;
    let done = (Mutex::new(false), Condvar::new());
    let out = std::thread::scope(|s| {
        let job = s.spawn(|| {
            let out = caught(pool, || f(&stop));
            *done.0.lock().unwrap_or_else(|e| e.into_inner()) = true;
            done.1.notify_all();
            out
        });
        loop {
            let finished = py.detach(|| {
                let guard = done.0.lock().unwrap_or_else(|e| e.into_inner());
                let waited = done.1.wait_timeout_while(guard, SIGNAL_POLL, |d| !*d);
                waited.map_or(true, |(d, _)| *d)
            });
            if finished {
                break;
            }
            if raised.is_none() {
                if let Err(e) = py.check_signals() {
                    stop.store(true, Ordering::Relaxed);
                    raised = Some(e);
                }
            }
        }
        py.detach(|| job.join())
    });
    if let Some(e) = raised {
        return Err(e);
    }
    finished(out.unwrap_or_else(Err), context)
}

/// The result of a job run by [`run`]: its error as Python's, a panic as `ScError`.
fn finished<T>(out: std::thread::Result<Res<T>>, context: Option<&Path>) -> PyResult<T> {
    match out {
        Ok(r) => r.map_err(|e| e.into_py(context)),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            let at = context.map(|p| format!("{}: ", p.display()));
            Err(ScError::new_err(format!(
                "{}internal error (a bug in sc, please report it): {what}",
                at.unwrap_or_default()
            )))
        }
    }
}

/// A writer that fails once its flag is set (by [`run_stoppable`]): the job writing through
/// it ends at its next block, as after any write error, and its unfinished output goes.
struct Stoppable<'a, W> {
    inner: W,
    stop: &'a AtomicBool,
}

impl<W: Write> Write for Stoppable<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.stop.load(Ordering::Relaxed) {
            // Not `ErrorKind::Interrupted`, which writers retry.
            return Err(io::Error::other("interrupted"));
        }
        self.inner.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// `w`, stopped by `stop`.
fn stoppable<W: Write>(w: W, stop: &AtomicBool) -> Stoppable<'_, W> {
    Stoppable { inner: w, stop }
}

/// A `threads=` argument, as the command line takes `-T`: a whole number, 0 for all cores.
struct Threads(usize);

impl<'a, 'py> FromPyObject<'a, 'py> for Threads {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let bad = || {
            let shown = obj.repr().map_or_else(|_| "?".into(), |r| r.to_string());
            ScError::new_err(format!(
                "invalid argument: threads must be a whole number, 0 (all cores) or more, not \
                 {shown}"
            ))
        };
        if obj.is_instance_of::<PyBool>() {
            return Err(bad());
        }
        match obj.extract::<i64>() {
            Ok(n) => usize::try_from(n).map(Threads).map_err(|_| bad()),
            // Past 64 bits: more than any machine's cores, capped like any such number.
            Err(e) if e.is_instance_of::<PyOverflowError>(obj.py()) && obj.gt(0)? => {
                Ok(Threads(usize::MAX))
            }
            Err(_) => Err(bad()),
        }
    }
}

/// A pool of `threads` threads, capped to the cores as the command line caps `-T`, or `None`
/// for rayon's global pool (all cores) when `threads` is absent or 0.
fn thread_pool(threads: Option<Threads>) -> PyResult<Option<Arc<ThreadPool>>> {
    match threads {
        None | Some(Threads(0)) => Ok(None),
        Some(Threads(n)) => rayon::ThreadPoolBuilder::new()
            .num_threads(sc::worker_threads(n))
            .build()
            .map(|p| Some(Arc::new(p)))
            .map_err(|e| ScError::new_err(format!("cannot start worker threads: {e}"))),
    }
}

/// How the package opens archives and outputs: its remote options
/// (`sc.remote_options()`), the default memory.
fn open_options() -> sc::OpenOptions {
    let mut o = sc::OpenOptions::default();
    o.remote = remote::options();
    o
}

/// [`open_options`], stopped by `cancel` (a long call interrupted by Ctrl-C).
fn open_options_until(cancel: &sc::Cancel) -> sc::OpenOptions {
    let mut o = open_options();
    o.cancel = Some(cancel.clone());
    o
}

/// Opens the base at `path` for the archive at `archive` (`None` when the base is for
/// encoding): the error says which base the archive needs. A missing path is an `OSError`, as
/// for any file.
fn open_base(path: &Path, archive: Option<&sc::Location>) -> Res<sc::Base> {
    std::fs::metadata(path).map_err(|e| Failure::Os(e, path.into()))?;
    Ok(match archive {
        Some(a) => a.open_base(path)?,
        None => sc::Base::open(path)?,
    })
}

/// The base given as `base` (a path), opened for the archive at `archive` (`None` when the
/// base is for encoding).
fn base_for(base: Option<&Path>, archive: Option<&sc::Location>) -> Res<Option<sc::Base>> {
    base.map(|b| open_base(b, archive)).transpose()
}

fn mode_of(mode: &str) -> PyResult<sc::Mode> {
    match mode {
        "fast" => Ok(sc::Mode::Fast),
        "best" => Ok(sc::Mode::Best),
        _ => Err(ScError::new_err(format!(
            "invalid argument: mode must be \"fast\" or \"best\", not {mode:?}"
        ))),
    }
}

/// The options for `mode` and `level` (a level flag's number, as `sc -N` means it; a `mode`
/// given as well must agree with it), FAST when neither is given.
fn encode_options(
    mode: Option<&str>,
    level: Option<i64>,
    block_size: Option<u64>,
    md5: Option<bool>,
) -> PyResult<sc::EncodeOptions<'static>> {
    let mode = mode.map(mode_of).transpose()?;
    let mut opts = match level {
        None => sc::EncodeOptions::new(mode.unwrap_or(sc::Mode::Fast)),
        Some(n) => {
            let numbered = u32::try_from(n)
                .ok()
                .filter(|&n| n <= sc::HIGHEST_LEVEL)
                .and_then(sc::level);
            let (by_level, signs) = numbered.ok_or_else(|| {
                ScError::new_err(format!("invalid argument: level must be 1 to 9, not {n}"))
            })?;
            if let Some(m) = mode.filter(|&m| m != by_level) {
                return Err(ScError::new_err(format!(
                    "invalid argument: level {n} means mode {:?} and contradicts mode {:?}",
                    by_level.name(),
                    m.name()
                )));
            }
            sc::EncodeOptions {
                sign_models: signs,
                ..sc::EncodeOptions::new(by_level)
            }
        }
    };
    if let Some(b) = block_size {
        opts.block_size = u32::try_from(b).map_err(|_| {
            ScError::new_err(format!("invalid argument: block size {b} is too large"))
        })?;
    }
    if let Some(m) = md5 {
        opts.md5 = m;
    }
    Ok(opts)
}

/// Writes `dst` (a file, through a temporary file renamed into place once complete, or a
/// remote location, uploaded) with `write`; without `overwrite`, an existing one is refused.
/// A failure leaves nothing behind.
fn write_to<T>(
    dst: &Path,
    overwrite: bool,
    write: impl FnOnce(&mut BufWriter<&mut sc::Output>) -> Res<T>,
) -> Res<T> {
    let start = Instant::now();
    let mut out = sc::Output::create(&sc::Location::parse(dst), overwrite, &open_options())?;
    let made = {
        let mut w = BufWriter::with_capacity(1 << 20, &mut out);
        let made = write(&mut w)?;
        // Write errors name the destination.
        w.flush().map_err(sc::Error::from)?;
        made
    };
    if let sc::Committed::Upload(sent) = out.commit(false)? {
        remote::record(remote::Cost::of(sent, start.elapsed()));
    }
    Ok(made)
}

/// Reads Python buffers one after the other.
struct Parts<'a> {
    parts: Vec<&'a [u8]>,
    next: usize,
}

impl Read for Parts<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while let Some(part) = self.parts.get_mut(self.next) {
            if part.is_empty() {
                self.next += 1;
                continue;
            }
            return part.read(buf);
        }
        Ok(0)
    }
}

/// Encodes the concatenation of `parts` (a safetensors file's header and tensor data) into an
/// archive written to `dst`, or returned as bytes when `dst` is None.
#[pyfunction]
#[pyo3(signature = (parts, dst=None, mode=None, block_size=None, md5=None, threads=None, overwrite=true, level=None))]
#[allow(clippy::too_many_arguments)]
fn encode_parts(
    py: Python<'_>,
    parts: Vec<PyBuffer<u8>>,
    dst: Option<PathBuf>,
    mode: Option<&str>,
    block_size: Option<u64>,
    md5: Option<bool>,
    threads: Option<Threads>,
    overwrite: bool,
    level: Option<i64>,
) -> PyResult<Option<Py<PyBytes>>> {
    let mut opts = encode_options(mode, level, block_size, md5)?;
    let pool = thread_pool(threads)?;
    let mut spans = Vec::with_capacity(parts.len());
    for b in &parts {
        if !b.is_c_contiguous() {
            return Err(ScError::new_err(
                "invalid argument: buffers must be contiguous",
            ));
        }
        spans.push((b.buf_ptr() as usize, b.len_bytes()));
    }
    opts.input_len = Some(spans.iter().map(|s| s.1 as u64).sum());
    let archive = run_stoppable(py, pool.as_deref(), dst.as_deref(), |stop| {
        let cancel = sc::Cancel::from_flag(stop.clone());
        let opts = sc::EncodeOptions {
            cancel: Some(&cancel),
            ..opts
        };
        // SAFETY: the buffers stay exported, so their memory stays put, while `parts` lives.
        let input = || Parts {
            parts: spans
                .iter()
                .map(|&(p, n)| unsafe { std::slice::from_raw_parts(p as *const u8, n) })
                .collect(),
            next: 0,
        };
        match &dst {
            Some(d) => write_to(d, overwrite, |w| {
                sc::encode(input(), stoppable(w, stop), &opts)?;
                Ok(None)
            }),
            None => {
                let mut out = Vec::new();
                sc::encode(input(), stoppable(&mut out, stop), &opts)?;
                Ok(Some(out))
            }
        }
    })?;
    drop(parts);
    Ok(archive.map(|a| PyBytes::new(py, &a).unbind()))
}

/// Compresses the file `src` into the archive `dst`, coded against `base` when given, or
/// against the one of `base_from` that codes it smallest (by measurement, `sc::relate`), if
/// any does; tensors that repeat an earlier one are stored once.
#[pyfunction]
#[pyo3(signature = (src, dst, mode=None, block_size=None, md5=None, threads=None, overwrite=false, base=None, level=None, base_from=None))]
#[allow(clippy::too_many_arguments)]
fn compress_file<'py>(
    py: Python<'py>,
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
) -> PyResult<Bound<'py, PyDict>> {
    let opts = encode_options(mode, level, block_size, md5)?;
    if base.is_some() && base_from.is_some() {
        return Err(ScError::new_err(
            "invalid argument: give base or base_from, not both",
        ));
    }
    let pool = thread_pool(threads)?;
    let report = run_stoppable(py, pool.as_deref(), Some(&src), |stop| {
        let cancel = sc::Cancel::from_flag(stop.clone());
        // A remote source is copied to a temporary file first: finding repeated tensors
        // reads the input twice.
        let start = Instant::now();
        let mut source =
            sc::Source::open(&sc::Location::parse(&src), &open_options_until(&cancel))?;
        let f = source.to_file()?;
        if let Some(s) = source.remote_stats() {
            remote::record(remote::Cost::of(s, start.elapsed()));
        }
        let found = match &base_from {
            Some(candidates) => {
                let inputs = [src.clone()];
                let relate = sc::RelateOptions {
                    mode: opts.mode,
                    ..sc::RelateOptions::default()
                };
                let plan = sc::relate(&inputs, candidates, &relate)?;
                plan.base_path(0, &inputs, candidates)
                    .map(Path::to_path_buf)
            }
            None => base.clone(),
        };
        let base = base_for(found.as_deref(), None)?;
        let opts = sc::EncodeOptions {
            base: base.as_ref(),
            cancel: Some(&cancel),
            ..opts
        };
        write_to(&dst, overwrite, |w| {
            Ok(sc::encode_file(&f, stoppable(w, stop), &opts)?)
        })
    })?;
    let d = PyDict::new(py);
    d.set_item("original_len", report.original_len)?;
    d.set_item("archive_len", report.archive_len)?;
    d.set_item("blocks", report.blocks)?;
    d.set_item("safetensors", matches!(report.kind, sc::Kind::Safetensors))?;
    d.set_item("kind", report.kind.name())?;
    d.set_item("md5", report.md5.map(hex))?;
    d.set_item("based_tensors", report.based_tensors)?;
    d.set_item("repeated_tensors", report.repeated_tensors)?;
    Ok(d)
}

fn hex(d: [u8; 16]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// Decodes the archive file `src` into `out`, checking every block and, with `check_md5`, the
/// recorded MD5 of the whole file; `base`, the path of the base it is coded against. It stops
/// once `stop` is set.
fn decode_to(
    src: &Path,
    out: impl Write + Send,
    check_md5: bool,
    base: Option<&Path>,
    stop: &Arc<AtomicBool>,
) -> Res<sc::DecodeReport> {
    let cancel = sc::Cancel::from_flag(stop.clone());
    let at = sc::Location::parse(src);
    let start = Instant::now();
    let source = sc::Source::open(&at, &open_options_until(&cancel))?;
    let base = base_for(base, Some(&at))?;
    // Positioned reads, not maps: another process truncating the archive must give an
    // error, not kill the interpreter with SIGBUS.
    let opts = sc::DecodeOptions {
        check_md5,
        base: base.as_ref(),
        map: false,
        cancel: Some(&cancel),
        ..Default::default()
    };
    let decoded = source.decode(out, &opts)?;
    if let Some(s) = decoded.remote {
        remote::record(remote::Cost::of(s, start.elapsed()));
    }
    Ok(decoded.report)
}

fn decode_report<'py>(py: Python<'py>, r: &sc::DecodeReport) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("original_len", r.original_len)?;
    d.set_item("archive_len", r.archive_len)?;
    d.set_item("blocks", r.blocks)?;
    d.set_item("md5", r.md5.map(hex))?;
    d.set_item("recorded_md5", r.stored_md5.map(hex))?;
    Ok(d)
}

/// Restores the original file of the archive `src` as `dst`; `base`, the path of the base it
/// is coded against.
#[pyfunction]
#[pyo3(signature = (src, dst, threads=None, check_md5=false, overwrite=false, base=None))]
fn decompress_file<'py>(
    py: Python<'py>,
    src: PathBuf,
    dst: PathBuf,
    threads: Option<Threads>,
    check_md5: bool,
    overwrite: bool,
    base: Option<PathBuf>,
) -> PyResult<Bound<'py, PyDict>> {
    let pool = thread_pool(threads)?;
    let report = run_stoppable(py, pool.as_deref(), Some(&src), |stop| {
        write_to(&dst, overwrite, |w| {
            decode_to(&src, stoppable(w, stop), check_md5, base.as_deref(), stop)
        })
    })?;
    decode_report(py, &report)
}

/// Decodes the archive `path` without writing anything, checking every block and the
/// recorded MD5 when there is one; `base`, the path of the base it is coded against.
#[pyfunction]
#[pyo3(signature = (path, threads=None, base=None))]
fn verify<'py>(
    py: Python<'py>,
    path: PathBuf,
    threads: Option<Threads>,
    base: Option<PathBuf>,
) -> PyResult<Bound<'py, PyDict>> {
    let pool = thread_pool(threads)?;
    let report = run_stoppable(py, pool.as_deref(), Some(&path), |stop| {
        decode_to(
            &path,
            stoppable(io::sink(), stop),
            true,
            base.as_deref(),
            stop,
        )
    })?;
    decode_report(py, &report)
}

/// Tensor by tensor, whether the GGUF quant `quant` derives bit for bit from the seed `seed` (a
/// GGUF file, its archive or a folder): a list of dicts `name`, `dtype`, `blocks`, `exact`,
/// `derives` and `reason` (why it cannot be re-derived, or None).
#[pyfunction]
fn verify_derives<'py>(
    py: Python<'py>,
    seed: PathBuf,
    quant: PathBuf,
) -> PyResult<Vec<Bound<'py, PyDict>>> {
    let report = run(py, None, Some(&quant), || {
        let base = sc::Base::open(&seed)?;
        let file = std::fs::File::open(&quant).map_err(|e| Failure::Os(e, quant.clone()))?;
        let len = file.metadata().map_err(sc::Error::from)?.len();
        Ok(sc::verify_derives(&base, &file, len)?)
    })?;
    report
        .iter()
        .map(|t| {
            let d = PyDict::new(py);
            d.set_item("name", &t.name)?;
            d.set_item("dtype", &t.dtype)?;
            d.set_item("blocks", t.blocks)?;
            d.set_item("exact", t.exact)?;
            d.set_item("derives", t.derives())?;
            d.set_item("reason", t.not_derivable.as_deref())?;
            Ok(d)
        })
        .collect()
}

/// The names in `names` closest to `name` (at most three, best first), by the rule the command
/// line's suggestions follow too.
#[pyfunction]
fn closest_names(name: &str, names: Vec<String>) -> Vec<String> {
    let near = sc::closest_names(name, names.iter().map(String::as_str));
    near.into_iter().map(String::from).collect()
}

/// The native module.
#[pymodule]
fn _sc(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("ScError", m.py().get_type::<ScError>())?;
    m.add_class::<Reader>()?;
    m.add_function(wrap_pyfunction!(encode_parts, m)?)?;
    m.add_function(wrap_pyfunction!(compress_file, m)?)?;
    m.add_function(wrap_pyfunction!(decompress_file, m)?)?;
    m.add_function(wrap_pyfunction!(verify, m)?)?;
    m.add_function(wrap_pyfunction!(verify_derives, m)?)?;
    m.add_function(wrap_pyfunction!(closest_names, m)?)?;
    m.add_function(wrap_pyfunction!(remote::stats, m)?)?;
    m.add_function(wrap_pyfunction!(remote::is_url, m)?)?;
    m.add_function(wrap_pyfunction!(remote::remote_options, m)?)?;
    m.add_function(wrap_pyfunction!(remote::list_prefix, m)?)?;
    m.add_function(wrap_pyfunction!(remote::fetch, m)?)?;
    m.add_function(wrap_pyfunction!(folder::compress_folder, m)?)?;
    m.add_function(wrap_pyfunction!(folder::decompress_folder, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
