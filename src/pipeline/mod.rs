//! The streaming pipeline: read blocks in order, code them in parallel on the current rayon
//! pool, write them in order. Memory is bounded by the window of blocks in flight, never by the
//! file.

pub mod block;
pub mod decode;
pub mod dedup;
pub mod digest;
pub mod encode;
pub(crate) mod mapped;
pub mod plan;
pub mod pool;
pub mod refs;
pub mod source;

use crate::cancel::{self, Cancel};
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
        .map_err(|e| cannot_start(threads, e))?
        .install(f)
}

/// The error of a pool of `threads` threads that failed to start: its cause once, with the
/// cause's kind (rayon's error shows its cause and names it as its source as well).
fn cannot_start(threads: usize, e: rayon::ThreadPoolBuildError) -> std::io::Error {
    let kind = std::error::Error::source(&e)
        .and_then(|s| s.downcast_ref::<std::io::Error>())
        .map_or(std::io::ErrorKind::Other, std::io::Error::kind);
    std::io::Error::new(kind, format!("cannot start {threads} worker threads: {e}"))
}

/// Default memory budget for the blocks a run keeps in flight
/// ([`EncodeOptions::memory`](crate::EncodeOptions::memory),
/// [`DecodeOptions::memory`](crate::DecodeOptions::memory)): 256 MiB.
pub const DEFAULT_MEMORY: u64 = 256 << 20;

/// Memory a run needs besides its block buffers: the program itself, I/O buffers, archive map
/// windows of small blocks, and per worker thread its stack and Huffman tables.
fn fixed_memory() -> u64 {
    (24 << 20) + (128 << 10) * rayon::current_num_threads() as u64
}

/// Half-blocks of buffers one block in flight holds at most, encoding or decoding: the block
/// (2), and the worker scratch it is coded into or decoded from (planes 2, coded planes 2,
/// joint keys 1), or its payload (2), decoded bytes (2) and scratch (planes 2, keys 1).
const UNIT_HALF_BLOCKS: u64 = 7;

/// Half-blocks a block in flight holds besides, in an archive with references (a fine-tune
/// coded against its base, repeated tensors): its base bytes (2).
const BASE_HALF_BLOCKS: u64 = 2;

/// The smallest memory budget that takes blocks of `block_size` bytes on the current rayon
/// pool: one block in flight (about 3.5 block sizes of buffers), and what a run needs besides
/// (24 MiB, and 128 KiB per worker thread).
pub fn memory_needed(block_size: u32) -> u64 {
    fixed_memory() + UNIT_HALF_BLOCKS * block_size as u64 / 2
}

/// [`memory_needed`] for an archive with references (coded against a base, or holding
/// repeated tensors), whose blocks in flight also hold their base bytes: one block more.
pub fn memory_needed_with_references(block_size: u32) -> u64 {
    memory_needed(block_size) + BASE_HALF_BLOCKS * block_size as u64 / 2
}

/// What decoding the archive that `r` starts with needs at least ([`memory_needed`] for its
/// block size, with references where it has them), read from the fixed part of its file
/// header alone: a GGUF archive's kept header takes tens of milliseconds to inflate, and is
/// not read. The decoder checks that part against the header's checksum.
pub fn archive_memory_needed(r: &mut impl std::io::Read) -> crate::Result<u64> {
    let (block_size, refs) = crate::container::FileHeader::peek(r)?;
    Ok(one_block_needs(block_size, refs))
}

/// [`memory_needed_with_references`] with `refs`, else [`memory_needed`].
pub(crate) fn one_block_needs(block_size: u32, refs: bool) -> u64 {
    match refs {
        true => memory_needed_with_references(block_size),
        false => memory_needed(block_size),
    }
}

/// How much of a pipeline run is in flight, so that its buffers fit a memory budget.
///
/// Each block in flight holds its buffers until it is written; the MD5 thread may hold a few
/// blocks more while it catches up. The window shrinks as blocks grow, down to one block at a
/// time, so memory stays under the budget whatever the thread count and block size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Budget {
    /// Blocks read but not yet written.
    pub(crate) window: usize,
    /// Blocks the MD5 thread may still hold once the pipeline is done with them.
    pub(crate) md5_behind: usize,
}

