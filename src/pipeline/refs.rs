//! The bytes each block is coded against: an archive's references (`container::refs`) laid
//! over the original file.
//!
//! A block with a delta transform is coded against its base bytes: for each of its bytes that
//! lies in a referenced tensor, the byte at the same place in the tensor's source (the base
//! tensor of that name, or an earlier tensor of the file); zero for any other byte. The encoder
//! never puts unreferenced bytes in a delta block, but the rule holds for any block, so every
//! record decodes to something definite.

use crate::base::Base;
use crate::container::refs::{References, Source};
use crate::error::{Error, Result};
use crate::gguf::types::GgmlType;
use crate::read::ReadAt;
use crate::safetensors::TensorInfo;
use std::collections::HashMap;
use std::ops::Range;
use twox_hash::XxHash3_128;

/// Where the base bytes of a referenced tensor come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum From {
    /// The base tensor of this name, with its length and XXH3-128.
    Base {
        /// The tensor's name.
        name: String,
        /// Its length.
        len: u64,
        /// Its XXH3-128.
        digest: u128,
        /// For a tensor re-derived from the base (a quant from its seed): the types it is
        /// quantized from and to. `None`: the base tensor's bytes as they are.
        derive: Option<Derive>,
    },
    /// The bytes of the original file from this offset on (an earlier tensor of the file).
    Own(u64),
}

/// How a quant tensor is re-derived from its seed tensor: widened from `seed`'s type to f32,
/// quantized to `quant`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Derive {
    /// The seed tensor's type (F32, F16 or BF16).
    pub seed: &'static GgmlType,
    /// The quant tensor's type.
    pub quant: &'static GgmlType,
}

/// One referenced tensor: its bytes in the original file and their source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Span {
    /// The tensor's bytes in the original file.
    pub range: Range<u64>,
    /// Where its base bytes come from.
    pub from: From,
}

/// Reads bytes of the original file for tensors coded against an earlier tensor.
pub trait OwnBytes: Sync {
    /// Fills `out` with the original file's bytes `range`.
    fn read_own(&self, range: Range<u64>, out: &mut [u8]) -> Result<()>;
}

/// An input with random access: the source of its own repeated tensors.
pub struct Input<'a>(pub &'a dyn ReadAt);

impl OwnBytes for Input<'_> {
    fn read_own(&self, range: Range<u64>, out: &mut [u8]) -> Result<()> {
        Ok(self.0.read_exact_at(out, range.start)?)
    }
}

/// The source used where no tensor refers to an earlier one.
pub struct NoOwn;

impl OwnBytes for NoOwn {
    fn read_own(&self, _: Range<u64>, _: &mut [u8]) -> Result<()> {
        Err(Error::Corrupt(
            "a block refers to repeated bytes that cannot be read here".into(),
        ))
    }
}

/// What the base bytes of blocks are read from: the spans, the base, earlier tensors.
#[derive(Clone, Copy)]
pub struct Sources<'a> {
    /// The archive's referenced tensors.
    pub spans: &'a Spans,
    /// The base, if one was given.
    pub base: Option<&'a Base>,
    /// The original file's own bytes, for repeated tensors.
    pub own: &'a dyn OwnBytes,
}

impl Sources<'_> {
    /// [`Spans::fill`] from these sources.
    pub fn fill(&self, start: u64, out: &mut [u8]) -> Result<()> {
        self.spans.fill(start, out, self.base, self.own)
    }
}

/// The bytes of an archive's repeated tensors' sources, kept as a stream decode writes them
/// (a stream cannot be read again). They grow only as decoded bytes arrive, so a corrupt
/// archive claiming huge sources allocates nothing for them.
#[derive(Default)]
pub struct Retained {
    /// Source ranges of the original file, by start, with the bytes seen so far.
    parts: Vec<(Range<u64>, Vec<u8>)>,
}

impl Retained {
    /// Room for every source of `spans`.
    pub fn new(spans: &Spans) -> Retained {
        Retained {
            parts: spans
                .sources()
                .into_iter()
                .map(|r| (r, Vec::new()))
                .collect(),
        }
    }

    /// Sources already read: byte ranges of the original file and their bytes.
    pub fn from_parts(parts: Vec<(Range<u64>, Vec<u8>)>) -> Retained {
        Retained { parts }
    }

