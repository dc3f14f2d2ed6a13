//! Encoding: probe the input, keep its header, plan blocks, code them in parallel.

use super::block::{code_block, payloads, Scratch};
use super::digest::DigestWorker;
use super::plan::{Planner, TensorRows};
use super::pool::{Pool, Pooled};
use super::refs::{FillCheck, Input, NoOwn, OwnBytes, Spans};
use super::{dedup, on_threads, ordered_until, Budget, Pending, Pools, DEFAULT_MEMORY};
use crate::base::Base;
use crate::cancel::{self, Cancel};
use crate::choice::SignModels;
use crate::container::kept;
use crate::container::refs::{Derived, Reference, References, Source};
use crate::container::{
    check_block_size, BlockRecord, FileHeader, Footer, IndexEntry, Kind, Mode, DEFAULT_BLOCK_SIZE,
    MAX_KEPT_GGUF, MAX_KEPT_JSON,
};
use crate::error::{Error, HeaderError, Result};
use crate::gguf::{GgufError, GgufHeader};
use crate::read::{read_up_to, ReadAt};
use crate::safetensors::{json_len, Header, MAX_HEADER_LEN};
use crate::transform::Transform;
use std::fs::File;
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
    /// A base checkpoint to code the input against (a fine-tune of it): each tensor with a
    /// tensor of the same name, dtype and shape in the base is coded as its difference from
    /// it, block by block where that is smaller. The archive records the base's name and a
    /// digest of each base tensor used, and decoding it needs the same base
    /// ([`crate::DecodeOptions::base`]).
    pub base: Option<&'a Base>,
    /// Store a tensor that repeats an earlier one byte for byte as a reference to it (on by
    /// default). Needs random access to the input: [`encode_file`] and [`encode_to_vec`] find
    /// repeats, [`encode`] (a stream) does not.
    pub dedup: bool,
    /// BEST: where to code the signs of each tensor column with a model of their own (see
    /// [`SignModels`]; by default on the blocks where they save at least 1 bit in 64 values).
    /// Weights of a column often lean to one sign. With sign models, the archive of a
    /// safetensors file needs a reader of format version 5; [`SignModels::Off`] writes what
    /// readers of version 4 decode.
    pub sign_models: SignModels,
    /// A token that stops the run once set ([`Cancel`]): it ends with
    /// [`Error::Cancelled`] once the blocks being coded are done, writing nothing more.
    pub cancel: Option<&'a Cancel>,
}

