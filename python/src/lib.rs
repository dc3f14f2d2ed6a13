//! `sc._sc`: the native half of the `sc` Python package.
//!
//! A thin layer over the `sc` library: it opens archives, decodes byte ranges straight into
//! buffers that Python allocated (the memory of the arrays and tensors it returns), and encodes
//! from Python buffers. The GIL is released while the library works, and every entry point turns
//! library errors into `sc.ScError` and a panic into an exception instead of an abort.

mod folder;
mod remote;

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyOSError, PyOverflowError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict};
use rayon::ThreadPool;
use sc::output::OutputFile;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Cursor, Read, Seek, SeekFrom, Write};
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
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    match threads {
        None | Some(Threads(0)) => Ok(None),
        Some(Threads(n)) => rayon::ThreadPoolBuilder::new()
            .num_threads(n.min(cores))
            .build()
            .map(|p| Some(Arc::new(p)))
            .map_err(|e| ScError::new_err(format!("cannot start worker threads: {e}"))),
    }
}

fn open(path: &Path) -> Res<File> {
    let f = File::open(path).map_err(|e| Failure::Os(e, path.into()))?;
    let meta = f.metadata().map_err(|e| Failure::Os(e, path.into()))?;
    if meta.is_dir() {
        return Err(Failure::Os(io::Error::from_raw_os_error(21), path.into()));
    }
    Ok(f)
}

/// Opens the base at `path`; `needed` gives the name of the base the archive to be read
/// needs, for the message when this one cannot serve. A missing path is an `OSError`, as for
/// any file.
fn open_base(path: &Path, needed: impl FnOnce() -> Option<String>) -> Res<sc::Base> {
    std::fs::metadata(path).map_err(|e| Failure::Os(e, path.into()))?;
    sc::Base::open(path).map_err(|e| match needed() {
        Some(n) => Failure::Noted(e, format!(" (the archive needs the base {n:?})")),
        None => e.into(),
    })
}

/// The name of the base the archive read from `input` needs, if it is one that needs one.
fn needed_base(input: impl Read + Seek + Send) -> Option<String> {
    let archive = sc::Archive::open(input).ok()?;
    archive.base_name().map(str::to_string)
}

/// The base given as `base` (a path), opened for the archive file `archive` (`None` when the
/// base is for encoding).
fn base_for(base: Option<&Path>, archive: Option<&Path>) -> Res<Option<sc::Base>> {
    base.map(|b| open_base(b, || needed_base(File::open(archive?).ok()?)))
        .transpose()
}

/// Where an open archive's bytes come from.
enum Source {
    File(BufReader<File>),
    Memory(Cursor<Vec<u8>>),
}

impl Read for Source {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Source::File(f) => f.read(buf),
            Source::Memory(m) => m.read(buf),
        }
    }
}

impl Seek for Source {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        match self {
            Source::File(f) => f.seek(pos),
            Source::Memory(m) => m.seek(pos),
        }
    }
}

/// An open archive: a local one (file or memory) or a remote one.
enum Opened {
    Local(sc::Archive<Source>),
    Remote(sc::Archive<sc::remote::RemoteFile>),
}

/// Evaluates `$body` with `$a` bound to the archive inside `$opened`, whichever kind it is.
macro_rules! each {
    ($opened:expr, $a:ident => $body:expr) => {
        match $opened {
            Opened::Local($a) => $body,
            Opened::Remote($a) => $body,
        }
    };
}

/// A tensor as Python sees it: name, dtype, shape, and its bytes' start and end in the original
/// file.
type TensorRow = (String, String, Vec<u64>, u64, u64);

/// An archive opened for reading tensors (`sc.safe_open` and the `load` functions use it).
#[pyclass(module = "sc._sc")]
struct Reader {
    archive: Mutex<Option<Opened>>,
    pool: Option<Arc<ThreadPool>>,
    /// The file or location, for error messages (`None` for archives in memory).
    path: Option<PathBuf>,
    /// What reading a remote archive has cost so far.
    cost: Mutex<remote::Cost>,
}

