//! Decoding: read records in order, decode blocks in parallel, check everything.

use super::block::decode_block;
use super::digest::DigestWorker;
use super::mapped::MappedFile;
use super::pool::Pool;
use super::{on_threads, ordered, Budget, Pools, DEFAULT_MEMORY};
use crate::container::{
    checksum::hex, BlockRecord, FileHeader, Footer, IndexEntry, Kind, Mode,
};
use crate::error::{Error, Result};
use crate::read::{read_exact_or, read_up_to};
use std::fs::File;
use std::io::{self, BufReader, Read, Write};
use std::sync::Arc;

/// Settings for [`decode`], [`decode_file`] and [`decode_to_vec`]. Build them from
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
    /// [`decode_file`] and [`decode_to_vec`] know it themselves.
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
}

impl Default for DecodeOptions<'_> {
    fn default() -> Self {
        DecodeOptions {
            check_md5: false,
            archive_len: None,
            threads: 0,
            progress: None,
            memory: DEFAULT_MEMORY,
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

/// A block's payload: read into a pooled buffer, or where the archive lies in memory.
pub(crate) enum Payload<'a> {
    /// Read from a stream; goes back to the pool once decoded.
    Read(Vec<u8>),
    /// Part of an archive in memory.
    Borrowed(&'a [u8]),
    /// Part of a map of the archive file, unmapped when its last payload is dropped.
    Mapped(Arc<memmap2::Mmap>, std::ops::Range<usize>),
}

impl std::ops::Deref for Payload<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Payload::Read(v) => v,
            Payload::Borrowed(s) => s,
            Payload::Mapped(m, r) => &m[r.clone()],
        }
    }
}

/// Where an archive's bytes come from: records through [`Read`], payloads as [`Payload`]s.
pub(crate) trait Source<'a>: Read {
    /// The next `len` bytes, as a payload.
    fn payload(&mut self, len: usize, buffers: &Pool<Vec<u8>>) -> Result<Payload<'a>>;
}

/// A stream's payloads, read into pooled buffers.
pub(crate) struct Stream<R>(pub(crate) R);

impl<R: Read> Read for Stream<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}

impl<R: Read> Source<'_> for Stream<R> {
    fn payload(&mut self, len: usize, buffers: &Pool<Vec<u8>>) -> Result<Payload<'static>> {
        let mut payload = buffers.buffer(len);
        read_exact_or(self, &mut payload, "block payload")?;
        Ok(Payload::Read(payload))
    }
}

/// An archive in memory: its payloads borrowed.
impl<'a> Source<'a> for &'a [u8] {
    fn payload(&mut self, len: usize, _: &Pool<Vec<u8>>) -> Result<Payload<'a>> {
        if len > self.len() {
            return Err(Error::Truncated("block payload"));
        }
        let (payload, rest) = self.split_at(len);
        *self = rest;
        Ok(Payload::Borrowed(payload))
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
            self.index.push(IndexEntry {
                offset,
                raw_offset: self.raw_pos,
                raw_len: rec.raw_len,
                stored_len: rec.stored_len() as u32,
            });
            self.raw_pos += rec.raw_len as u64;
            return Ok(Some((n, rec, payload)));
        }
        Ok(None)
    }
}

/// Block number, record and payload of a block read but not yet decoded.
pub(crate) type Block<'a> = (u64, BlockRecord, Payload<'a>);

/// Decodes one block into a pooled buffer.
pub(crate) fn decode_one(block: Block, pools: &Pools) -> Result<(BlockRecord, Vec<u8>)> {
    let mut out = pools.blocks.buffer(block.1.raw_len as usize);
    let rec = decode_into(block, &mut out, pools)?;
    Ok((rec, out))
}

/// Decodes one block into `out` (exactly its length), returning the payload's buffer (if it
/// has one) to the pool.
pub(crate) fn decode_into((n, rec, payload): Block, out: &mut [u8], pools: &Pools) -> Result<BlockRecord> {
    let decoded = decode_block(&rec, &payload, out, &mut pools.scratch.guard());
    if let Payload::Read(buffer) = payload {
        pools.coded.give(buffer);
    }
    decoded.map_err(|e| e.in_block(n))?;
    Ok(rec)
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
    on_threads(opts.threads, || decode_from(Stream(input), output, opts))
}