impl EncodeOptions<'_> {
    /// Default settings for `mode`: 1 MiB blocks, MD5 recorded by BEST only, the current
    /// thread pool, no base, repeated tensors stored once.
    pub fn new(mode: Mode) -> Self {
        EncodeOptions {
            mode,
            block_size: DEFAULT_BLOCK_SIZE,
            md5: mode == Mode::Best,
            input_len: None,
            threads: 0,
            progress: None,
            memory: DEFAULT_MEMORY,
            base: None,
            dedup: true,
            sign_models: SignModels::default(),
            cancel: None,
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
            .field("base", &self.base.map(Base::name))
            .field("dedup", &self.dedup)
            .field("sign_models", &self.sign_models)
            .field("cancel", &self.cancel)
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
    /// Tensors paired with a tensor of the base ([`EncodeOptions::base`]), coded against it
    /// block by block where that is smaller.
    pub based_tensors: usize,
    /// Of those, quant tensors re-derived from the base, their seed (quantized with
    /// [`crate::derive::QUANTIZER`]).
    pub derived_tensors: usize,
    /// Tensors stored as a reference to an earlier, identical one ([`EncodeOptions::dedup`]).
    pub repeated_tensors: usize,
    /// The base's name as the archive records it, when some tensor is coded against it.
    pub base_name: Option<String>,
}

// Every header the probe accepts must fit the container's kept-header limit.
const _: () = assert!(MAX_HEADER_LEN <= MAX_KEPT_JSON);

/// What the start of the input was found to be.
struct Probed {
    /// Safetensors, GGUF, or generic.
    kind: Kind,
    /// The tensors of a safetensors or GGUF header (offsets relative to the end of `prefix`).
    header: Option<Header>,
    /// The header kept in the archive: the input's first bytes, up to its tensor data.
    prefix: Vec<u8>,
    /// Bytes read past the prefix, to code before the rest of the input.
    pending: Vec<u8>,
    /// Why an input took the generic path.
    reason: Option<HeaderError>,
}

/// First bytes of the input read for a GGUF header; they double until the header fits.
const GGUF_FIRST_READ: usize = 1 << 20;

/// Reads the header of a safetensors or GGUF file if the input starts with a valid one;
/// returns what it found and the bytes consumed.
///
/// `input_len` (known for files) lets the header be checked against the real payload size.
fn probe(input: &mut impl Read, input_len: Option<u64>) -> Result<Probed> {
    let mut first = [0u8; 8];
    let got = read_up_to(input, &mut first)?;
    let consumed = first[..got].to_vec();
    if Kind::by_magic(&first[..got]) == Some(Kind::Gguf) {
        return probe_gguf(input, input_len, consumed);
    }
    Ok(match probe_safetensors(input, input_len, consumed)? {
        (Ok(header), prefix) => Probed {
            kind: Kind::Safetensors,
            header: Some(header),
            prefix,
            pending: Vec::new(),
            reason: None,
        },
        (Err(reason), consumed) => generic(consumed, reason),
    })
}

/// What an input that took the generic path was found to be: `consumed` bytes of it are read.
fn generic(consumed: Vec<u8>, reason: HeaderError) -> Probed {
    Probed {
        kind: Kind::Generic,
        header: None,
        prefix: Vec::new(),
        pending: consumed,
        reason: Some(reason),
    }
}

/// Reads a GGUF header after its first bytes `consumed`, in reads that double until it parses
/// whole or passes [`MAX_KEPT_GGUF`]; a file that does not validate takes the generic path.
fn probe_gguf(
    input: &mut impl Read,
    input_len: Option<u64>,
    mut consumed: Vec<u8>,
) -> Result<Probed> {
    let file_len = input_len.unwrap_or(u64::MAX);
    let mut want = GGUF_FIRST_READ;
    let reason = loop {
        let had = consumed.len();
        consumed.resize(want, 0);
        let got = read_up_to(input, &mut consumed[had..])?;
        consumed.truncate(had + got);
        let ended = consumed.len() < want;
        // Lengths alone say whether the header is all read; it is checked once it is.
        let parsed = GgufHeader::len_in(&consumed, file_len)
            .and_then(|_| crate::gguf::listed_tensors(&consumed, file_len));
        match parsed {
            Ok((h, _)) if h.data_start > MAX_KEPT_GGUF => {
                break GgufError::Implausible("header length", h.data_start)
            }
            // The padding after the header (up to `general.alignment`, which may exceed what
            // was read) is part of the kept header: read up to the data's start.
            Ok((h, _)) if h.data_start > consumed.len() as u64 => {
                if ended {
                    break GgufError::Truncated("padding before the tensor data");
                }
                want = h.data_start as usize;
            }
            Ok((h, tensors)) => {
                let pending = consumed.split_off(h.data_start as usize);
                let header = Header {
                    json_len: 0,
                    tensors,
                };
                return Ok(Probed {
                    kind: Kind::Gguf,
                    header: Some(header),
                    prefix: consumed,
                    pending,
                    reason: None,
                });
            }
            Err(GgufError::Truncated(_)) if !ended && (want as u64) < MAX_KEPT_GGUF => {
                want = (want * 2).min(MAX_KEPT_GGUF as usize);
            }
            Err(e) => break e,
        }
    };
    Ok(generic(consumed, HeaderError::Gguf(reason.to_string())))
}

/// Reads the safetensors header after its first bytes `consumed` (up to 8) if there is a
/// valid one; returns it, or why there is none, and the bytes consumed.
fn probe_safetensors(
    input: &mut impl Read,
    input_len: Option<u64>,
    mut consumed: Vec<u8>,
) -> Result<(std::result::Result<Header, HeaderError>, Vec<u8>)> {
    let mut first = [0u8; 8];
    if consumed.len() < first.len() {
        return Ok((Err(HeaderError::TooShort), consumed));
    }
    first.copy_from_slice(&consumed[..8]);
    let n = json_len(&first);
    let room = input_len.map_or(u64::MAX, |l| l.saturating_sub(8));
    if n > MAX_HEADER_LEN || n > room || n < 2 {
        return Ok((Err(HeaderError::ImplausibleLength(n)), consumed));
    }
    consumed.resize(8 + n as usize, 0);
    let got = read_up_to(input, &mut consumed[8..])?;
    if got < n as usize {
        consumed.truncate(8 + got);
        return Ok((Err(HeaderError::EndsInsideHeader), consumed));
    }
    let header = Header::parse(&consumed[8..], input_len.map(|l| l.saturating_sub(8 + n)));
    Ok((header, consumed))
}

/// Reads the input one planned block at a time.
struct InputReader {
    planner: Planner,
    /// The input has ended (or the plan is complete).
    done: bool,
}

/// A block read from the input: its offset in the input, how to split it, where its elements
/// lie in rows, whether it is coded against base bytes, and its bytes (shared with the MD5
/// thread).
type RawBlock<B> = (u64, Transform, Vec<TensorRows>, bool, B);

impl InputReader {
    fn read(
        &mut self,
        source: &mut impl Read,
        buffers: &Pool<Vec<u8>>,
    ) -> Result<Option<RawBlock<Vec<u8>>>> {
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
                return Ok(Some((spec.offset, transform, spec.rows, spec.based, buf)));
            }
        }
        Ok(None)
    }
}