impl Budget {
    /// The budget for blocks of `block_size` bytes within `memory` bytes, at most `per_thread`
    /// blocks in flight per worker thread and two more, with room for `extra_blocks` more
    /// blocks held aside (random access keeps its last block). With `refs` (an archive of a
    /// fine-tune coded against its base, or with repeated tensors) each block in flight also
    /// holds its base bytes. Fails when not even one block in flight fits.
    pub(crate) fn new(
        memory: u64,
        block_size: u32,
        per_thread: usize,
        extra_blocks: u64,
        refs: bool,
    ) -> crate::Result<Budget> {
        let block = block_size as u64;
        let unit = one_block_needs(block_size, refs) - fixed_memory();
        let fixed = fixed_memory() + extra_blocks * block;
        let need = fixed + unit;
        if memory < need {
            let buffers = need - fixed_memory();
            return Err(crate::Error::InvalidArgument(format!(
                "a memory budget of {} MiB is too small for blocks of {} bytes{}: one block in \
                 flight needs {} MiB: {:.1} block sizes of buffers ({} MiB) and {:.1} MiB for \
                 the program and its {} worker threads",
                memory >> 20,
                block_size,
                match refs {
                    true => " coded against a base or repeated tensors",
                    false => "",
                },
                need.div_ceil(1 << 20),
                buffers as f64 / block as f64,
                buffers.div_ceil(1 << 20),
                fixed_memory() as f64 / (1 << 20) as f64,
                rayon::current_num_threads()
            )));
        }
        let most = rayon::current_num_threads() * per_thread + 2;
        let window = ((memory - fixed) / unit).clamp(1, most as u64) as usize;
        let left = memory - fixed - window as u64 * unit;
        Ok(Budget {
            window,
            md5_behind: (left / block).min(window as u64) as usize,
        })
    }

    /// The pools of a run, and its MD5 thread when it hashes its file (`md5`).
    pub(crate) fn start(
        &self,
        md5: bool,
    ) -> std::io::Result<(Pools, Option<digest::DigestWorker>)> {
        let pools = self.pools();
        let digest = digest::DigestWorker::start(md5, &pools.blocks, self.window)?;
        Ok((pools, digest))
    }

    /// The pools of one pipeline run, with room for every buffer the budget allows.
    pub(crate) fn pools(&self) -> Pools {
        Pools {
            blocks: pool::Pool::new(self.window + self.md5_behind + 2),
            coded: pool::Pool::new(self.window + 2),
            scratch: pool::Pool::new(self.window + 1),
        }
    }
}

/// The pools of one pipeline run.
///
/// Blocks and their coded forms differ in size, so each kind has a pool of its own: a coded
/// buffer reused for a block would be grown, and the growth zeroed, block after block.
pub(crate) struct Pools {
    /// Buffers of original block bytes.
    pub(crate) blocks: pool::Pool<Vec<u8>>,
    /// Buffers of block payloads read from a stream.
    pub(crate) coded: pool::Pool<Vec<u8>>,
    /// Scratch to code or decode a block in.
    pub(crate) scratch: pool::Pool<block::Scratch>,
}

/// A coded unit, or the panic of the worker that coded it (re-raised on the calling thread).
type Outcome<C> = std::thread::Result<C>;

/// Runs an ordered pipeline. `read` yields units on the calling thread until it returns `None`;
/// each goes to `code` on the rayon pool as soon as it is read, with at most `window` units
/// read but not yet written; `write` gets the coded units in reading order, on the calling
/// thread, as soon as each one and all before it are done.
///
/// A slow block holds back only the writing, never the workers. Safe to call from inside the
/// pool (folders code several files at once): while it waits, the calling thread runs queued
/// work instead of blocking a worker. After an error nothing more is read or written, and the
/// units in flight are waited for.
pub(crate) fn ordered<B: Send, C: Send>(
    window: usize,
    read: &mut dyn FnMut() -> crate::Result<Option<B>>,
    code: &(dyn Fn(B) -> C + Sync),
    write: &mut dyn FnMut(C) -> crate::Result<()>,
) -> crate::Result<()> {
    ordered_until(window, None, read, code, write)
}

