//! `sc list` and `sc extract`: the tensors of an archive, read through its index.

mod common;

use common::{check_layout, encode_to_vec, fails, ok, sc, tensor_ranges};
use sc::{Archive, EncodeOptions};
use std::io::Cursor;
use std::path::Path;

const SAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../testdata/sample.safetensors"
);

fn sample() -> Vec<u8> {
    std::fs::read(SAMPLE).expect("testdata/sample.safetensors")
}

fn open(archive: &[u8]) -> Archive<Cursor<&[u8]>> {
    Archive::open(Cursor::new(archive)).expect("open a good archive")
}

#[test]
fn cli_list_and_extract_on_a_streamed_archive() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let original = sample();
    // Encoded from a pipe to a pipe: the index at the end makes the landed file seekable.
    let streamed = ok(sc(
        d,
        &["encode", "-", "-c", "-b", "64K"],
        Some(Path::new(SAMPLE)),
    ))
    .stdout;
    std::fs::write(d.join("m.safetensors.sc"), &streamed).unwrap();
    let listing = String::from_utf8(ok(sc(d, &["list", "m.safetensors.sc"], None)).stdout).unwrap();
    let a = open(&streamed);
    let sizes = a.stored_bytes();
    for (t, stored) in a.tensors().iter().zip(&sizes.per_tensor) {
        let line = listing
            .lines()
            .find(|l| l.starts_with(&format!("{} ", t.name)))
            .unwrap_or_else(|| panic!("{} not listed:\n{listing}", t.name));
        let cols: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cols[1], t.dtype_name);
        assert!(
            cols.contains(&(t.end - t.begin).to_string().as_str()),
            "{line}"
        );
        assert!(cols.contains(&stored.to_string().as_str()), "{line}");
    }
    let total = listing.lines().find(|l| l.starts_with("total")).unwrap();
    let tensor_bytes: u64 = a.tensors().iter().map(|t| t.end - t.begin).sum();
    let stored: u64 = sizes.per_tensor.iter().sum();
    assert!(total.contains(&format!(" {tensor_bytes} ")), "{total}");
    assert!(total.contains(&format!(" {stored} ")), "{total}");
    assert!(
        listing.contains(&format!("archive: {} bytes", streamed.len())),
        "{listing}"
    );

    // Default name, -v statistics, then no overwrite without -f.
    let want = tensor_ranges(&original);
    let name = "encoder.layer.0.attention.self.query.weight";
    let range = want.iter().find(|(n, _)| n == name).unwrap().1.clone();
    let out = ok(sc(
        d,
        &["extract", "m.safetensors.sc", "-t", name, "-v"],
        None,
    ));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("decoded 5 of"), "{err}");
    let file = std::fs::read(d.join("m.extract.safetensors")).unwrap();
    let (h, _) = check_layout(&file);
    let base = 8 + h.json_len as usize;
    assert!(file[base..] == original[range.clone()]);
    fails(
        sc(d, &["extract", "m.safetensors.sc", "-t", name], None),
        "already exists",
    );
    ok(sc(
        d,
        &["extract", "-f", "-q", "m.safetensors.sc", "-t", name],
        None,
    ));

    // --raw to stdout, in the order given.
    let other = "embeddings.LayerNorm.weight";
    let range2 = want.iter().find(|(n, _)| n == other).unwrap().1.clone();
    let args = [
        "extract",
        "m.safetensors.sc",
        "--raw",
        "-c",
        "--tensor",
        other,
        "-t",
        name,
    ];
    let raw = ok(sc(d, &args, None)).stdout;
    let mut expect = original[range2].to_vec();
    expect.extend_from_slice(&original[range]);
    assert!(raw == expect);
}

#[test]
fn cli_errors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let archive = encode_to_vec(&sample(), &EncodeOptions::default());
    std::fs::write(d.join("m.sc"), &archive).unwrap();
    let err = fails(
        sc(
            d,
            &["extract", "m.sc", "-t", "embeddings.LayerNorm.weigt"],
            None,
        ),
        "no tensor named",
    );
    assert!(err.contains("\"embeddings.LayerNorm.weight\""), "{err}");
    fails(sc(d, &["extract", "m.sc", "-t", "zzz"], None), "sc list");
    fails(
        sc(d, &["extract", "-", "-t", "x"], Some(&d.join("m.sc"))),
        "seekable archive",
    );
    let generic = encode_to_vec(b"just some bytes", &EncodeOptions::default());
    std::fs::write(d.join("g.sc"), generic).unwrap();
    fails(sc(d, &["list", "g.sc"], None), "not safetensors");
    let mut bad = archive.clone();
    let n = bad.len();
    bad[n - 30] ^= 1;
    std::fs::write(d.join("bad.sc"), bad).unwrap();
    fails(sc(d, &["list", "bad.sc"], None), "corrupt");
    // A missing --tensor is a usage error.
    assert_eq!(sc(d, &["extract", "m.sc"], None).status.code(), Some(2));
    // Nothing was left behind by the failures.
    let mut files: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(files, ["bad.sc", "g.sc", "m.sc"]);
}
