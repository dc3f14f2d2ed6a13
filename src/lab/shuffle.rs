//! The byte-shuffle baseline (`sc shuffle`): the planes FAST would code, written out uncoded, so
//! that a general-purpose compressor can be run on them (`sc shuffle FILE | zstd`). It shows how
//! much of sc's gain comes from splitting the planes and how much from its own coders.
//!
//! Stream layout: one kind byte (0 generic, 1 safetensors), the block size (u32, little-endian);
//! for safetensors the file's header
//! verbatim (8-byte length and JSON); then for each block, planned as the encoder plans them,
//! the transform id and the block's planes back to back. [`unshuffle`] needs nothing else.

use super::read_file_header;
use crate::choice::refine;
use crate::container::check_block_size;
use crate::error::{Error, Result};
use crate::pipeline::plan::Planner;
use crate::read::{read_exact_or, read_up_to};
use crate::safetensors::{json_len, Header, MAX_HEADER_LEN};
use crate::transform::{Transform, MAX_PLANES};
use std::io::{Read, Seek, SeekFrom, Write};

const GENERIC: u8 = 0;
const SAFETENSORS: u8 = 1;

/// Writes the shuffled form of the file `input` to `output`, in blocks of at most
/// `block_size` bytes; returns the bytes read.
pub fn shuffle<R: Read + Seek, W: Write>(
    input: &mut R,
    output: &mut W,
    block_size: u32,
) -> Result<u64> {
    check_block_size(block_size).map_err(Error::InvalidArgument)?;
    // Whatever does not parse as safetensors is shuffled as plain bytes, as encode does.
    let header = read_file_header(input).ok().map(|(h, _)| h);
    input.seek(SeekFrom::Start(0))?;
    let mut prefix = vec![0u8; header.as_ref().map_or(0, |h| h.prefix_len()) as usize];
    read_exact_or(input, &mut prefix, "safetensors header")?;
    output.write_all(&[if header.is_some() {
        SAFETENSORS
    } else {
        GENERIC
    }])?;
    output.write_all(&block_size.to_le_bytes())?;
    output.write_all(&prefix)?;
    let mut planes = vec![Vec::new(); MAX_PLANES];
    let mut raw = Vec::new();
    let mut read = prefix.len() as u64;
    for spec in Planner::new(header.as_ref(), read, block_size) {
        raw.resize(spec.len as usize, 0);
        let got = read_up_to(input, &mut raw)?;
        raw.truncate(got);
        let t = match spec.transform {
            // FAST picks some splits per block by measurement; so does the baseline.
            t if got % t.width() == 0 => refine(t, &raw, false),
            _ => Transform::Bytes,
        };
        if got > 0 {
            t.split(&raw, &mut planes);
            output.write_all(&[t as u8])?;
            for p in &planes[..t.planes()] {
                output.write_all(p)?;
            }
        }
        read += got as u64;
        if got < spec.len as usize {
            break;
        }
    }
    output.flush()?;
    Ok(read)
}

/// Restores the original file from the output of [`shuffle`]; returns the bytes written.
pub fn unshuffle<R: Read, W: Write>(input: &mut R, output: &mut W) -> Result<u64> {
    let bad = |why: &str| Error::InvalidArgument(format!("not a shuffled stream: {why}"));
    let mut start = [0u8; 5];
    read_exact_or(input, &mut start, "shuffled stream").map_err(|_| bad("too short"))?;
    let block_size = u32::from_le_bytes([start[1], start[2], start[3], start[4]]);
    check_block_size(block_size).map_err(|e| bad(&e))?;
    let (header, prefix) = match start[0] {
        GENERIC => (None, Vec::new()),
        SAFETENSORS => {
            let mut len = [0u8; 8];
            read_exact_or(input, &mut len, "shuffled stream header")?;
            let n = json_len(&len);
            let mut prefix = len.to_vec();
            if n > MAX_HEADER_LEN {
                return Err(bad("header length is implausible"));
            }
            prefix.resize(8 + n as usize, 0);
            read_exact_or(input, &mut prefix[8..], "shuffled stream header")?;
            let h = Header::parse(&prefix[8..], None).map_err(|e| bad(&e.to_string()))?;
            (Some(h), prefix)
        }
        _ => return Err(bad("unknown kind")),
    };
    output.write_all(&prefix)?;
    let mut written = prefix.len() as u64;
    let (mut buf, mut out) = (Vec::new(), Vec::new());
    for spec in Planner::new(header.as_ref(), written, block_size) {
        // Every block's length is planned; only the last may come up short.
        let mut id = [0u8; 1];
        if read_up_to(input, &mut id)? == 0 {
            break;
        }
        // The shuffle never codes against a base: a delta transform here is not one of its.
        let t = Transform::from_id(id[0])
            .filter(|t| !t.is_delta() && t.ggml().is_none())
            .ok_or_else(|| bad("unknown transform"))?;
        buf.resize(spec.len as usize, 0);
        let got = read_up_to(input, &mut buf)?;
        if got % t.width() != 0 {
            return Err(bad("a block ends inside an element"));
        }
        let n = t.plane_len(0, got);
        let views: Vec<&[u8]> = buf[..got].chunks(n.max(1)).collect();
        out.resize(got, 0);
        if got > 0 {
            t.merge(&views, &mut out).map_err(|e| bad(&e.to_string()))?;
        }
        output.write_all(&out)?;
        written += got as u64;
        if got < spec.len as usize {
            break;
        }
    }
    output.flush()?;
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn round_trip(original: &[u8], block_size: u32) -> Vec<u8> {
        let mut shuffled = Vec::new();
        let n = shuffle(&mut Cursor::new(original), &mut shuffled, block_size).unwrap();
        assert_eq!(n, original.len() as u64);
        let mut back = Vec::new();
        let m = unshuffle(&mut Cursor::new(&shuffled), &mut back).unwrap();
        assert_eq!(m, original.len() as u64);
        assert!(back == original, "round trip differs");
        shuffled
    }

    #[test]
    fn safetensors_and_other_files_round_trip() {
        let tiny = include_bytes!("../../testdata/tiny.safetensors");
        let shuffled = round_trip(tiny, 4096);
        assert_eq!(shuffled[0], SAFETENSORS);
        // Header kept, planes moved: the same bytes in another order, plus the block tags.
        assert!(shuffled[5..].starts_with(&tiny[..16]));
        assert_ne!(&shuffled[5..5 + tiny.len()], &tiny[..]);
        let mut cut = tiny.to_vec();
        cut.truncate(tiny.len() - 3);
        assert_eq!(round_trip(&cut, 4096)[0], GENERIC);
        let odd: Vec<u8> = (0..10_001u32).map(|i| (i * 7 % 251) as u8).collect();
        round_trip(&odd, 4096);
        round_trip(&[], 4096);
    }

    #[test]
    fn bad_streams_are_errors() {
        for bad in [
            &b""[..],
            &[7, 0, 0, 16, 0][..],
            &[0, 0, 0, 16, 0, 9][..],
            &[0, 1, 0, 0, 0],
        ] {
            assert!(unshuffle(&mut Cursor::new(bad), &mut Vec::new()).is_err());
        }
    }
}
