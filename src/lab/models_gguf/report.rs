//! What `sc models` reports of a GGUF file: the rows measured of each plane, per ggml type and
//! for the plain tensors.

use crate::lab::gguf::GgufAnalysis;
use crate::lab::models::ModelReport;

/// What is measured of each plane, in the order of [`PlaneReport::sizes`]. The entropies are
/// bounds; the coders' rows are their payloads as the pipeline would store them (a constant
/// plane as one byte, a plane that codes no smaller stored); the last two rows are what the
/// archive stores.
pub const ROWS: [&str; 12] = [
    "order-0 entropy, per tensor",
    "order-0 entropy, per archive block",
    "huffman (sc fast's coder)",
    "static range coder, order 0",
    "adaptive order 0",
    "byctx: given the block's scale high byte, plane 0 (sc best's model)",
    "adaptive per context: the same byte of the previous ggml block",
    "adaptive per context: position in the ggml block",
    "adaptive per context: the previous byte (order 1)",
    "smallest of the coders above, per archive block",
    "sc fast: as the archive stores it",
    "sc best: as the archive stores it",
];

/// Index of a row of [`ROWS`].
pub mod row {
    /// Order-0 entropy of each tensor's plane.
    pub const TENSOR_BOUND: usize = 0;
    /// Order-0 entropy of each archive block's plane.
    pub const BLOCK_BOUND: usize = 1;
    /// Huffman, FAST's coder.
    pub const HUFFMAN: usize = 2;
    /// The static range coder.
    pub const RANGE: usize = 3;
    /// The adaptive order-0 coder.
    pub const ADAPTIVE: usize = 4;
    /// `byctx` given plane 0.
    pub const BYCTX: usize = 5;
    /// Adaptive, given the previous ggml block's byte.
    pub const PREVIOUS_BLOCK: usize = 6;
    /// Adaptive, given the position in the ggml block.
    pub const POSITION: usize = 7;
    /// Adaptive, given the previous byte.
    pub const ORDER1: usize = 8;
    /// The smallest coder row, per archive block.
    pub const SMALLEST: usize = 9;
    /// What FAST stores.
    pub const FAST: usize = 10;
    /// What BEST stores.
    pub const BEST: usize = 11;
}

/// The coder rows: [`row::HUFFMAN`] to [`row::ORDER1`].
pub(super) const CODERS: std::ops::Range<usize> = row::HUFFMAN..row::SMALLEST;

/// Short names of the coder rows, from [`row::HUFFMAN`] on.
pub(super) const CODER_NAMES: [&str; 7] = [
    "huffman",
    "range",
    "adaptive",
    "byctx",
    "previous block",
    "position",
    "order 1",
];

/// One plane of a ggml type's blocks, measured over all the type's archive blocks.
#[derive(Clone, Debug)]
pub struct PlaneReport {
    /// What the plane holds ("d high byte", "qs", "quants joined 6-bit", ...).
    pub name: String,
    /// Bytes of the plane (the joined quants take a byte a value).
    pub bytes: u64,
    /// Bytes under each row of [`ROWS`]; `None` where the row does not apply to the plane
    /// (`byctx` to plane 0; the position and order-1 contexts to a byte a ggml block).
    pub sizes: [Option<f64>; ROWS.len()],
    /// The coder rows that are the smallest ([`row::SMALLEST`]), by short name, and in how many
    /// archive blocks.
    pub smallest_coders: Vec<(&'static str, u64)>,
    /// The codecs FAST stores the plane with, and in how many archive blocks.
    pub fast_codecs: Vec<(&'static str, u64)>,
    /// The same for BEST.
    pub best_codecs: Vec<(&'static str, u64)>,
}

/// The tensors of one quantized ggml type that the archive codes in planes of their fields.
#[derive(Clone, Debug)]
pub struct QuantReport {
    /// ggml's name of the type.
    pub name: &'static str,
    /// Tensors of the type.
    pub tensors: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Archive blocks holding them.
    pub blocks: u64,
    /// The order-0 bound of their fields as `sc analyze` measures it, in bytes.
    pub field_bound: f64,
    /// The planes of the type's transform, in order.
    pub planes: Vec<PlaneReport>,
}

impl QuantReport {
    /// Bytes of the type under row `r` of [`ROWS`], over all planes, where it applies to every
    /// plane.
    pub fn total(&self, r: usize) -> Option<f64> {
        self.planes.iter().map(|p| p.sizes[r]).sum()
    }
}

/// Blocks the archive codes with one transform other than a ggml block transform: plain
/// tensors (F32, F16, ...), types without a described layout, the bytes between tensors.
#[derive(Clone, Debug)]
pub struct PlainReport {
    /// The ggml types of the tensors in them (and "bytes between tensors" where they hold
    /// such), as FAST plans them.
    pub name: String,
    /// The transform planned for them.
    pub transform: &'static str,
    /// Tensors in them.
    pub tensors: usize,
    /// Their bytes.
    pub bytes: u64,
    /// FAST's archive blocks of them.
    pub blocks: u64,
    /// Bytes FAST stores for them (plane payloads).
    pub fast: u64,
    /// Bytes BEST stores for them.
    pub best: u64,
}

/// A GGUF file measured in the archive's blocks.
#[derive(Clone, Debug)]
pub struct GgufModels {
    /// `sc analyze`'s measurement of the file: its header and field bound.
    pub analysis: GgufAnalysis,
    /// The block size the archive is planned with.
    pub block_size: u32,
    /// FAST's blocks, all of the file's after the header.
    pub blocks: u64,
    /// The quantized types coded in planes of their fields, in order of first appearance.
    pub quant: Vec<QuantReport>,
    /// The other blocks, by planned transform.
    pub plain: Vec<PlainReport>,
    /// The safetensors measurement ([`super::models::compare_models`]) over the file's F16 and
    /// BF16 tensors; `None` when it has none.
    pub half: Option<ModelReport>,
}

impl GgufModels {
    /// Payload bytes FAST stores for all blocks (the tensor data and the bytes between).
    pub fn fast_bytes(&self) -> u64 {
        self.stored(row::FAST, |p| p.fast)
    }

    /// Payload bytes BEST stores for all blocks.
    pub fn best_bytes(&self) -> u64 {
        self.stored(row::BEST, |p| p.best)
    }

    fn stored(&self, r: usize, plain: impl Fn(&PlainReport) -> u64) -> u64 {
        let quant: f64 = self.quant.iter().filter_map(|q| q.total(r)).sum();
        quant as u64 + self.plain.iter().map(plain).sum::<u64>()
    }

    /// Bytes after the header: the tensor data and the bytes between tensors.
    pub fn data_bytes(&self) -> u64 {
        self.analysis.file_len - self.analysis.header_len
    }

    /// The order-0 bound of the data after the header (`sc analyze`'s, less its header).
    pub fn data_bound(&self) -> f64 {
        self.analysis.bound_bytes() - self.analysis.header_deflated as f64
    }
}
