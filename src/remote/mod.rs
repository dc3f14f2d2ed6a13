//! Archives where weights live: `http://`, `https://` and `s3://` locations, read with range
//! requests ([`RemoteFile`], the reader under [`Archive::open_url`](crate::Archive::open_url))
//! and written with multipart uploads ([`Upload`]), through the `object_store` crate.
//!
//! S3 is configured from the usual environment: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
//! `AWS_SESSION_TOKEN`, `AWS_REGION` or `AWS_DEFAULT_REGION` (`us-east-1` when neither is set),
//! and for an S3-compatible store `AWS_ENDPOINT_URL` (path-style requests) with
//! `AWS_ALLOW_HTTP=true` when that endpoint is plain HTTP. Without an access key, requests go
//! unsigned (public buckets).
//!
//! `object_store` is asynchronous; the requests run on one runtime of this module's own, and
//! everything the library shows stays synchronous. Each request is retried with exponential
//! backoff on server errors (5xx, 429) and dropped connections, a transfer cut short resuming
//! where it stopped ([`RemoteOptions::retries`], [`RemoteOptions::retry_timeout`]).

mod fetch;
mod upload;

pub use fetch::RemoteFile;
pub use upload::{abort_unfinished, Upload};

use crate::error::{Error, Result};
use futures::StreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::http::HttpBuilder;
use object_store::multipart::MultipartStore;
use object_store::path::Path;
use object_store::{BackoffConfig, ClientOptions, ObjectStore, RetryConfig};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;

/// How remote locations are read and written.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RemoteOptions {
    /// Range requests (or upload parts) in flight at once, each on a connection of its own:
    /// 4 by default.
    pub connections: usize,
    /// Times one request is retried after a server error (5xx, 429), a dropped connection or
    /// a timeout: 10 by default.
    pub retries: usize,
    /// No retry starts later than this after a request's first try: 3 minutes by default.
    pub retry_timeout: Duration,
    /// Longest time one request may take, connecting and transferring its range: 60 seconds
    /// by default.
    pub timeout: Duration,
}

impl Default for RemoteOptions {
    fn default() -> Self {
        RemoteOptions {
            connections: 4,
            retries: 10,
            retry_timeout: Duration::from_secs(180),
            timeout: Duration::from_secs(60),
        }
    }
}

impl RemoteOptions {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }
}

/// What the requests to one location did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct RemoteStats {
    /// Requests made: range requests for reads, parts (and the requests that start and
    /// complete them) for uploads. A request retried by the client counts once.
    pub requests: u64,
    /// Bytes received (for an upload: sent).
    pub bytes_fetched: u64,
    /// Time the reading thread waited for bytes that had not arrived yet.
    pub network_wait: Duration,
    /// Time since the location was opened: what is not `network_wait` of it went to decoding
    /// and to the caller.
    pub elapsed: Duration,
}

/// Whether `s` names a remote location (`http://`, `https://`, `s3://`) rather than a path.
pub fn is_url(s: &str) -> bool {
    ["http://", "https://", "s3://"].iter().any(|scheme| {
        s.get(..scheme.len())
            .is_some_and(|p| p.eq_ignore_ascii_case(scheme))
    })
}

/// The objects under the prefix `prefix` (`s3://bucket/model/`), at any depth, sorted by
/// key: each object's location and size. Plain HTTP has no listing: an `http(s)://` prefix
/// is an error.
pub fn list(prefix: &str, opts: &RemoteOptions) -> Result<Vec<(String, u64)>> {
    let loc = Location::parse(prefix, opts)?;
    let Some(bucket) = &loc.bucket else {
        return Err(Error::InvalidArgument(format!(
            "{prefix}: an http(s) location cannot be listed; name its files one by one"
        )));
    };
    let store = loc.store.clone();
    let path = loc.path.clone();
    let listed: Vec<object_store::ObjectMeta> = runtime()?
        .block_on(async move {
            store
                .list(Some(&path))
                .collect::<Vec<_>>()
                .await
                .into_iter()
                .collect::<std::result::Result<Vec<_>, _>>()
        })
        .map_err(|e| remote_error(prefix, e))?;
    let mut found: Vec<(String, u64)> = listed
        .into_iter()
        .map(|m| (format!("s3://{bucket}/{}", m.location), m.size))
        .collect();
    found.sort();
    Ok(found)
}

/// A location resolved: the store that holds it, and its path there.
struct Location {
    store: Arc<dyn ObjectStore>,
    path: Path,
    /// The location as the caller named it, for messages.
    url: String,
    /// The bucket of an `s3://` location.
    bucket: Option<String>,
    /// The store of an `s3://` location, for multipart uploads ([`Upload`]).
    multipart: Option<Arc<dyn MultipartStore>>,
}

