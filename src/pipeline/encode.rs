//! Encoding: probe the input, keep its header, plan blocks, code them in parallel.

use super::block::{code_block, payloads, Scratch};
use super::digest::DigestWorker;
use super::plan::{Planner, TensorRows};
use super::pool::{Pool, Pooled};
use super::{on_threads, ordered, Budget, Pools, DEFAULT_MEMORY};
use crate::container::{
    check_block_size, BlockRecord, FileHeader, Footer, IndexEntry, Kind, Mode,
    DEFAULT_BLOCK_SIZE, MAX_KEPT_JSON, VERSION,
};
use crate::error::{Error, HeaderError, Result};
use crate::read::read_up_to;
use crate::safetensors::{json_len, Header, MAX_HEADER_LEN};
use crate::transform::Transform;
use std::io::{Read, Write};
use std::sync::Arc;

/// Settings for [`encode`] and [`encode_to_vec`]. Build them from [`EncodeOptions::new`] or
/// [`Default`] so that code keeps compiling when settings are added:
///
/// ```
/// let opts = sc::EncodeOptions {
///     block_size: 4 << 20,
///     threads: 2,
///     ..sc::EncodeOptions::new(sc::Mode::Best)
/// };
/// ```
#[derive(Clone, Copy)]
pub struct EncodeOptions<'a> {
    /// FAST or BEST.
    pub mode: Mode,
    /// Largest block in bytes: even, from 4 KiB to 64 MiB
    /// ([`MIN_BLOCK_SIZE`](crate::MIN_BLOCK_SIZE), [`MAX_BLOCK_SIZE`](crate::MAX_BLOCK_SIZE));
    /// 1 MiB by default. Blocks are the unit of parallel coding and of random access.
    pub block_size: u32,
    /// Record the MD5 of the input. MD5 is sequential, about 0.5 GB/s on one core: FAST codes
    /// faster than that on two cores, so it leaves the MD5 out unless asked. Blocks always
    /// carry XXH3-64 checksums of their original bytes.
    pub md5: bool,
    /// Length of the input, when known (a file): a safetensors header must then place every
    /// tensor inside it, else the input is coded as plain bytes. `None` for streams.
    pub input_len: Option<u64>,
    /// Worker threads: 0 codes on the current rayon pool (the global one, or the pool the
    /// caller runs in through `ThreadPool::install`); any other number on a pool of that many
    /// threads made for the call. Output is identical for any thread count.
    pub threads: usize,
    /// Called with the input bytes coded so far after each block is written, on the calling
    /// thread.
    pub progress: Option<&'a (dyn Fn(u64) + Sync)>,
    /// Memory budget in bytes for the blocks in flight ([`DEFAULT_MEMORY`], 256 MiB, by
    /// default): fewer blocks are coded at once as blocks grow, down to one at a time, whatever
    /// the thread count. A budget too small for one block
    /// ([`memory_needed`](crate::memory_needed)) is an error.
    pub memory: u64,
}

impl EncodeOptions<'_> {
    /// Default settings for `mode`: 1 MiB blocks, MD5 recorded by BEST only, the current
    /// thread pool.
    pub fn new(mode: Mode) -> Self {
        EncodeOptions {
            mode,
            block_size: DEFAULT_BLOCK_SIZE,
            md5: mode == Mode::Best,
            input_len: None,
            threads: 0,
            progress: None,
            memory: DEFAULT_MEMORY,
        }
    }

    /// Checks a block size against the format's limits (even, 4 KiB to 64 MiB); the error
    /// says what they are.
    pub fn check_block_size(size: u32) -> Result<()> {
        check_block_size(size).map_err(Error::InvalidArgument)
    }
}

impl Default for EncodeOptions<'_> {
    /// FAST, see [`EncodeOptions::new`].
    fn default() -> Self {
        EncodeOptions::new(Mode::Fast)
    }
}

impl std::fmt::Debug for EncodeOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EncodeOptions")
            .field("mode", &self.mode)
            .field("block_size", &self.block_size)
            .field("md5", &self.md5)
            .field("input_len", &self.input_len)
            .field("threads", &self.threads)
            .field("progress", &self.progress.map(|_| "callback"))
            .field("memory", &self.memory)
            .finish()
    }
}

