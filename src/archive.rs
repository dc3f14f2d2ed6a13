//! Reading an archive without decoding all of it: random access to any byte range or tensor
//! through the index ([`Archive`]), and its description ([`inspect`]).
//!
//! The index at the end of the archive maps every block to its place in the original file and
//! in the archive, so a reader seeks straight to the blocks a range needs. A partial read cannot
//! check the MD5 of the whole file; what it does check is everything it reads: the file header,
//! index and trailer checksums, each block record's checksum, and each decoded block's XXH3-64.

mod blocks;
mod extract;
mod whole;

pub use whole::{decode_file, decode_slice, decode_to_vec};

use blocks::{check_index, decode_want, deliver, parse_block, read_block};

use crate::base::Base;
use crate::container::{BlockRecord, FileHeader, Footer, IndexEntry, Kind, Mode};
use crate::error::{Error, Result};
use crate::gguf::GgufHeader;
use crate::inspect::{container_parts, header_json, kept_metadata, reference, Reference};
use crate::pipeline::decode::{
    decode_from, decode_into, decode_one, spans_of, Block, Counting, DecodeOptions, DecodeReport,
    Reread,
};
use crate::pipeline::mapped::MappedFile;
use crate::pipeline::pool::Pool;
use crate::pipeline::refs::{OwnBytes, Retained, Sources, Spans};
use crate::pipeline::source::{Source, Stream};
use crate::pipeline::{on_threads, one_block_needs, ordered, Budget, Pools, DEFAULT_MEMORY};
use crate::read::{join_adjacent, At, Prefetch};
use crate::safetensors::{self, TensorInfo};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock};

/// What an [`Archive`] has read and decoded since it was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AccessStats {
    /// Every byte read from the archive: header, index and trailer included.
    pub archive_bytes_read: u64,
    /// Blocks decoded.
    pub blocks_decoded: u64,
    /// Archive bytes of those blocks (records and payloads).
    pub block_bytes_read: u64,
    /// Original bytes those blocks decoded to, whole blocks counted even when only part of one
    /// was wanted.
    pub bytes_decoded: u64,
}

/// Bytes of blocks decoded at a time when a read needs the sources of repeated tensors: their
/// bytes are held while the blocks repeating them decode.
const REPEAT_PIECE: u64 = 64 << 20;

/// How the archive's bytes divide among the tensors, as [`Archive::stored_bytes`] reports.
///
/// `per_tensor.iter().sum() + between_tensors + container` is the archive's length.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoredBytes {
    /// Archive bytes attributed to each tensor, in the order of [`Archive::tensors`].
    pub per_tensor: Vec<u64>,
    /// Archive bytes attributed to block bytes outside every tensor (padding between tensors,
    /// trailing data).
    pub between_tensors: u64,
    /// File header (with the kept safetensors header), end tag, index and trailer.
    pub container: u64,
}

// Seeking leaves the count alone, so over a random-access session `pos` is the bytes read.
impl<R: Seek> Seek for Counting<R> {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        self.inner.seek(pos)
    }
}

