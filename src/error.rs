//! The library's single error type, and [`CodecError`], the static failure of one plane's
//! decoding that the block decoder turns into one.

use std::io;

/// Everything that can go wrong while encoding, decoding or inspecting an archive.
///
/// Each variant names the problem precisely enough for a one-line message; decoding never
/// panics on bad input, it ends in one of these. New variants may be added.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Reading or writing failed at the operating-system level.
    #[error(transparent)]
    Io(io::Error),
    /// The input does not start with the `.sc` magic bytes.
    #[error("not an sc archive (bad magic bytes)")]
    BadMagic,
    /// The archive was written by a format version this build cannot read.
    #[error(
        "unsupported sc format version {found} (this build reads versions {oldest} to {supported})"
    )]
    UnsupportedVersion {
        /// Version found in the file.
        found: u16,
        /// Oldest version this build reads.
        oldest: u16,
        /// Newest version this build reads.
        supported: u16,
    },
    /// The archive ended before a structure was complete.
    #[error("truncated archive: unexpected end of data in {0}")]
    Truncated(&'static str),
    /// A structure outside the blocks (header, index, trailer) failed validation.
    #[error("corrupt archive: {0}")]
    Corrupt(String),
    /// The safetensors header kept in the archive does not validate.
    #[error("corrupt archive: kept safetensors header: {0}")]
    KeptHeader(HeaderError),
    /// One block failed validation or decoding; `index` counts blocks from 0.
    #[error("corrupt block {index}: {reason}")]
    CorruptBlock {
        /// Block number, from 0.
        index: u64,
        /// What was wrong with it.
        reason: String,
    },
    /// The decoded data does not have the MD5 recorded at encode time.
    #[error("MD5 mismatch: expected {expected}, got {actual}")]
    Md5Mismatch {
        /// The MD5 that should have been seen (lower-case hex).
        expected: String,
        /// The MD5 of what was decoded (lower-case hex).
        actual: String,
    },
    /// A file read as safetensors is not one.
    #[error("not a safetensors file: {0}")]
    NotSafetensors(HeaderError),
    /// A remote location (`remote` feature) could not be read or written: not found (404),
    /// refused (403), changed while it was read, or failing past the retries. Shown with
    /// control characters escaped (`\u{1b}`): a location's key is anyone's text.
    #[error("{}: {}", escaped(location), escaped(reason))]
    Remote {
        /// The location, as it was named.
        location: String,
        /// What went wrong, on one line.
        reason: String,
    },
    /// The archive has no tensor of this name.
    #[error("no tensor named {0:?}")]
    NoSuchTensor(String),
    /// An option or argument is out of range.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The archive is coded against a base, which was not given
    /// ([`crate::DecodeOptions::base`], [`crate::Archive::open_with_base`]).
    #[error("coded against the base {needed:?}, which was not given")]
    BaseNeeded {
        /// The base's file or folder name, as recorded when the archive was made.
        needed: String,
    },
    /// The base given is not the one the archive was coded against: a tensor it needs is
    /// missing from it or holds other bytes.
    #[error("{}", base_mismatch(given, needed, reason))]
    BaseMismatch {
        /// The name of the base given.
        given: String,
        /// The base's file or folder name, as recorded when the archive was made.
        needed: String,
        /// Which tensor does not match, and how.
        reason: String,
    },
    /// A file changed while an encode read it (another process wrote it): the bytes a tensor
    /// was coded against are not those the archive would record for it, so no archive is
    /// made. Says which file and tensor.
    #[error("{0} changed while it was being read")]
    Changed(String),
    /// A run over a folder or several files ([`crate::folder`]) cannot go ahead as planned:
    /// two outputs meet, an output would replace a file the run reads, there is nothing to do,
    /// a folder cannot be read. Said before anything is written.
    #[error("{0}")]
    Folder(String),
    /// A file or folder cannot serve as a base ([`crate::Base::open`]).
    #[error("cannot use {path} as a base: {reason}")]
    BadBase {
        /// The path given.
        path: String,
        /// Why.
        reason: String,
    },
    /// The run was stopped through its [`Cancel`](crate::Cancel) token (Ctrl-C, say) before
    /// it was done: what it wrote is unfinished.
    #[error("cancelled")]
    Cancelled,
}

/// The text of [`Error::BaseMismatch`]: a base of the name recorded has most likely been
/// changed since, which "the base X is not the base X" would not say.
fn base_mismatch(given: &str, needed: &str, reason: &str) -> String {
    match given == needed {
        true => format!(
            "the base {given:?} is not the one this was coded against (a base of the same \
             name, changed since?): {reason}"
        ),
        false => format!(
            "the base {given:?} is not the base {needed:?} this was coded against: {reason}"
        ),
    }
}