/// The file header, waiting for its kept header's deflated form: the kept header comes back
/// with it from `packed`.
struct PendingHeader {
    header: FileHeader,
    packed: Pending<(Vec<u8>, Option<Vec<u8>>)>,
}

/// Appends coded blocks to the archive in order, keeping the index.
struct ArchiveWriter {
    /// The file header, until it is written before the first block.
    header: Option<PendingHeader>,
    /// The record being written.
    head: Vec<u8>,
    archive_len: u64,
    raw_pos: u64,
    index: Vec<IndexEntry>,
}

/// A block coded and waiting to be written: its bytes, the scratch holding its coded planes,
/// its record, and the base bytes it was coded against (checked as it is written).
type Coded<'p> = (
    Arc<Vec<u8>>,
    Pooled<'p, Scratch>,
    BlockRecord,
    Option<Vec<u8>>,
);

impl ArchiveWriter {
    /// Writes the file header unless it is written, once its kept header is deflated (running
    /// pool work meanwhile).
    fn write_header<W: Write>(&mut self, output: &mut W) -> Result<()> {
        if let Some(PendingHeader { mut header, packed }) = self.header.take() {
            let (prefix, packed) = packed.wait();
            header.prefix = prefix;
            header.set_packed(packed);
            header.write(output)?;
            self.archive_len = header.encoded_len();
        }
        Ok(())
    }

