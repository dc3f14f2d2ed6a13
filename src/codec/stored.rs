//! `stored` (id 0): the plane's bytes as they are. What near-random planes get, and any plane
//! that no coder makes smaller.
//!
//! Payload: the plane, exactly as long as it.

use super::spec::{Decode, Slot, Spec};
use crate::error::CodecError;

/// The `stored` codec.
pub static SPEC: Spec = Spec {
    id: 0,
    name: "stored",
    fits: |at: Slot, coded_len| coded_len == at.plane_len,
    partner: None,
    decode: Decode::Plane(decode),
};

/// Copies the payload into `out`, which must be as long.
pub fn decode(payload: &[u8], out: &mut [u8]) -> Result<(), CodecError> {
    if payload.len() != out.len() {
        return Err(CodecError("stored plane has the wrong length"));
    }
    out.copy_from_slice(payload);
    Ok(())
}
