//! Archives where weights live: `http://`, `https://` and `s3://` locations, read with range
//! requests ([`RemoteFile`], the reader under [`Archive::open_url`](crate::Archive::open_url))
//! and written with multipart uploads ([`Upload`]), through the `object_store` crate.
//!
//! S3 is configured from the usual environment: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
//! `AWS_SESSION_TOKEN`, `AWS_REGION` or `AWS_DEFAULT_REGION` (`us-east-1` when neither is set),
//! and for an S3-compatible store `AWS_ENDPOINT_URL` (path-style requests) with
//! `AWS_ALLOW_HTTP=true` when that endpoint is plain HTTP. Without an access key, requests go
//! unsigned (public buckets). An S3 endpoint's redirect to another host (or port) is refused,
//! so that no credential header (the signature, `x-amz-security-token`) leaves the endpoint.
//! A user name or password in a location (`https://user:pass@host/...`) is refused, and never
//! shown: locations in messages have the password masked ([`shown`]).
//!
//! An object is read as it was when opened: every request after the first is conditional on
//! the first answer's ETag (`If-Match`; `If-Unmodified-Since` where the server gives no ETag),
//! and each answer's ETag, date and length are compared with the first's, so that an object
//! replaced while it is read is an error ("changed while it was read"), never a mix of two.
//! A body is read no further than the bytes asked for.
//!
//! `object_store` is asynchronous; the requests run on one runtime of this module's own, and
//! everything the library shows stays synchronous. Each request is retried with exponential
//! backoff on server errors (5xx, 429) and dropped connections, a transfer cut short resuming
//! where it stopped ([`RemoteOptions::retries`], [`RemoteOptions::retry_timeout`]).

mod fetch;
mod list;
mod upload;

pub use fetch::RemoteFile;
pub use list::Listing;
pub use upload::{abort_unfinished, Upload};

use crate::cancel::Cancel;
use crate::error::{Error, Result};
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::client::{ClientConfigKey, HttpClient, HttpConnector, HttpError, HttpErrorKind};
use object_store::http::HttpBuilder;
use object_store::multipart::MultipartStore;
use object_store::path::Path;
use object_store::{BackoffConfig, ClientOptions, ObjectStore, RetryConfig};
use std::borrow::Cow;
use std::error::Error as _;
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
    /// A token that stops the reads in progress once set ([`Cancel`]): a read waiting for the
    /// network ends within 50 ms with [`Error::Cancelled`].
    pub cancel: Option<Cancel>,
}

