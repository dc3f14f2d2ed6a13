//! [`RemoteFile`]: a remote object read with range requests, fetching ahead what the reader
//! plans to read ([`Prefetch`]) over several connections.

use super::{block_on, runtime, Counters, Location, RemoteOptions, RemoteStats, CHANGED};
use crate::error::{Error, Result};
use crate::read::{join_adjacent, seek_position, Prefetch};
use bytes::Bytes;
use futures::StreamExt;
use object_store::{GetOptions, GetRange, ObjectMeta};
use std::collections::VecDeque;
use std::io::{self, Read, Seek, SeekFrom};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

/// Bytes of the end of the object fetched when it is opened: the trailer and the index of an
/// archive of up to ~8,000 blocks.
const TAIL: u64 = 256 << 10;
/// Bytes of the start of the object fetched when it is opened: the file header with a kept
/// safetensors header of up to ~250 KiB.
const HEAD: u64 = 256 << 10;
/// Least bytes fetched by a read outside the plan (the reader's small reads of one structure
/// then take one request).
const MIN_READ: u64 = 64 << 10;
/// The pieces a planned run of bytes is fetched in: four per connection, none shorter than the
/// least (fewer requests) and none longer than the most, so that the decoder starts on the
/// first piece while the next ones arrive instead of waiting for a large one.
const MIN_PIECE: u64 = 1 << 20;
const MAX_PIECE: u64 = 2 << 20;

/// A remote object (`http://`, `https://`, `s3://`) read with range requests: a [`Read`] and
/// [`Seek`] over it, so that it is the `R` of [`Archive`](crate::Archive)
/// ([`Archive::open_url`](crate::Archive::open_url)).
///
/// Opening it makes two requests, for its end and its start; every read after that is served
/// from bytes fetched ahead when the reader said what it would read, or from one
/// request of its own. Up to [`RemoteOptions::connections`] requests are in flight at once, and
/// twice as many pieces (of 1 to 2 MiB) are held ahead of the reader, or fewer and smaller
/// ones to fit [`RemoteFile::hold_at_most`].
pub struct RemoteFile {
    shared: Arc<Shared>,
    pos: u64,
}

/// What the readers of one open location share: the store, and what is fetched ahead.
pub(crate) struct Shared {
    loc: Location,
    /// The object as the first answer described it: every later request is conditional on it.
    version: Arc<ObjectMeta>,
    len: u64,
    connections: usize,
    /// Bytes of planned pieces held at once, requested or arrived ([`RemoteFile::hold_at_most`]).
    ahead: AtomicU64,
    /// Bytes of the object's start and end, held since it was opened.
    kept_len: u64,
    counters: Arc<Counters>,
    /// A permit per connection: the requests in flight.
    slots: Arc<Semaphore>,
    state: Mutex<State>,
}

/// The bytes a reader has at hand or coming.
#[derive(Default)]
struct State {
    /// The start and the end of the object, fetched when it was opened.
    kept: Vec<(u64, Bytes)>,
    /// The bytes of the last read outside the plan.
    last: Option<(u64, Bytes)>,
    /// Planned pieces not yet requested, in reading order.
    todo: VecDeque<Range<u64>>,
    /// Planned pieces requested, in reading order: in flight or arrived.
    started: VecDeque<Piece>,
}

/// A planned piece requested.
struct Piece {
    range: Range<u64>,
    data: Fetch,
}

enum Fetch {
    Pending(JoinHandle<Result<Bytes>>),
    Ready(Bytes),
}

impl Drop for Piece {
    fn drop(&mut self) {
        if let Fetch::Pending(task) = &self.data {
            task.abort();
        }
    }
}

