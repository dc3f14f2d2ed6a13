//! Inputs the fuzzers found, replayed through the fuzz targets' own bodies (`sc::fuzz`): every
//! file under `fuzz/regressions/<target>/` (committed), and any crash a local fuzz run left in
//! `fuzz/artifacts/<target>/` (not committed), so `cargo test` reproduces it. Each target's
//! check (no panic; for `roundtrip`, identical bytes back) applies to each input.

use std::path::Path;

/// Runs `body` on every input of `target`; returns how many committed inputs there were.
fn replay(target: &str, body: fn(&[u8])) -> usize {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut committed = 0;
    for dir in ["regressions", "artifacts"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir).join(target)) else {
            continue;
        };
        let mut paths: Vec<_> = entries
            .map(|e| e.expect("directory entry").path())
            .collect();
        paths.sort();
        for path in paths.iter().filter(|p| p.is_file()) {
            let data = std::fs::read(path).expect("read a fuzz input");
            let run = std::panic::catch_unwind(|| body(&data));
            assert!(run.is_ok(), "{target} fails on {}", path.display());
            committed += usize::from(dir == "regressions");
        }
    }
    committed
}

#[test]
fn container_inputs() {
    assert!(replay("container", sc::fuzz::archive) > 0);
}

#[test]
fn entropy_inputs() {
    assert!(replay("entropy", sc::fuzz::entropy) > 0);
}

#[test]
fn derived_inputs() {
    assert!(replay("derived", sc::fuzz::derived) > 0);
}

#[test]
fn gguf_inputs() {
    assert!(replay("gguf", sc::fuzz::gguf) > 0);
}

#[test]
fn roundtrip_inputs() {
    let check = |data: &[u8]| {
        if let Err(why) = sc::fuzz::roundtrip(data) {
            panic!("{why}");
        }
    };
    assert!(replay("roundtrip", check) > 0);
}
