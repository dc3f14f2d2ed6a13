//! `sc._sc.Reader`: an archive opened once, from a path, a remote location or bytes, for
//! reading tensors straight into buffers Python allocated.

use super::*;

/// A tensor as Python sees it: name, dtype, shape, and its bytes' start and end in the original
/// file.
type TensorRow = (String, String, Vec<u64>, u64, u64);

/// An archive opened for reading tensors (`sc.safe_open` and the `load` functions use it).
#[pyclass(module = "sc._sc")]
pub struct Reader {
    archive: Mutex<Option<sc::Archive<sc::Source>>>,
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
        f: impl FnOnce(&mut sc::Archive<sc::Source>) -> Res<T> + Send,
    ) -> PyResult<T> {
        run(py, self.pool.as_deref(), self.path.as_deref(), || {
            let mut guard = self.archive.lock().unwrap_or_else(|e| e.into_inner());
            let Some(opened) = guard.as_mut() else {
                return Err(invalid("the archive is closed".into()));
            };
            let before = opened.remote_stats();
            let start = Instant::now();
            let out = f(&mut *opened);
            if let (Some(before), Some(after)) = (before, opened.remote_stats()) {
                let c = remote::Cost::of(remote::delta(before, after), start.elapsed());
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
        let (at, path) = match source.cast::<PyBytes>() {
            Ok(b) => (sc::Location::Bytes(b.as_bytes().into()), None),
            Err(_) => {
                let p: PathBuf = source.extract()?;
                (sc::Location::parse(&p), Some(p))
            }
        };
        let (archive, cost) = run(py, None, path.as_deref(), || {
            let start = Instant::now();
            let mut opts = open_options();
            opts.base = base_for(base.as_deref(), Some(&at))?;
            let archive = sc::Archive::open_at(&at, &opts)?;
            let cost = archive.remote_stats().map(|s| {
                let cost = remote::Cost::of(s, start.elapsed());
                remote::record(cost);
                cost
            });
            Ok((archive, cost.unwrap_or_default()))
        })?;
        Ok(Reader {
            archive: Mutex::new(Some(archive)),
            pool,
            path,
            cost: Mutex::new(cost),
        })
    }

    /// The tensors as (name, dtype, shape, start, end), ordered by where their bytes lie in the
    /// original file (start and end are offsets in it); empty for a generic archive.
    fn tensors(&self, py: Python<'_>) -> PyResult<Vec<TensorRow>> {
        self.with(py, |a| {
            Ok(a.tensors()
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
                .collect())
        })
    }

    /// The kept safetensors header's JSON text, or None for a generic archive.
    fn header_json(&self, py: Python<'_>) -> PyResult<Option<String>> {
        self.with(py, |a| Ok(a.header_json().map(str::to_string)))
    }

    /// The kept header's metadata: a safetensors header's `__metadata__`, a GGUF header's
    /// key-values (values that are not strings as their JSON text), or None.
    fn metadata<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        // Made once within the archive, without the GIL; the dict is then built from it, not
        // from a copy (a tokenizer's vocabulary as text is megabytes).
        self.with(py, |a| Ok(a.metadata().is_some()))?;
        let guard = self.archive.lock().unwrap_or_else(|e| e.into_inner());
        let Some(archive) = guard.as_ref() else {
            return Err(PyValueError::new_err("the archive is closed"));
        };
        let Some(meta) = archive.metadata() else {
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
            self.with(py, |a| {
                Ok((
                    a.kind().name(),
                    a.mode().name(),
                    a.block_size(),
                    a.blocks(),
                    a.archive_len(),
                    a.original_len(),
                    a.base_name().map(str::to_string),
                ))
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
        let (s, remote) = self.with(py, |a| Ok((a.stats(), a.remote_stats().is_some())))?;
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
        self.with(py, move |a| {
            // SAFETY: each buffer is writable and C-contiguous, stays exported (so its memory
            // stays put) while `buffers` lives, and no two of them overlap (checked above).
            let mut parts: Vec<(u64, &mut [u8])> = targets
                .into_iter()
                .map(|(start, ptr, len)| unsafe {
                    (start, std::slice::from_raw_parts_mut(ptr as *mut u8, len))
                })
                .collect();
            Ok(a.read_ranges_into(&mut parts)?)
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