    /// Keeps what the sources need of the original file's bytes `data`, which start at
    /// `start` (blocks arrive in order).
    pub fn keep(&mut self, start: u64, data: &[u8]) {
        let end = start + data.len() as u64;
        for (r, kept) in &mut self.parts {
            let next = r.start + kept.len() as u64;
            if next >= start && next < end && next < r.end {
                let to = r.end.min(end);
                kept.extend_from_slice(&data[(next - start) as usize..(to - start) as usize]);
            }
        }
    }
}

impl OwnBytes for Retained {
    fn read_own(&self, range: Range<u64>, out: &mut [u8]) -> Result<()> {
        let part = self
            .parts
            .iter()
            .find(|(r, kept)| r.start <= range.start && range.end <= r.start + kept.len() as u64);
        let (r, kept) = part.ok_or_else(|| {
            Error::Corrupt("a repeated tensor's source was not decoded before it".into())
        })?;
        let from = (range.start - r.start) as usize;
        out.copy_from_slice(&kept[from..from + out.len()]);
        Ok(())
    }
}

/// The referenced tensors of an archive, by position in the original file.
#[derive(Clone, Debug, Default)]
pub struct Spans {
    /// The base's name as recorded (for errors), empty when no tensor refers to a base.
    base_name: String,
    /// By `range.start`; ranges do not overlap (they are tensors').
    spans: Vec<Span>,
}

impl Spans {
    /// The spans of the references `refs` (checked against `tensors`, the kept header's, whose
    /// data starts at `prefix_len`).
    pub fn new(refs: Option<&References>, tensors: &[TensorInfo], prefix_len: u64) -> Spans {
        let Some(refs) = refs else {
            return Spans::default();
        };
        let by_name: HashMap<&str, &TensorInfo> =
            tensors.iter().map(|t| (t.name.as_str(), t)).collect();
        // A corrupt kept header may give offsets near u64::MAX: such spans lie past every block.
        let at =
            |t: &TensorInfo| prefix_len.saturating_add(t.begin)..prefix_len.saturating_add(t.end);
        let mut spans: Vec<Span> = refs
            .entries
            .iter()
            .filter_map(|e| {
                let t = by_name.get(e.tensor.as_str())?;
                let from = match &e.source {
                    Source::Base { len, digest } => From::Base {
                        name: e.tensor.clone(),
                        len: *len,
                        digest: *digest,
                        derive: None,
                    },
                    Source::Derived(d) => {
                        let (seed, quant) = d.types().ok()?;
                        From::Base {
                            name: e.tensor.clone(),
                            len: d.len,
                            digest: d.digest,
                            derive: Some(Derive { seed, quant }),
                        }
                    }
                    Source::Tensor(s) => From::Own(at(by_name.get(s.as_str())?).start),
                };
                Some(Span { range: at(t), from })
            })
            .collect();
        spans.sort_by_key(|s| s.range.start);
        Spans {
            base_name: refs.base_name.clone(),
            spans,
        }
    }

    /// Every span, by position.
    pub fn spans(&self) -> &[Span] {
        &self.spans
    }

    /// The ranges of the original file that tensors coded against earlier ones repeat: by
    /// start, each once.
    fn sources(&self) -> Vec<Range<u64>> {
        let mut ranges: Vec<Range<u64>> = self
            .spans
            .iter()
            .filter_map(|s| match s.from {
                From::Own(src) => Some(src..src + (s.range.end - s.range.start)),
                From::Base { .. } => None,
            })
            .collect();
        ranges.sort_by_key(|r| (r.start, r.end));
        ranges.dedup();
        ranges
    }

    /// Whether some tensor is coded against an earlier one.
    pub fn has_own(&self) -> bool {
        self.spans.iter().any(|s| matches!(s.from, From::Own(_)))
    }

    /// Whether some tensor is coded against the base.
    pub fn needs_base(&self) -> bool {
        self.spans
            .iter()
            .any(|s| matches!(s.from, From::Base { .. }))
    }

    /// The base's name as the archive records it.
    pub fn base_name(&self) -> &str {
        &self.base_name
    }

    /// The spans overlapping `range`.
    fn overlapping(&self, range: Range<u64>) -> impl Iterator<Item = &Span> {
        let first = self.spans.partition_point(|s| s.range.end <= range.start);
        self.spans[first..]
            .iter()
            .take_while(move |s| s.range.start < range.end)
    }

    /// Whether bytes `range` hold a tensor coded against an earlier one.
    pub fn needs_own(&self, range: Range<u64>) -> bool {
        self.overlapping(range)
            .any(|s| matches!(s.from, From::Own(_)))
    }