impl RemoteFile {
    /// Opens the object at `url`: two requests, for its last and its first 256 KiB (which
    /// also tell its length and its version: later requests are conditional on that). A
    /// missing object, one the store refuses, or an answer of another length than asked, is
    /// [`Error::Remote`](crate::Error::Remote) naming it.
    pub fn open(url: &str, opts: &RemoteOptions) -> Result<RemoteFile> {
        let loc = Location::parse(url, opts)?;
        let counters = super::Counters::new();
        let cancel = loc.cancel.clone();
        let tail = get(loc.clone(), GetRange::Suffix(TAIL), None, counters.clone());
        let (tail_range, version, tail_bytes) = block_on(cancel.as_ref(), tail)??;
        let (len, version) = (version.size, Arc::new(version));
        let mut kept = vec![(tail_range.start, tail_bytes)];
        if tail_range.start > 0 {
            let range = GetRange::Bounded(0..HEAD.min(tail_range.start));
            let head = get(loc.clone(), range, Some(version.clone()), counters.clone());
            let (_, _, head) = block_on(cancel.as_ref(), head)??;
            kept.push((0, head));
        }
        let connections = opts.connections.max(1);
        let kept_len = kept.iter().map(|(_, b)| b.len() as u64).sum();
        counters.held(kept_len);
        let shared = Shared {
            loc,
            version,
            len,
            connections,
            ahead: AtomicU64::new(2 * connections as u64 * MAX_PIECE),
            kept_len,
            counters,
            slots: Arc::new(Semaphore::new(connections)),
            state: Mutex::new(State {
                kept,
                ..State::default()
            }),
        };
        Ok(RemoteFile {
            shared: Arc::new(shared),
            pos: 0,
        })
    }

    /// The object's length in bytes.
    pub fn len(&self) -> u64 {
        self.shared.len
    }

    /// Whether the object is empty.
    pub fn is_empty(&self) -> bool {
        self.shared.len == 0
    }

    /// What the requests to this location did so far.
    pub fn stats(&self) -> RemoteStats {
        self.shared.counters.stats()
    }

    /// Tells the reader that `ranges` will be read next, in this order: they are fetched
    /// ahead, over the connections, adjacent ones together. [`Archive`](crate::Archive) says
    /// it for every read; a plain copy of the object says `[0..len]`.
    pub fn will_read(&self, ranges: &[Range<u64>]) {
        self.shared.will_read(ranges);
    }

    /// Holds at most `bytes` in memory from now on, the object's start and end it opened with
    /// included: the pieces fetched ahead shrink, and fewer are fetched at once (reads are
    /// slower, never refused). The pieces get at least 64 KiB however small `bytes` is.
    /// Returns the most this reader will hold, which a memory budget should count.
    pub fn hold_at_most(&self, bytes: u64) -> u64 {
        let ahead = bytes.saturating_sub(self.shared.kept_len).max(MIN_READ);
        let ahead = ahead.min(2 * self.shared.connections as u64 * MAX_PIECE);
        self.shared.ahead.store(ahead, Ordering::Relaxed);
        self.shared.kept_len + ahead
    }

    /// What plans this reader's fetching ahead.
    pub(crate) fn prefetch(&self) -> Arc<dyn Prefetch> {
        self.shared.clone()
    }
}

