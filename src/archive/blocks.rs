//! One block of a read: its record and payload read and checked against the index (which is
//! checked once, when the archive is opened), decoded, and its bytes delivered.

use super::*;

/// Decodes `block` for `want`: straight into its place when the whole block is wanted in one
/// (`None`), or else into a pooled buffer.
pub(super) fn decode_want(
    block: Block,
    want: &mut Want,
    pools: &Pools,
    sources: Sources,
) -> Result<Option<Vec<u8>>> {
    let len = block.record.raw_len as usize;
    match want.places.as_mut_slice() {
        [(0, dest)] if dest.len() == len => decode_into(block, dest, pools, sources).map(|_| None),
        _ => decode_one(block, pools, sources).map(|(_, out)| Some(out)),
    }
}

/// Sends the bytes of the decoded `block` (at offset `at` of the original file) that lie in
/// `out`'s range to its writer, or else to their places in the caller's buffers.
pub(super) fn deliver(
    out: &mut Option<(&mut (dyn Write + Send), Range<u64>)>,
    want: Want,
    block: &[u8],
    at: u64,
) -> Result<()> {
    match out {
        Some((w, range)) => {
            let len = block.len() as u64;
            let from = range.start.saturating_sub(at).min(len) as usize;
            let to = range.end.saturating_sub(at).min(len) as usize;
            w.write_all(&block[from..to.max(from)])?;
        }
        None => {
            for (offset, dest) in want.places {
                let part =
                    block
                        .get(offset..offset + dest.len())
                        .ok_or_else(|| Error::CorruptBlock {
                            index: want.n as u64,
                            reason: "shorter than the index says".into(),
                        })?;
                dest.copy_from_slice(part);
            }
        }
    }
    Ok(())
}

/// Checks that the index lays the blocks end to end from the header to the end tag and covers
/// the original file after the kept header exactly, so every later seek and allocation made
/// from it is bounded by the archive.
pub(super) fn check_index(header: &FileHeader, footer: &Footer) -> Result<()> {
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
pub(super) fn read_block<R: Read + Seek>(
    input: &mut R,
    block_size: u32,
    index: &[IndexEntry],
    n: usize,
    buffers: &Pool<Vec<u8>>,
) -> Result<Block<'static>> {
    input.seek(SeekFrom::Start(index[n].offset))?;
    parse_block(input, block_size, index, n, buffers)
}

/// Reads block `n`'s record and payload from where `input` stands, checking the record
/// against the index.
pub(super) fn parse_block<R: Read>(
    input: &mut R,
    block_size: u32,
    index: &[IndexEntry],
    n: usize,
    buffers: &Pool<Vec<u8>>,
) -> Result<Block<'static>> {
    let e = index[n];
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
    Ok(Block {
        n: n as u64,
        raw_offset: e.raw_offset,
        record: rec,
        payload,
    })
}
