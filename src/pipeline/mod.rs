//! The streaming pipeline: read a bounded batch of blocks, code them in parallel on the current
//! rayon pool, write them in order. Memory is bounded by the batch, never by the file.

pub mod block;
pub mod decode;
pub mod digest;
pub mod encode;
pub mod plan;
pub mod pool;

/// Blocks per batch: enough to keep every worker busy while bounding memory.
pub(crate) fn batch_blocks() -> usize {
    (rayon::current_num_threads() * 2).max(4)
}

/// Drives a batched pipeline with its three stages overlapped: batch i is coded on the pool
/// (`code`) while the result of batch i-1 is written (`write`) and batch i+1 is read (`read`,
/// which returns an empty batch at the end). `settle` turns a coded batch into what `write`
/// takes, on the calling thread (recycling buffers, reporting progress).
pub(crate) fn overlap<B: Send + Sync, C: Send, P: Send>(
    mut read: impl FnMut() -> crate::Result<Vec<B>> + Send,
    code: impl Fn(&[B]) -> crate::Result<C> + Sync,
    mut settle: impl FnMut(Vec<B>, C) -> P,
    mut write: impl FnMut(P) -> crate::Result<()> + Send,
) -> crate::Result<()> {
    let mut batch = read()?;
    let mut pending: Option<P> = None;
    while !batch.is_empty() {
        let (coded, (written, next)) = rayon::join(
            || code(&batch),
            || (pending.take().map_or(Ok(()), &mut write), read()),
        );
        written?;
        pending = Some(settle(batch, coded?));
        batch = next?;
    }
    pending.map_or(Ok(()), write)
}
