//! Decoding: read records in order, decode blocks in parallel, check everything.

use super::block::decode_block;
use super::digest::DigestWorker;
use super::pool::Pool;
use super::refs::{NoOwn, OwnBytes, Retained, Sources, Spans};
use super::source::{Payload, Source, Stream};
use super::{on_threads, ordered_until, Budget, Pending, Pools, DEFAULT_MEMORY};
use crate::base::Base;
use crate::cancel::Cancel;
use crate::container::{checksum::hex, BlockRecord, FileHeader, Footer, IndexEntry, Kind, Mode};
use crate::error::{Error, Result};
use crate::read::read_up_to;
use crate::safetensors::TensorInfo;
use std::io::{self, Read, Write};
use std::ops::Range;
use std::sync::Arc;

/// Settings for [`decode`], [`decode_file`](crate::decode_file) and [`decode_to_vec`](crate::decode_to_vec). Build them from
/// [`Default`] so that code keeps compiling when settings are added:
///
/// ```
/// let opts = sc::DecodeOptions {
///     check_md5: true,
///     ..Default::default()
/// };
/// ```
#[derive(Clone, Copy)]
pub struct DecodeOptions<'a> {
    /// Also compute the MD5 of the output and compare it with the one recorded at encode time,
    /// if there is one. Block checksums (XXH3-64) are always checked.
    pub check_md5: bool,
    /// Length of the archive when known; bounds every allocation by the real data.
    /// [`decode_file`](crate::decode_file) and [`decode_to_vec`](crate::decode_to_vec) know it themselves.
    pub archive_len: Option<u64>,
    /// Worker threads: 0 decodes on the current rayon pool (the global one, or the pool the
    /// caller runs in through `ThreadPool::install`); any other number on a pool of that many
    /// threads made for the call.
    pub threads: usize,
    /// Called with the archive bytes decoded so far after each block is written, on the
    /// calling thread.
    pub progress: Option<&'a (dyn Fn(u64) + Sync)>,
    /// Memory budget in bytes for the blocks in flight ([`DEFAULT_MEMORY`], 256 MiB, by
    /// default): fewer blocks are decoded at once as the archive's blocks grow, down to one at
    /// a time, whatever the thread count. An archive whose blocks are too large for the budget
    /// ([`memory_needed`](crate::memory_needed)) is refused before any block is read.
    pub memory: u64,
    /// The base an archive of a fine-tune was coded against ([`crate::EncodeOptions::base`]).
    /// Such an archive does not decode without it ([`Error::BaseNeeded`]), nor with a base
    /// whose tensors differ from the ones it was coded against ([`Error::BaseMismatch`]):
    /// both are found before anything is written. Archives without a base ignore it.
    pub base: Option<&'a Base>,
    /// Read an archive file given to [`decode_file`](crate::decode_file) through memory maps (the default):
    /// blocks are decoded where the page cache holds them, but another process truncating
    /// the file meanwhile kills this one with SIGBUS. Off, the file is read with positioned
    /// reads, and a file truncated meanwhile is an error like any other.
    pub map: bool,
    /// A token that stops the run once set ([`Cancel`]): it ends with
    /// [`Error::Cancelled`] once the blocks being decoded are done, writing nothing more.
    pub cancel: Option<&'a Cancel>,
}

impl Default for DecodeOptions<'_> {
    fn default() -> Self {
        DecodeOptions {
            check_md5: false,
            archive_len: None,
            threads: 0,
            progress: None,
            memory: DEFAULT_MEMORY,
            base: None,
            map: true,
            cancel: None,
        }
    }
}

impl std::fmt::Debug for DecodeOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DecodeOptions")
            .field("check_md5", &self.check_md5)
            .field("archive_len", &self.archive_len)
            .field("threads", &self.threads)
            .field("progress", &self.progress.map(|_| "callback"))
            .field("memory", &self.memory)
            .field("base", &self.base.map(Base::name))
            .field("map", &self.map)
            .field("cancel", &self.cancel)
            .finish()
    }
}