impl Location {
    /// Resolves `url`, making the store with `opts`'s timeouts and retries.
    fn parse(url: &str, opts: &RemoteOptions) -> Result<Location> {
        let bad = |why: &str| Error::InvalidArgument(format!("{url}: {why}"));
        let parsed = url::Url::parse(url).map_err(|e| bad(&e.to_string()))?;
        let retry = RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_secs(5),
                base: 2.0,
            },
            max_retries: opts.retries,
            retry_timeout: opts.retry_timeout,
        };
        let client = ClientOptions::new()
            .with_timeout(opts.timeout)
            .with_connect_timeout(opts.timeout.min(Duration::from_secs(10)))
            .with_pool_max_idle_per_host(opts.connections.max(1));
        let path = Path::from_url_path(parsed.path().trim_start_matches('/'))
            .map_err(|e| bad(&e.to_string()))?;
        let scheme = parsed.scheme().to_ascii_lowercase();
        let (store, bucket, multipart): (Arc<dyn ObjectStore>, _, _) = match scheme.as_str() {
            "http" | "https" => {
                let origin = parsed[..url::Position::BeforePath].to_string();
                let store = HttpBuilder::new()
                    .with_url(origin.as_str())
                    .with_client_options(client.with_allow_http(scheme == "http"))
                    .with_retry(retry)
                    .build()
                    .map_err(|e| bad(&one_line(&e.to_string())))?;
                (Arc::new(store), None, None)
            }
            "s3" => {
                let bucket = parsed
                    .host_str()
                    .filter(|b| !b.is_empty())
                    .ok_or_else(|| bad("no bucket named"))?
                    .to_string();
                let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
                let allow_http = env("AWS_ALLOW_HTTP").is_some_and(|v| v == "true" || v == "1");
                let mut builder = AmazonS3Builder::from_env()
                    .with_bucket_name(&bucket)
                    .with_client_options(client.with_allow_http(allow_http))
                    .with_retry(retry);
                if env("AWS_REGION").is_none() && env("AWS_DEFAULT_REGION").is_none() {
                    builder = builder.with_region("us-east-1");
                }
                // Without keys in the environment the requests go unsigned, rather than
                // asking an instance-metadata service for credentials.
                let keyed = env("AWS_ACCESS_KEY_ID").is_some()
                    || env("AWS_WEB_IDENTITY_TOKEN_FILE").is_some()
                    || env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI").is_some()
                    || env("AWS_CONTAINER_CREDENTIALS_FULL_URI").is_some();
                let store = Arc::new(
                    builder
                        .with_skip_signature(!keyed)
                        .build()
                        .map_err(|e| bad(&one_line(&e.to_string())))?,
                );
                let multipart: Arc<dyn MultipartStore> = store.clone();
                (store, Some(bucket), Some(multipart))
            }
            _ => return Err(bad("not an http://, https:// or s3:// location")),
        };
        Ok(Location {
            store,
            path,
            url: url.to_string(),
            bucket,
            multipart,
        })
    }
}

/// The runtime every request runs on, started on first use.
fn runtime() -> Result<&'static Runtime> {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    if let Some(rt) = RUNTIME.get() {
        return Ok(rt);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("sc-remote")
        .enable_all()
        .build()?;
    // Two threads may have built one at once: one is kept, the other dropped.
    let _ = RUNTIME.set(rt);
    RUNTIME
        .get()
        .ok_or_else(|| Error::Io(std::io::Error::other("no runtime for remote requests")))
}

/// What the requests to one location did so far, shared by everything reading or writing it.
#[derive(Debug)]
struct Counters {
    requests: AtomicU64,
    bytes: AtomicU64,
    wait_ns: AtomicU64,
    opened: Instant,
}

impl Counters {
    fn new() -> Arc<Counters> {
        Arc::new(Counters {
            requests: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            wait_ns: AtomicU64::new(0),
            opened: Instant::now(),
        })
    }

    /// A request is made.
    fn request(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    /// `bytes` were received or sent.
    fn moved(&self, bytes: u64) {
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    fn waited(&self, since: Instant) {
        let ns = since.elapsed().as_nanos().min(u64::MAX as u128) as u64;
        self.wait_ns.fetch_add(ns, Ordering::Relaxed);
    }

    fn stats(&self) -> RemoteStats {
        RemoteStats {
            requests: self.requests.load(Ordering::Relaxed),
            bytes_fetched: self.bytes.load(Ordering::Relaxed),
            network_wait: Duration::from_nanos(self.wait_ns.load(Ordering::Relaxed)),
            elapsed: self.opened.elapsed(),
        }
    }
}

/// One line saying what went wrong at `url`: a missing object and a refused one in the terms
/// of HTTP, anything else as the client says it.
fn remote_error(url: &str, e: object_store::Error) -> Error {
    let reason = match &e {
        object_store::Error::NotFound { .. } => "not found (404)".to_string(),
        object_store::Error::PermissionDenied { .. }
        | object_store::Error::Unauthenticated { .. } => "access denied (403)".to_string(),
        _ => one_line(&e.to_string()),
    };
    Error::Remote {
        location: url.to_string(),
        reason,
    }
}

/// [`remote_error`] as an I/O error, for the readers and writers, keeping its kind.
fn io_error(url: &str, e: object_store::Error) -> std::io::Error {
    use std::io::ErrorKind;
    let kind = match &e {
        object_store::Error::NotFound { .. } => ErrorKind::NotFound,
        object_store::Error::PermissionDenied { .. }
        | object_store::Error::Unauthenticated { .. } => ErrorKind::PermissionDenied,
        _ => ErrorKind::Other,
    };
    std::io::Error::new(kind, remote_error(url, e))
}

/// `text` on one line, and not much longer than one (servers put whole pages in errors).
fn one_line(text: &str) -> String {
    let line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(300) {
        Some((at, _)) => format!("{}...", &line[..at]),
        None => line,
    }
}