/// An archive opened for random access: its tensors, and any byte range or tensor of the
/// original file, decoding only the blocks that hold it.
///
/// Blocks are decoded several at a time in parallel on the current rayon pool (the global
/// one, or the pool the caller runs in through `ThreadPool::install`).
///
/// ```
/// # let tiny = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/tiny.safetensors"))?;
/// # let path = std::env::temp_dir().join(format!("sc-doc-{}.sc", std::process::id()));
/// # std::fs::write(&path, sc::encode_to_vec(&tiny, &Default::default())?)?;
/// let mut archive = sc::Archive::open(std::fs::File::open(&path)?)?;
/// for t in archive.tensors() {
///     println!("{} {} {:?}", t.name, t.dtype_name, t.shape);
/// }
/// let name = archive.tensors()[0].name.clone();
/// let bytes = archive.read_tensor(&name)?;
/// assert_eq!(bytes.len() as u64, archive.tensor(&name).unwrap().len());
/// println!("{} bytes from {} blocks", bytes.len(), archive.stats().blocks_decoded);
/// # std::fs::remove_file(&path)?;
/// # Ok::<(), sc::Error>(())
/// ```
pub struct Archive<R> {
    input: Counting<R>,
    header: FileHeader,
    footer: Footer,
    archive_len: u64,
    /// Tensors by data offset; empty for generic archives.
    tensors: Vec<TensorInfo>,
    /// The kept header's metadata, made on first use: a GGUF vocabulary as text takes longer
    /// than a small file's decode.
    metadata: OnceLock<Option<BTreeMap<String, String>>>,
    /// Positions in `tensors` ordered by name, made on the first lookup by name: each lookup
    /// is then a binary search, so finding many names among many tensors costs
    /// O((names + tensors) log tensors), never their product.
    by_name: OnceLock<Vec<u32>>,
    stats: AccessStats,
    /// The last block decoded, kept because consecutive small tensors often share one.
    cache: Option<(usize, Vec<u8>)>,
    /// Whether the budget leaves room for the cached block.
    caching: bool,
    budget: Budget,
    pools: Pools,
    /// The tensors coded against a base or an earlier tensor.
    spans: Spans,
    /// The base they are coded against, when given.
    base: Option<Base>,
    /// Bytes of blocks decoded at a time when the sources of repeated tensors are held.
    repeat_piece: u64,
    /// Told what each read will read, when the archive is remote: it fetches ahead, and
    /// fetches a block that fails to decode once more.
    prefetch: Option<Arc<dyn Prefetch>>,
}

/// Counts a comparison of two tensor names (for tests, which bound lookups by name).
fn names_compared() {
    #[cfg(feature = "internals")]
    crate::hook::add(crate::hook::Work::NamesCompared, 1);
}

/// The budget for reading the blocks of the archive `header` describes within `memory`, with
/// room for the cached block when there is enough.
fn budget(memory: u64, header: &FileHeader) -> Result<(Budget, bool)> {
    let (size, refs) = (header.block_size, header.refs.is_some());
    match Budget::new(memory, size, 2, 1, refs) {
        Ok(b) => Ok((b, true)),
        Err(_) => Ok((Budget::new(memory, size, 2, 0, refs)?, false)),
    }
}

/// A block that a read needs, and where its wanted bytes go.
struct Want<'o> {
    /// Block number.
    n: usize,
    /// The places in the caller's buffers that the block fills, each with the offset in the
    /// block it starts at; empty when the bytes go to a writer.
    places: Vec<(usize, &'o mut [u8])>,
}

/// A block decoded for a read: straight into its place in the caller's buffer, or into a
/// pooled buffer, to be delivered.
enum Decoded<'o> {
    /// The block's length.
    InPlace(u64),
    /// The decoded block and what is wanted of it.
    Buffered(Vec<u8>, Want<'o>),
}

impl<R: Read + Seek + Send> Archive<R> {
    /// Opens an archive: reads and checks its file header, index and trailer (no blocks).
    ///
    /// The index must describe blocks that follow each other without gaps from the end of the
    /// header to the end tag and cover the original file exactly; the kept safetensors header
    /// must parse. Any disagreement is an error.
    ///
    /// An archive coded against a base opens without it: its tensors are listed, and those not
    /// coded against the base read; reading the others fails with [`Error::BaseNeeded`]
    /// ([`Archive::open_with_base`]).
    pub fn open(inner: R) -> Result<Archive<R>> {
        Archive::open_with(inner, None)
    }

    /// Opens an archive coded against `base` ([`crate::EncodeOptions::base`]). Each base
    /// tensor is checked against the digest the archive records when a read first needs it;
    /// one that differs fails that read with [`Error::BaseMismatch`]. An archive without a
    /// base ignores it.
    ///
    /// ```no_run
    /// let base = sc::Base::open("base.safetensors")?;
    /// let file = std::fs::File::open("tune.safetensors.sc")?;
    /// let mut archive = sc::Archive::open_with_base(file, base)?;
    /// let bytes = archive.read_tensor("pooler.dense.weight")?;
    /// # Ok::<(), sc::Error>(())
    /// ```
    pub fn open_with_base(inner: R, base: Base) -> Result<Archive<R>> {
        Archive::open_with(inner, Some(base))
    }