impl Default for RemoteOptions {
    fn default() -> Self {
        RemoteOptions {
            connections: 4,
            retries: 10,
            retry_timeout: Duration::from_secs(180),
            timeout: Duration::from_secs(60),
            cancel: None,
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
    /// The most bytes a reader held at once: the start and end of the object it opened with,
    /// the pieces fetched ahead, and its last read outside them
    /// ([`RemoteFile::hold_at_most`] bounds it). 0 for uploads.
    pub most_held: u64,
}

/// Whether `s` names a remote location (`http://`, `https://`, `s3://`) rather than a path.
pub fn is_url(s: &str) -> bool {
    ["http://", "https://", "s3://"].iter().any(|scheme| {
        s.get(..scheme.len())
            .is_some_and(|p| p.eq_ignore_ascii_case(scheme))
    })
}

/// The objects under the prefix `prefix` (`s3://bucket/model/`), at any depth, sorted by
/// key: each object's location and size. Objects whose keys this library cannot read are left
/// out ([`list_skipping`] names them). Plain HTTP has no listing: an `http(s)://` prefix is an
/// error.
pub fn list(prefix: &str, opts: &RemoteOptions) -> Result<Vec<(String, u64)>> {
    Ok(list_skipping(prefix, opts)?.objects)
}

/// [`list`], and the locations of the objects left out because their keys are not ones this
/// library can read (a control character, or an empty, `.` or `..` part), for a note naming
/// them: one such object does not stop the listing.
pub fn list_skipping(prefix: &str, opts: &RemoteOptions) -> Result<Listing> {
    let loc = Location::parse(prefix, opts)?;
    let (Some(bucket), Some(s3)) = (&loc.bucket, &loc.s3) else {
        return Err(Error::InvalidArgument(format!(
            "{}: an http(s) location cannot be listed; name its files one by one",
            loc.url
        )));
    };
    list::list(&loc, s3, bucket)
}

/// Puts a small object at `key` of the bucket of the `s3://` location `bucket_url`, whatever
/// the key (a control character, an empty part): for tests of objects whose keys the rest of
/// the library refuses.
#[cfg(feature = "internals")]
#[doc(hidden)]
pub fn put_crafted(bucket_url: &str, key: &str, opts: &RemoteOptions) -> Result<()> {
    let loc = Location::parse(bucket_url, opts)?;
    let s3 = loc
        .s3
        .as_ref()
        .ok_or_else(|| Error::InvalidArgument("not s3://".into()))?;
    list::put(&loc, s3, key)
}

/// A location resolved: the store that holds it, and its path there.
#[derive(Clone)]
struct Location {
    store: Arc<dyn ObjectStore>,
    path: Path,
    /// The location as the caller named it, its password masked ([`shown`]), for messages.
    url: String,
    /// The bucket of an `s3://` location.
    bucket: Option<String>,
    /// The timeouts its requests run under, for messages.
    timeout: Duration,
    retry_timeout: Duration,
    /// The store of an `s3://` location, for multipart uploads ([`Upload`]).
    multipart: Option<Arc<dyn MultipartStore>>,
    /// What stops the waits for its answers.
    cancel: Option<Cancel>,
    /// What an `s3://` location's own requests (listings) need.
    s3: Option<Arc<list::S3Requests>>,
}

impl Location {
    /// Resolves `url`, making the store with `opts`'s timeouts and retries.
    fn parse(url: &str, opts: &RemoteOptions) -> Result<Location> {
        let bad = |why: &str| Error::Remote {
            location: shown(url).into_owned(),
            reason: one_line(why),
        };
        let parsed = url::Url::parse(url).map_err(|e| bad(&e.to_string()))?;
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(bad(
                "a user name or password in the location is not supported",
            ));
        }
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
            .with_connect_timeout(connect_timeout(opts.timeout))
            .with_pool_max_idle_per_host(opts.connections.max(1));
        let path = Path::from_url_path(parsed.path().trim_start_matches('/'))
            .map_err(|e| bad(&e.to_string()))?;
        let scheme = parsed.scheme().to_ascii_lowercase();
        let mut s3 = None;
        let (store, bucket, multipart): (Arc<dyn ObjectStore>, _, _) = match scheme.as_str() {
            "http" | "https" => {
                let origin = parsed[..url::Position::BeforePath].to_string();
                let store = HttpBuilder::new()
                    .with_url(origin.as_str())
                    .with_client_options(client.with_allow_http(scheme == "http"))
                    .with_retry(retry)
                    .build()
                    .map_err(|e| bad(&e.to_string()))?;
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
                    .with_http_connector(SameHost(opts.clone()))
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
                let config = |k| builder.get_config_value(&k);
                let region = config(AmazonS3ConfigKey::Region).unwrap_or_default();
                let bucket_url = match (
                    config(AmazonS3ConfigKey::Endpoint),
                    config(AmazonS3ConfigKey::VirtualHostedStyleRequest)
                        .is_some_and(|v| v == "true"),
                ) {
                    (Some(e), true) => e,
                    (Some(e), false) => format!("{}/{bucket}", e.trim_end_matches('/')),
                    (None, true) => format!("https://{bucket}.s3.{region}.amazonaws.com"),
                    (None, false) => format!("https://s3.{region}.amazonaws.com/{bucket}"),
                };
                let store = Arc::new(
                    builder
                        .with_skip_signature(!keyed)
                        .build()
                        .map_err(|e| bad(&e.to_string()))?,
                );
                s3 = Some(Arc::new(list::S3Requests {
                    store: store.clone(),
                    client: s3_client(opts, allow_http).map_err(|e| bad(&e.to_string()))?,
                    bucket_url,
                    region,
                    signed: keyed,
                }));
                let multipart: Arc<dyn MultipartStore> = store.clone();
                (store, Some(bucket), Some(multipart))
            }
            _ => return Err(bad("not an http://, https:// or s3:// location")),
        };
        Ok(Location {
            store,
            path,
            url: shown(url).into_owned(),
            bucket,
            timeout: opts.timeout,
            retry_timeout: opts.retry_timeout,
            multipart,
            cancel: opts.cancel.clone(),
            s3,
        })
    }

    /// One line saying what went wrong with a request here ([`remote_error`]), a timeout
    /// naming the timeout it ran past.
    fn error(&self, e: object_store::Error) -> Error {
        failure(&self.url, e, Some(self))
    }
}

/// `url` as messages show it: a password in it masked (`https://user:***@host/...`).
pub fn shown(url: &str) -> Cow<'_, str> {
    let Some(at) = url.find("://").map(|at| at + 3) else {
        return Cow::Borrowed(url);
    };
    let rest = &url[at..];
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    let Some(user_end) = authority.rfind('@') else {
        return Cow::Borrowed(url);
    };
    match authority[..user_end].find(':') {
        Some(colon) => Cow::Owned(format!(
            "{}***{}",
            &url[..at + colon + 1],
            &url[at + user_end..]
        )),
        None => Cow::Borrowed(url),
    }
}

