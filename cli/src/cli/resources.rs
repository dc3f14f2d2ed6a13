//! What a run may use: worker threads (at most one per core) and memory for blocks in flight.

use super::{folder, is_stdio, note, Common, EncodeArgs};
use std::path::Path;

/// Parses a size: bytes, or with a K, M or G suffix (binary: `256M` is 256 MiB).
pub fn parse_bytes(s: &str) -> std::result::Result<u64, String> {
    let lower = s.trim().to_ascii_lowercase();
    let t = lower.trim_end_matches("ib").trim_end_matches('b');
    let (num, shift) = match t.char_indices().last() {
        Some((at, 'k')) => (&t[..at], 10),
        Some((at, 'm')) => (&t[..at], 20),
        Some((at, 'g')) => (&t[..at], 30),
        _ => (t, 0),
    };
    let n: u64 = num
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a size (examples: 4096, 64K, 256M, 2G)"))?;
    n.checked_mul(1 << shift)
        .ok_or_else(|| format!("'{s}' is too large"))
}

/// The worker threads for `-T requested`: all cores for 0, and never more than the cores (a
/// note says so when `verbose`): more threads than cores only add memory and switching.
pub fn threads(requested: usize, verbose: bool) -> usize {
    let threads = sc::worker_threads(requested);
    // Capped, `threads` is the cores.
    if requested > threads && verbose {
        note(format_args!(
            "sc: note: -T {requested} is more than the {threads} cores here; using {threads}"
        ));
    }
    threads
}

/// The memory budget: `--memory`, else the default raised to `needed`, what one block in
/// flight of the run needs, so that the default takes any block size one block at a time.
pub fn memory(common: &Common, needed: impl FnOnce() -> u64) -> u64 {
    common
        .memory
        .unwrap_or_else(|| sc::DEFAULT_MEMORY.max(needed()))
}

/// What one block in flight of `archive` needs.
pub fn archive_needs<R: std::io::Read + std::io::Seek + Send>(archive: &sc::Archive<R>) -> u64 {
    match archive.has_references() {
        true => sc::memory_needed_with_references(archive.block_size()),
        false => sc::memory_needed(archive.block_size()),
    }
}

/// What one block in flight of the archive `input` needs: nothing known of a stream, a FIFO
/// or a device, which are read once, by the decoder (opening a FIFO here would take its
/// writer's bytes).
pub fn archive_file_needs(input: &Path) -> u64 {
    let regular = std::fs::metadata(input).is_ok_and(|m| m.is_file());
    match !is_stdio(input) && regular {
        true => folder::archive_memory_needed(input),
        false => 0,
    }
}

/// What one block in flight needs when encoding with `a`'s block size, against `base` if any.
pub fn encode_needs(a: &EncodeArgs, base: Option<&sc::Base>) -> u64 {
    match base {
        Some(_) => sc::memory_needed_with_references(a.block_size),
        None => sc::memory_needed(a.block_size),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_bytes("256M"), Ok(256 << 20));
        assert_eq!(parse_bytes("2g"), Ok(2 << 30));
        assert_eq!(parse_bytes("64KiB"), Ok(64 << 10));
        assert_eq!(parse_bytes("1000"), Ok(1000));
        assert!(parse_bytes("lots").is_err());
        assert!(parse_bytes("99999999999G").is_err());
    }
}