/// What [`decode`] found.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct DecodeReport {
    /// The mode the archive was made with.
    pub mode: Mode,
    /// How its original was treated.
    pub kind: Kind,
    /// Its largest block, in original bytes.
    pub block_size: u32,
    /// Bytes written.
    pub original_len: u64,
    /// Bytes read.
    pub archive_len: u64,
    /// Blocks decoded.
    pub blocks: u64,
    /// MD5 recorded at encode time, if it was.
    pub stored_md5: Option<[u8; 16]>,
    /// MD5 of the output, when it was computed.
    pub md5: Option<[u8; 16]>,
}

/// A reader that counts the bytes it has delivered.
pub(crate) struct Counting<R> {
    pub(crate) inner: R,
    pub(crate) pos: u64,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.pos += n as u64;
        Ok(n)
    }
}

/// Reads block records and payloads, one block at a time, building the index as it goes.
struct BlockReader {
    index: Vec<IndexEntry>,
    raw_pos: u64,
    /// Archive offset of the end tag, once reached.
    end_offset: Option<u64>,
    block_size: u32,
    archive_len: Option<u64>,
}

impl BlockReader {
    fn read<'a, S: Source<'a>>(
        &mut self,
        r: &mut Counting<S>,
        buffers: &Pool<Vec<u8>>,
    ) -> Result<Option<Block<'a>>> {
        if self.end_offset.is_none() {
            let n = self.index.len() as u64;
            let offset = r.pos;
            let Some(rec) = BlockRecord::read(r, self.block_size, n)? else {
                self.end_offset = Some(offset);
                return Ok(None);
            };
            let len = rec.payload_len();
            if self.archive_len.is_some_and(|a| r.pos + len > a) {
                return Err(Error::Truncated("block payload"));
            }
            let payload = r.inner.payload(len as usize, buffers)?;
            r.pos += len;
            let raw_offset = self.raw_pos;
            self.index.push(IndexEntry {
                offset,
                raw_offset,
                raw_len: rec.raw_len,
                stored_len: rec.stored_len() as u32,
            });
            self.raw_pos += rec.raw_len as u64;
            return Ok(Some(Block {
                n,
                raw_offset,
                record: rec,
                payload,
            }));
        }
        Ok(None)
    }
}

/// A block read but not yet decoded.
pub(crate) struct Block<'a> {
    /// Its number, from 0.
    pub(crate) n: u64,
    /// Offset of its first byte in the original file.
    pub(crate) raw_offset: u64,
    /// Its record.
    pub(crate) record: BlockRecord,
    /// Its payload.
    pub(crate) payload: Payload<'a>,
}

impl Block<'_> {
    /// Its bytes in the original file.
    pub(crate) fn range(&self) -> Range<u64> {
        self.raw_offset..self.raw_offset + self.record.raw_len as u64
    }
}

/// Decodes one block into a pooled buffer, reading its base bytes (if it has any) from
/// `sources`.
pub(crate) fn decode_one(
    block: Block,
    pools: &Pools,
    sources: Sources,
) -> Result<(BlockRecord, Vec<u8>)> {
    let mut out = pools.blocks.buffer(block.record.raw_len as usize);
    let rec = decode_into(block, &mut out, pools, sources)?;
    Ok((rec, out))
}

/// Decodes one block into `out` (exactly its length), returning the payload's buffer (if it
/// has one) to the pool.
pub(crate) fn decode_into(
    block: Block,
    out: &mut [u8],
    pools: &Pools,
    sources: Sources,
) -> Result<BlockRecord> {
    let Block {
        n,
        raw_offset,
        record: rec,
        payload,
    } = block;
    let mut base = rec
        .transform
        .is_delta()
        .then(|| pools.blocks.buffer(rec.raw_len as usize));
    if let Some(b) = &mut base {
        sources.fill(raw_offset, b)?;
    }
    let decoded = decode_block(
        &rec,
        &payload,
        base.as_deref(),
        out,
        &mut pools.scratch.guard(),
    );
    if let Some(b) = base {
        pools.blocks.give(b);
    }
    if let Payload::Read(buffer) = payload {
        pools.coded.give(buffer);
    }
    decoded.map_err(|e| e.in_block(n))?;
    Ok(rec)
}

/// Where a full decode reads the sources of repeated tensors.
enum Own<'r> {
    /// There are none.
    None,
    /// The archive read a second time, through random access.
    Again(Box<dyn OwnBytes + 'r>),
    /// Kept from the output as it passes (a stream).
    Kept(Retained),
}