impl Shared {
    fn lock(&self) -> io::Result<std::sync::MutexGuard<'_, State>> {
        self.state
            .lock()
            .map_err(|_| io::Error::other("remote reader poisoned"))
    }

    /// Requests `range` on the runtime, when a connection is free.
    fn spawn(&self, range: Range<u64>) -> io::Result<JoinHandle<Result<Bytes>>> {
        let rt = runtime().map_err(io::Error::other)?;
        let (loc, version) = (self.loc.clone(), self.version.clone());
        let (slots, counters) = (self.slots.clone(), self.counters.clone());
        Ok(rt.spawn(async move {
            // The semaphore is never closed.
            let _slot = slots.acquire_owned().await;
            let range = GetRange::Bounded(range);
            let (_, _, bytes) = get(loc, range, Some(version), counters).await?;
            Ok(bytes)
        }))
    }

    /// Waits for `task` (unless the reader is cancelled), counting the wait.
    fn wait(&self, task: &mut JoinHandle<Result<Bytes>>) -> io::Result<Bytes> {
        let since = Instant::now();
        let got = block_on(self.loc.cancel.as_ref(), task);
        self.counters.waited(since);
        got?.map_err(io::Error::other)?.map_err(io::Error::other)
    }

    /// Bytes `range`, fetched now.
    fn fetch_now(&self, range: Range<u64>) -> io::Result<Bytes> {
        let mut task = self.spawn(range)?;
        self.wait(&mut task)
    }

    /// Requests planned pieces until twice as many as there are connections are held ahead,
    /// or as many as fit the bytes it may hold ahead (one at least).
    fn fill(&self, st: &mut State) -> io::Result<()> {
        let ahead = self.ahead.load(Ordering::Relaxed);
        let mut held: u64 = st.started.iter().map(|p| p.range.end - p.range.start).sum();
        while st.started.len() < 2 * self.connections {
            let Some(next) = st.todo.front() else {
                break;
            };
            let len = next.end - next.start;
            if !st.started.is_empty() && held + len > ahead {
                break;
            }
            let Some(range) = st.todo.pop_front() else {
                break;
            };
            held += len;
            let task = self.spawn(range.clone())?;
            st.started.push_back(Piece {
                range,
                data: Fetch::Pending(task),
            });
        }
        self.count_held(st);
        Ok(())
    }

    /// Counts what the reader holds now towards [`RemoteStats::most_held`].
    fn count_held(&self, st: &State) {
        let pieces: u64 = st.started.iter().map(|p| p.range.end - p.range.start).sum();
        let last = st.last.as_ref().map_or(0, |(_, b)| b.len() as u64);
        self.counters.held(self.kept_len + pieces + last);
    }

    /// Fills `buf` from `pos` (in the object) as far as one piece of bytes goes.
    fn read_at(&self, pos: u64, buf: &mut [u8]) -> io::Result<usize> {
        crate::cancel::check(self.loc.cancel.as_ref())?;
        let mut st = self.lock()?;
        let copy = |start: u64, bytes: &Bytes, buf: &mut [u8]| {
            let from = (pos - start) as usize;
            let n = buf.len().min(bytes.len() - from);
            buf[..n].copy_from_slice(&bytes[from..from + n]);
            n
        };
        let at_hand = |(start, b): &&(u64, Bytes)| *start <= pos && pos < start + b.len() as u64;
        if let Some((start, bytes)) = st.kept.iter().chain(st.last.iter()).find(at_hand) {
            return Ok(copy(*start, bytes, buf));
        }
        // Pieces the reader has gone past are done with.
        while st.started.front().is_some_and(|p| p.range.end <= pos) {
            st.started.pop_front();
        }
        while st.started.is_empty() && st.todo.front().is_some_and(|r| r.end <= pos) {
            st.todo.pop_front();
        }
        self.fill(&mut st)?;
        if let Some(piece) = st.started.front_mut().filter(|p| p.range.start <= pos) {
            if let Fetch::Pending(task) = &mut piece.data {
                match self.wait(task) {
                    Ok(bytes) => piece.data = Fetch::Ready(bytes),
                    Err(e) => {
                        // A finished task is not waited for twice: the plan is dropped.
                        st.started.clear();
                        st.todo.clear();
                        return Err(e);
                    }
                }
            }
            if let Fetch::Ready(bytes) = &piece.data {
                let n = copy(piece.range.start, bytes, buf);
                return Ok(n);
            }
        }
        let end = self.len.min(pos + MIN_READ.max(buf.len() as u64));
        st.last = None;
        let bytes = self.fetch_now(pos..end)?;
        let n = copy(pos, &bytes, buf);
        st.last = Some((pos, bytes));
        self.count_held(&st);
        Ok(n)
    }
}

