//! The whole-file MD5, computed on its own thread.

use super::pool::Pool;
use crate::container::checksum::FileDigest;
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

/// Computes the file MD5 on its own thread, in order, while the pipeline codes the blocks.
///
/// MD5 is inherently sequential and about as slow as the whole FAST codec, so it must not sit
/// on the critical path. Hashed buffers go back to `pool`; the bounded queue bounds memory when
/// the hash falls behind, and [`DigestWorker::wait_behind`] bounds it further where a memory
/// budget asks.
pub struct DigestWorker {
    tx: Option<SyncSender<Arc<Vec<u8>>>>,
    handle: Option<JoinHandle<[u8; 16]>>,
    /// Buffers pushed and not yet hashed.
    pending: Arc<(Mutex<usize>, Condvar)>,
}

impl DigestWorker {
    /// Starts the thread; at most `queue` buffers wait for it.
    pub fn spawn(queue: usize, pool: Pool<Vec<u8>>) -> std::io::Result<DigestWorker> {
        let (tx, rx) = sync_channel::<Arc<Vec<u8>>>(queue);
        let pending = Arc::new((Mutex::new(0usize), Condvar::new()));
        let hashed = Arc::clone(&pending);
        let handle = std::thread::Builder::new()
            .name("sc-md5".into())
            .spawn(move || {
                let mut d = FileDigest::new();
                for buf in rx {
                    d.update(&buf);
                    pool.give_shared(buf);
                    let (count, cv) = &*hashed;
                    if let Ok(mut n) = count.lock() {
                        *n = n.saturating_sub(1);
                        cv.notify_all();
                    }
                }
                d.finish()
            })?;
        Ok(DigestWorker {
            tx: Some(tx),
            handle: Some(handle),
            pending,
        })
    }

    /// Starts the thread when `enabled`.
    pub fn start(
        enabled: bool,
        pool: &Pool<Vec<u8>>,
        queue: usize,
    ) -> std::io::Result<Option<DigestWorker>> {
        match enabled {
            true => DigestWorker::spawn(queue, pool.clone()).map(Some),
            false => Ok(None),
        }
    }

    /// Queues the next bytes of the file (blocks while the queue is full). The buffer goes back
    /// to the pool once both the hash and the pipeline are done with it.
    pub fn push(&self, buf: Arc<Vec<u8>>) {
        if let Some(tx) = &self.tx {
            if let Ok(mut n) = self.pending.0.lock() {
                *n += 1;
            }
            // A send only fails if the thread is gone; finish() reports that.
            let _ = tx.send(buf);
        }
    }

    /// Waits until at most `n` pushed buffers are still waiting to be hashed (returns at once
    /// if the thread is gone; `finish` reports that).
    pub fn wait_behind(&self, n: usize) {
        let (count, cv) = &*self.pending;
        let Ok(mut pending) = count.lock() else {
            return;
        };
        while *pending > n && self.handle.as_ref().is_some_and(|h| !h.is_finished()) {
            match cv.wait_timeout(pending, std::time::Duration::from_millis(50)) {
                Ok((p, _)) => pending = p,
                Err(_) => return,
            }
        }
    }

    /// Waits for the digest of everything pushed.
    pub fn finish(mut self) -> std::io::Result<[u8; 16]> {
        self.tx = None;
        match self.handle.take().map(JoinHandle::join) {
            Some(Ok(d)) => Ok(d),
            _ => Err(std::io::Error::other("MD5 thread failed")),
        }
    }
}

impl Drop for DigestWorker {
    /// A run that ends early (an error) still waits for the thread, which ends once the queue
    /// is empty, so that no thread of a run outlives it.
    fn drop(&mut self) {
        self.tx = None;
        if let Some(handle) = self.handle.take() {
            // Its digest is not wanted; a panic in it has nothing left to spoil.
            let _ = handle.join();
        }
    }
}
