//! Remote archives in Python: `http://`, `https://` and `s3://` locations, read and written
//! through the library's `remote` module, and the process's running totals of what they cost
//! (`sc.stats()`).

use super::{run, Failure, Res, ScError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use sc::remote::{RemoteFile, RemoteOptions, RemoteStats};
use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Whether `s` names a remote location rather than a local path.
pub fn is_url_path(p: &Path) -> bool {
    p.to_str().is_some_and(sc::remote::is_url)
}

/// What remote reads and writes cost: requests, bytes moved, time waiting on the network and
/// time decoding (or encoding) besides.
#[derive(Clone, Copy, Default)]
pub struct Cost {
    pub requests: u64,
    pub bytes_fetched: u64,
    pub network_wait: Duration,
    pub decode: Duration,
}

impl Cost {
    /// The cost of a call that took `busy` and whose remote reads did `delta`.
    pub fn of(delta: RemoteStats, busy: Duration) -> Cost {
        Cost {
            requests: delta.requests,
            bytes_fetched: delta.bytes_fetched,
            network_wait: delta.network_wait,
            decode: busy.saturating_sub(delta.network_wait),
        }
    }

    pub fn add(&mut self, other: Cost) {
        self.requests += other.requests;
        self.bytes_fetched += other.bytes_fetched;
        self.network_wait += other.network_wait;
        self.decode += other.decode;
    }

    /// Sets `requests`, `bytes_fetched`, `network_wait_s` and `decode_s` in `d`.
    pub fn set_items<'py>(self, d: &Bound<'py, PyDict>) -> PyResult<()> {
        d.set_item("requests", self.requests)?;
        d.set_item("bytes_fetched", self.bytes_fetched)?;
        d.set_item("network_wait_s", self.network_wait.as_secs_f64())?;
        d.set_item("decode_s", self.decode.as_secs_f64())?;
        Ok(())
    }
}

/// The process's totals since it started (or since `stats(reset=True)`).
static TOTALS: Mutex<Cost> = Mutex::new(Cost {
    requests: 0,
    bytes_fetched: 0,
    network_wait: Duration::ZERO,
    decode: Duration::ZERO,
});

/// Adds `c` to the process's totals.
pub fn record(c: Cost) {
    TOTALS.lock().unwrap_or_else(|e| e.into_inner()).add(c);
}

/// The remote options set by `remote_options` (the library's defaults until then).
static OPTIONS: Mutex<Option<RemoteOptions>> = Mutex::new(None);

/// The remote options every remote read and write of the package uses.
pub fn options() -> RemoteOptions {
    let o = OPTIONS.lock().unwrap_or_else(|e| e.into_inner());
    o.clone().unwrap_or_default()
}

/// A positive, finite number of seconds.
fn seconds(what: &str, s: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(s)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| {
            ScError::new_err(format!(
                "invalid argument: {what} must be a positive number of seconds, not {s}"
            ))
        })
}

/// Sets the options of later remote reads and writes (those given; the others stay) and
/// returns them all: `connections` (parallel range requests per archive), `retries` (per
/// request, on 5xx answers and dropped connections), `retry_timeout` (seconds after which a
/// request is no longer retried) and `timeout` (seconds for one request).
#[pyfunction]
#[pyo3(signature = (connections=None, retries=None, retry_timeout=None, timeout=None))]
pub fn remote_options(
    py: Python<'_>,
    connections: Option<usize>,
    retries: Option<usize>,
    retry_timeout: Option<f64>,
    timeout: Option<f64>,
) -> PyResult<Bound<'_, PyDict>> {
    let mut o = options();
    if let Some(n) = connections {
        if n == 0 {
            return Err(ScError::new_err(
                "invalid argument: connections must be 1 or more, not 0",
            ));
        }
        o.connections = n;
    }
    if let Some(n) = retries {
        o.retries = n;
    }
    if let Some(s) = retry_timeout {
        o.retry_timeout = seconds("retry_timeout", s)?;
    }
    if let Some(s) = timeout {
        o.timeout = seconds("timeout", s)?;
    }
    *OPTIONS.lock().unwrap_or_else(|e| e.into_inner()) = Some(o.clone());
    let d = PyDict::new(py);
    d.set_item("connections", o.connections)?;
    d.set_item("retries", o.retries)?;
    d.set_item("retry_timeout", o.retry_timeout.as_secs_f64())?;
    d.set_item("timeout", o.timeout.as_secs_f64())?;
    Ok(d)
}

/// What `a` did between `before` and `after`.
pub fn delta(before: RemoteStats, after: RemoteStats) -> RemoteStats {
    let mut d = RemoteStats::default();
    d.requests = after.requests.saturating_sub(before.requests);
    d.bytes_fetched = after.bytes_fetched.saturating_sub(before.bytes_fetched);
    d.network_wait = after.network_wait.saturating_sub(before.network_wait);
    d
}