/// [`ordered`], stopped by `cancel` once it is set: nothing more is read or written, and the
/// units in flight whose coding has not begun are dropped uncoded, so that the run ends once
/// the units being coded are done ([`Error::Cancelled`](crate::Error::Cancelled)).
pub(crate) fn ordered_until<B: Send, C: Send>(
    window: usize,
    cancel: Option<&Cancel>,
    read: &mut dyn FnMut() -> crate::Result<Option<B>>,
    code: &(dyn Fn(B) -> C + Sync),
    write: &mut dyn FnMut(C) -> crate::Result<()>,
) -> crate::Result<()> {
    let (tx, rx) = channel::<(usize, Outcome<Option<C>>)>();
    rayon::in_place_scope(|s| {
        // `done[i]` is unit `written + i`, once coded (`Some(None)` when dropped uncoded).
        let mut done: VecDeque<Option<Option<C>>> = VecDeque::new();
        let (mut sent, mut written) = (0usize, 0usize);
        let mut read_all = false;
        let mut result = Ok(());
        loop {
            while result.is_ok() && !read_all && done.len() < window.max(1) {
                if let Err(e) = cancel::check(cancel) {
                    result = Err(e);
                    break;
                }
                match read() {
                    Ok(Some(unit)) => {
                        let (tx, seq) = (tx.clone(), sent);
                        sent += 1;
                        done.push_back(None);
                        s.spawn(move |_| {
                            let coded =
                                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                                    match cancel.is_some_and(Cancel::is_cancelled) {
                                        true => None,
                                        false => Some(code(unit)),
                                    }
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
                        result = cancel::check(cancel);
                    }
                    match c {
                        Some(c) if result.is_ok() => result = write(c),
                        // Dropped uncoded: only once the token was set.
                        None if result.is_ok() => result = Err(crate::Error::Cancelled),
                        _ => {}
                    }
                }
            }
        }
    })
}

/// Work running on the pool of a scope, whose result a later step of the pipeline waits for.
pub(crate) struct Pending<T>(Receiver<Outcome<T>>);

impl<T: Send> Pending<T> {
    /// Starts `work` on the pool of `scope`.
    pub(crate) fn spawn<'s>(scope: &rayon::Scope<'s>, work: impl FnOnce() -> T + Send + 's) -> Self
    where
        T: 's,
    {
        let (tx, rx) = channel();
        scope.spawn(move |_| {
            let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
            // Only a waiter that gave up (after an error) has dropped the receiver.
            let _ = tx.send(done);
        });
        Pending(rx)
    }

    /// Its result, running pool work while it is not ready; a panic in the work resumes here.
    pub(crate) fn wait(self) -> T {
        receive(&self.0).unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A token set while a unit is coded stops the run there: the units in flight whose
    /// coding has not begun are dropped uncoded, and nothing more is read or written.
    #[test]
    fn a_token_set_mid_run_drops_the_units_not_yet_begun() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let cancel = Cancel::new();
        let coded = std::sync::atomic::AtomicUsize::new(0);
        let (mut read, mut written) = (0, 0);
        let result = pool.install(|| {
            ordered_until(
                8,
                Some(&cancel),
                &mut || {
                    read += 1;
                    Ok((read <= 100).then_some(read))
                },
                &|unit: usize| {
                    coded.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    cancel.cancel();
                    unit
                },
                &mut |_| {
                    written += 1;
                    Ok(())
                },
            )
        });
        assert!(matches!(result, Err(crate::Error::Cancelled)), "{result:?}");
        // One worker thread: the first unit coded sets the token before any other begins.
        assert_eq!(coded.into_inner(), 1);
        assert_eq!(written, 0);
        assert!(read <= 8, "{read} units read");
    }

    /// A pool whose threads cannot start says why once, with the cause's kind.
    #[test]
    fn a_pool_that_cannot_start_says_why_once() {
        let e = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .spawn_handler(|_| Err(std::io::Error::from(std::io::ErrorKind::WouldBlock)))
            .build()
            .map(drop)
            .unwrap_err();
        let e = crate::Error::from(cannot_start(2, e));
        let mut text = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            text += &format!(": {s}");
            source = s.source();
        }
        let cause = std::io::Error::from(std::io::ErrorKind::WouldBlock).to_string();
        assert_eq!(text, format!("cannot start 2 worker threads: {cause}"));
        assert_eq!(
            std::io::Error::from(e).kind(),
            std::io::ErrorKind::WouldBlock
        );
    }
}
