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

/// Work that tests bound without timing it, counted on the thread that does it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Work {
    /// Two tensor names compared to find a tensor by name.
    NamesCompared,
    /// Histogram bins visited by whole-histogram passes (clearing, summing, entropies,
    /// pooling), besides the one bin each counted symbol adds to.
    BinsVisited,
}

thread_local! {
    static WORK: std::cell::Cell<[u64; 2]> = const { std::cell::Cell::new([0; 2]) };
}

/// Adds `n` to this thread's count of `work`.
pub(crate) fn add(work: Work, n: u64) {
    WORK.with(|w| {
        let mut counts = w.get();
        counts[work as usize] += n;
        w.set(counts);
    });
}

/// This thread's count of `work` so far.
pub fn done(work: Work) -> u64 {
    WORK.with(|w| w.get()[work as usize])
}
