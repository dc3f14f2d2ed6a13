//! Random access: read any byte range of the original file, or any tensor by name, from a
//! seekable archive, decoding only the blocks that hold it.
//!
//! The index at the end of the archive maps every block to its place in the original file and
//! in the archive, so a reader seeks straight to the blocks a range needs. A partial read cannot
//! check the MD5 of the whole file; what it does check is everything it reads: the file header,
//! index and trailer checksums, each block record's checksum, and each decoded block's XXH3-64.
//!
//! ```no_run
//! let mut archive = sc::Archive::open(std::fs::File::open("model.safetensors.sc")?)?;
//! let bytes = archive.read_tensor("embeddings.word_embeddings.weight")?;
//! println!("{} bytes from {} blocks", bytes.len(), archive.stats().blocks_decoded);
//! # Ok::<(), sc::Error>(())
//! ```

use crate::container::{BlockRecord, FileHeader, Footer, IndexEntry, Kind};
use crate::error::{Error, Result};
use crate::pipeline::decode::{decode_one, Block, Counting, Source, Stream};
use crate::pipeline::pool::Pool;
use crate::pipeline::{ordered, pools, window, Pools};
use crate::safetensors::{Header, TensorInfo};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::ops::Range;

/// What an [`Archive`] has read and decoded since it was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
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

/// How the archive's bytes divide among the tensors, as [`Archive::stored_bytes`] reports.
///
/// `per_tensor.iter().sum() + between_tensors + container` is the archive's length.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
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

/// An archive opened for random access.
pub struct Archive<R> {
    input: Counting<R>,
    header: FileHeader,
    footer: Footer,
    archive_len: u64,
    /// Tensors by data offset; empty for generic archives.
    tensors: Vec<TensorInfo>,
    stats: AccessStats,
    /// The last block decoded, kept because consecutive small tensors often share one.
    cache: Option<(usize, Vec<u8>)>,
    pools: Pools,
}

impl<R: Read + Seek + Send> Archive<R> {
    /// Opens an archive: reads and checks its file header, index and trailer (no blocks).
    ///
    /// The index must describe blocks that follow each other without gaps from the end of the
    /// header to the end tag and cover the original file exactly; the kept safetensors header
    /// must parse. Any disagreement is an error.
    pub fn open(inner: R) -> Result<Archive<R>> {
        let mut input = Counting { inner, pos: 0 };
        let archive_len = input.seek(SeekFrom::End(0))?;
        input.seek(SeekFrom::Start(0))?;
        let header = FileHeader::read(&mut input, Some(archive_len))?;
        let footer = Footer::read_from_end(&mut input, archive_len)?;
        check_index(&header, &footer)?;
        let tensors = match header.kind {
            // The encoder keeps a header only if it parsed, so one that does not is corruption.
            Kind::Safetensors => {
                Header::parse(&header.prefix[8..], None)
                    .map_err(|e| Error::Corrupt(format!("kept safetensors header: {e}")))?
                    .tensors
            }
            Kind::Generic => Vec::new(),
        };
        let pools = pools();
        Ok(Archive {
            stats: AccessStats::default(),
            input,
            header,
            footer,
            archive_len,
            tensors,
            cache: None,
            pools,
        })
    }

    /// The archive's file header (mode, kind, block size, kept safetensors header).
    pub fn header(&self) -> &FileHeader {
        &self.header
    }

    /// The archive's index and trailer.
    pub fn footer(&self) -> &Footer {
        &self.footer
    }

    /// Length of the archive in bytes.
    pub fn archive_len(&self) -> u64 {
        self.archive_len
    }

    /// Length of the original file.
    pub fn original_len(&self) -> u64 {
        self.footer.original_len
    }

    /// The tensors of a safetensors archive, ordered by data offset (empty for generic ones).
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// The tensor called `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
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