/// Decompresses the archive `archive` (in memory, or a memory map of a file) into `output`,
/// decoding its blocks where they lie instead of copying them out first.
pub fn decode_slice<W: Write + Send>(
    archive: &[u8],
    output: W,
    opts: &DecodeOptions,
) -> Result<DecodeReport> {
    let opts = DecodeOptions {
        archive_len: Some(archive.len() as u64),
        ..*opts
    };
    on_threads(opts.threads, || decode_from(archive, output, &opts))
}

/// Decompresses the archive `archive` into a new buffer.
pub fn decode_to_vec(archive: &[u8], opts: &DecodeOptions) -> Result<Vec<u8>> {
    // The trailer's length is only a hint, and bounded: a corrupt one must not allocate.
    let hint = Footer::read_from_end(&mut std::io::Cursor::new(archive), archive.len() as u64)
        .map_or(0, |f| f.original_len.min(archive.len() as u64 * 4));
    let mut out = Vec::with_capacity(hint as usize);
    decode_slice(archive, &mut out, opts)?;
    Ok(out)
}

/// Decompresses the archive file `file` into `output`. A regular file is read from its start
/// (whatever its cursor) through memory maps of a few megabytes at a time, so that blocks are
/// decoded where the page cache holds them; anything else, or a file that cannot be mapped, is
/// read as a stream from its cursor.
///
/// Like every reader of mapped files, the process can be killed by SIGBUS if another process
/// truncates the file while it is being decoded.
pub fn decode_file<W: Write + Send>(
    file: &File,
    output: W,
    opts: &DecodeOptions,
) -> Result<DecodeReport> {
    on_threads(opts.threads, || decode_file_here(file, output, opts))
}

/// [`decode_file`] on the current thread pool.
fn decode_file_here<W: Write + Send>(
    file: &File,
    output: W,
    opts: &DecodeOptions,
) -> Result<DecodeReport> {
    let meta = file.metadata()?;
    // Some regular files report no length (procfs, some FUSE file systems): `new` leaves
    // those, like files that cannot be mapped, to be streamed.
    let mapped = meta
        .is_file()
        .then(|| MappedFile::new(file, meta.len()))
        .flatten();
    match mapped {
        Some(mapped) => {
            let opts = DecodeOptions {
                archive_len: Some(meta.len()),
                ..*opts
            };
            decode_from(mapped, output, &opts)
        }
        None => {
            let input = Stream(BufReader::with_capacity(64 << 10, file));
            decode_from(input, output, opts)
        }
    }
}

fn decode_from<'a, S: Source<'a> + Send, W: Write + Send>(
    input: S,
    mut output: W,
    opts: &DecodeOptions,
) -> Result<DecodeReport> {
    let mut r = Counting {
        inner: input,
        pos: 0,
    };
    let header = FileHeader::read(&mut r, opts.archive_len)?;
    let budget = Budget::new(opts.memory, header.block_size, 0)?;
    output.write_all(&header.prefix)?;
    let (pools, digest) = budget.start(opts.check_md5, &header.prefix)?;
    let mut reader = BlockReader {
        index: Vec::new(),
        raw_pos: header.prefix.len() as u64,
        end_offset: None,
        block_size: header.block_size,
        archive_len: opts.archive_len,
    };
    let mut decoded_to = r.pos;
    ordered(
        budget.window,
        &mut || {
            // Decoded blocks the MD5 thread has not hashed yet stay in memory.
            if let Some(d) = &digest {
                d.wait_behind(budget.md5_behind);
            }
            reader.read(&mut r, &pools.coded)
        },
        &|block| decode_one(block, &pools),
        &mut |decoded| {
            let (rec, out) = decoded?;
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
    if let (Some(m), Some(stored)) = (md5, stored_md5) {
        if m != stored {
            return Err(Error::Md5Mismatch {
                expected: hex(&stored),
                actual: hex(&m),
            });
        }
    }
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