/// Makes the HTTP client of an S3 store: `object_store`'s settings as [`Location::parse`]
/// gives them (timeouts, pool, plain HTTP only where allowed, no decompression), and
/// redirects followed only within the endpoint's scheme, host and port, since the headers
/// that sign a request (`x-amz-security-token` among them) would go along.
#[derive(Debug)]
struct SameHost(RemoteOptions);

/// Redirects an S3 request follows at most (within its endpoint).
const MAX_REDIRECTS: usize = 10;

impl HttpConnector for SameHost {
    fn connect(&self, options: &ClientOptions) -> object_store::Result<HttpClient> {
        let allow_http = options
            .get_config_value(&ClientConfigKey::AllowHttp)
            .is_some_and(|v| v == "true");
        let client = s3_client(&self.0, allow_http).map_err(|e| object_store::Error::Generic {
            store: "S3",
            source: Box::new(e),
        })?;
        Ok(HttpClient::new(client))
    }
}

/// The HTTP client of an S3 store ([`SameHost`]): `opts`'s timeouts and pool, plain HTTP
/// only where allowed, no decompression, and redirects followed only within the endpoint's
/// scheme, host and port.
fn s3_client(opts: &RemoteOptions, allow_http: bool) -> reqwest::Result<reqwest::Client> {
    let same_origin = reqwest::redirect::Policy::custom(|attempt| {
        let origin = |u: &url::Url| {
            (
                u.scheme().to_string(),
                u.host_str().map(str::to_string),
                u.port_or_known_default(),
            )
        };
        let first = attempt.previous().first().map(origin);
        if first.is_some_and(|f| f != origin(attempt.url())) {
            attempt.error("the S3 endpoint redirected to another host, which is refused: the request's credentials would go along")
        } else if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error("too many redirects")
        } else {
            attempt.follow()
        }
    });
    reqwest::Client::builder()
        .user_agent(concat!("sc/", env!("CARGO_PKG_VERSION")))
        .timeout(opts.timeout)
        .connect_timeout(connect_timeout(opts.timeout))
        .pool_max_idle_per_host(opts.connections.max(1))
        .no_gzip()
        .no_brotli()
        .no_zstd()
        .no_deflate()
        .https_only(!allow_http)
        .redirect(same_origin)
        .build()
}