    /// The source bytes the tensors coded against earlier ones need for bytes `range`.
    pub fn own_sources(&self, range: Range<u64>) -> Vec<Range<u64>> {
        self.overlapping(range.clone())
            .filter_map(|s| match s.from {
                From::Own(src) => {
                    let a = s.range.start.max(range.start);
                    let b = s.range.end.min(range.end);
                    Some(src + (a - s.range.start)..src + (b - s.range.start))
                }
                From::Base { .. } => None,
            })
            .collect()
    }

    /// Checks that `base` holds every base tensor the spans overlapping `ranges` need,
    /// computing digests several at a time; without a base, that none is needed.
    pub fn verify(&self, base: Option<&Base>, ranges: &[Range<u64>]) -> Result<()> {
        let mut needed: Vec<(&str, u64, u128, Option<Derive>)> = ranges
            .iter()
            .flat_map(|r| self.overlapping(r.clone()))
            .filter_map(|s| match &s.from {
                From::Base {
                    name,
                    len,
                    digest,
                    derive,
                } => Some((name.as_str(), *len, *digest, *derive)),
                From::Own(_) => None,
            })
            .collect();
        // A tensor across the gap between two ranges is met twice, one after the other.
        needed.dedup();
        if needed.is_empty() {
            return Ok(());
        }
        let base = base.ok_or_else(|| self.base_needed())?;
        let present: Vec<&str> = needed
            .iter()
            .filter(|(n, len, ..)| base.tensor(n).is_some_and(|t| t.len() == *len))
            .map(|(n, ..)| *n)
            .collect();
        base.digests(&present)?;
        for (name, len, digest, derive) in needed {
            self.check_base(base, name, len, digest, derive)?;
        }
        Ok(())
    }

    /// Checks that `base` holds the tensor `name` with `len` bytes of XXH3-128 `digest`, and,
    /// for a tensor re-derived from it, of the seed type recorded.
    fn check_base(
        &self,
        base: &Base,
        name: &str,
        len: u64,
        digest: u128,
        derive: Option<Derive>,
    ) -> Result<()> {
        base.verify(&self.base_name, name, len, digest)?;
        match derive {
            Some(d)
                if base
                    .tensor(name)
                    .is_some_and(|t| t.dtype_name != d.seed.name) =>
            {
                Err(Error::BaseMismatch {
                    given: base.name().to_string(),
                    needed: self.base_name.clone(),
                    reason: format!("its tensor {name:?} is not {}", d.seed.name),
                })
            }
            _ => Ok(()),
        }
    }

    fn base_needed(&self) -> Error {
        Error::BaseNeeded {
            needed: self.base_name.clone(),
        }
    }

    /// Fills `out` with the base bytes of the original file's bytes from `start`: each byte of
    /// a referenced tensor from its source (`base`, or `own` for earlier tensors), zero
    /// elsewhere. Base tensors are checked against their digests first.
    pub fn fill(
        &self,
        start: u64,
        out: &mut [u8],
        base: Option<&Base>,
        own: &dyn OwnBytes,
    ) -> Result<()> {
        let end = start + out.len() as u64;
        let mut filled = start;
        for s in self.overlapping(start..end) {
            let a = s.range.start.max(start);
            let b = s.range.end.min(end);
            out[(filled - start) as usize..(a - start) as usize].fill(0);
            filled = b;
            let dst = &mut out[(a - start) as usize..(b - start) as usize];
            let offset = a - s.range.start;
            match &s.from {
                From::Base {
                    name,
                    len,
                    digest,
                    derive,
                } => {
                    let base = base.ok_or_else(|| self.base_needed())?;
                    self.check_base(base, name, *len, *digest, *derive)?;
                    match derive {
                        None => base.read(name, offset, dst)?,
                        Some(d) => {
                            crate::derive::predict(base, name, d.seed, d.quant, offset, dst)?
                        }
                    }
                }
                From::Own(src) => {
                    let from = src + offset;
                    own.read_own(from..from + dst.len() as u64, dst)?;
                }
            }
        }
        out[(filled - start) as usize..].fill(0);
        Ok(())
    }
}

/// Hashes of byte ranges fed in order, piece by piece: a hash in progress for each range begun,
/// the XXH3-128 of each range once all its bytes came.
struct Hashes {
    going: HashMap<usize, (XxHash3_128, u64)>,
    done: Vec<Option<u128>>,
}

impl Hashes {
    fn new(n: usize) -> Hashes {
        Hashes {
            going: HashMap::new(),
            done: vec![None; n],
        }
    }

