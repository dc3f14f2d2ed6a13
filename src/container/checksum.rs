//! Checksums: XXH3-64 for block contents and structures, MD5 for the whole original file.

use md5::{Digest, Md5};

/// Checksum of a block's original bytes (XXH3-64, seed 0).
pub fn block(data: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(data)
}

/// Short checksum protecting a structure's own fields (low 32 bits of XXH3-64).
pub fn structure(bytes: &[u8]) -> u32 {
    xxhash_rust::xxh3::xxh3_64(bytes) as u32
}

/// Incremental MD5 of the original file.
#[derive(Clone, Default)]
pub struct FileDigest(Md5);

impl FileDigest {
    /// Starts an empty digest.
    pub fn new() -> Self {
        FileDigest(Md5::new())
    }

    /// Adds bytes.
    pub fn update(&mut self, data: &[u8]) {
        self.0.update(data);
    }

    /// Final 16-byte digest.
    pub fn finish(self) -> [u8; 16] {
        self.0.finalize().into()
    }
}

/// Lower-case hex of a digest, as `md5sum` prints it.
pub fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}
