//! Recycling of block-sized buffers and per-worker scratch.
//!
//! Fresh multi-megabyte allocations cost a page fault per 4 KiB touched; recycling them keeps
//! the steady state of the pipeline free of allocation.

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex};

/// A bounded stack of reusable values shared between threads.
#[derive(Clone)]
pub struct Pool<T> {
    free: Arc<Mutex<Vec<T>>>,
    cap: usize,
}

impl<T: Default> Pool<T> {
    /// A pool keeping at most `cap` idle values.
    pub fn new(cap: usize) -> Self {
        Pool {
            free: Arc::new(Mutex::new(Vec::new())),
            cap,
        }
    }

    /// An idle value, if there is one.
    fn idle(&self) -> Option<T> {
        self.free.lock().ok().and_then(|mut f| f.pop())
    }

    /// An idle value, or a new default one.
    pub fn take(&self) -> T {
        self.idle().unwrap_or_default()
    }

    /// Returns a value for reuse (dropped if the pool is full).
    pub fn give(&self, v: T) {
        if let Ok(mut f) = self.free.lock() {
            if f.len() < self.cap {
                f.push(v);
            }
        }
    }

    /// A value that goes back to the pool when the guard is dropped.
    pub fn guard(&self) -> Pooled<'_, T> {
        Pooled {
            value: Some(self.take()),
            pool: self,
        }
    }
}

impl Pool<Vec<u8>> {
    /// A buffer of `len` bytes, reusing an idle one when there is one. Its contents are
    /// unspecified (zeros or an earlier block's bytes): every user overwrites all of it, and
    /// zeroing megabytes per block would cost as much as copying them.
    pub fn buffer(&self, len: usize) -> Vec<u8> {
        match self.idle() {
            Some(mut v) => {
                v.resize(len, 0);
                v
            }
            // Zeroed by the allocator (fresh pages from the kernel), not by a memset.
            None => vec![0; len],
        }
    }

    /// Returns a buffer shared with another thread: whichever owner lets go last recycles it.
    pub fn give_shared(&self, v: Arc<Vec<u8>>) {
        if let Some(v) = Arc::into_inner(v) {
            self.give(v);
        }
    }
}

/// A pooled value, returned on drop.
pub struct Pooled<'a, T: Default> {
    value: Option<T>,
    pool: &'a Pool<T>,
}

impl<T: Default> Deref for Pooled<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // Only `drop` takes the value out.
        self.value.as_ref().unwrap_or_else(|| unreachable!())
    }
}

impl<T: Default> DerefMut for Pooled<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.value.as_mut().unwrap_or_else(|| unreachable!())
    }
}

impl<T: Default> Drop for Pooled<'_, T> {
    fn drop(&mut self) {
        if let Some(v) = self.value.take() {
            self.pool.give(v);
        }
    }
}
