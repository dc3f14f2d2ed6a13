//! Encoding: probe the input, keep its header, plan blocks, code batches in parallel.

use super::block::encode_block;
use super::digest::DigestWorker;
use super::plan::Planner;
use super::pool::Pool;
use super::{ordered, pools, window, Pools};
use crate::container::{
    check_block_size, read_up_to, FileHeader, Footer, IndexEntry, Kind, Mode, DEFAULT_BLOCK_SIZE,
};
use crate::error::{Error, Result};
use crate::safetensors::{json_len, Header, MAX_HEADER_LEN};
use crate::split::Transform;
use std::io::{Read, Write};
use std::sync::Arc;

/// Settings for [`encode`].
#[derive(Clone, Copy, Debug)]
pub struct EncodeOptions {
    /// FAST or BEST.
    pub mode: Mode,
    /// Largest block in bytes: even, from 4 KiB to 64 MiB.
    pub block_size: u32,
    /// Record the MD5 of the input. MD5 is sequential, about 0.5 GB/s on one core: FAST codes
    /// faster than that on two cores, so it leaves the MD5 out unless asked. Blocks always
    /// carry XXH3-64 checksums of their original bytes.
    pub md5: bool,
}

impl EncodeOptions {
    /// Default settings for `mode`: 1 MiB blocks, MD5 recorded by BEST only.
    pub fn new(mode: Mode) -> Self {
        EncodeOptions {
            mode,
            block_size: DEFAULT_BLOCK_SIZE,
            md5: mode == Mode::Best,
        }
    }
}

impl Default for EncodeOptions {
    fn default() -> Self {
        EncodeOptions::new(Mode::Fast)
    }
}

/// What [`encode`] did.
#[derive(Clone, Debug)]
pub struct EncodeReport {
    /// Bytes read.
    pub original_len: u64,
    /// Bytes written.
    pub archive_len: u64,
    /// Blocks written.
    pub blocks: u64,
    /// How the input was treated.
    pub kind: Kind,
    /// Why a file that looked like safetensors took the generic path.
    pub generic_reason: Option<String>,
    /// MD5 of the input, when it was recorded.
    pub md5: Option<[u8; 16]>,
}

/// Reads the safetensors header if there is a valid one; returns it and the bytes consumed.
///
/// `input_len` (known for files) lets the header be checked against the real payload size.
fn probe(
    input: &mut impl Read,
    input_len: Option<u64>,
) -> Result<(Option<Header>, Vec<u8>, Option<String>)> {
    let mut first = [0u8; 8];
    let got = read_up_to(input, &mut first)?;
    let mut consumed = first[..got].to_vec();
    if got < 8 {
        return Ok((
            None,
            consumed,
            Some("shorter than a safetensors header".into()),
        ));
    }
    let n = json_len(&first);
    let room = input_len.map_or(u64::MAX, |l| l.saturating_sub(8));
    if n > MAX_HEADER_LEN || n > room || n < 2 {
        return Ok((
            None,
            consumed,
            Some(format!("header length {n} is implausible")),
        ));
    }
    consumed.resize(8 + n as usize, 0);
    let got = read_up_to(input, &mut consumed[8..])?;
    if got < n as usize {
        consumed.truncate(8 + got);
        return Ok((None, consumed, Some("input ends inside the header".into())));
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

/// A block read from the input: how to split it, and its bytes (shared with the MD5 thread).
type RawBlock = (Transform, Arc<Vec<u8>>);

impl InputReader {
    fn read(
        &mut self,
        source: &mut impl Read,
        buffers: &Pool<Vec<u8>>,
    ) -> Result<Option<(Transform, Vec<u8>)>> {
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
                return Ok(Some((transform, buf)));
            }
        }
        Ok(None)
    }
}

/// Appends coded blocks to the archive in order, keeping the index.
struct ArchiveWriter {
    archive_len: u64,
    raw_pos: u64,
    index: Vec<IndexEntry>,
}

impl ArchiveWriter {
    /// Writes the coded form of block `raw`; both buffers go back to the pool once free.
    fn write<W: Write>(
        &mut self,
        output: &mut W,
        raw: Arc<Vec<u8>>,
        block: Vec<u8>,
        pools: &Pools,
    ) -> Result<()> {
        output.write_all(&block)?;
        self.index.push(IndexEntry {
            offset: self.archive_len,
            raw_offset: self.raw_pos,
            raw_len: raw.len() as u32,
            stored_len: block.len() as u32,
        });
        self.archive_len += block.len() as u64;
        self.raw_pos += raw.len() as u64;
        pools.coded.give(block);
        pools.blocks.give_shared(raw);
        Ok(())
    }
}

/// Compresses `input` into an archive on `output`.
///
/// `input_len` is the input's length when known (files); `progress` is called with the number
/// of input bytes consumed so far after each batch.
pub fn encode<R: Read + Send, W: Write + Send>(
    mut input: R,
    input_len: Option<u64>,
    mut output: W,
    opts: &EncodeOptions,
    progress: &mut dyn FnMut(u64),
) -> Result<EncodeReport> {
    check_block_size(opts.block_size).map_err(Error::InvalidArgument)?;
    let (header, consumed, generic_reason) = probe(&mut input, input_len)?;
    let (kind, prefix, pending) = match &header {
        Some(_) => (Kind::Safetensors, consumed, Vec::new()),
        None => (Kind::Generic, Vec::new(), consumed),
    };
    let file_header = FileHeader {
        mode: opts.mode,
        kind,
        block_size: opts.block_size,
        prefix,
        md5: opts.md5,
    };
    file_header.write(&mut output)?;
    let pools = pools();
    let digest = DigestWorker::start(opts.md5, &file_header.prefix, &pools.blocks)?;
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
        archive_len: file_header.encoded_len(),
        raw_pos: file_header.prefix.len() as u64,
        index: Vec::new(),
    };
    let mode = opts.mode;
    ordered(
        window(),
        &mut || {
            // The MD5 thread hashes each block as soon as it is read, off the coding path.
            let block = reader.read(&mut source, &pools.blocks)?;
            Ok(block.map(|(t, raw)| {
                let raw = Arc::new(raw);
                if let Some(d) = &digest {
                    d.push(raw.clone());
                }
                (t, raw)
            }))
        },
        &|(t, raw): RawBlock| {
            let mut out = pools.coded.take();
            encode_block(&raw, t, mode, &mut pools.scratch.guard(), &mut out);
            (raw, out)
        },
        &mut |(raw, block)| {
            writer.write(&mut output, raw, block, &pools)?;
            progress(writer.raw_pos);
            Ok(())
        },
    )?;
    let ArchiveWriter {
        archive_len,
        raw_pos,
        index,
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
