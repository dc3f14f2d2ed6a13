//! `sc`: lossless compression for LLM weight files.
//!
//! A safetensors file's tensor data is cut into blocks; each block is split into byte planes
//! (for 16-bit floats: the predictable exponent and the near-random sign/mantissa bits) and each
//! plane is entropy-coded with sc's own coders: canonical Huffman in FAST mode, a range coder
//! with adaptive, exponent-conditioned models in BEST mode. The `.sc` container keeps the
//! original header verbatim, checksums every block and records the MD5 of the whole file (BEST,
//! or [`EncodeOptions::md5`]). Any other file round-trips through the same pipeline.
//!
//! ```no_run
//! use sc::{decode, encode, DecodeOptions, EncodeOptions};
//! let input = std::fs::read("model.safetensors")?;
//! let mut archive = Vec::new();
//! encode(&input[..], Some(input.len() as u64), &mut archive, &EncodeOptions::default(), &mut |_| {})?;
//! let mut restored = Vec::new();
//! decode(&archive[..], &mut restored, &DecodeOptions { check_md5: true, ..Default::default() }, &mut |_| {})?;
//! assert_eq!(input, restored);
//! # Ok::<(), sc::Error>(())
//! ```

#![warn(missing_docs)]

pub mod access;
pub mod analysis;
pub mod archive;
pub mod container;
pub mod entropy;
pub mod error;
pub mod experiments;
pub mod pipeline;
pub mod safetensors;
pub mod shuffle;
pub mod split;

pub use access::{AccessStats, Archive, StoredBytes};
pub use archive::{inspect, ArchiveInfo};
pub use container::{Kind, Mode};
pub use error::{Error, Result};
pub use pipeline::decode::{decode, decode_file, decode_slice, DecodeOptions, DecodeReport};
pub use pipeline::encode::{encode, EncodeOptions, EncodeReport};