impl Reader {
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Opened) -> Res<T> + Send,
    ) -> PyResult<T> {
        run(py, self.pool.as_deref(), self.path.as_deref(), || {
            let mut guard = self.archive.lock().unwrap_or_else(|e| e.into_inner());
            let Some(opened) = guard.as_mut() else {
                return Err(invalid("the archive is closed".into()));
            };
            let before = match &*opened {
                Opened::Remote(a) => Some(a.remote_stats()),
                Opened::Local(_) => None,
            };
            let start = Instant::now();
            let out = f(&mut *opened);
            if let (Some(before), Opened::Remote(a)) = (before, &*opened) {
                let c = remote::Cost::of(remote::delta(before, a.remote_stats()), start.elapsed());
                self.cost.lock().unwrap_or_else(|e| e.into_inner()).add(c);
                remote::record(c);
            }
            out
        })
    }
}

#[pymethods]
impl Reader {
    /// Opens `source`, a path, a remote location (`http://`, `https://`, `s3://`) or the bytes
    /// of an archive, reading its header, index and trailer; `threads` decoding threads
    /// (default: all cores); `base`, the path of the base an archive of a fine-tune is coded
    /// against.
    #[new]
    #[pyo3(signature = (source, threads=None, base=None))]
    fn new(
        py: Python<'_>,
        source: &Bound<'_, PyAny>,
        threads: Option<Threads>,
        base: Option<PathBuf>,
    ) -> PyResult<Self> {
        let pool = thread_pool(threads)?;
        let (input, path) = match source.cast::<PyBytes>() {
            Ok(b) => (Err(b.as_bytes().to_vec()), None),
            Err(_) => {
                let p: PathBuf = source.extract()?;
                (Ok(p.clone()), Some(p))
            }
        };
        let remote = path.as_deref().filter(|p| remote::is_url_path(p));
        if let Some(url) = remote.and_then(Path::to_str) {
            let (archive, cost) = run(py, None, path.as_deref(), || {
                let start = Instant::now();
                let base = base_for(base.as_deref(), None)?;
                let opts = remote::options();
                let a = match base {
                    Some(b) => sc::Archive::open_url_with_base(url, b, &opts)?,
                    None => sc::Archive::open_url(url, &opts)?,
                };
                let cost = remote::Cost::of(a.remote_stats(), start.elapsed());
                remote::record(cost);
                Ok((a, cost))
            })?;
            return Ok(Reader {
                archive: Mutex::new(Some(Opened::Remote(archive))),
                pool,
                path,
                cost: Mutex::new(cost),
            });
        }
        let archive = run(py, None, path.as_deref(), || {
            let source = match input {
                Ok(p) => Source::File(BufReader::with_capacity(64 << 10, open(&p)?)),
                Err(bytes) => Source::Memory(Cursor::new(bytes)),
            };
            let base = match &source {
                Source::File(_) => base_for(base.as_deref(), path.as_deref())?,
                Source::Memory(m) => {
                    let needed = || needed_base(Cursor::new(m.get_ref().as_slice()));
                    base.as_deref().map(|b| open_base(b, needed)).transpose()?
                }
            };
            Ok(match base {
                Some(b) => sc::Archive::open_with_base(source, b)?,
                None => sc::Archive::open(source)?,
            })
        })?;
        Ok(Reader {
            archive: Mutex::new(Some(Opened::Local(archive))),
            pool,
            path,
            cost: Mutex::new(remote::Cost::default()),
        })
    }

    /// The tensors as (name, dtype, shape, start, end), ordered by where their bytes lie in the
    /// original file (start and end are offsets in it); empty for a generic archive.
    fn tensors(&self, py: Python<'_>) -> PyResult<Vec<TensorRow>> {
        self.with(py, |o| {
            each!(o, a => Ok(a
                .tensors()
                .iter()
                .map(|t| {
                    let r = a.tensor_range(t);
                    (
                        t.name.clone(),
                        t.dtype_name.clone(),
                        t.shape.clone(),
                        r.start,
                        r.end,
                    )
                })
                .collect()))
        })
    }

    /// The kept safetensors header's JSON text, or None for a generic archive.
    fn header_json(&self, py: Python<'_>) -> PyResult<Option<String>> {
        self.with(
            py,
            |o| each!(o, a => Ok(a.header_json().map(str::to_string))),
        )
    }

