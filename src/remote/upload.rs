//! [`Upload`]: an object written to S3 as a multipart upload, visible only once complete.

use super::{io_error, remote_error, runtime, Counters, Location, RemoteOptions, RemoteStats};
use crate::error::{Error, Result};
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path;
use object_store::{MultipartId, ObjectStoreExt, PutPayload};
use std::collections::VecDeque;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::task::JoinHandle;

/// Bytes of each part (S3 wants at least 5 MiB in every part but the last).
const PART: usize = 8 << 20;

/// The longest [`abort_unfinished`] waits for the store to confirm one abort.
const ABORT_WAIT: Duration = Duration::from_secs(10);

/// A multipart upload begun at the store: what completing or aborting it takes.
#[derive(Clone)]
struct Begun {
    /// Which [`Upload`] it is, in [`BEGUN`].
    key: u64,
    store: Arc<dyn MultipartStore>,
    path: Path,
    id: MultipartId,
}

/// The uploads begun and neither completed nor aborted, for [`abort_unfinished`].
static BEGUN: Mutex<Vec<Begun>> = Mutex::new(Vec::new());

/// Set by [`abort_unfinished`]: no upload begins or completes afterwards.
static CLOSED: AtomicBool = AtomicBool::new(false);

fn begun() -> MutexGuard<'static, Vec<Begun>> {
    BEGUN.lock().unwrap_or_else(|e| e.into_inner())
}

/// Aborts every [`Upload`] of this process not yet completed nor aborted, deleting the parts
/// sent, for a process about to exit on a signal (waiting at most 10 seconds for the store to
/// answer). Uploads cannot begin nor complete afterwards. An upload whose process is killed
/// before this runs (SIGKILL) stays at the store, invisible to listings of objects, until the
/// store's lifecycle rule (`AbortIncompleteMultipartUpload`) expires it or it is aborted by
/// hand (`aws s3api list-multipart-uploads` and `abort-multipart-upload`).
pub fn abort_unfinished() {
    let uploads = {
        let mut begun = begun();
        CLOSED.store(true, Ordering::SeqCst);
        std::mem::take(&mut *begun)
    };
    if uploads.is_empty() {
        return;
    }
    let Ok(rt) = runtime() else { return };
    // The timeouts are made inside the runtime, whose timer they need.
    rt.block_on(async {
        let aborts = uploads
            .iter()
            .map(|b| tokio::time::timeout(ABORT_WAIT, b.store.abort_multipart(&b.path, &b.id)));
        futures::future::join_all(aborts).await
    });
}

/// An object written to an `s3://` location as a streaming multipart upload: a [`Write`]
/// whose bytes go out in parts of 8 MiB, [`RemoteOptions::connections`] at once (so at most
/// that many parts, and the one being filled, are held in memory). Nothing is visible at the
/// location until [`Upload::finish`] succeeds; an upload dropped without it, or after a
/// failed write, is aborted and its parts deleted, and so is every upload of a process when
/// [`abort_unfinished`] runs.
///
/// ```no_run
/// let opts = sc::remote::RemoteOptions::default();
/// let mut upload = sc::remote::Upload::create("s3://bucket/model.safetensors.sc", &opts)?;
/// let input = std::fs::File::open("model.safetensors")?;
/// sc::encode(input, &mut upload, &sc::EncodeOptions::default())?;
/// upload.finish()?;
/// # Ok::<(), sc::Error>(())
/// ```
pub struct Upload {
    /// `None` once finished or aborted.
    begun: Option<Begun>,
    /// The part being filled.
    buf: Vec<u8>,
    /// The parts being sent, in order.
    sending: VecDeque<JoinHandle<object_store::Result<PartId>>>,
    /// The parts sent, in order.
    sent: Vec<PartId>,
    url: String,
    connections: usize,
    counters: Arc<Counters>,
    /// Made by [`Upload::create_new`]: the store (for its `head`) to look at before completing.
    new_only: Option<Location>,
}

impl Upload {
    /// Starts a multipart upload to `url`, which must be an `s3://` location.
    pub fn create(url: &str, opts: &RemoteOptions) -> Result<Upload> {
        Upload::begin(url, opts, false)
    }

    /// [`Upload::create`] for a location where no object may be replaced: it fails where one
    /// exists, and [`Upload::finish`] looks again just before completing, aborting the upload
    /// if one appeared meanwhile. Between that last look and the completion another uploader
    /// can still complete first, and be replaced: `object_store` 0.14 completes multipart
    /// uploads unconditionally (its `PutMultipartOptions` has no `PutMode`, and the
    /// `If-None-Match` completion it uses for copies is not public).
    pub fn create_new(url: &str, opts: &RemoteOptions) -> Result<Upload> {
        if Upload::exists(url, opts)? {
            return Err(Error::Remote {
                location: url.to_string(),
                reason: "already exists".into(),
            });
        }
        Upload::begin(url, opts, true)
    }

