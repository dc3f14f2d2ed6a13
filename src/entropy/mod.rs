//! The machinery the plane codecs share, apart from the codecs themselves (`crate::codec`
//! holds one file or folder per format id): the range coder, the adaptive model it drives
//! and the two-stream framing of its payloads, the joint alphabet of exponent and top
//! mantissa bits, and the row layout the context models run on.
//!
//! | module | what | used by |
//! |---|---|---|
//! | [`rc`] | the 32-bit range coder, with adaptive binary models | the BEST codecs |
//! | [`model`] | the adaptive order-0 frequency model | `adaptive`, `context`, `joint`, `ctxjoint` |
//! | [`streams`] | "two streams": a payload's pair of interleaved range-coded streams | `adaptive`, `context`, `joint`, `ctxjoint`, `signs` |
//! | [`alphabet`] | the joint symbols of exponent and top mantissa bits | `joint`, `huffjoint`, `ctxjoint` |
//! | [`rows`] | where a plane's elements lie in their tensors' rows | `ctxjoint`, `signs` |

pub mod alphabet;
pub mod model;
pub mod rc;
pub mod rows;
pub mod streams;
