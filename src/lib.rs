//! `sc`: lossless compression for LLM weight files.
//!
//! `sc` compresses model weight files (`.safetensors`, mostly BF16, and llama.cpp's `.gguf`,
//! mostly quantized) byte for byte into a `.sc` archive, smaller than general-purpose
//! compressors make them because it knows their structure: the tensor data is cut into blocks
//! (1 MiB by default), each block is split into byte planes by dtype (the predictable exponent
//! of a float apart from its near-random sign and mantissa bits; each field of a ggml
//! quantization block apart from the others), and each plane is entropy-coded by sc's own
//! coders. Two modes:
//!
//! - [`Mode::Fast`]: Huffman coding of the exponent and top mantissa bits, the rest stored raw;
//!   decodes faster than most files can be copied.
//! - [`Mode::Best`]: a range coder with adaptive models; the smallest archives.
//!
//! The archive keeps the original safetensors or GGUF header verbatim, checksums every block
//! (XXH3-64) and can record the MD5 of the whole file; its index gives random access to any
//! tensor ([`Archive`]). Any other file round-trips as well, as plain bytes. Blocks are coded in
//! parallel on the current rayon pool, or on a pool of [`EncodeOptions::threads`], and memory
//! stays bounded whatever the file's size: the blocks in flight fit a budget
//! ([`EncodeOptions::memory`], [`DEFAULT_MEMORY`], 256 MiB) whatever the thread
//! count and block size. The format is specified in `docs/FORMAT.md`.
//!
//! # Compress and restore
//!
//! In memory:
//!
//! ```
//! let weights = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/tiny.safetensors"))?;
//! let archive = sc::encode_to_vec(&weights, &sc::EncodeOptions::new(sc::Mode::Best))?;
//! let restored = sc::decode_to_vec(&archive, &sc::DecodeOptions::default())?;
//! assert_eq!(restored, weights);
//! # Ok::<(), sc::Error>(())
//! ```
//!
//! From any reader to any writer ([`encode`], [`decode`], [`decode_file`] for archive files),
//! or as adapters in a chain of readers and writers ([`Encoder`], [`Decoder`]):
//!
//! ```
//! use std::io::Read;
//! # let weights = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/tiny.safetensors"))?;
//! let mut archive = Vec::new();
//! let report = sc::encode(&weights[..], &mut archive, &sc::EncodeOptions::default())?;
//! println!("{} -> {} bytes", report.original_len, report.archive_len);
//! let mut restored = Vec::new();
//! sc::Decoder::new(std::io::Cursor::new(archive), &sc::DecodeOptions::default())?
//!     .read_to_end(&mut restored)?;
//! assert_eq!(restored, weights);
//! # Ok::<(), sc::Error>(())
//! ```
//!
//! # Read one tensor
//!
//! ```
//! # let weights = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/tiny.safetensors"))?;
//! # let archive = sc::encode_to_vec(&weights, &sc::EncodeOptions::default())?;
//! let mut archive = sc::Archive::open(std::io::Cursor::new(archive))?;
//! let name = archive.tensors()[0].name.clone();
//! let data = archive.read_tensor(&name)?;
//! // Only the blocks that hold it were decoded.
//! assert!(archive.stats().blocks_decoded <= archive.blocks());
//! # assert_eq!(data.len() as u64, archive.tensors()[0].len());
//! # Ok::<(), sc::Error>(())
//! ```
//!
//! # From a path, a remote location or bytes
//!
//! [`Location`] names where an archive is (or an output goes), and [`OpenOptions`] how it is
//! opened: base, remote options, memory, threads. [`Archive::open_at`] opens one for random
//! access, [`Source::open`] and [`Source::decode`] decode one whole, [`inspect_at`] describes
//! one, and [`Output`] writes a file atomically or uploads, refusing an existing one unless
//! told to overwrite it. The command line and the Python package go through these.
//!
//! Every failure is an [`Error`] naming the problem; no input, however corrupt, makes the
//! library panic, hang or allocate beyond what the input's real size allows.

#![deny(missing_docs)]
#![deny(unsafe_code)]

// Modules the `internals` feature makes public (hidden from the documentation) for the crate's
// tests, fuzz targets and benches; private otherwise. Declared one by one, not by a macro, so
// that `cargo fmt` reaches their files.
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod choice;
#[cfg(not(feature = "internals"))]
mod choice;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod codec;
#[cfg(not(feature = "internals"))]
mod codec;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod container;
#[cfg(not(feature = "internals"))]
mod container;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod entropy;
#[cfg(not(feature = "internals"))]
mod entropy;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod gguf;
// Parts of the GGUF reader serve only the experiment commands.
#[cfg(not(feature = "internals"))]
#[cfg_attr(not(feature = "lab"), allow(dead_code))]
mod gguf;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod pipeline;
#[cfg(not(feature = "internals"))]
mod pipeline;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod read;
#[cfg(not(feature = "internals"))]
mod read;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod safetensors;
#[cfg(not(feature = "internals"))]
mod safetensors;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod stats;
#[cfg(not(feature = "internals"))]
mod stats;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod tensor;
#[cfg(not(feature = "internals"))]
mod tensor;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod transform;
#[cfg(not(feature = "internals"))]
mod transform;