    /// [`Archive::open`] with a base, or none.
    pub(crate) fn open_with(inner: R, base: Option<Base>) -> Result<Archive<R>> {
        let mut input = Counting { inner, pos: 0 };
        let archive_len = input.seek(SeekFrom::End(0))?;
        input.seek(SeekFrom::Start(0))?;
        let header = FileHeader::read(&mut input, Some(archive_len))?;
        let footer = Footer::read_from_end(&mut input, archive_len)?;
        check_index(&header, &footer)?;
        let tensors = header.tensors()?;
        let spans = spans_of(&header, &tensors)?;
        // The default budget takes one block in flight however large (a base's blocks of
        // 64 MiB need more than the default).
        let one = one_block_needs(header.block_size, header.refs.is_some());
        let (budget, caching) = budget(DEFAULT_MEMORY.max(one), &header)?;
        Ok(Archive {
            stats: AccessStats::default(),
            input,
            header,
            footer,
            archive_len,
            tensors,
            metadata: OnceLock::new(),
            by_name: OnceLock::new(),
            cache: None,
            caching,
            pools: budget.pools(),
            budget,
            spans,
            base,
            repeat_piece: REPEAT_PIECE,
            prefetch: None,
        })
    }

    /// Sets the memory budget for the blocks a read decodes at once
    /// ([`DEFAULT_MEMORY`](crate::DEFAULT_MEMORY) after [`Archive::open`], or what one block
    /// needs where that is more); fails, leaving the budget as it was, if one block does not
    /// fit ([`memory_needed`](crate::memory_needed)).
    pub fn set_memory(&mut self, memory: u64) -> Result<()> {
        (self.budget, self.caching) = budget(memory, &self.header)?;
        self.pools = self.budget.pools();
        if !self.caching {
            self.cache = None;
        }
        Ok(())
    }

    /// Sets the bytes of blocks decoded at a time when a read needs the sources of repeated
    /// tensors, so that tests reach the piece boundaries with small archives.
    #[cfg(feature = "internals")]
    #[doc(hidden)]
    pub fn set_repeat_piece(&mut self, bytes: u64) {
        self.repeat_piece = bytes;
    }

    /// Has `prefetch` told what each read will read (and asked for blocks again).
    pub(crate) fn set_prefetch(&mut self, prefetch: Arc<dyn Prefetch>) {
        self.prefetch = Some(prefetch);
    }

    /// The reader of the archive's bytes.
    pub(crate) fn reader(&self) -> &R {
        &self.input.inner
    }

    /// The name of the base the archive is coded against, as it records it, if it needs one.
    pub fn base_name(&self) -> Option<&str> {
        self.spans.needs_base().then(|| self.spans.base_name())
    }