    /// Feeds the next `bytes` of range `k`, `len` bytes long.
    fn feed(&mut self, k: usize, bytes: &[u8], len: u64) {
        let (h, n) = self
            .going
            .entry(k)
            .or_insert_with(|| (XxHash3_128::new(), 0));
        h.write(bytes);
        *n += bytes.len() as u64;
        if *n == len {
            if let Some((h, _)) = self.going.remove(&k) {
                self.done[k] = Some(h.finish_128());
            }
        }
    }
}

/// Feeds `hashes` the pieces of `data` (the original file's bytes from `start`) that lie in
/// the ranges of `items` (`range` gives each one's; sorted, not overlapping), each under its
/// index.
fn feed_ranges<T>(
    hashes: &mut Hashes,
    items: &[T],
    range: impl Fn(&T) -> &Range<u64>,
    start: u64,
    data: &[u8],
) {
    let end = start + data.len() as u64;
    let first = items.partition_point(|t| range(t).end <= start);
    for (k, t) in items.iter().enumerate().skip(first) {
        let r = range(t);
        if r.start >= end {
            break;
        }
        let (a, b) = (r.start.max(start), r.end.min(end));
        hashes.feed(
            k,
            &data[(a - start) as usize..(b - start) as usize],
            r.end - r.start,
        );
    }
}

/// What an encode checks once every block is coded: that each referenced tensor was coded
/// against the bytes its archive gives as its source, whatever another process wrote to the
/// files meanwhile. The base bytes filled in for a base tensor must have the digest recorded
/// (taken before coding); those filled in for a repeated tensor must be the bytes stored for
/// the earlier tensor in its own blocks. Bytes are hashed as the blocks are written, in order,
/// so nothing more is held.
pub struct FillCheck<'s> {
    spans: &'s Spans,
    /// The bytes filled in for each span.
    filled: Hashes,
    /// The ranges of the file that repeated tensors repeat (by start, distinct).
    sources: Vec<Range<u64>>,
    /// The bytes stored for each source.
    stored: Hashes,
}

impl<'s> FillCheck<'s> {
    /// The check of an encode whose references are `spans`.
    pub fn new(spans: &'s Spans) -> FillCheck<'s> {
        let sources = spans.sources();
        FillCheck {
            filled: Hashes::new(spans.spans.len()),
            stored: Hashes::new(sources.len()),
            spans,
            sources,
        }
    }

    /// Takes in the block of the original file's bytes `raw` from `start`, as stored, and the
    /// base bytes it was coded against, if any. Blocks come in order.
    pub fn block(&mut self, start: u64, raw: &[u8], base: Option<&[u8]>) {
        feed_ranges(&mut self.stored, &self.sources, |r| r, start, raw);
        if let Some(base) = base {
            feed_ranges(
                &mut self.filled,
                &self.spans.spans,
                |s| &s.range,
                start,
                base,
            );
        }
    }

    /// Checks every span once the last block is in: fails with [`Error::Changed`] naming the
    /// file and tensor (`name` names the tensor whose bytes start at an offset) whose source
    /// bytes are not those recorded.
    pub fn finish(self, base: Option<&Base>, name: &dyn Fn(u64) -> String) -> Result<()> {
        for (k, s) in self.spans.spans.iter().enumerate() {
            let filled = self.filled.done[k];
            match &s.from {
                // A prediction is not the seed's bytes: the seed is hashed again instead, so a
                // seed changed while it was read is found (unless changed back meanwhile).
                From::Base {
                    name: tensor,
                    digest,
                    derive: Some(_),
                    ..
                } => {
                    let base = base.ok_or_else(|| self.base_needed())?;
                    if base.digest_again(tensor)? != *digest {
                        return Err(base.changed(tensor));
                    }
                }
                From::Base {
                    name: tensor,
                    digest,
                    ..
                } => {
                    if filled != Some(*digest) {
                        return Err(match base {
                            Some(b) => b.changed(tensor),
                            None => self.base_needed(),
                        });
                    }
                }
                From::Own(src) => {
                    let k = self.sources.partition_point(|r| r.start < *src);
                    if filled.is_none() || filled != self.stored.done.get(k).copied().flatten() {
                        return Err(Error::Changed(format!(
                            "the input (its tensor {:?}, stored as a repeat of {:?})",
                            name(s.range.start),
                            name(*src)
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    fn base_needed(&self) -> Error {
        self.spans.base_needed()
    }
}
