//! [`Upload`]: an object written to S3 as a multipart upload, visible only once complete.

use super::{io_error, remote_error, runtime, Counters, Location, RemoteOptions, RemoteStats};
use crate::error::{Error, Result};
use object_store::{ObjectStoreExt, WriteMultipart};
use std::io::{self, Write};
use std::sync::Arc;

/// Bytes of each part (S3 wants at least 5 MiB in every part but the last).
const PART: usize = 8 << 20;

/// An object written to an `s3://` location as a streaming multipart upload: a [`Write`]
/// whose bytes go out in parts of 8 MiB, [`RemoteOptions::connections`] at once (so at most
/// that many parts are held in memory). Nothing is visible at the location until
/// [`Upload::finish`] succeeds; an upload dropped without it, or after a failed write, is
/// aborted and its parts deleted.
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
    parts: Option<WriteMultipart>,
    url: String,
    connections: usize,
    counters: Arc<Counters>,
}

impl Upload {
    /// Starts a multipart upload to `url`, which must be an `s3://` location.
    pub fn create(url: &str, opts: &RemoteOptions) -> Result<Upload> {
        let loc = Location::parse(url, opts)?;
        if loc.bucket.is_none() {
            return Err(Error::InvalidArgument(format!(
                "{url}: uploads go to s3:// locations, not http(s)"
            )));
        }
        let counters = Counters::new();
        counters.request();
        let upload = runtime()?
            .block_on(loc.store.put_multipart(&loc.path))
            .map_err(|e| remote_error(url, e))?;
        Ok(Upload {
            parts: Some(WriteMultipart::new_with_chunk_size(upload, PART)),
            url: url.to_string(),
            connections: opts.connections.max(1),
            counters,
        })
    }

    /// Whether an object exists at the `s3://` location `url`.
    pub fn exists(url: &str, opts: &RemoteOptions) -> Result<bool> {
        let loc = Location::parse(url, opts)?;
        match runtime()?.block_on(loc.store.head(&loc.path)) {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(remote_error(url, e)),
        }
    }

    /// Completes the upload: the object appears at its location, whole. Returns what the
    /// requests did.
    pub fn finish(mut self) -> Result<RemoteStats> {
        let parts = self.parts.take().ok_or_else(|| self.aborted())?;
        self.counters.request();
        runtime()?
            .block_on(parts.finish())
            .map_err(|e| remote_error(&self.url, e))?;
        Ok(self.counters.stats())
    }

    /// What the requests did so far.
    pub fn stats(&self) -> RemoteStats {
        self.counters.stats()
    }

    fn aborted(&self) -> Error {
        Error::Remote {
            location: self.url.clone(),
            reason: "the upload was aborted after a failed write".into(),
        }
    }

    /// Aborts the upload, if it is still going.
    fn abort(&mut self) {
        if let (Some(parts), Ok(rt)) = (self.parts.take(), runtime()) {
            // Nothing is visible either way; an abort that fails leaves parts the store
            // expires by its own rules.
            let _ = rt.block_on(parts.abort());
        }
    }
}

impl Write for Upload {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let rt = runtime().map_err(io::Error::other)?;
        let Some(parts) = self.parts.as_mut() else {
            return Err(io::Error::other(self.aborted()));
        };
        // At most `connections` parts are held: sent, or being sent.
        if let Err(e) = rt.block_on(parts.wait_for_capacity(self.connections)) {
            self.abort();
            return Err(io_error(&self.url, e));
        }
        let take = buf.len().min(PART);
        let before = self.counters.stats().bytes_fetched / PART as u64;
        if let Some(parts) = self.parts.as_mut() {
            // Parts are sent by tasks spawned on the runtime.
            let _on_runtime = rt.enter();
            parts.write(&buf[..take]);
        }
        self.counters.moved(take as u64);
        let after = self.counters.stats().bytes_fetched / PART as u64;
        for _ in before..after {
            self.counters.request();
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