mod archive;
mod base;
mod cancel;
pub mod derive;
mod error;
pub mod folder;
mod format;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod fuzz;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod hook;
mod inspect;
#[cfg(feature = "lab")]
pub mod lab;
mod names;
mod open;
pub mod output;
mod relate;
#[cfg(feature = "remote")]
pub mod remote;
#[cfg(feature = "remote")]
mod remote_archive;
mod stream;

/// README.md's Rust example, compiled as a doctest so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExample;

/// A xorshift32 generator of test data: deterministic, and good enough to look random to the
/// coders.
#[cfg(test)]
pub(crate) fn test_rng(seed: u32) -> impl FnMut() -> u32 {
    let mut x = seed;
    move || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x
    }
}

pub use archive::decode_file;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub use archive::decode_slice;
pub use archive::decode_to_vec;
pub use archive::{AccessStats, Archive, StoredBytes};
pub use base::Base;
pub use cancel::Cancel;
pub use choice::SignModels;
pub use container::{Kind, Mode};
pub use derive::{verify_derives, TensorDerivation};
pub use error::{Error, HeaderError, Result, TensorProblem};
pub use inspect::{inspect, ArchiveInfo, CodecUse, Reference, TransformUse};
pub use names::closest_names;
pub use open::{
    inspect_at, worker_threads, Committed, Decoded, Location, OpenOptions, Output, Source,
};
pub use pipeline::decode::{decode, DecodeOptions, DecodeReport};
pub use pipeline::encode::{encode, encode_file, encode_to_vec, EncodeOptions, EncodeReport};
pub use pipeline::{
    archive_memory_needed, memory_needed, memory_needed_with_references, DEFAULT_MEMORY,
};
pub use relate::{relate, Chosen, RelateOptions, RelatePlan, Related};
#[cfg(feature = "remote")]
pub use remote_archive::{decode_url, inspect_url};
pub use stream::{Decoder, Encoder};
pub use tensor::{Dtype, TensorInfo};

/// First bytes of every archive: what tells an archive from other files.
pub const MAGIC: [u8; 4] = container::MAGIC;
/// The container format version this build writes and reads.
pub const FORMAT_VERSION: u16 = container::VERSION;
/// Smallest block size ([`EncodeOptions::block_size`]).
pub const MIN_BLOCK_SIZE: u32 = container::MIN_BLOCK_SIZE;
/// Largest block size.
pub const MAX_BLOCK_SIZE: u32 = container::MAX_BLOCK_SIZE;
/// Default block size: 1 MiB.
pub const DEFAULT_BLOCK_SIZE: u32 = container::DEFAULT_BLOCK_SIZE;

/// The highest compression level ([`level`]): a higher one (zstd's `-19`) means this one.
pub const HIGHEST_LEVEL: u32 = 9;
/// The highest compression level that means FAST ([`level`]).
pub const LAST_FAST_LEVEL: u32 = 5;

/// The mode and BEST's sign models that compression level `n` means, on zstd's scale (the
/// command line's `-1` to `-9`, Python's `level=`): 1 to 5 FAST (sc's default, which decodes at
/// copy speed), 6 and above BEST (smaller, several times slower). BEST's sign models go where
/// they pay, but nowhere at 6 (BEST's fastest decoding, and archives for readers of format
/// version 4) and wherever they code a block smaller from [`HIGHEST_LEVEL`] up (smallest;
/// such blocks decode about 1.4x slower). `None` for 0.
pub fn level(n: u32) -> Option<(Mode, SignModels)> {
    let mode = match n {
        0 => return None,
        1..=LAST_FAST_LEVEL => Mode::Fast,
        _ => Mode::Best,
    };
    let signs = match n {
        6 => SignModels::Off,
        n if n >= HIGHEST_LEVEL => SignModels::Everywhere,
        _ => SignModels::Paying,
    };
    Some((mode, signs))
}

#[cfg(test)]
mod level_tests {
    use super::*;

    #[test]
    fn levels_are_zstds_scale() {
        assert_eq!(level(1), Some((Mode::Fast, SignModels::Paying)));
        assert_eq!(level(5), Some((Mode::Fast, SignModels::Paying)));
        assert_eq!(level(6), Some((Mode::Best, SignModels::Off)));
        assert_eq!(level(7), Some((Mode::Best, SignModels::Paying)));
        assert_eq!(level(9), Some((Mode::Best, SignModels::Everywhere)));
        assert_eq!(level(19), Some((Mode::Best, SignModels::Everywhere)));
        assert_eq!(level(0), None);
    }
}