    /// The kept header's metadata: a safetensors header's `__metadata__`, a GGUF header's
    /// key-values (values that are not strings as their JSON text), or None.
    fn metadata<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        // Made once within the archive, without the GIL; the dict is then built from it, not
        // from a copy (a tokenizer's vocabulary as text is megabytes).
        self.with(py, |o| each!(o, a => Ok(a.metadata().is_some())))?;
        let guard = self.archive.lock().unwrap_or_else(|e| e.into_inner());
        let Some(opened) = guard.as_ref() else {
            return Err(PyValueError::new_err("the archive is closed"));
        };
        let Some(meta) = each!(opened, a => a.metadata()) else {
            return Ok(None);
        };
        let d = PyDict::new(py);
        for (k, v) in meta {
            d.set_item(k, v)?;
        }
        Ok(Some(d))
    }

    /// Archive facts: the original's kind ("safetensors", "gguf" or "generic"), mode, block
    /// size, blocks, archive and original lengths, and the name of the base it is coded
    /// against (or None).
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (kind, mode, block_size, blocks, archive_len, original_len, base) =
            self.with(py, |o| {
                each!(o, a => Ok((
                    a.kind().name(),
                    a.mode().name(),
                    a.block_size(),
                    a.blocks(),
                    a.archive_len(),
                    a.original_len(),
                    a.base_name().map(str::to_string),
                )))
            })?;
        let d = PyDict::new(py);
        d.set_item("kind", kind)?;
        d.set_item("mode", mode)?;
        d.set_item("block_size", block_size)?;
        d.set_item("blocks", blocks)?;
        d.set_item("archive_len", archive_len)?;
        d.set_item("original_len", original_len)?;
        d.set_item("base", base)?;
        Ok(d)
    }

    /// What has been read and decoded since the archive was opened; for a remote archive, also
    /// the requests made, bytes fetched and seconds spent waiting on the network and decoding.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (s, remote) = self.with(py, |o| {
            Ok((each!(o, a => a.stats()), matches!(o, Opened::Remote(_))))
        })?;
        let d = PyDict::new(py);
        if remote {
            let cost = *self.cost.lock().unwrap_or_else(|e| e.into_inner());
            cost.set_items(&d)?;
        }
        d.set_item("blocks_decoded", s.blocks_decoded)?;
        d.set_item("bytes_decoded", s.bytes_decoded)?;
        d.set_item("block_bytes_read", s.block_bytes_read)?;
        d.set_item("archive_bytes_read", s.archive_bytes_read)?;
        Ok(d)
    }

    /// Decodes bytes `ranges[k]` of the original file into `buffers[k]` (writable, contiguous,
    /// exactly as long as its range). Ranges must not overlap; all of them are decoded in one
    /// parallel pass over their blocks, each block wholly inside one buffer straight into it.
    fn read_into(
        &self,
        py: Python<'_>,
        ranges: Vec<(u64, u64)>,
        buffers: Vec<PyBuffer<u8>>,
    ) -> PyResult<()> {
        let targets = writable_targets(&ranges, &buffers).map_err(|e| e.into_py(None))?;
        self.with(py, move |o| {
            // SAFETY: each buffer is writable and C-contiguous, stays exported (so its memory
            // stays put) while `buffers` lives, and no two of them overlap (checked above).
            let mut parts: Vec<(u64, &mut [u8])> = targets
                .into_iter()
                .map(|(start, ptr, len)| unsafe {
                    (start, std::slice::from_raw_parts_mut(ptr as *mut u8, len))
                })
                .collect();
            Ok(each!(o, a => a.read_ranges_into(&mut parts))?)
        })
    }

    /// Releases the file; later calls raise.
    fn close(&self) {
        let mut guard = self.archive.lock().unwrap_or_else(|e| e.into_inner());
        *guard = None;
    }
}