/// Shorthand for results of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Why bytes are not a valid safetensors header (8-byte little-endian length, then JSON).
///
/// An input whose header does not validate is still encoded, as plain bytes
/// ([`crate::EncodeReport::generic_reason`] says why).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HeaderError {
    /// Fewer than the 8 bytes of the length field.
    #[error("shorter than a safetensors header")]
    TooShort,
    /// The length field cannot be right: over the 100 MiB limit, past the end of the input, or
    /// too short for a JSON object.
    #[error("header length {0} is implausible")]
    ImplausibleLength(u64),
    /// The input ends before the JSON text does.
    #[error("input ends inside the header")]
    EndsInsideHeader,
    /// The JSON text does not parse.
    #[error("header is not valid JSON: {0}")]
    Json(String),
    /// The JSON is not an object.
    #[error("header JSON is not an object")]
    NotAnObject,
    /// One tensor's entry is invalid.
    #[error("tensor {name:?}: {problem}")]
    Tensor {
        /// The tensor's name.
        name: String,
        /// What is wrong with its entry.
        problem: TensorProblem,
    },
    /// Two tensors' data overlap.
    #[error("tensors {0:?} and {1:?} overlap")]
    Overlap(String, String),
    /// The input starts with the GGUF magic but is not a GGUF file this build reads: says why.
    #[error("GGUF header: {0}")]
    Gguf(String),
    /// A tensor ends past the data the input holds.
    #[error("tensor {name:?} ends at {end} but the payload has {payload} bytes")]
    PastEnd {
        /// The tensor's name.
        name: String,
        /// Where its data ends, relative to the end of the header.
        end: u64,
        /// Bytes after the header.
        payload: u64,
    },
}

/// What is wrong with one tensor's entry in a safetensors header.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TensorProblem {
    /// No `dtype` string.
    #[error("missing dtype")]
    MissingDtype,
    /// No `shape` list.
    #[error("missing shape")]
    MissingShape,
    /// `shape` holds something other than non-negative integers.
    #[error("shape is not a list of integers")]
    BadShape,
    /// No `data_offsets` list.
    #[error("missing data_offsets")]
    MissingOffsets,
    /// `data_offsets` holds something other than non-negative integers.
    #[error("data_offsets not integers")]
    BadOffsets,
    /// `data_offsets` does not hold exactly two entries.
    #[error("data_offsets must have two entries")]
    OffsetsNotPair,
    /// The end offset is below the start.
    #[error("data_offsets are reversed")]
    ReversedOffsets,
    /// The element count overflows.
    #[error("shape overflows")]
    ShapeOverflow,
    /// Shape and dtype give another byte count than the offsets.
    #[error("shape x dtype is {expected} bytes but data_offsets span {span}")]
    SizeMismatch {
        /// Bytes that shape and dtype call for.
        expected: u64,
        /// Bytes between the offsets.
        span: u64,
    },
}

/// A decoding failure inside one plane; the pipeline adds the block number.
///
/// A static string, so the decode paths never allocate for errors.
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

/// `s` with control characters (C0, DEL, C1) written as escapes (`\u{1b}`, `\r`).
fn escaped(s: &str) -> String {
    s.chars()
        .map(|c| match c.is_control() {
            true => c.escape_debug().to_string(),
            false => c.to_string(),
        })
        .collect()
}

impl From<io::Error> for Error {
    /// An I/O error carrying an [`Error`] (one that passed through a [`std::io::Read`] or
    /// [`std::io::Write`]) gives it back, so that it is said once, as itself.
    fn from(e: io::Error) -> Error {
        if !e.get_ref().is_some_and(|inner| inner.is::<Error>()) {
            return Error::Io(e);
        }
        let kind = e.kind();
        match e.into_inner().map(|inner| inner.downcast::<Error>()) {
            Some(Ok(inner)) => *inner,
            Some(Err(other)) => Error::Io(io::Error::new(kind, other)),
            None => Error::Io(kind.into()),
        }
    }
}

impl From<Error> for io::Error {
    /// An [`Error::Io`] gives back its I/O error; every other error becomes
    /// [`io::ErrorKind::InvalidData`] (or `Other`) carrying it, for [`std::io::Read`] and
    /// [`std::io::Write`] implementations.
    fn from(e: Error) -> io::Error {
        match e {
            Error::Io(e) => e,
            Error::InvalidArgument(_)
            | Error::NoSuchTensor(_)
            | Error::BaseNeeded { .. }
            | Error::BaseMismatch { .. }
            | Error::BadBase { .. } => io::Error::new(io::ErrorKind::InvalidInput, e),
            // Not `Interrupted`, which readers and writers retry.
            Error::Cancelled => io::Error::other(e),
            e => io::Error::new(io::ErrorKind::InvalidData, e),
        }
    }
}