    /// Writes block `raw`, coded into `scratch` as `record` says, straight from the scratch;
    /// the buffers go back to their pools once free.
    fn write<W: Write>(
        &mut self,
        output: &mut W,
        (raw, scratch, record, base): Coded,
        pools: &Pools,
        check: &mut FillCheck,
    ) -> Result<()> {
        self.write_header(output)?;
        check.block(self.raw_pos, &raw, base.as_deref());
        if let Some(b) = base {
            pools.blocks.give(b);
        }
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
///
/// A stream is read once, so repeated tensors are not found ([`EncodeOptions::dedup`] is
/// ignored): each copy is coded again, and a checkpoint with a duplicated embedding comes out
/// larger than from [`encode_file`] (a file) or [`encode_to_vec`] (memory), which store it
/// once. Prefer those where the input is a file or in memory.
pub fn encode<R: Read + Send, W: Write + Send>(
    input: R,
    output: W,
    opts: &EncodeOptions,
) -> Result<EncodeReport> {
    on_threads(opts.threads, || encode_here(input, output, opts, None))
}

/// Compresses the file `file` (read from its start, whatever its cursor) into an archive on
/// `output`: [`encode`] with the random access that finding repeated tensors needs
/// ([`EncodeOptions::dedup`]). Anything but a regular file is read as a stream from its
/// cursor.
pub fn encode_file<W: Write + Send>(
    file: &File,
    output: W,
    opts: &EncodeOptions,
) -> Result<EncodeReport> {
    let meta = file.metadata()?;
    if !meta.is_file() {
        let opts = EncodeOptions {
            dedup: false,
            ..*opts
        };
        return encode(
            std::io::BufReader::with_capacity(64 << 10, file),
            output,
            &opts,
        );
    }
    let opts = EncodeOptions {
        input_len: Some(meta.len()),
        ..*opts
    };
    let input = crate::read::At::new(file)?;
    on_threads(opts.threads, || {
        encode_here(
            std::io::BufReader::with_capacity(64 << 10, input),
            output,
            &opts,
            Some(file),
        )
    })
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
    on_threads(opts.threads, || {
        encode_here(input, &mut archive, &opts, Some(&input))
    })?;
    Ok(archive)
}

/// The references of the input whose tensors `header` describes (data from `prefix_len`): its
/// tensors repeating earlier ones, found through `at` when `dedup` asks for it, the
/// others' namesakes in `base` of the same dtype and shape, with their digests, and (with
/// random access to the input, `at`) the quant tensors re-derived from their namesakes in
/// `base` ([`derived`]). `None` when there are none.
fn references(
    header: &Header,
    prefix_len: u64,
    base: Option<&Base>,
    at: Option<&dyn ReadAt>,
    dedup: bool,
) -> Result<Option<References>> {
    let tensors = &header.tensors;
    let mut sources: Vec<Option<Source>> = vec![None; tensors.len()];
    if let Some(at) = at.filter(|_| dedup) {
        for (repeat, first) in dedup::find(tensors, prefix_len, at)? {
            sources[repeat] = Some(Source::Tensor(tensors[first].name.clone()));
        }
    }
    let mut base_name = String::new();
    if let Some(base) = base {
        let paired: Vec<usize> = (0..tensors.len())
            .filter(|&i| {
                let t = &tensors[i];
                let same =
                    |b: &crate::TensorInfo| b.dtype_name == t.dtype_name && b.shape == t.shape;
                sources[i].is_none() && !t.is_empty() && base.tensor(&t.name).is_some_and(same)
            })
            .collect();
        let names: Vec<&str> = paired.iter().map(|&i| tensors[i].name.as_str()).collect();
        let digests = base.digests(&names)?;
        for (&i, digest) in paired.iter().zip(digests) {
            let len = tensors[i].len();
            sources[i] = Some(Source::Base { len, digest });
        }
        if let Some(at) = at {
            derived(tensors, prefix_len, base, at, &mut sources)?;
        }
        if sources
            .iter()
            .any(|s| matches!(s, Some(Source::Base { .. } | Source::Derived(_))))
        {
            base_name = base.name().to_string();
        }
    }
    let entries: Vec<Reference> = tensors
        .iter()
        .zip(sources)
        .filter_map(|(t, s)| {
            Some(Reference {
                tensor: t.name.clone(),
                source: s?,
            })
        })
        .collect();
    let refs = References { base_name, entries };
    Ok((!refs.entries.is_empty() && refs.fits()).then_some(refs))
}

/// Sets the source of each tensor of `tensors` (data from `prefix_len`, read through `at`)
/// without one that re-derives from its namesake in `base` ([`crate::derive::derivable`]): a
/// derived reference where at least one of its ggml blocks re-derives exactly. A tensor none
/// of whose blocks does (an unrelated seed) is coded alone.
fn derived(
    tensors: &[crate::TensorInfo],
    prefix_len: u64,
    base: &Base,
    at: &dyn ReadAt,
    sources: &mut [Option<Source>],
) -> Result<()> {
    for (t, source) in tensors.iter().zip(sources.iter_mut()) {
        let Some(seed) = base.tensor(&t.name).filter(|_| source.is_none()) else {
            continue;
        };
        let Some((sty, qty)) = crate::derive::derivable(seed, t) else {
            continue;
        };
        let exact = crate::derive::count_exact(base, t, sty, qty, at, prefix_len + t.begin)?;
        if exact > 0 {
            *source = Some(Source::Derived(Derived {
                len: seed.len(),
                digest: base.digest(&t.name)?,
                seed_type: sty.id,
                quant_type: qty.id,
                quantizer: crate::derive::QUANTIZER.to_string(),
                exact,
            }));
        }
    }
    Ok(())
}

/// [`encode`] on the current thread pool; `at` gives random access to the input (a file or
/// a buffer), for finding repeated tensors.
fn encode_here<R: Read + Send, W: Write + Send>(
    mut input: R,
    mut output: W,
    opts: &EncodeOptions,
    at: Option<&dyn ReadAt>,
) -> Result<EncodeReport> {
    check_block_size(opts.block_size).map_err(Error::InvalidArgument)?;
    let Probed {
        kind,
        header,
        prefix,
        pending,
        reason: generic_reason,
    } = probe(&mut input, opts.input_len)?;
    let refs = match &header {
        Some(h) => references(h, prefix.len() as u64, opts.base, at, opts.dedup)?,
        None => None,
    };
    let at = at.filter(|_| opts.dedup);
    let spans = Spans::new(
        refs.as_ref(),
        header.as_ref().map_or(&[], |h| &h.tensors),
        prefix.len() as u64,
    );
    let (based_tensors, repeated_tensors) = refs.as_ref().map_or((0, 0), References::counts);
    let base_name = refs
        .as_ref()
        .map(|r| r.base_name.clone())
        .filter(|n| !n.is_empty());
    let derived_tensors = refs.as_ref().map_or(0, References::derived);
    // Finding repeated tensors reads the whole input once.
    cancel::check(opts.cancel)?;
    #[cfg(feature = "internals")]
    crate::hook::reach(crate::hook::Point::Planned);
    let budget = Budget::new(opts.memory, opts.block_size, 2, 0, refs.is_some())?;
    let signs = match opts.mode {
        Mode::Best => opts.sign_models,
        Mode::Fast => SignModels::Off,
    };
    let (pools, digest) = budget.start(opts.md5)?;
    if let Some(d) = &digest {
        d.push(Arc::new(prefix.clone()));
    }
    let prefix_len = prefix.len() as u64;
    let mut source = std::io::Cursor::new(pending).chain(input);
    let mut reader = InputReader {
        planner: Planner::with_refs(
            header.as_ref(),
            prefix_len,
            opts.block_size,
            &spans,
            opts.mode,
            kind,
        ),
        done: false,
    };
    let input_at = at.map(Input);
    let own: &dyn OwnBytes = match &input_at {
        Some(at) => at,
        None => &NoOwn,
    };
    let file_header = FileHeader::new(
        opts.mode,
        kind,
        opts.block_size,
        Vec::new(),
        opts.md5,
        refs,
        signs != SignModels::Off,
    );
    let mut writer = ArchiveWriter {
        header: None,
        head: Vec::new(),
        archive_len: 0,
        raw_pos: prefix_len,
        index: Vec::new(),
    };
    let mode = opts.mode;
    let mut check = FillCheck::new(&spans);
    rayon::in_place_scope(|s| {
        // The kept header is deflated on the pool while the first blocks are coded (a GGUF
        // vocabulary takes tens of milliseconds); the writer waits for it before block 0.
        let packed = Pending::spawn(s, move || {
            let packed = kept::pack(&prefix, mode);
            (prefix, packed)
        });
        writer.header = Some(PendingHeader {
            header: file_header,
            packed,
        });
        ordered_until(
            budget.window,
            opts.cancel,
            &mut || {
                // The MD5 thread hashes each block as soon as it is read, off the coding path,
                // holding blocks already written no further behind than the budget allows.
                if let Some(d) = &digest {
                    d.wait_behind(budget.md5_behind);
                }
                let block = reader.read(&mut source, &pools.blocks)?;
                #[cfg(feature = "internals")]
                if let Some((offset, .., raw)) = &block {
                    let end = offset + raw.len() as u64;
                    crate::hook::reach(crate::hook::Point::Read { end });
                }
                Ok(block.map(|(offset, t, rows, based, raw)| {
                    let raw = Arc::new(raw);
                    if let Some(d) = &digest {
                        d.push(raw.clone());
                    }
                    (offset, t, rows, based, raw)
                }))
            },
            &|(offset, t, rows, based, raw): RawBlock<Arc<Vec<u8>>>| {
                let mut base = based.then(|| pools.blocks.buffer(raw.len()));
                if let Some(b) = &mut base {
                    spans.fill(offset, b, opts.base, own)?;
                }
                let mut scratch = pools.scratch.guard();
                let record = code_block(&raw, base.as_deref(), t, &rows, mode, signs, &mut scratch);
                Ok((raw, scratch, record, base))
            },
            &mut |coded: Result<Coded>| {
                writer.write(&mut output, coded?, &pools, &mut check)?;
                if let Some(progress) = opts.progress {
                    progress(writer.raw_pos);
                }
                Ok(())
            },
        )?;
        // No blocks (tensors of no bytes): the header still goes first.
        writer.write_header(&mut output)
    })?;
    // The archive is complete but for its footer: an incomplete one is what an error leaves.
    let tensors = header.as_ref().map_or(&[][..], |h| &h.tensors[..]);
    let name = |at: u64| {
        let t = tensors.iter().find(|t| prefix_len + t.begin == at);
        t.map_or_else(String::new, |t| t.name.clone())
    };
    check.finish(opts.base, &name)?;
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
        based_tensors,
        derived_tensors,
        repeated_tensors,
        base_name,
    })
}