/// Checks the buffers against their ranges and returns (start, address, length) per buffer,
/// sorted by start.
fn writable_targets(
    ranges: &[(u64, u64)],
    buffers: &[PyBuffer<u8>],
) -> Res<Vec<(u64, usize, usize)>> {
    if ranges.len() != buffers.len() {
        return Err(invalid("one buffer is needed per range".into()));
    }
    let mut targets = Vec::with_capacity(ranges.len());
    for (&(start, end), b) in ranges.iter().zip(buffers) {
        if b.readonly() || !b.is_c_contiguous() {
            return Err(invalid("buffers must be writable and contiguous".into()));
        }
        if end < start || end - start != b.len_bytes() as u64 {
            return Err(invalid(format!(
                "a buffer of {} bytes for bytes {start}..{end}",
                b.len_bytes()
            )));
        }
        if end > start {
            targets.push((start, b.buf_ptr() as usize, b.len_bytes()));
        }
    }
    // The library takes the ranges in order and refuses overlaps.
    targets.sort_unstable();
    let mut by_address: Vec<(usize, usize)> = targets.iter().map(|t| (t.1, t.2)).collect();
    by_address.sort_unstable();
    if by_address.windows(2).any(|w| w[0].0 + w[0].1 > w[1].0) {
        return Err(invalid("buffers share memory".into()));
    }
    Ok(targets)
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

/// Writes `dst` as the command line writes its outputs ([`sc::output`]): through a temporary
/// file beside it (with the umask's mode), renamed into place only once `write` succeeded; an
/// existing FIFO or character device in place; a symbolic link's target. Without `overwrite`,
/// an existing file is an error.
fn write_atomically(
    dst: &Path,
    overwrite: bool,
    write: impl FnOnce(&mut BufWriter<&mut OutputFile>) -> Res<()>,
) -> Res<()> {
    let os = |e: io::Error| Failure::Os(e, dst.into());
    let mut out = OutputFile::create(dst, overwrite).map_err(os)?;
    {
        let mut w = BufWriter::with_capacity(1 << 20, &mut out);
        write(&mut w)?;
        // Write errors name the destination.
        w.flush().map_err(sc::Error::from)?;
    }
    out.commit(false).map_err(os)?;
    Ok(())
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
            Some(d) if remote::is_url_path(d) => {
                let url = d.to_str().unwrap_or_default();
                remote::encode_to_url(url, overwrite, |w| {
                    sc::encode(input(), stoppable(w, stop), &opts)?;
                    Ok(None)
                })
            }
            Some(d) => write_atomically(d, overwrite, |w| {
                sc::encode(input(), stoppable(w, stop), &opts)?;
                Ok(())
            })
            .map(|()| None),
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
        let f = match src.to_str().filter(|s| sc::remote::is_url(s)) {
            Some(url) => remote::spool(url, &cancel)?,
            None => open(&src)?,
        };
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
        if let Some(url) = dst.to_str().filter(|s| sc::remote::is_url(s)) {
            return remote::encode_to_url(url, overwrite, |w| {
                Ok(sc::encode_file(&f, stoppable(w, stop), &opts)?)
            });
        }
        let mut report = None;
        write_atomically(&dst, overwrite, |w| {
            report = Some(sc::encode_file(&f, stoppable(w, stop), &opts)?);
            Ok(())
        })?;
        report.ok_or_else(|| Failure::Py(ScError::new_err("encoding did not finish")))
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
    if let Some(url) = src.to_str().filter(|s| sc::remote::is_url(s)) {
        let base = base_for(base, None)?;
        return remote::decode_url(url, out, check_md5, base.as_ref(), &cancel);
    }
    let f = open(src)?;
    let base = base_for(base, Some(src))?;
    // Positioned reads, not maps: another process truncating the archive must give an
    // error, not kill the interpreter with SIGBUS.
    let opts = sc::DecodeOptions {
        check_md5,
        base: base.as_ref(),
        map: false,
        cancel: Some(&cancel),
        ..Default::default()
    };
    Ok(sc::decode_file(&f, out, &opts)?)
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
        let mut report = None;
        write_atomically(&dst, overwrite, |w| {
            let w = stoppable(w, stop);
            report = Some(decode_to(&src, w, check_md5, base.as_deref(), stop)?);
            Ok(())
        })?;
        report.ok_or_else(|| Failure::Py(ScError::new_err("decoding did not finish")))
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
        let file = File::open(&quant).map_err(|e| Failure::Os(e, quant.clone()))?;
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