impl Own<'_> {
    fn bytes(&self) -> &dyn OwnBytes {
        match self {
            Own::None => &NoOwn,
            Own::Again(a) => &**a,
            Own::Kept(k) => k,
        }
    }
}

/// The referenced tensors of an archive with `header`, whose kept header lists `tensors`
/// (checked against them).
pub(crate) fn spans_of(header: &FileHeader, tensors: &[TensorInfo]) -> Result<Spans> {
    let Some(refs) = &header.refs else {
        return Ok(Spans::default());
    };
    refs.check(tensors)?;
    Ok(Spans::new(Some(refs), tensors, header.prefix.len() as u64))
}

/// The kept header until it is written, first of the output.
enum Kept {
    /// Being inflated on the pool (a GGUF vocabulary takes tens of milliseconds), while the
    /// first blocks decode.
    Pending(Pending<Result<Vec<u8>>>),
    /// At hand.
    Ready(Vec<u8>),
    Written,
}

impl Kept {
    /// Writes the kept header unless it is written (waiting for it to be inflated, running pool
    /// work meanwhile), and queues it first for the MD5 thread.
    fn write(&mut self, output: &mut impl Write, digest: Option<&DigestWorker>) -> Result<()> {
        let prefix = match std::mem::replace(self, Kept::Written) {
            Kept::Pending(p) => p.wait()?,
            Kept::Ready(prefix) => prefix,
            Kept::Written => return Ok(()),
        };
        output.write_all(&prefix)?;
        if let Some(d) = digest {
            d.push(Arc::new(prefix));
        }
        Ok(())
    }
}

/// A block decoded by a worker, or one to decode on the writing thread once the blocks before
/// it are written (it repeats bytes that a stream only has once they are).
enum Step<'a> {
    /// Where the block starts in the original file, its record and bytes.
    Done(u64, BlockRecord, Vec<u8>),
    Later(Block<'a>),
}

/// Fails with [`Error::Md5Mismatch`] when both the MD5 an archive records and the MD5 of what
/// was decoded are known and differ.
pub(crate) fn check_md5(stored: Option<[u8; 16]>, decoded: Option<[u8; 16]>) -> Result<()> {
    match (stored, decoded) {
        (Some(expected), Some(actual)) if expected != actual => Err(Error::Md5Mismatch {
            expected: hex(&expected),
            actual: hex(&actual),
        }),
        _ => Ok(()),
    }
}

/// Decompresses the archive on `input` into `output`; returns what it found.
///
/// Every structure and every block's checksum is checked (the MD5 too with
/// [`DecodeOptions::check_md5`]); any failure is an error naming it, and nothing after the
/// failing block is written. Reading, decoding (in parallel, see [`DecodeOptions::threads`])
/// and writing overlap, with memory bounded by a window of blocks.
pub fn decode<R: Read + Send, W: Write + Send>(
    input: R,
    output: W,
    opts: &DecodeOptions,
) -> Result<DecodeReport> {
    on_threads(opts.threads, || {
        decode_from(Stream(input), output, opts, None)
    })
}

/// Opens the archive being decoded a second time, given the base, to read the sources of its
/// repeated tensors: what `archive` builds for a decoder of an archive file and hands down.
pub(crate) type Reread<'r> =
    Box<dyn FnOnce(Option<Base>) -> Result<Box<dyn OwnBytes + 'r>> + Send + 'r>;

