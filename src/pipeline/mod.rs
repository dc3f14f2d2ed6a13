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
