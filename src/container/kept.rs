//! The kept header (safetensors or GGUF) stored deflated (format version 3, header flag bit 2).
//!
//! A raw DEFLATE stream (RFC 1951, no zlib or gzip wrapper): the archive's XXH3 already checks
//! the stored bytes, and the declared length bounds the output.

use crate::error::{Error, Result};
use crate::Mode;
use miniz_oxide::deflate::core::{
    compress_to_output, create_comp_flags_from_zip_params, CompressorOxide, TDEFLFlush, TDEFLStatus,
};
use miniz_oxide::inflate::core::{decompress, inflate_flags, DecompressorOxide};
use miniz_oxide::inflate::TINFLStatus;
use rayon::prelude::*;

/// BEST's deflate level, 6: on real headers (4 to 12 KB) as small as levels 9 and 10, byte for
/// byte, and on a 97 MB header of 10^6 tensors 1.2 s against 2.9 s for level 10, 0.01% larger.
const BEST_LEVEL: u8 = 6;

/// FAST's deflate level, 1 (miniz's greedy fast path): on the 6.5 MB header of a GGUF file with
/// a 262,144-token vocabulary about three times faster than level 2, which took a tenth of
/// the FAST encode's CPU time, and 176 KB larger (0.07% of that file).
const FAST_LEVEL: u8 = 1;

/// The deflate level of `mode`.
fn level(mode: Mode) -> u8 {
    match mode {
        Mode::Fast => FAST_LEVEL,
        Mode::Best => BEST_LEVEL,
    }
}

/// Bytes the packed form adds besides the deflated stream: its `u32` length.
pub const PACKED_LEN_FIELD: usize = 4;

/// Bytes deflated as one piece. A GGUF header holds megabytes of tokenizer vocabulary, which
/// one thread deflates in a quarter of a second while the blocks wait for it; pieces of 1 MiB
/// are deflated in parallel and cost 0.05% of a real one (each starts without the
/// previous piece's window).
const PIECE: usize = 1 << 20;

/// The deflated form of `kept` when storing it (with its length field) takes fewer bytes than
/// `kept` itself, else `None`; deflated at the level of `mode`. Pieces of [`PIECE`] bytes are deflated in parallel, each but the
/// last ending with a sync flush (an empty stored block, byte-aligned and not final), so that
/// their concatenation is one DEFLATE stream, whose back-references stay within their piece.
pub fn pack(kept: &[u8], mode: Mode) -> Option<Vec<u8>> {
    if kept.len() <= PACKED_LEN_FIELD + 2 {
        return None;
    }
    let last = kept.len().div_ceil(PIECE) - 1;
    let pieces: Vec<Vec<u8>> = kept
        .par_chunks(PIECE)
        .enumerate()
        .map(|(k, piece)| match k == last {
            true => deflate(piece, level(mode), TDEFLFlush::Finish),
            false => deflate(piece, level(mode), TDEFLFlush::Sync),
        })
        .collect();
    let packed = pieces.concat();
    (packed.len() + PACKED_LEN_FIELD < kept.len()).then_some(packed)
}

/// `piece` deflated at `level` as a raw stream ending with `flush`.
fn deflate(piece: &[u8], level: u8, flush: TDEFLFlush) -> Vec<u8> {
    let flags = create_comp_flags_from_zip_params(level.into(), 0, 0);
    let mut state = Box::new(CompressorOxide::new(flags));
    let mut out = Vec::with_capacity(piece.len() / 2 + 64);
    let (status, _) = compress_to_output(&mut state, piece, flush, |bytes| {
        out.extend_from_slice(bytes);
        true
    });
    // Output goes to a growing vector, so the compressor cannot be cut short.
    debug_assert!(matches!(status, TDEFLStatus::Done | TDEFLStatus::Okay));
    out
}

