//! Checksums: XXH3-64 for block contents and structures, MD5 for the whole original file.

use md5::{Digest, Md5};

/// Checksum of a block's original bytes (XXH3-64, seed 0).
pub fn block(data: &[u8]) -> u64 {
    xxh3(data)
}

/// XXH3-64 with seed 0; the implementation picks AVX2 or SSE2 at run time.
pub fn xxh3(data: &[u8]) -> u64 {
    twox_hash::XxHash3_64::oneshot(data)
}

/// Short checksum protecting a structure's own fields (low 32 bits of XXH3-64).
pub fn structure(bytes: &[u8]) -> u32 {
    xxh3(bytes) as u32
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The format fixes XXH3-64 with seed 0: the reference value for empty input, and the same
    /// hash whichever of the implementation's paths (short, medium, long inputs) runs.
    #[test]
    fn xxh3_is_the_reference_function() {
        assert_eq!(xxh3(b""), 0x2D06_8005_38D3_94C2);
        let data: Vec<u8> = (0..5000u32).map(|i| (i * 31 % 256) as u8).collect();
        for n in [1, 3, 16, 17, 128, 129, 240, 241, 1024, 5000] {
            let mut h = twox_hash::XxHash3_64::new();
            let (a, b) = data[..n].split_at(n / 3);
            std::hash::Hasher::write(&mut h, a);
            std::hash::Hasher::write(&mut h, b);
            assert_eq!(std::hash::Hasher::finish(&h), xxh3(&data[..n]), "n={n}");
        }
    }
}