impl Prefetch for Shared {
    fn will_read(&self, ranges: &[Range<u64>]) {
        // Adjacent ranges make one run, and a run is fetched in pieces over the connections.
        let runs = join_adjacent(ranges.iter().filter(|r| r.start < r.end).cloned());
        // Two pieces at least fit what may be held ahead, so that one arrives while the
        // reader is on the other.
        let most = (self.ahead.load(Ordering::Relaxed) / 2).max(MIN_READ);
        let mut todo = VecDeque::new();
        for run in runs {
            let len = run.end - run.start;
            let piece = len
                .div_ceil(4 * self.connections as u64)
                .clamp(MIN_PIECE, MAX_PIECE)
                .min(most);
            let mut at = run.start;
            while at < run.end {
                let end = run.end.min(at + piece);
                todo.push_back(at..end);
                at = end;
            }
        }
        if let Ok(mut st) = self.lock() {
            st.started.clear();
            // The bytes of the last read outside the plan are done with.
            st.last = None;
            st.todo = todo;
            // Requested now, so that the first bytes are coming while the reader starts.
            let _ = self.fill(&mut st);
        }
    }

    fn read_again(&self, range: Range<u64>) -> io::Result<Vec<u8>> {
        self.fetch_now(range).map(Vec::from)
    }
}

impl Read for RemoteFile {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() || self.pos >= self.shared.len {
            return Ok(0);
        }
        let n = self.shared.read_at(self.pos, buf)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl Seek for RemoteFile {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        self.pos = seek_position(self.pos, self.shared.len, to)?;
        Ok(self.pos)
    }
}

/// Fetches `range` of the object at `loc`, conditional on `version` (the object as its first
/// answer described it) when given: the body is read no further than the bytes asked for,
/// and an answer of another length, or from another version of the object, is an error.
/// Returns the bytes' place in the object, what the answer said of the object, and the bytes.
async fn get(
    loc: Location,
    range: GetRange,
    version: Option<Arc<ObjectMeta>>,
    counters: Arc<Counters>,
) -> Result<(Range<u64>, ObjectMeta, Bytes)> {
    let v = version.as_deref();
    // A weak ETag never matches `If-Match`: such an object is held to its date instead.
    let strong = v
        .and_then(|v| v.e_tag.clone())
        .filter(|t| !t.starts_with("W/"));
    let dated = v
        .filter(|v| strong.is_none() && v.last_modified.timestamp() != 0)
        .map(|v| v.last_modified);
    let options = GetOptions {
        range: Some(range),
        if_match: strong,
        if_unmodified_since: dated,
        ..Default::default()
    };
    counters.request();
    let got = loc
        .store
        .get_opts(&loc.path, options)
        .await
        .map_err(|e| loc.error(e))?;
    if v.is_some_and(|v| !same_version(v, &got.meta)) {
        return Err(said(&loc, CHANGED.to_string()));
    }
    // `object_store` checked the answer's Content-Range against the range asked.
    let (range, meta) = (got.range.clone(), got.meta.clone());
    let want = range.end - range.start;
    let mut body = got.into_stream();
    let mut chunks = Vec::new();
    let mut have = 0u64;
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| loc.error(e))?;
        have += chunk.len() as u64;
        counters.moved(chunk.len() as u64);
        if have > want {
            let reason = format!(
                "the server sent more than the {want} bytes asked for (bytes {}..{}): a server error",
                range.start, range.end
            );
            return Err(said(&loc, reason));
        }
        chunks.push(chunk);
    }
    if have < want {
        let reason = format!(
            "the server sent {have} bytes for bytes {}..{}: a server error",
            range.start, range.end
        );
        return Err(said(&loc, reason));
    }
    let bytes = match chunks.len() {
        1 => chunks.swap_remove(0),
        _ => chunks.concat().into(),
    };
    Ok((range, meta, bytes))
}

/// Whether `now` describes the object `first` described: the same ETag where both have one,
/// else the same date; the same length either way.
fn same_version(first: &ObjectMeta, now: &ObjectMeta) -> bool {
    let same = match (&first.e_tag, &now.e_tag) {
        (Some(a), Some(b)) => a == b,
        _ => first.last_modified == now.last_modified,
    };
    same && first.size == now.size
}

/// The error `reason` at `loc`.
fn said(loc: &Location, reason: String) -> Error {
    Error::Remote {
        location: loc.url.clone(),
        reason,
    }
}