/// The running totals of every remote read and write this process made: `requests`,
/// `bytes_fetched` (or sent, for uploads), `network_wait_s` (time spent waiting for bytes not
/// yet arrived) and `decode_s` (time spent decoding or encoding besides); zeroed afterwards
/// with `reset`.
#[pyfunction]
#[pyo3(signature = (reset=false))]
pub fn stats(py: Python<'_>, reset: bool) -> PyResult<Bound<'_, PyDict>> {
    let c = {
        let mut t = TOTALS.lock().unwrap_or_else(|e| e.into_inner());
        let c = *t;
        if reset {
            *t = Cost::default();
        }
        c
    };
    let d = PyDict::new(py);
    c.set_items(&d)?;
    Ok(d)
}

/// Whether `s` names a remote location (`http://`, `https://`, `s3://`).
#[pyfunction]
pub fn is_url(s: &str) -> bool {
    sc::remote::is_url(s)
}

/// The objects under the prefix `prefix` (`s3://bucket/folder/`), recursively, as (location,
/// size) sorted by key. An object whose key the library cannot read is left out with a
/// `UserWarning` naming it (escaped).
#[pyfunction]
pub fn list_prefix(py: Python<'_>, prefix: String) -> PyResult<Vec<(String, u64)>> {
    let listing = run(py, None, None, || {
        Ok(sc::remote::list_skipping(&prefix, &options())?)
    })?;
    for url in &listing.skipped {
        let shown = url.escape_debug();
        let text = format!(
            "skipping {shown}: its key is not one sc can read (a control character, or an \
             empty, \".\" or \"..\" part)"
        );
        let text = std::ffi::CString::new(text).unwrap_or_default();
        PyErr::warn(
            py,
            &py.get_type::<pyo3::exceptions::PyUserWarning>(),
            &text,
            1,
        )?;
    }
    Ok(listing.objects)
}

/// The whole object at `url` (a small one: a config file, an index).
#[pyfunction]
pub fn fetch(py: Python<'_>, url: String) -> PyResult<Py<PyBytes>> {
    let bytes = run(py, None, None, || {
        let start = Instant::now();
        let mut f = RemoteFile::open(&url, &options())?;
        let mut out = Vec::new();
        f.read_to_end(&mut out).map_err(sc::Error::from)?;
        record(Cost::of(f.stats(), start.elapsed()));
        Ok(out)
    })?;
    Ok(PyBytes::new(py, &bytes).unbind())
}

/// The HTTP status a remote error reports ("not found (404)"), if any.
pub fn status_of(e: &sc::Error) -> Option<u16> {
    match e {
        sc::Error::Remote { reason, .. } => {
            let (_, rest) = reason.rsplit_once('(')?;
            rest.strip_suffix(')')?.parse().ok()
        }
        _ => None,
    }
}

/// The Python exception for a remote error: FileNotFoundError for a 404, PermissionError for a
/// 403 (each naming the location), `ScError` with the one-line message otherwise.
pub fn remote_error(e: &sc::Error) -> Option<PyErr> {
    let sc::Error::Remote { location, reason } = e else {
        return None;
    };
    let errno = match status_of(e) {
        Some(404) => 2,
        Some(403) => 13,
        _ => return Some(ScError::new_err(e.to_string())),
    };
    Some(pyo3::exceptions::PyOSError::new_err((
        errno,
        reason.clone(),
        location.clone(),
    )))
}

/// Writes a new object at `dst` with `write`, uploaded as it is written and visible only once
/// complete (an error aborts the upload); without `overwrite`, an existing object is an error.
pub fn encode_to_url<T>(
    dst: &str,
    overwrite: bool,
    write: impl FnOnce(&mut io::BufWriter<&mut sc::remote::Upload>) -> Res<T>,
) -> Res<T> {
    let start = Instant::now();
    if !overwrite && sc::remote::Upload::exists(dst, &options())? {
        return Err(Failure::Py(pyo3::exceptions::PyFileExistsError::new_err((
            17,
            "File exists",
            dst.to_string(),
        ))));
    }
    // Without `overwrite`, the upload also refuses to complete over an object that appeared
    // while it was sent.
    let mut upload = match overwrite {
        true => sc::remote::Upload::create(dst, &options())?,
        false => sc::remote::Upload::create_new(dst, &options())?,
    };
    let out = {
        let mut w = io::BufWriter::with_capacity(8 << 20, &mut upload);
        let out = write(&mut w)?;
        w.flush().map_err(sc::Error::from)?;
        out
    };
    let sent = upload.finish()?;
    record(Cost::of(sent, start.elapsed()));
    Ok(out)
}

/// The remote options, stopped by `cancel`.
fn options_until(cancel: &sc::Cancel) -> RemoteOptions {
    let mut o = options();
    o.cancel = Some(cancel.clone());
    o
}

/// The object at `src` copied into an unnamed temporary file (for encoding, which finds
/// repeated tensors by reading its input twice), until `cancel` is set.
pub fn spool(src: &str, cancel: &sc::Cancel) -> Res<std::fs::File> {
    let start = Instant::now();
    let f = RemoteFile::open(src, &options_until(cancel))?;
    let mut tmp = tempfile::tempfile().map_err(sc::Error::from)?;
    // Large reads: each refill is one range request.
    let mut r = io::BufReader::with_capacity(16 << 20, f);
    io::copy(&mut r, &mut tmp).map_err(sc::Error::from)?;
    record(Cost::of(r.get_ref().stats(), start.elapsed()));
    Ok(tmp)
}

/// Decodes the remote archive `src` into `out`, checking every block (and the recorded MD5
/// with `check_md5`), until `cancel` is set.
pub fn decode_url(
    src: &str,
    out: impl Write + Send,
    check_md5: bool,
    base: Option<&sc::Base>,
    cancel: &sc::Cancel,
) -> Res<sc::DecodeReport> {
    let start = Instant::now();
    let opts = sc::DecodeOptions {
        check_md5,
        base,
        map: false,
        cancel: Some(cancel),
        ..Default::default()
    };
    let (report, s) = sc::decode_url(src, out, &opts, &options_until(cancel))?;
    record(Cost::of(s, start.elapsed()));
    Ok(report)
}