    /// Writes bytes `range` of the original file to `out`, decoding only the blocks that hold
    /// them, several at a time in parallel on the current rayon pool.
    pub fn read_range_to<W: Write + Send>(&mut self, range: Range<u64>, out: &mut W) -> Result<()> {
        if range.start > range.end || range.end > self.footer.original_len {
            return Err(Error::InvalidArgument(format!(
                "bytes {}..{} are not inside the original file of {} bytes",
                range.start, range.end, self.footer.original_len
            )));
        }
        let prefix = &self.header.prefix;
        let kept = range.start.min(prefix.len() as u64)..range.end.min(prefix.len() as u64);
        out.write_all(&prefix[kept.start as usize..kept.end as usize])?;
        let index = &self.footer.index;
        let first = index.partition_point(|e| e.raw_offset + e.raw_len as u64 <= range.start);
        let end = index.partition_point(|e| e.raw_offset < range.end);
        if first >= end {
            return Ok(());
        }
        let last = end - 1;
        let slice_of = |n: usize, block: &[u8]| {
            let at = index[n].raw_offset;
            let from = range.start.max(at) - at;
            let to = range.end.min(at + block.len() as u64) - at;
            from as usize..to as usize
        };
        let mut next = first;
        if let Some((n, block)) = &self.cache {
            if *n == first {
                out.write_all(&block[slice_of(first, block)])?;
                next += 1;
            }
        }
        let block_size = self.header.block_size;
        let Archive {
            input,
            stats,
            cache,
            pools,
            ..
        } = self;
        ordered(
            window(),
            &mut || {
                if next == end {
                    return Ok(None);
                }
                let block = read_block(input, block_size, index, next, &pools.coded)?;
                next += 1;
                stats.block_bytes_read += block.1.stored_len();
                Ok(Some(block))
            },
            &|block| {
                let n = block.0 as usize;
                decode_one(block, pools).map(|(_, out)| (n, out))
            },
            &mut |decoded| {
                let (n, block) = decoded?;
                stats.blocks_decoded += 1;
                stats.bytes_decoded += block.len() as u64;
                out.write_all(&block[slice_of(n, &block)])?;
                if n == last {
                    *cache = Some((n, block));
                } else {
                    pools.blocks.give(block);
                }
                Ok(())
            },
        )
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

    fn named_range(&self, name: &str) -> Result<Range<u64>> {
        self.find(name).map(|(_, range)| range)
    }

    /// The position of the tensor called `name` in [`Archive::tensors`] and its bytes in the
    /// original file, which must hold them.
    fn find(&self, name: &str) -> Result<(usize, Range<u64>)> {
        let k = self
            .tensors
            .iter()
            .position(|t| t.name == name)
            .ok_or_else(|| Error::InvalidArgument(format!("no tensor named {name:?}")))?;
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

    /// Writes a safetensors file holding the tensors `names` (each once) to `out`; returns the
    /// bytes written.
    ///
    /// The new header keeps each tensor's dtype and shape, recomputes its `data_offsets`, and
    /// keeps `__metadata__`. Tensors are laid out by element width, widest first, and in their
    /// original order within a width (what the reference writer does), so every tensor starts
    /// at a multiple of its element size; the JSON is padded with spaces to a multiple of 8
    /// bytes for the same reason.
    pub fn write_safetensors<W: Write + Send>(
        &mut self,
        names: &[&str],
        out: &mut W,
    ) -> Result<u64> {
        let mut chosen: Vec<(usize, u64)> = Vec::new();
        for name in names {
            let (k, _) = self.find(name)?;
            if !chosen.iter().any(|&(c, _)| c == k) {
                let width = self.tensors[k].dtype.map_or(1, |d| d.width());
                chosen.push((k, width));
            }
        }
        chosen.sort_by_key(|&(k, width)| (std::cmp::Reverse(width), k));
        let mut json = serde_json::Map::new();
        if let Some(meta) = self.metadata()? {
            json.insert("__metadata__".into(), meta);
        }
        let mut pos = 0u64;
        for &(k, _) in &chosen {
            let t = &self.tensors[k];
            let len = t.end - t.begin;
            json.insert(
                t.name.clone(),
                serde_json::json!({
                    "dtype": t.dtype_name,
                    "shape": t.shape,
                    "data_offsets": [pos, pos + len],
                }),
            );
            pos += len;
        }
        let mut text = serde_json::Value::Object(json).to_string().into_bytes();
        text.resize(text.len().next_multiple_of(8), b' ');
        out.write_all(&(text.len() as u64).to_le_bytes())?;
        out.write_all(&text)?;
        for (k, _) in chosen {
            let range = self.tensor_range(&self.tensors[k]);
            self.read_range_to(range, out)?;
        }
        Ok(8 + text.len() as u64 + pos)
    }

    /// The kept header's `__metadata__` entry, if it has one.
    fn metadata(&self) -> Result<Option<serde_json::Value>> {
        if self.header.kind != Kind::Safetensors {
            return Ok(None);
        }
        let mut value: serde_json::Value = serde_json::from_slice(&self.header.prefix[8..])
            .map_err(|e| Error::Corrupt(format!("kept safetensors header: {e}")))?;
        Ok(value.as_object_mut().and_then(|o| o.remove("__metadata__")))
    }
}

/// Checks that the index lays the blocks end to end from the header to the end tag and covers
/// the original file after the kept header exactly, so every later seek and allocation made
/// from it is bounded by the archive.
fn check_index(header: &FileHeader, footer: &Footer) -> Result<()> {
    let mut offset = header.encoded_len();
    let mut raw = header.prefix.len() as u64;
    for (n, e) in footer.index.iter().enumerate() {
        let next = offset.checked_add(e.stored_len as u64);
        let next_raw = raw.checked_add(e.raw_len as u64);
        let ok = e.offset == offset
            && e.raw_offset == raw
            && e.raw_len > 0
            && e.raw_len <= header.block_size
            && next.is_some_and(|o| o <= footer.end_offset)
            && next_raw.is_some_and(|r| r <= footer.original_len);
        if !ok {
            return Err(Error::Corrupt(format!(
                "index entry {n} does not follow the blocks before it"
            )));
        }
        (offset, raw) = (next.unwrap_or_default(), next_raw.unwrap_or_default());
    }
    if offset != footer.end_offset || raw != footer.original_len {
        return Err(Error::Corrupt(
            "block index does not cover the archive and the original file".into(),
        ));
    }
    Ok(())
}

/// Reads block `n`'s record and payload, checking the record against the index.
fn read_block<R: Read + Seek>(
    input: &mut R,
    block_size: u32,
    index: &[IndexEntry],
    n: usize,
    buffers: &Pool<Vec<u8>>,
) -> Result<Block<'static>> {
    let e = index[n];
    input.seek(SeekFrom::Start(e.offset))?;
    let bad = |reason: &str| Error::CorruptBlock {
        index: n as u64,
        reason: reason.into(),
    };
    let rec = BlockRecord::read(input, block_size, n as u64)?
        .ok_or_else(|| bad("the index points at the end tag"))?;
    // Payload lengths are at most the block size, and the index placed the block inside the
    // archive, so this allocation is bounded by both.
    if rec.raw_len != e.raw_len || rec.stored_len() != e.stored_len as u64 {
        return Err(bad("record disagrees with the index"));
    }
    let payload = Stream(&mut *input).payload(rec.payload_len() as usize, buffers)?;
    Ok((n as u64, rec, payload))
}