/// What [`encode`] did.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct EncodeReport {
    /// Bytes read.
    pub original_len: u64,
    /// Bytes written.
    pub archive_len: u64,
    /// Blocks written.
    pub blocks: u64,
    /// How the input was treated.
    pub kind: Kind,
    /// Why an input that did not validate as safetensors took the generic path.
    pub generic_reason: Option<HeaderError>,
    /// MD5 of the input, when it was recorded.
    pub md5: Option<[u8; 16]>,
}

// Every header the probe accepts must fit the container's kept-header limit.
const _: () = assert!(MAX_HEADER_LEN <= MAX_KEPT_JSON);

/// Reads the safetensors header if there is a valid one; returns it and the bytes consumed.
///
/// `input_len` (known for files) lets the header be checked against the real payload size.
fn probe(
    input: &mut impl Read,
    input_len: Option<u64>,
) -> Result<(Option<Header>, Vec<u8>, Option<HeaderError>)> {
    let mut first = [0u8; 8];
    let got = read_up_to(input, &mut first)?;
    let mut consumed = first[..got].to_vec();
    if got < 8 {
        return Ok((None, consumed, Some(HeaderError::TooShort)));
    }
    let n = json_len(&first);
    let room = input_len.map_or(u64::MAX, |l| l.saturating_sub(8));
    if n > MAX_HEADER_LEN || n > room || n < 2 {
        return Ok((None, consumed, Some(HeaderError::ImplausibleLength(n))));
    }
    consumed.resize(8 + n as usize, 0);
    let got = read_up_to(input, &mut consumed[8..])?;
    if got < n as usize {
        consumed.truncate(8 + got);
        return Ok((None, consumed, Some(HeaderError::EndsInsideHeader)));
    }
    match Header::parse(&consumed[8..], input_len.map(|l| l.saturating_sub(8 + n))) {
        Ok(h) => Ok((Some(h), consumed, None)),
        Err(reason) => Ok((None, consumed, Some(reason))),
    }
}

/// Reads the input one planned block at a time.
struct InputReader {
    planner: Planner,
    /// The input has ended (or the plan is complete).
    done: bool,
}

/// A block read from the input: how to split it, where its elements lie in rows, and its bytes.
type ReadBlock = (Transform, Option<TensorRows>, Vec<u8>);

/// A [`ReadBlock`] whose bytes are shared with the MD5 thread.
type RawBlock = (Transform, Option<TensorRows>, Arc<Vec<u8>>);

impl InputReader {
    fn read(
        &mut self,
        source: &mut impl Read,
        buffers: &Pool<Vec<u8>>,
    ) -> Result<Option<ReadBlock>> {
        while !self.done {
            let Some(spec) = self.planner.next() else {
                self.done = true;
                break;
            };
            let mut buf = buffers.buffer(spec.len as usize);
            let got = read_up_to(source, &mut buf)?;
            let mut transform = spec.transform;
            if got < buf.len() {
                // A stream ended early (or a file shrank): the block is what is there.
                buf.truncate(got);
                if got % transform.width() != 0 {
                    transform = Transform::Bytes;
                }
                self.done = true;
            }
            if got > 0 {
                return Ok(Some((transform, spec.rows, buf)));
            }
        }
        Ok(None)
    }
}

/// Appends coded blocks to the archive in order, keeping the index.
struct ArchiveWriter {
    /// The record being written.
    head: Vec<u8>,
    archive_len: u64,
    raw_pos: u64,
    index: Vec<IndexEntry>,
}

/// A block coded and waiting to be written: its bytes, the scratch holding its coded planes,
/// and its record.
type Coded<'p> = (Arc<Vec<u8>>, Pooled<'p, Scratch>, BlockRecord);

impl ArchiveWriter {
    /// Writes block `raw`, coded into `scratch` as `record` says, straight from the scratch;
    /// the buffers go back to their pools once free.
    fn write<W: Write>(
        &mut self,
        output: &mut W,
        (raw, scratch, record): Coded,
        pools: &Pools,
    ) -> Result<()> {
        self.head.clear();
        record.write(&mut self.head);
        output.write_all(&self.head)?;
        for p in payloads(&record, &raw, &scratch) {
            output.write_all(p)?;
        }
        let stored_len = record.stored_len();
        self.index.push(IndexEntry {
            offset: self.archive_len,
            raw_offset: self.raw_pos,
            raw_len: raw.len() as u32,
            stored_len: stored_len as u32,
        });
        self.archive_len += stored_len;
        self.raw_pos += raw.len() as u64;
        pools.blocks.give_shared(raw);
        Ok(())
    }
}