/// The longest a connection may take to open, for requests that may take `timeout`.
fn connect_timeout(timeout: Duration) -> Duration {
    timeout.min(Duration::from_secs(10))
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

/// How often a wait for an answer looks at its [`Cancel`] token.
const CANCEL_POLL: Duration = Duration::from_millis(50);

/// Runs `work` on the runtime to its end, or until `cancel` is set ([`Error::Cancelled`]),
/// when the wait gives up on it.
fn block_on<F: std::future::Future>(cancel: Option<&Cancel>, work: F) -> Result<F::Output> {
    let rt = runtime()?;
    let Some(cancel) = cancel else {
        return Ok(rt.block_on(work));
    };
    rt.block_on(async {
        let mut work = std::pin::pin!(work);
        loop {
            cancel.check()?;
            if let Ok(done) = tokio::time::timeout(CANCEL_POLL, work.as_mut()).await {
                return Ok(done);
            }
        }
    })
}

/// What the requests to one location did so far, shared by everything reading or writing it.
#[derive(Debug)]
struct Counters {
    requests: AtomicU64,
    bytes: AtomicU64,
    wait_ns: AtomicU64,
    most_held: AtomicU64,
    opened: Instant,
}

impl Counters {
    fn new() -> Arc<Counters> {
        Arc::new(Counters {
            requests: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            wait_ns: AtomicU64::new(0),
            most_held: AtomicU64::new(0),
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

    /// A reader holds `bytes` now.
    fn held(&self, bytes: u64) {
        self.most_held.fetch_max(bytes, Ordering::Relaxed);
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
            most_held: self.most_held.load(Ordering::Relaxed),
        }
    }
}

/// One line saying what went wrong at `url`: a missing object and a refused one in the terms
/// of HTTP, anything else as the client says it.
fn remote_error(url: &str, e: object_store::Error) -> Error {
    failure(url, e, None)
}

/// [`remote_error`], a timeout naming the timeouts of `loc` when given.
fn failure(url: &str, e: object_store::Error, loc: Option<&Location>) -> Error {
    let reason = match &e {
        object_store::Error::NotFound { .. } => "not found (404)".to_string(),
        object_store::Error::PermissionDenied { .. }
        | object_store::Error::Unauthenticated { .. } => "access denied (403)".to_string(),
        object_store::Error::Precondition { .. } => CHANGED.to_string(),
        _ => cause(&e, loc).unwrap_or_else(|| one_line(&e.to_string())),
    };
    Error::Remote {
        location: url.to_string(),
        reason,
    }
}

/// What an object replaced while it is read is said to be.
const CHANGED: &str = "the object changed while it was read (its ETag, date or length is not \
                       the one it had when opened)";

/// The cause under a failed request, where the client's own words ("error sending request")
/// would hide it: a timeout (and which), or the operating system's error (connection refused).
fn cause(e: &(dyn std::error::Error + 'static), loc: Option<&Location>) -> Option<String> {
    let mut timed_out = false;
    let mut connecting = false;
    let mut os = None;
    let mut next = Some(e);
    while let Some(err) = next {
        if let Some(h) = err.downcast_ref::<HttpError>() {
            timed_out |= h.kind() == HttpErrorKind::Timeout;
            connecting |= h.kind() == HttpErrorKind::Connect;
        }
        if let Some(r) = err.downcast_ref::<reqwest::Error>() {
            timed_out |= r.is_timeout();
            connecting |= r.is_connect();
            // A redirect refused says why itself (`SameHost`).
            if let Some(why) = r.source().filter(|_| r.is_redirect()) {
                return Some(one_line(&why.to_string()));
            }
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            timed_out |= io.kind() == std::io::ErrorKind::TimedOut;
            os = Some(io.to_string());
        }
        next = err.source();
    }
    if timed_out {
        let which = match (connecting, loc) {
            (true, Some(l)) => format!(
                "the connect timeout ({} s)",
                connect_timeout(l.timeout).as_secs_f64()
            ),
            (true, None) => "the connect timeout".to_string(),
            (false, Some(l)) => format!(
                "the request timeout ({} s; retried within {} s)",
                l.timeout.as_secs_f64(),
                l.retry_timeout.as_secs_f64()
            ),
            (false, None) => "the request timeout".to_string(),
        };
        return Some(format!("timed out: no complete answer within {which}"));
    }
    let os = os?;
    let os = os.split(" (os error").next().unwrap_or(&os).to_lowercase();
    Some(match connecting {
        true => format!("cannot connect: {os}"),
        false => one_line(&os),
    })
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