    /// What the tensor `name` is coded against, if anything but itself.
    pub fn reference(&self, name: &str) -> Option<Reference<'_>> {
        reference(&self.header, name)
    }

    /// The mode the archive was made with.
    pub fn mode(&self) -> Mode {
        self.header.mode
    }

    /// Whether the original was a safetensors or GGUF file (with tensors) or other bytes.
    pub fn kind(&self) -> Kind {
        self.header.kind
    }

    /// Largest block, in original bytes.
    pub fn block_size(&self) -> u32 {
        self.header.block_size
    }

    /// Whether some tensor is coded against the base or an earlier tensor
    /// ([`Archive::reference`]).
    pub fn has_references(&self) -> bool {
        self.header.refs.is_some()
    }

    /// Number of blocks.
    pub fn blocks(&self) -> u64 {
        self.footer.index.len() as u64
    }

    /// Length of the archive in bytes.
    pub fn archive_len(&self) -> u64 {
        self.archive_len
    }

    /// Length of the original file.
    pub fn original_len(&self) -> u64 {
        self.footer.original_len
    }

    /// The MD5 of the original file, if the archive records one.
    pub fn recorded_md5(&self) -> Result<Option<[u8; 16]>> {
        self.header.recorded_md5(&self.footer)
    }

    /// The kept safetensors header's JSON text, as the original file has it.
    pub fn header_json(&self) -> Option<&str> {
        header_json(&self.header)
    }

    /// The kept header's metadata: a safetensors header's `__metadata__` (string values as
    /// they are, any other value as its JSON text), a GGUF header's key-values (strings as they
    /// are, numbers, booleans and arrays as their JSON text). `None` when there is none (and
    /// for generic archives).
    pub fn metadata(&self) -> Option<&BTreeMap<String, String>> {
        // The kept header parsed when the archive was opened (its tensors), so it parses here.
        let made = || kept_metadata(&self.header).ok().flatten();
        self.metadata.get_or_init(made).as_ref()
    }

    /// The tensors of a safetensors archive, ordered by data offset (empty for generic ones).
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// The tensor called `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.position(name).map(|k| &self.tensors[k])
    }

    /// The position in [`Archive::tensors`] of the tensor called `name` (names are unique: a
    /// safetensors header keeps the last entry of a name, a GGUF header has each once).
    fn position(&self, name: &str) -> Option<usize> {
        let tensors = &self.tensors;
        let order = self.by_name.get_or_init(|| {
            let mut order: Vec<u32> = (0..tensors.len() as u32).collect();
            order.sort_unstable_by(|&a, &b| {
                names_compared();
                tensors[a as usize].name.cmp(&tensors[b as usize].name)
            });
            order
        });
        let at = order.binary_search_by(|&k| {
            names_compared();
            tensors[k as usize].name.as_str().cmp(name)
        });
        at.ok().map(|at| order[at] as usize)
    }

    /// What has been read and decoded so far.
    pub fn stats(&self) -> AccessStats {
        AccessStats {
            archive_bytes_read: self.input.pos,
            ..self.stats
        }
    }

    /// Where `t`'s bytes lie in the original file.
    pub fn tensor_range(&self, t: &TensorInfo) -> Range<u64> {
        let base = self.header.prefix.len() as u64;
        base.saturating_add(t.begin)..base.saturating_add(t.end)
    }

    /// Archive bytes attributed to each tensor.
    ///
    /// Each block's stored bytes (record and payloads) are shared among the byte ranges it holds
    /// in proportion to their lengths, rounded down at every range boundary within the block,
    /// so the shares of a block add up to its stored length exactly.
    pub fn stored_bytes(&self) -> StoredBytes {
        let mut per_tensor = vec![0u64; self.tensors.len()];
        let mut in_tensors = 0u64;
        let mut in_blocks = 0u64;
        let ranges: Vec<Range<u64>> = self.tensors.iter().map(|t| self.tensor_range(t)).collect();
        for e in &self.footer.index {
            let (start, raw, stored) = (e.raw_offset, e.raw_len as u64, e.stored_len as u64);
            in_blocks += stored;
            // Share of the block's stored bytes up to `pos` bytes into the block.
            let upto = |pos: u64| stored * pos / raw;
            let first = ranges.partition_point(|r| r.end <= start);
            for (k, r) in ranges.iter().enumerate().skip(first) {
                if r.start >= start + raw {
                    break;
                }
                let from = r.start.max(start) - start;
                let to = r.end.min(start + raw) - start;
                let share = upto(to) - upto(from);
                per_tensor[k] += share;
                in_tensors += share;
            }
        }
        StoredBytes {
            per_tensor,
            between_tensors: in_blocks - in_tensors,
            container: self.archive_len - in_blocks,
        }
    }

    /// Bytes `range` of the original file.
    pub fn read_range(&mut self, range: Range<u64>) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        if range.end <= self.footer.original_len {
            out.reserve(range.end.saturating_sub(range.start) as usize);
        }
        self.read_range_to(range, &mut out)?;
        Ok(out)
    }

    /// Writes bytes `range` of the original file to `out`.
    pub fn read_range_to<W: Write + Send>(&mut self, range: Range<u64>, out: &mut W) -> Result<()> {
        self.read_to(range, out, false)
    }

    /// [`Archive::read_range_to`]; `nested` when it reads the sources of repeated tensors.
    fn read_to(
        &mut self,
        range: Range<u64>,
        out: &mut (dyn Write + Send),
        nested: bool,
    ) -> Result<()> {
        self.check_range(&range)?;
        let prefix = &self.header.prefix;
        let kept = range.start.min(prefix.len() as u64)..range.end.min(prefix.len() as u64);
        out.write_all(&prefix[kept.start as usize..kept.end as usize])?;
        let index = &self.footer.index;
        let first = index.partition_point(|e| e.raw_offset + e.raw_len as u64 <= range.start);
        let end = index.partition_point(|e| e.raw_offset < range.end);
        let wants = (first..end).map(|n| Want {
            n,
            places: Vec::new(),
        });
        let last = end.checked_sub(1).filter(|&l| l >= first);
        self.decode_blocks(wants, last, Some((out, range)), nested)
    }

    /// Reads bytes `range` of the original file into `out`, which must be exactly as long.
    /// Blocks that lie wholly inside the range are decoded straight into `out`. After an error
    /// the contents of `out` are unspecified.
    pub fn read_range_into(&mut self, range: Range<u64>, out: &mut [u8]) -> Result<()> {
        let len = range.end.saturating_sub(range.start);
        if out.len() as u64 != len {
            return Err(Error::InvalidArgument(format!(
                "a buffer of {} bytes for {len} bytes",
                out.len()
            )));
        }
        self.check_range(&range)?;
        self.read_ranges_into(&mut [(range.start, out)])
    }

    /// Reads several byte ranges of the original file, each into its own buffer: `parts` holds
    /// (start of the range, buffer as long as the range), in order of start, without overlaps.
    ///
    /// One parallel pass (one per 64 MiB of blocks in an archive with repeated tensors)
    /// decodes every block the ranges need, each once, and no block that they do not need; a
    /// block that lies wholly inside one buffer is decoded straight into it. This is how many tensors are loaded at once into memory allocated for each. After
    /// an error the contents of the buffers are unspecified.
    pub fn read_ranges_into(&mut self, parts: &mut [(u64, &mut [u8])]) -> Result<()> {
        let mut end = 0;
        for (start, buf) in parts.iter() {
            let range = *start..start.saturating_add(buf.len() as u64);
            self.check_range(&range)?;
            if range.start < end {
                return Err(Error::InvalidArgument(
                    "ranges must be in order and must not overlap".into(),
                ));
            }
            end = range.end;
        }
        let prefix = &self.header.prefix;
        let index = &self.footer.index;
        let mut wants: Vec<Want> = Vec::new();
        for (start, buf) in parts.iter_mut() {
            let mut pos = *start;
            let mut rest: &mut [u8] = buf;
            if let Some(kept) = prefix.get(pos as usize..) {
                let (head, tail) = rest.split_at_mut(kept.len().min(rest.len()));
                head.copy_from_slice(&kept[..head.len()]);
                (pos, rest) = (pos + head.len() as u64, tail);
            }
            let mut n = index.partition_point(|e| e.raw_offset + e.raw_len as u64 <= pos);
            while !rest.is_empty() {
                // The index covers the original file (`check_index`) and the range lies in it.
                let e = index.get(n).ok_or_else(|| {
                    Error::Corrupt("block index does not cover the original file".into())
                })?;
                let at = (pos - e.raw_offset) as usize;
                let take = (e.raw_len as usize - at).min(rest.len());
                let (head, tail) = std::mem::take(&mut rest).split_at_mut(take);
                (pos, rest) = (pos + head.len() as u64, tail);
                match wants.last_mut() {
                    Some(w) if w.n == n => w.places.push((at, head)),
                    _ => wants.push(Want {
                        n,
                        places: vec![(at, head)],
                    }),
                }
                n += 1;
            }
        }
        let last = wants.last().map(|w| w.n);
        self.decode_blocks(wants.into_iter(), last, None, false)
    }

    /// The data of the tensor called `name`.
    pub fn read_tensor(&mut self, name: &str) -> Result<Vec<u8>> {
        let range = self.named_range(name)?;
        self.read_range(range)
    }

    /// Writes the data of the tensor called `name` to `out`.
    pub fn read_tensor_to<W: Write + Send>(&mut self, name: &str, out: &mut W) -> Result<()> {
        let range = self.named_range(name)?;
        self.read_range_to(range, out)
    }

    /// Reads the data of the tensor called `name` into `out`, which must be exactly as long
    /// ([`TensorInfo::len`]).
    pub fn read_tensor_into(&mut self, name: &str, out: &mut [u8]) -> Result<()> {
        let range = self.named_range(name)?;
        self.read_range_into(range, out)
    }

    container_parts!();

    fn named_range(&self, name: &str) -> Result<Range<u64>> {
        self.find(name).map(|(_, range)| range)
    }

    /// The position of the tensor called `name` in [`Archive::tensors`] and its bytes in the
    /// original file, which must hold them.
    fn find(&self, name: &str) -> Result<(usize, Range<u64>)> {
        let k = self
            .position(name)
            .ok_or_else(|| Error::NoSuchTensor(name.to_string()))?;
        let range = self.tensor_range(&self.tensors[k]);
        // Only a header that was wrong in the original file (say, a truncated stream) can say
        // this; the archive holds that file faithfully.
        if range.end > self.footer.original_len {
            return Err(Error::Corrupt(format!(
                "tensor {name:?} ends at byte {}, past the end of the original file ({} bytes)",
                range.end, self.footer.original_len
            )));
        }
        Ok((k, range))
    }

    /// The kept header's `__metadata__` entry as it is, if it has one.
    fn metadata_value(&self) -> Result<Option<serde_json::Value>> {
        if self.header.kind != Kind::Safetensors {
            return Ok(None);
        }
        safetensors::metadata(&self.header.prefix[8..]).map_err(Error::KeptHeader)
    }

    /// Refuses a range that is not inside the original file.
    fn check_range(&self, range: &Range<u64>) -> Result<()> {
        if range.start > range.end || range.end > self.footer.original_len {
            return Err(Error::InvalidArgument(format!(
                "bytes {}..{} are not inside the original file of {} bytes",
                range.start, range.end, self.footer.original_len
            )));
        }
        Ok(())
    }

    /// Decodes the blocks `wants` asks for (in increasing order; `last` is the last of them)
    /// and delivers their bytes in `out`'s range to its writer, or else to their places in the
    /// caller's buffers; `nested` when it reads the sources of repeated tensors, which must
    /// not repeat others themselves.
    ///
    /// The sources of repeated tensors are held while the blocks repeating them decode, so
    /// an archive with repeated tensors is read [`REPEAT_PIECE`] bytes of blocks at a time
    /// (the piece): memory stays bounded whatever the read.
    fn decode_blocks<'o>(
        &mut self,
        wants: impl Iterator<Item = Want<'o>>,
        last: Option<usize>,
        mut out: Option<(&mut (dyn Write + Send), Range<u64>)>,
        nested: bool,
    ) -> Result<()> {
        let piece = if self.spans.has_own() {
            self.repeat_piece
        } else {
            u64::MAX
        };
        let mut wants = wants.peekable();
        while wants.peek().is_some() {
            let index = &self.footer.index;
            let len = |w: &Want| index[w.n].raw_len as u64;
            let (mut group, mut bytes) = (Vec::new(), 0u64);
            while let Some(w) =
                wants.next_if(|w| group.is_empty() || bytes.saturating_add(len(w)) <= piece)
            {
                bytes += len(&w);
                group.push(w);
            }
            self.decode_group(group, last, &mut out, nested)?;
        }
        Ok(())
    }

    /// [`Archive::decode_blocks`] of blocks whose repeated tensors' sources are read first
    /// and held, several blocks at a time in parallel.
    fn decode_group(
        &mut self,
        group: Vec<Want<'_>>,
        last: Option<usize>,
        out: &mut Option<(&mut (dyn Write + Send), Range<u64>)>,
        nested: bool,
    ) -> Result<()> {
        let index = &self.footer.index;
        // The original bytes of the blocks, in runs of consecutive blocks.
        let runs = join_adjacent(group.iter().map(|w| {
            let e = &index[w.n];
            e.raw_offset..e.raw_offset + e.raw_len as u64
        }));
        self.spans.verify(self.base.as_ref(), &runs)?;
        let needed: Vec<Range<u64>> = runs
            .into_iter()
            .flat_map(|run| self.spans.own_sources(run))
            .collect();
        if nested && !needed.is_empty() {
            return Err(Error::Corrupt(
                "a repeated tensor's source holds repeated bytes itself".into(),
            ));
        }
        let mut parts = Vec::with_capacity(needed.len());
        for r in needed {
            let mut bytes = Vec::new();
            self.read_to(r.clone(), &mut bytes, true)?;
            parts.push((r, bytes));
        }
        let own = Retained::from_parts(parts);
        let index = &self.footer.index;
        // The blocks' bytes in the archive, but the cached block's.
        let cached = self.cache.as_ref().map(|(n, _)| *n);
        let planned: Vec<Range<u64>> = (group.iter())
            .filter(|w| Some(w.n) != cached)
            .map(|w| index[w.n].offset..index[w.n].offset + index[w.n].stored_len as u64)
            .collect();
        let mut wants = group.into_iter().peekable();
        if let Some((n, block)) = &self.cache {
            if let Some(w) = wants.next_if(|w| w.n == *n) {
                deliver(out, w, block, index[*n].raw_offset)?;
            }
        }
        let block_size = self.header.block_size;
        let Archive {
            input,
            stats,
            cache,
            caching,
            pools,
            budget,
            spans,
            base,
            prefetch,
            ..
        } = self;
        if let Some(p) = prefetch.as_ref() {
            p.will_read(&planned);
        }
        let prefetch = prefetch.as_deref();
        // Block `n` read once more, for a block whose bytes failed their checks: spoilt on
        // the way, they arrive whole this time; spoilt in the archive, they fail again.
        let again = |n: usize| -> Result<Block<'static>> {
            let e = index[n];
            let p = prefetch.ok_or_else(|| Error::Io(io::ErrorKind::Unsupported.into()))?;
            let bytes = p.read_again(e.offset..e.offset + e.stored_len as u64)?;
            parse_block(&mut &bytes[..], block_size, index, n, &pools.coded)
        };
        let sources = Sources {
            spans,
            base: base.as_ref(),
            own: &own,
        };
        ordered(
            budget.window,
            &mut || {
                let Some(want) = wants.next() else {
                    return Ok(None);
                };
                let block = match read_block(input, block_size, index, want.n, &pools.coded) {
                    Err(Error::CorruptBlock { .. }) if prefetch.is_some() => again(want.n)?,
                    read => read?,
                };
                stats.block_bytes_read += block.record.stored_len();
                Ok(Some((block, want)))
            },
            &|(block, mut want): (Block, Want)| {
                let n = want.n;
                let decoded = match decode_want(block, &mut want, pools, sources) {
                    // Bytes spoilt on the way are fetched once more.
                    Err(Error::CorruptBlock { .. }) if prefetch.is_some() => {
                        decode_want(again(n)?, &mut want, pools, sources)?
                    }
                    decoded => decoded?,
                };
                Ok::<_, Error>(match decoded {
                    None => Decoded::InPlace(index[n].raw_len as u64),
                    Some(out) => Decoded::Buffered(out, want),
                })
            },
            &mut |decoded| {
                stats.blocks_decoded += 1;
                let (block, want) = match decoded? {
                    Decoded::InPlace(len) => {
                        stats.bytes_decoded += len;
                        return Ok(());
                    }
                    Decoded::Buffered(block, want) => (block, want),
                };
                stats.bytes_decoded += block.len() as u64;
                let n = want.n;
                deliver(out, want, &block, index[n].raw_offset)?;
                if Some(n) == last && *caching {
                    *cache = Some((n, block));
                } else {
                    pools.blocks.give(block);
                }
                Ok(())
            },
        )
    }
}
