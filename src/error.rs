//! The library's single error type.

use std::io;

/// Everything that can go wrong while encoding, decoding or inspecting an archive.
///
/// Each variant names the problem precisely enough for a one-line CLI message; decoding never
/// panics on bad input, it ends in one of these.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing failed at the operating-system level.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// The input does not start with the `.sc` magic bytes.
    #[error("not an sc archive (bad magic bytes)")]
    BadMagic,
    /// The archive was written by a format version this build cannot read.
    #[error("unsupported sc format version {found} (this build reads version {supported})")]
    UnsupportedVersion {
        /// Version found in the file.
        found: u16,
        /// Version this build reads.
        supported: u16,
    },
    /// The archive ended before a structure was complete.
    #[error("truncated archive: unexpected end of data in {0}")]
    Truncated(&'static str),
    /// A structure outside the blocks (header, index, trailer) failed validation.
    #[error("corrupt archive: {0}")]
    Corrupt(String),
    /// One block failed validation or decoding; `index` counts blocks from 0.
    #[error("corrupt block {index}: {reason}")]
    CorruptBlock {
        /// Block number, from 0.
        index: u64,
        /// What was wrong with it.
        reason: String,
    },
    /// The decoded data does not have the MD5 recorded at encode time (or given by the user).
    #[error("MD5 mismatch: expected {expected}, got {actual}")]
    Md5Mismatch {
        /// The MD5 that should have been seen.
        expected: String,
        /// The MD5 of what was decoded.
        actual: String,
    },
    /// An option or argument is out of range.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

/// Shorthand for results of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// A decoding failure inside one plane or block; the pipeline adds the block number.
///
/// Kept as a static string so the hot paths never allocate for errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodecError(pub &'static str);

impl std::fmt::Display for CodecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl CodecError {
    /// Attaches the block number, turning this into a library error.
    pub fn in_block(self, index: u64) -> Error {
        Error::CorruptBlock {
            index,
            reason: self.0.to_string(),
        }
    }
}
