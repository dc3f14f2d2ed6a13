//! `const` (id 1): a plane of one repeated byte (the high bytes of small integers, zeroed
//! mantissa bits) stored as that byte.
//!
//! Payload: the byte.

use super::spec::{Decode, Slot, Spec};
use crate::error::CodecError;

/// The `const` codec.
pub static SPEC: Spec = Spec {
    id: 1,
    name: "const",
    fits: |_: Slot, coded_len| coded_len == 1,
    partner: None,
    decode: Decode::Plane(decode),
};

/// The byte of a plane of two or more bytes that are all that byte. The scan stops at the first
/// byte that differs, so it is free on random data.
pub fn of(plane: &[u8]) -> Option<u8> {
    match plane.first() {
        Some(&b) if plane.len() > 1 && plane.iter().all(|&x| x == b) => Some(b),
        _ => None,
    }
}

/// Fills `out` with the payload's byte.
pub fn decode(payload: &[u8], out: &mut [u8]) -> Result<(), CodecError> {
    out.fill(*payload.first().ok_or(CodecError("empty const plane"))?);
    Ok(())
}
