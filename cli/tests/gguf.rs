//! GGUF files on the command line: encoded as GGUF (kind 2) whatever their name, their
//! archives listed tensor by tensor from the kept header, restored byte for byte.

mod common;

use common::{ok, sc};

const TINY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/tiny.gguf");

#[test]
fn a_gguf_file_is_coded_listed_and_restored() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    // Detected by its magic, not its name.
    std::fs::copy(TINY, d.join("weights.bin")).unwrap();
    for mode in ["fast", "best"] {
        ok(sc(
            d,
            &[
                "encode",
                "-f",
                "-q",
                "-m",
                mode,
                "weights.bin",
                "-o",
                "w.sc",
            ],
            None,
        ));
        let list = ok(sc(d, &["list", "w.sc"], None));
        let list = String::from_utf8_lossy(&list.stdout);
        for (name, ggml, shape) in [
            ("token_embd.weight", "Q8_0", "[2, 576]"),
            ("blk.0.attn_norm.weight", "F32", "[576]"),
            ("gemma.blk.0.ffn_down.weight", "Q6_K", "[1, 2048]"),
        ] {
            let line = list
                .lines()
                .find(|l| l.starts_with(name))
                .unwrap_or_else(|| {
                    panic!("{name} not listed: {list}");
                });
            assert!(line.contains(ggml) && line.contains(shape), "{line}");
        }
        let info = ok(sc(d, &["info", "w.sc"], None));
        let info = String::from_utf8_lossy(&info.stdout);
        assert!(
            info.contains("GGUF") && info.contains("version 6"),
            "{info}"
        );
        ok(sc(d, &["decode", "-f", "-q", "w.sc", "-o", "back"], None));
        assert!(std::fs::read(d.join("back")).unwrap() == std::fs::read(TINY).unwrap());
    }
}
