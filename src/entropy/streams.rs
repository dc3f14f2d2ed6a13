//! "Two streams": the framing of the BEST codecs' range-coded payloads. A plane is
//! range-coded as two streams, even elements in the first and odd elements in the second,
//! sharing one model: the two coder states are independent dependency chains, so the
//! processor overlaps them, while the model sees the elements in their natural order. The
//! payload is `[u32 length of stream 0][stream 0][stream 1]`, and any fixed-length tail the
//! codec appends.

use super::rc::{Decoder, Encoder};
use crate::error::CodecError;

/// Appends two encoders' streams to `out` as "two streams".
pub(crate) fn finish_two(out: &mut Vec<u8>, e0: Encoder, e1: Encoder) {
    let len_at = out.len();
    out.extend_from_slice(&[0u8; 4]);
    e0.finish(out);
    let first_len = (out.len() - len_at - 4) as u32;
    out[len_at..len_at + 4].copy_from_slice(&first_len.to_le_bytes());
    e1.finish(out);
}

/// The decoders of "two streams", over one shared slice.
pub(crate) struct Streams<'a> {
    pub(crate) data: &'a [u8],
    pub(crate) decs: [Decoder; 2],
    /// Where each stream ends in `data`.
    ends: [usize; 2],
}

impl Streams<'_> {
    pub(crate) fn finish(self) -> Result<(), CodecError> {
        self.decs[0].finish(self.ends[0])?;
        self.decs[1].finish(self.ends[1])
    }
}

/// Splits "two streams" off the front of `payload` when `tail` bytes must follow them.
pub(crate) fn two_streams(payload: &[u8], tail: usize) -> Result<Streams<'_>, CodecError> {
    let head = payload
        .get(..4)
        .ok_or(CodecError("range coded streams truncated"))?;
    let first = u32::from_le(bytemuck::pod_read_unaligned(head)) as usize;
    let rest = &payload[4..];
    if first > rest.len() || rest.len() - first < tail {
        return Err(CodecError("range coded stream lengths are inconsistent"));
    }
    let data = &rest[..rest.len() - tail];
    Ok(Streams {
        data,
        decs: [Decoder::new(data, 0), Decoder::new(data, first)],
        ends: [first, data.len()],
    })
}
