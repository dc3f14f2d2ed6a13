//! Test hooks: a test sets a callback that runs at a chosen point of an encode, on the thread
//! that called it, to change a file at exactly that moment (another process writing the input
//! or the base while `sc` reads it) instead of racing it. Compiled with the `internals`
//! feature only; not a stable API.

use std::cell::RefCell;

/// Where a run calls the hook.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Point {
    /// An encode has found its input's repeated tensors and the digests of the base tensors it
    /// uses, and is about to read the first block.
    Planned,
    /// An encode has read its input's bytes up to `end` (a block), and not yet coded them.
    Read {
        /// The input's offset after the block.
        end: u64,
    },
}

type Hook = Box<dyn FnMut(Point)>;

thread_local! {
    static HOOK: RefCell<Option<Hook>> = const { RefCell::new(None) };
}

/// Runs `f` at every hook point reached on this thread (runs on this thread only: encode with
/// `threads: 0`) until [`clear`].
pub fn set(f: impl FnMut(Point) + 'static) {
    HOOK.with(|h| *h.borrow_mut() = Some(Box::new(f)));
}

/// Removes this thread's hook.
pub fn clear() {
    HOOK.with(|h| *h.borrow_mut() = None);
}

/// Calls this thread's hook, if one is set, at `point`.
pub(crate) fn reach(point: Point) {
    HOOK.with(|h| {
        if let Some(f) = h.borrow_mut().as_mut() {
            f(point);
        }
    });
}