/// Compresses `input` into an archive on `output`; returns what it did.
///
/// Any input round-trips: a safetensors file has its header kept and its tensors split by
/// dtype; anything else is coded as plain bytes. Reading, coding (in parallel, see
/// [`EncodeOptions::threads`]) and writing overlap, and memory stays bounded by a window of
/// blocks whatever the input's size. `output` is not flushed before returning an error; it
/// then holds an incomplete archive, which decoders refuse.
pub fn encode<R: Read + Send, W: Write + Send>(
    input: R,
    output: W,
    opts: &EncodeOptions,
) -> Result<EncodeReport> {
    on_threads(opts.threads, || encode_here(input, output, opts))
}

/// Compresses `input` into a new archive in memory.
///
/// ```
/// let weights = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/tiny.safetensors"))?;
/// let archive = sc::encode_to_vec(&weights, &sc::EncodeOptions::new(sc::Mode::Best))?;
/// assert!(archive.len() < weights.len());
/// assert_eq!(sc::decode_to_vec(&archive, &sc::DecodeOptions::default())?, weights);
/// # Ok::<(), sc::Error>(())
/// ```
pub fn encode_to_vec(input: &[u8], opts: &EncodeOptions) -> Result<Vec<u8>> {
    let opts = EncodeOptions {
        input_len: Some(input.len() as u64),
        ..*opts
    };
    let mut archive = Vec::with_capacity(input.len() / 4 * 3);
    encode(input, &mut archive, &opts)?;
    Ok(archive)
}

/// [`encode`] on the current thread pool.
fn encode_here<R: Read + Send, W: Write + Send>(
    mut input: R,
    mut output: W,
    opts: &EncodeOptions,
) -> Result<EncodeReport> {
    check_block_size(opts.block_size).map_err(Error::InvalidArgument)?;
    let budget = Budget::new(opts.memory, opts.block_size, 0)?;
    let (header, consumed, generic_reason) = probe(&mut input, opts.input_len)?;
    let (kind, prefix, pending) = match &header {
        Some(_) => (Kind::Safetensors, consumed, Vec::new()),
        None => (Kind::Generic, Vec::new(), consumed),
    };
    let file_header = FileHeader {
        version: VERSION,
        mode: opts.mode,
        kind,
        block_size: opts.block_size,
        prefix,
        md5: opts.md5,
    };
    file_header.write(&mut output)?;
    let (pools, digest) = budget.start(opts.md5, &file_header.prefix)?;
    let mut source = std::io::Cursor::new(pending).chain(input);
    let mut reader = InputReader {
        planner: Planner::new(
            header.as_ref(),
            file_header.prefix.len() as u64,
            opts.block_size,
        ),
        done: false,
    };
    let mut writer = ArchiveWriter {
        head: Vec::new(),
        archive_len: file_header.encoded_len(),
        raw_pos: file_header.prefix.len() as u64,
        index: Vec::new(),
    };
    let mode = opts.mode;
    ordered(
        budget.window,
        &mut || {
            // The MD5 thread hashes each block as soon as it is read, off the coding path,
            // holding blocks already written no further behind than the budget allows.
            if let Some(d) = &digest {
                d.wait_behind(budget.md5_behind);
            }
            let block = reader.read(&mut source, &pools.blocks)?;
            Ok(block.map(|(t, rows, raw)| {
                let raw = Arc::new(raw);
                if let Some(d) = &digest {
                    d.push(raw.clone());
                }
                (t, rows, raw)
            }))
        },
        &|(t, rows, raw): RawBlock| {
            let mut scratch = pools.scratch.guard();
            let record = code_block(&raw, t, rows, mode, &mut scratch);
            (raw, scratch, record)
        },
        &mut |coded| {
            writer.write(&mut output, coded, &pools)?;
            if let Some(progress) = opts.progress {
                progress(writer.raw_pos);
            }
            Ok(())
        },
    )?;
    let ArchiveWriter {
        archive_len,
        raw_pos,
        index,
        ..
    } = writer;
    let footer = Footer {
        end_offset: archive_len,
        original_len: raw_pos,
        md5: digest
            .map(DigestWorker::finish)
            .transpose()?
            .unwrap_or_default(),
        index,
    };
    footer.write(&mut output)?;
    output.flush()?;
    let blocks = footer.index.len() as u64;
    Ok(EncodeReport {
        original_len: raw_pos,
        archive_len: archive_len + Footer::encoded_len(blocks),
        blocks,
        kind,
        generic_reason,
        md5: opts.md5.then_some(footer.md5),
    })
}