    fn begin(url: &str, opts: &RemoteOptions, new_only: bool) -> Result<Upload> {
        let loc = Location::parse(url, opts)?;
        let Some(store) = loc.multipart.clone() else {
            return Err(Error::InvalidArgument(format!(
                "{url}: uploads go to s3:// locations, not http(s)"
            )));
        };
        let counters = Counters::new();
        counters.request();
        let id = runtime()?
            .block_on(store.create_multipart(&loc.path))
            .map_err(|e| remote_error(url, e))?;
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let b = Begun {
            key: NEXT.fetch_add(1, Ordering::Relaxed),
            store,
            path: loc.path.clone(),
            id,
        };
        let mut upload = Upload {
            begun: None,
            buf: Vec::new(),
            sending: VecDeque::new(),
            sent: Vec::new(),
            url: url.to_string(),
            connections: opts.connections.max(1),
            counters,
            new_only: new_only.then_some(loc),
        };
        {
            let mut all = begun();
            if !CLOSED.load(Ordering::SeqCst) {
                all.push(b.clone());
                upload.begun = Some(b);
                return Ok(upload);
            }
        }
        let _ = runtime()?.block_on(b.store.abort_multipart(&b.path, &b.id));
        Err(upload.aborted())
    }

    /// Whether an object exists at the `s3://` location `url`.
    pub fn exists(url: &str, opts: &RemoteOptions) -> Result<bool> {
        found(&Location::parse(url, opts)?)
    }

    /// Completes the upload: the object appears at its location, whole. Returns what the
    /// requests did.
    pub fn finish(mut self) -> Result<RemoteStats> {
        if self.begun.is_none() {
            return Err(self.aborted());
        }
        let rt = runtime()?;
        if !self.buf.is_empty() {
            self.send_part(rt).map_err(Error::Io)?;
        }
        while !self.sending.is_empty() {
            self.wait_oldest(rt).map_err(Error::Io)?;
        }
        // Taken from the uploads `abort_unfinished` aborts: it aborted this one if it is gone.
        let Some(b) = self.begun.take().filter(withdraw) else {
            return Err(self.aborted());
        };
        if let Some(loc) = &self.new_only {
            let appeared = found(loc);
            if !matches!(appeared, Ok(false)) {
                let _ = rt.block_on(b.store.abort_multipart(&b.path, &b.id));
                appeared?;
                return Err(Error::Remote {
                    location: self.url.clone(),
                    reason: "an object appeared there during the upload; not replaced".into(),
                });
            }
        }
        self.counters.request();
        let parts = std::mem::take(&mut self.sent);
        if let Err(e) = rt.block_on(b.store.complete_multipart(&b.path, &b.id, parts)) {
            let _ = rt.block_on(b.store.abort_multipart(&b.path, &b.id));
            return Err(remote_error(&self.url, e));
        }
        Ok(self.counters.stats())
    }

    /// What the requests did so far.
    pub fn stats(&self) -> RemoteStats {
        self.counters.stats()
    }

    fn aborted(&self) -> Error {
        Error::Remote {
            location: self.url.clone(),
            reason: "the upload was aborted (a failed write, or the process exiting)".into(),
        }
    }

    /// Sends the part filled, after waiting for room among the parts in flight.
    fn send_part(&mut self, rt: &tokio::runtime::Runtime) -> io::Result<()> {
        while self.sending.len() >= self.connections {
            self.wait_oldest(rt)?;
        }
        let Some(b) = self.begun.clone() else {
            return Err(io::Error::other(self.aborted()));
        };
        let idx = self.sent.len() + self.sending.len();
        let payload = PutPayload::from(std::mem::take(&mut self.buf));
        self.counters.request();
        self.counters.moved(payload.content_length() as u64);
        self.sending.push_back(
            rt.spawn(async move { b.store.put_part(&b.path, &b.id, idx, payload).await }),
        );
        Ok(())
    }

    /// Waits for the oldest part in flight; a failed part aborts the upload.
    fn wait_oldest(&mut self, rt: &tokio::runtime::Runtime) -> io::Result<()> {
        let Some(part) = self.sending.pop_front() else {
            return Ok(());
        };
        let e = match rt.block_on(part) {
            Ok(Ok(id)) => {
                self.sent.push(id);
                return Ok(());
            }
            Ok(Err(e)) => io_error(&self.url, e),
            Err(e) => io::Error::other(e),
        };
        self.abort();
        Err(e)
    }

    /// Aborts the upload, if it is still going.
    fn abort(&mut self) {
        let Some(b) = self.begun.take() else { return };
        for part in self.sending.drain(..) {
            part.abort();
        }
        if let (true, Ok(rt)) = (withdraw(&b), runtime()) {
            // Nothing is visible either way; an abort that fails leaves parts the store
            // expires by its own rules.
            let _ = rt.block_on(b.store.abort_multipart(&b.path, &b.id));
        }
    }
}

/// Takes `b` out of the uploads [`abort_unfinished`] would abort; false if it is no longer
/// there (`abort_unfinished` took it, and aborted it).
fn withdraw(b: &Begun) -> bool {
    let mut all = begun();
    let at = all.iter().position(|x| x.key == b.key);
    at.map(|at| all.swap_remove(at)).is_some()
}

/// Whether an object exists at `loc`.
fn found(loc: &Location) -> Result<bool> {
    match runtime()?.block_on(loc.store.head(&loc.path)) {
        Ok(_) => Ok(true),
        Err(object_store::Error::NotFound { .. }) => Ok(false),
        Err(e) => Err(remote_error(&loc.url, e)),
    }
}

impl Write for Upload {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.begun.is_none() {
            return Err(io::Error::other(self.aborted()));
        }
        if self.buf.capacity() == 0 {
            self.buf.reserve_exact(PART);
        }
        let take = buf.len().min(PART - self.buf.len());
        self.buf.extend_from_slice(&buf[..take]);
        if self.buf.len() == PART {
            let rt = runtime().map_err(io::Error::other)?;
            self.send_part(rt)?;
        }
        Ok(take)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for Upload {
    fn drop(&mut self) {
        self.abort();
    }
}
