//! Where a plane's elements lie in the rows of their tensors: the layout the context models
//! of the `ctxjoint`, `ctxtensors` and `ctxsigns` codecs and the sign models of `signs` run on,
//! the rules a payload's part table must keep, and the rows of a block's tensors that the
//! parts are cut from.

/// Longest row the payload may name; the column sums take 8 bytes per column.
pub const MAX_ROW: u32 = 1 << 16;

/// Where a plane's elements lie in the rows of their tensor: element `i` is in column
/// `(i + phase) % len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rows {
    /// Elements per row, 1 ..= [`MAX_ROW`].
    pub len: u32,
    /// Column of the plane's first element, below `len`.
    pub phase: u32,
}

impl Rows {
    /// A layout for a plane whose first element is element `first` of a tensor with rows of
    /// `len` elements (`first` is negative when the tensor starts later in the plane); rows
    /// longer than [`MAX_ROW`] are taken as rows of [`MAX_ROW`].
    pub fn at(len: u64, first: i64) -> Rows {
        let len = len.clamp(1, MAX_ROW as u64);
        Rows {
            len: len as u32,
            phase: first.rem_euclid(len as i64) as u32,
        }
    }
}

/// A run of a plane's elements that lie in the rows of one tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Part {
    /// Elements in the run: a multiple of [`QUAD_LEN`] but in the plane's last part.
    pub len: usize,
    /// Where its elements lie in the rows of its tensor.
    pub rows: Rows,
}

/// Parts of a plane other than its last hold whole quads of this many elements, so that the
/// decoder's quads never straddle two parts.
pub const QUAD_LEN: usize = 4;

/// Whether `parts` cover a plane of `len` elements, each in a valid row layout, every part but
/// the last in whole quads, and every part but the first and the last with rows no longer than
/// its elements and 3 more.
///
/// Starting a part costs time in its row length (its column statistics are cleared), so the
/// last rule bounds a plane's decoding work by its length and a few rows, whatever a corrupt
/// part table says. An encoder's middle parts hold their whole tensor but for at most 3
/// leading elements, and a tensor's rows are never longer than the tensor.
pub(crate) fn parts_fit(parts: &[Part], len: usize) -> bool {
    let valid =
        |p: &Part| p.len > 0 && (1..=MAX_ROW).contains(&p.rows.len) && p.rows.phase < p.rows.len;
    let middle = parts.get(1..parts.len().saturating_sub(1)).unwrap_or(&[]);
    let total = parts
        .iter()
        .try_fold(0usize, |sum, p| sum.checked_add(p.len));
    let whole_quads = parts
        .iter()
        .rev()
        .skip(1)
        .all(|p| p.len.is_multiple_of(QUAD_LEN));
    !parts.is_empty()
        && parts.iter().all(valid)
        && whole_quads
        && middle.iter().all(|p| p.rows.len as usize <= p.len + 3)
        && total == Some(len)
}

/// Where the elements of a block lie in the rows of one of its tensors, for the coders that
/// model rows (BEST's `ctxjoint` and `signs`), from which `crate::choice` cuts a plane's
/// [`Part`]s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorRows {
    /// Row lengths in elements to choose from: the tensor's last dimension above 1, and the
    /// product of its dimensions after the first (the same for 2-D tensors; both the element
    /// count for 1-D ones).
    pub lens: [u64; 2],
    /// Index in the tensor of the block's first element; negative when the tensor starts
    /// inside the block.
    pub first: i64,
}

impl TensorRows {
    /// The element of the block where the tensor's part of it starts.
    pub fn start(&self) -> u64 {
        (-self.first).max(0) as u64
    }

    /// The row lengths of a tensor of `shape` holding `elements` elements.
    pub(crate) fn lens(shape: &[u64], elements: u64) -> [u64; 2] {
        let dims: Vec<u64> = shape.iter().copied().filter(|&d| d > 1).collect();
        match dims.as_slice() {
            [] | [_] => [elements.max(1); 2],
            [_, rest @ ..] => [dims[dims.len() - 1], rest.iter().product()],
        }
    }
}