/// Decodes the archive on `input`; `again`, when the archive can be read a second time, is
/// where the sources of its repeated tensors are read (a stream keeps them instead).
pub(crate) fn decode_from<'a, S: Source<'a> + Send, W: Write + Send>(
    input: S,
    mut output: W,
    opts: &DecodeOptions,
    again: Option<Reread<'_>>,
) -> Result<DecodeReport> {
    let mut r = Counting {
        inner: input,
        pos: 0,
    };
    let (mut header, stored) = FileHeader::read_stored(&mut r, opts.archive_len)?;
    let kept_len = stored.original_len();
    // Only an archive with references needs its kept header's tensors to decode; any other's
    // is inflated on the pool while the first blocks decode (see `Kept`).
    let (spans, deflated) = match header.refs.is_none() && stored.is_deflated() {
        true => (Spans::default(), Some(stored)),
        false => {
            header.prefix = stored.open()?.0;
            let spans = match header.refs {
                Some(_) => spans_of(&header, &header.tensors()?)?,
                None => Spans::default(),
            };
            (spans, None)
        }
    };
    // Up to four blocks per thread in flight, where encode has two: the writer waits for the
    // kept header (a GGUF vocabulary inflates in tens of milliseconds) while the workers go on
    // decoding; with two per thread they stood idle for half that time.
    let budget = Budget::new(opts.memory, header.block_size, 4, 0, header.refs.is_some())?;
    // A missing or wrong base is reported before anything is written.
    spans.verify(opts.base, std::slice::from_ref(&(0..u64::MAX)))?;
    let mut own = match (spans.has_own(), again) {
        (false, _) => Own::None,
        (true, Some(again)) => Own::Again(again(opts.base.cloned())?),
        (true, None) => Own::Kept(Retained::new(&spans)),
    };
    let (pools, digest) = budget.start(opts.check_md5)?;
    let mut reader = BlockReader {
        index: Vec::new(),
        raw_pos: kept_len,
        end_offset: None,
        block_size: header.block_size,
        archive_len: opts.archive_len,
    };
    let mut decoded_to = r.pos;
    let sources = Sources {
        spans: &spans,
        base: opts.base,
        own: &NoOwn,
    };
    rayon::in_place_scope(|s| {
        let mut kept = match deflated {
            Some(stored) => Kept::Pending(Pending::spawn(s, move || Ok(stored.open()?.0))),
            None => Kept::Ready(std::mem::take(&mut header.prefix)),
        };
        ordered_until(
            budget.window,
            opts.cancel,
            &mut || {
                // Decoded blocks the MD5 thread has not hashed yet stay in memory.
                if let Some(d) = &digest {
                    d.wait_behind(budget.md5_behind);
                }
                reader.read(&mut r, &pools.coded)
            },
            &|block: Block<'a>| {
                if block.record.transform.is_delta() && spans.needs_own(block.range()) {
                    return Ok(Step::Later(block));
                }
                let start = block.raw_offset;
                decode_one(block, &pools, sources).map(|(rec, out)| Step::Done(start, rec, out))
            },
            &mut |decoded| {
                kept.write(&mut output, digest.as_ref())?;
                let (start, rec, out) = match decoded? {
                    Step::Done(start, rec, out) => (start, rec, out),
                    Step::Later(block) => {
                        let start = block.raw_offset;
                        let own = Sources {
                            own: own.bytes(),
                            ..sources
                        };
                        let (rec, out) = decode_one(block, &pools, own)?;
                        (start, rec, out)
                    }
                };
                if let Own::Kept(retained) = &mut own {
                    retained.keep(start, &out);
                }
                output.write_all(&out)?;
                match &digest {
                    Some(d) => d.push(Arc::new(out)),
                    None => pools.blocks.give(out),
                }
                decoded_to += rec.stored_len();
                if let Some(progress) = opts.progress {
                    progress(decoded_to);
                }
                Ok(())
            },
        )?;
        // No blocks (tensors of no bytes): the kept header is still written.
        kept.write(&mut output, digest.as_ref())
    })?;
    let (index, raw_pos) = (reader.index, reader.raw_pos);
    let end_offset = reader.end_offset.unwrap_or_default();
    let footer = Footer::read_after_tag(&mut r, index.len() as u64)?;
    if footer.end_offset != end_offset || footer.index != index {
        return Err(Error::Corrupt(
            "block index disagrees with the blocks".into(),
        ));
    }
    if footer.original_len != raw_pos {
        return Err(Error::Corrupt(format!(
            "trailer says {} original bytes, blocks hold {raw_pos}",
            footer.original_len
        )));
    }
    let mut extra = [0u8; 1];
    if read_up_to(&mut r, &mut extra)? != 0 {
        return Err(Error::Corrupt(
            "unexpected data after the end of the archive".into(),
        ));
    }
    output.flush()?;
    let stored_md5 = header.recorded_md5(&footer)?;
    let md5 = digest.map(DigestWorker::finish).transpose()?;
    check_md5(stored_md5, md5)?;
    Ok(DecodeReport {
        mode: header.mode,
        kind: header.kind,
        block_size: header.block_size,
        original_len: raw_pos,
        archive_len: r.pos,
        blocks: index.len() as u64,
        stored_md5,
        md5,
    })
}