/// Inflates `packed`, which must be one whole DEFLATE stream, ending at its last byte, of
/// exactly `len` bytes. Memory grows with the bytes actually inflated, never past `len`, so a
/// claimed length costs nothing until the stream produces it.
pub fn unpack(packed: &[u8], len: usize, header: &str) -> Result<Vec<u8>> {
    let bad = |what: &str| Error::Corrupt(format!("{header} corrupt: {what}"));
    let flags = inflate_flags::TINFL_FLAG_USING_NON_WRAPPING_OUTPUT_BUF;
    let mut state = Box::<DecompressorOxide>::default();
    let mut out = vec![0u8; len.min(packed.len().saturating_mul(4).max(4096))];
    let (mut read, mut written) = (0, 0);
    loop {
        let (status, took, made) =
            decompress(&mut state, &packed[read..], &mut out, written, flags);
        read += took;
        written += made;
        match status {
            TINFLStatus::Done if written == len && read == packed.len() => return Ok(out),
            TINFLStatus::Done if written != len => {
                return Err(bad(&format!("inflates to {written} bytes, not {len}")))
            }
            TINFLStatus::Done => return Err(bad("bytes after the end of its stream")),
            TINFLStatus::HasMoreOutput if out.len() < len => {
                out.resize(out.len().saturating_mul(2).min(len), 0);
            }
            TINFLStatus::HasMoreOutput => {
                return Err(bad(&format!("inflates to more than {len} bytes")))
            }
            TINFLStatus::NeedsMoreInput | TINFLStatus::FailedCannotMakeProgress => {
                return Err(bad("its stream ends early"))
            }
            _ => return Err(bad("invalid DEFLATE stream")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header_like(n: usize) -> Vec<u8> {
        let mut json = String::from("{");
        for i in 0..n {
            json.push_str(&format!(
                "\"layer.{i}.weight\":{{\"dtype\":\"BF16\",\"shape\":[384,384],\"data_offsets\":[{},{}]}},",
                i * 294912,
                (i + 1) * 294912
            ));
        }
        json.push_str("\"__metadata__\":{\"format\":\"pt\"}}");
        let mut b = (json.len() as u64).to_le_bytes().to_vec();
        b.extend_from_slice(json.as_bytes());
        b
    }

    #[test]
    fn round_trip_and_exact_lengths() {
        for n in [1, 10, 300] {
            let kept = header_like(n);
            let packed = pack(&kept, Mode::Best).expect("a JSON header deflates");
            assert!(packed.len() + PACKED_LEN_FIELD < kept.len());
            assert_eq!(unpack(&packed, kept.len(), "h").unwrap(), kept);
            // The declared length must be exact, and the stream must end at its last byte.
            assert!(unpack(&packed, kept.len() - 1, "h").is_err());
            assert!(unpack(&packed, kept.len() + 1, "h").is_err());
            let mut longer = packed.clone();
            longer.push(0);
            assert!(unpack(&longer, kept.len(), "h").is_err());
            for cut in [0, 1, packed.len() / 2, packed.len() - 1] {
                assert!(
                    unpack(&packed[..cut], kept.len(), "h").is_err(),
                    "cut {cut}"
                );
            }
        }
    }

    #[test]
    fn pieces_make_one_stream() {
        // A header of one piece deflates as one compressor call would, so archives of the
        // usual headers are the bytes they were.
        let small = header_like(300);
        for mode in [Mode::Fast, Mode::Best] {
            assert_eq!(
                pack(&small, mode).unwrap(),
                miniz_oxide::deflate::compress_to_vec(&small, level(mode))
            );
        }
        // Over three pieces and a part: one stream, inflated whole, within 0.2% of one piece
        // on this repetitive JSON (0.05% on the headers of real GGUF files).
        let kept = header_like(40_000);
        assert!(kept.len() > 3 * PIECE && !kept.len().is_multiple_of(PIECE));
        let packed = pack(&kept, Mode::Best).unwrap();
        assert_eq!(unpack(&packed, kept.len(), "h").unwrap(), kept);
        let whole = miniz_oxide::deflate::compress_to_vec(&kept, BEST_LEVEL).len();
        assert!(
            packed.len() < whole + whole / 500,
            "{} vs {whole}",
            packed.len()
        );
        assert!(unpack(&packed[..packed.len() - 1], kept.len(), "h").is_err());
    }

    #[test]
    fn incompressible_stays_raw() {
        let hashes: Vec<u8> = (0..512u64)
            .flat_map(|i| crate::container::checksum::xxh3(&i.to_le_bytes()).to_le_bytes())
            .collect();
        assert!(pack(&hashes, Mode::Fast).is_none() && pack(&hashes, Mode::Best).is_none());
        assert!(pack(b"12345", Mode::Fast).is_none());
    }

    #[test]
    fn corrupt_streams_fail_without_panicking() {
        let kept = header_like(40);
        let packed = pack(&kept, Mode::Best).unwrap();
        for i in 0..packed.len() {
            for bit in [1u8, 0x10, 0x80] {
                let mut bad = packed.clone();
                bad[i] ^= bit;
                // Either an error, or (a flip in padding bits) the same header.
                if let Ok(out) = unpack(&bad, kept.len(), "h") {
                    assert_eq!(out.len(), kept.len());
                }
            }
        }
        // A stream of long matches claims far more than it has: output stays within `len`.
        let zeros = vec![0u8; 1 << 20];
        let bomb = miniz_oxide::deflate::compress_to_vec(&zeros, 10);
        assert!(unpack(&bomb, 1000, "h").is_err());
        assert_eq!(unpack(&bomb, 1 << 20, "h").unwrap(), zeros);
    }
}
