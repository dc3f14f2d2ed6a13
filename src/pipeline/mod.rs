//! The streaming pipeline: read blocks in order, code them in parallel on the current rayon
//! pool, write them in order. Memory is bounded by the window of blocks in flight, never by the
//! file.

pub mod block;
pub mod decode;
pub mod digest;
pub mod encode;
mod mapped;
pub mod plan;
pub mod pool;

use std::collections::VecDeque;
use std::sync::mpsc::{channel, Receiver};
use std::time::Duration;

/// Runs `f` on a pool of `threads` threads made for the call, or on the current pool for 0.
pub(crate) fn on_threads<T: Send>(
    threads: usize,
    f: impl FnOnce() -> crate::Result<T> + Send,
) -> crate::Result<T> {
    if threads == 0 {
        return f();
    }
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(std::io::Error::other)?
        .install(f)
}

/// Blocks in flight: enough that every worker always has a block to code while the calling
/// thread reads and writes, few enough to bound memory to a few blocks per worker.
pub(crate) fn window() -> usize {
    rayon::current_num_threads() * 2 + 2
}

/// The pools of one pipeline run.
///
/// Blocks and their coded forms differ in size, so each kind has a pool of its own: a coded
/// buffer reused for a block would be grown, and the growth zeroed, block after block.
pub(crate) struct Pools {
    /// Buffers of original block bytes.
    pub(crate) blocks: pool::Pool<Vec<u8>>,
    /// Buffers of coded blocks (record and payloads, or payloads alone).
    pub(crate) coded: pool::Pool<Vec<u8>>,
    /// One scratch per worker.
    pub(crate) scratch: pool::Pool<block::Scratch>,
}

/// The pools of one pipeline run, with room for every block in flight (blocks: also those
/// queued for the MD5 thread).
pub(crate) fn pools() -> Pools {
    Pools {
        blocks: pool::Pool::new(window() * 2 + 2),
        coded: pool::Pool::new(window() + 2),
        scratch: pool::Pool::new(rayon::current_num_threads() + 1),
    }
}

/// A coded unit, or the panic of the worker that coded it (re-raised on the calling thread).
type Outcome<C> = std::thread::Result<C>;

/// Runs an ordered pipeline. `read` yields units on the calling thread until it returns `None`;
/// each goes to `code` on the rayon pool as soon as it is read, with at most `window` units
/// read but not yet written; `write` gets the coded units in reading order, on the calling
/// thread, as soon as each one and all before it are done.
///
/// A slow block holds back only the writing, never the workers. Safe to call from inside the pool (folders code several files at once): while it waits,
/// the calling thread runs queued work instead of blocking a worker. After an error nothing
/// more is read or written, and the units in flight are waited for.
pub(crate) fn ordered<B: Send, C: Send>(
    window: usize,
    read: &mut dyn FnMut() -> crate::Result<Option<B>>,
    code: &(dyn Fn(B) -> C + Sync),
    write: &mut dyn FnMut(C) -> crate::Result<()>,
) -> crate::Result<()> {
    let (tx, rx) = channel::<(usize, Outcome<C>)>();
    rayon::in_place_scope(|s| {
        // `done[i]` is unit `written + i`, once coded.
        let mut done: VecDeque<Option<C>> = VecDeque::new();
        let (mut sent, mut written) = (0usize, 0usize);
        let mut read_all = false;
        let mut result = Ok(());
        loop {
            while result.is_ok() && !read_all && done.len() < window.max(1) {
                match read() {
                    Ok(Some(unit)) => {
                        let (tx, seq) = (tx.clone(), sent);
                        sent += 1;
                        done.push_back(None);
                        s.spawn(move |_| {
                            let coded =
                                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                                    code(unit)
                                }));
                            // The receiver outlives the scope, so the send cannot fail.
                            let _ = tx.send((seq, coded));
                        });
                    }
                    Ok(None) => read_all = true,
                    Err(e) => result = Err(e),
                }
            }
            if done.is_empty() {
                return result;
            }
            while done.front().is_some_and(Option::is_none) {
                let (seq, coded) = receive(&rx);
                match coded {
                    Ok(c) => done[seq - written] = Some(c),
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            }
            while let Some(Some(_)) = done.front() {
                if let Some(Some(c)) = done.pop_front() {
                    written += 1;
                    if result.is_ok() {
                        result = write(c);
                    }
                }
            }
        }
    })
}

/// Waits for the next coded unit, running pool work meanwhile when there is any.
fn receive<T>(rx: &Receiver<T>) -> T {
    loop {
        if let Ok(x) = rx.try_recv() {
            return x;
        }
        if let Some(rayon::Yield::Executed) = rayon::yield_now() {
            continue;
        }
        // Nothing queued: the units in flight are running on other threads. A short timeout
        // lets this thread help again if their own nested work gets queued.
        if let Ok(x) = rx.recv_timeout(Duration::from_micros(500)) {
            return x;
        }
    }
}
