//! The experiment commands run as a user would: `analyze`, `sweep`, `bench`, `shuffle`, and
//! `verify` over many archives. Only small files, and nothing that needs zstd or the other
//! compressors to be installed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const TINY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/tiny.safetensors");
const SAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../testdata/sample.safetensors"
);

/// Runs `sc args...` in `dir` with the environment changed by `env`.
fn sc_env(dir: &Path, args: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sc"));
    c.args(args).current_dir(dir);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run sc")
}

fn sc(dir: &Path, args: &[&str]) -> Output {
    sc_env(dir, args, &[])
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Stdout of a run that must succeed.
fn ok(out: Output, what: &str) -> String {
    assert_eq!(out.status.code(), Some(0), "{what}: {}", text(&out.stderr));
    text(&out.stdout)
}

/// Stderr of a run that must fail with exit 1 and one `sc: error:` line.
fn fails(out: Output, what: &str) -> String {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{what} should fail: {err}");
    assert_eq!(err.lines().count(), 1, "{what}: one error line: {err}");
    assert!(
        err.starts_with("sc: error: ") && !err.contains("panicked"),
        "{err}"
    );
    err
}

/// Cells of the markdown table row whose first cells are `key`.
fn row(out: &str, key: &[&str]) -> Vec<String> {
    out.lines()
        .map(|l| {
            l.split('|')
                .map(|c| c.trim().to_string())
                .collect::<Vec<_>>()
        })
        .find(|cells| cells.len() > key.len() && cells[1..=key.len()] == *key)
        .unwrap_or_else(|| panic!("no row {key:?} in:\n{out}"))[1..]
        .to_vec()
}

/// A safetensors file of (name, dtype, little-endian data, element count).
fn safetensors(tensors: &[(&str, &str, Vec<u8>, usize)]) -> Vec<u8> {
    let (mut json, mut data) = (Vec::new(), Vec::new());
    for (name, dtype, raw, n) in tensors {
        let end = data.len() + raw.len();
        json.push(format!(
            r#""{name}":{{"dtype":"{dtype}","shape":[{n}],"data_offsets":[{},{end}]}}"#,
            data.len()
        ));
        data.extend_from_slice(raw);
    }
    let json = format!("{{{}}}", json.join(","));
    let mut f = (json.len() as u64).to_le_bytes().to_vec();
    f.extend_from_slice(json.as_bytes());
    f.extend_from_slice(&data);
    f
}

fn workdir() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().expect("temp dir");
    let p = d.path().to_path_buf();
    (d, p)
}

/// -p log2 p summed: the entropy of a distribution given by counts.
fn entropy(counts: &[f64]) -> f64 {
    let n: f64 = counts.iter().sum();
    counts.iter().map(|c| -(c / n) * (c / n).log2()).sum()
}

/// A GGUF file is measured field by field: a Q4_0 tensor whose blocks all hold the scale
/// 1.0 and the nibbles 0..15 in turn has 0 bits of scale and 4 bits of quants; a Q5_0 tensor
/// whose quants are the values 0..31 in turn has 5 bits of joined quants, though each of
/// its low nibbles and high bits alone is 4 and 1; the bound adds them up with the header
/// deflated.
#[test]
fn analyze_measures_gguf_fields() {
    let (_t, d) = workdir();
    let mut q4 = Vec::new();
    let mut q5 = Vec::new();
    for _ in 0..8 {
        q4.extend_from_slice(&0x3c00u16.to_le_bytes());
        q4.extend((0..16u8).map(|k| (k & 0xf) | (((k + 1) & 0xf) << 4)));
        // Quant j has low nibble j & 15 and high bit j >> 4, for j in 0..32.
        q5.extend_from_slice(&0x3c00u16.to_le_bytes());
        q5.extend_from_slice(&0xffff_0000u32.to_le_bytes());
        q5.extend((0..16u8).map(|j| j | (j << 4)));
    }
    let mut file = b"GGUF".to_vec();
    for n in [
        3u32.to_le_bytes().as_slice(),
        &2u64.to_le_bytes(),
        &0u64.to_le_bytes(),
    ] {
        file.extend_from_slice(n);
    }
    for (name, ty, offset) in [("a", 2u32, 0u64), ("b", 6, 160)] {
        file.extend_from_slice(&1u64.to_le_bytes());
        file.extend_from_slice(name.as_bytes());
        file.extend_from_slice(&1u32.to_le_bytes());
        file.extend_from_slice(&256u64.to_le_bytes());
        file.extend_from_slice(&ty.to_le_bytes());
        file.extend_from_slice(&offset.to_le_bytes());
    }
    file.resize(file.len().next_multiple_of(32), 0);
    file.extend_from_slice(&q4);
    file.resize(file.len().next_multiple_of(32), 0);
    file.extend_from_slice(&q5);
    std::fs::write(d.join("m.gguf"), &file).unwrap();
    let out = ok(sc(&d, &["analyze", "m.gguf"]), "analyze");
    // Columns: type, tensors, % of file, field, bits, per tensor, pooled, bound % of field.
    let per_tensor = |ty: &str, field: &str| -> f64 {
        let mut current = String::new();
        for cells in out
            .lines()
            .map(|l| l.split('|').map(str::trim).collect::<Vec<_>>())
        {
            if cells.len() > 8 && !cells[1].is_empty() {
                current = cells[1].to_string();
            }
            if cells.len() > 8 && current == ty && cells[4] == field {
                return cells[6].parse().unwrap();
            }
        }
        panic!("no {ty} {field} row:\n{out}");
    };
    for (ty, field, bits) in [
        ("Q4_0", "d", 0.0),
        ("Q4_0", "qs", 4.0),
        ("Q5_0", "qs", 4.0),
        ("Q5_0", "qh", 1.0),
        ("Q5_0", "quants, 5-bit, joined", 5.0),
    ] {
        assert!(
            (per_tensor(ty, field) - bits).abs() < 1e-9,
            "{ty} {field}:\n{out}"
        );
    }
    assert!(
        out.contains("GGUF version 3") && out.contains("2 tensors"),
        "{out}"
    );
    // Bound: 0 + 128 bytes of Q4_0 quants, 0 + 160 of Q5_0 quants, the deflated header and
    // the padding.
    let bound: f64 = out
        .split("Bound: ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .unwrap()
        .parse()
        .unwrap();
    assert!(bound > 288.0 && bound < 288.0 + 200.0, "{out}");
    let bad = sc(&d, &["analyze", "m.gguf", "--plot", "p"]);
    assert!(!bad.status.success() && text(&bad.stderr).contains("safetensors files only"));
    std::fs::write(d.join("cut.gguf"), &file[..100]).unwrap();
    let cut = sc(&d, &["analyze", "cut.gguf"]);
    assert_eq!(cut.status.code(), Some(1));
    assert!(
        text(&cut.stderr).contains("not a GGUF file"),
        "{}",
        text(&cut.stderr)
    );
}

#[test]
fn analyze_reports_hand_computed_entropies() {
    let (_t, d) = workdir();
    // BF16 1.0, 1.0, -1.0, 2.0, 0.5, 0.5, 0.5, 0.5: high bytes 3F 3F BF 40 3F 3F 3F 3F, low
    // bytes 80 80 80 00 00 00 00 00, exponents 7F 7F 7F 80 7E 7E 7E 7E, sign/mantissa
    // 00 00 80 00 00 00 00 00; the whole values are {3F80: 2, BF80: 1, 4000: 1, 3F00: 4}.
    let vals: [u16; 8] = [
        0x3F80, 0x3F80, 0xBF80, 0x4000, 0x3F00, 0x3F00, 0x3F00, 0x3F00,
    ];
    let raw: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(
        d.join("m.safetensors"),
        safetensors(&[("w", "BF16", raw, 8), ("b", "U8", vec![7, 7, 9, 9], 4)]),
    )
    .unwrap();
    let out = ok(
        sc(&d, &["analyze", "m.safetensors", "--plot", "plots"]),
        "analyze",
    );
    // Columns: dtype, tensors, elements, % of file, field, bits, entropy, % of bits.
    let h = |field: &str| -> f64 {
        let cells = out
            .lines()
            .map(|l| l.split('|').map(str::trim).collect::<Vec<_>>())
            .find(|c| c.len() > 7 && c[1] == "BF16" && c[5] == field)
            .unwrap_or_else(|| panic!("no {field} row:\n{out}"));
        cells[7].parse().unwrap()
    };
    let word = entropy(&[2.0, 1.0, 1.0, 4.0]);
    let high = entropy(&[6.0, 1.0, 1.0]);
    let checks = [
        ("high byte", high),
        ("low byte", entropy(&[3.0, 5.0])),
        ("exponent", entropy(&[3.0, 1.0, 4.0])),
        ("sign + mantissa (top word)", entropy(&[7.0, 1.0])),
        ("low byte given high byte", word - high),
        ("top word (2 high bytes) jointly", word),
    ];
    for (field, want) in checks {
        let got = h(field);
        assert!((got - want).abs() < 0.01, "{field}: {got} vs {want}");
    }
    assert_eq!(row(&out, &["U8", "1"])[6], "1.0000", "U8 7 7 9 9: one bit");
    // Bounds: the joint bound in bits per element and as % of this dtype's 16 bits.
    let joint = row(&out, &["BF16", "high byte + second byte given high"]);
    assert!((joint[2].parse::<f64>().unwrap() - word).abs() < 0.01);
    assert!((joint[3].parse::<f64>().unwrap() - 100.0 * word / 16.0).abs() < 0.01);
    let svg = std::fs::read_to_string(d.join("plots/m.BF16.svg")).expect("BF16 histogram");
    assert!(svg.starts_with("<?xml") && svg.trim_end().ends_with("</svg>"));
    assert!(
        svg.contains(&format!("high byte: H = {high:.3} of 8 bits")),
        "{svg}"
    );
    assert!(svg.contains("exponent (8 bits)"));
}

#[test]
fn experiment_commands_reject_other_files_in_one_line() {
    let (_t, d) = workdir();
    std::fs::write(d.join("notes.txt"), "not a model, just some text\n").unwrap();
    for args in [
        &["analyze", "notes.txt"][..],
        &["sweep", "notes.txt"],
        &["bench", "notes.txt"],
    ] {
        let err = fails(sc(&d, args), args[0]);
        assert!(
            err.contains("notes.txt") && err.contains("not a safetensors file"),
            "{err}"
        );
    }
    fails(sc(&d, &["analyze", "missing.safetensors"]), "missing file");
    // Usage errors are clap's: exit 2.
    let bad = sc(&d, &["bench", "--against", "lz4", TINY]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad.stderr));
    assert!(text(&bad.stderr).contains("unknown compressor"));
}

#[test]
fn sweep_shows_framing_shrinking_as_blocks_grow() {
    let (_t, d) = workdir();
    let args = [
        "sweep",
        SAMPLE,
        "--block-sizes",
        "16K,1M",
        "--mode",
        "fast",
        "--runs",
        "1",
        "--csv",
        "--plot",
        "charts",
    ];
    let out = ok(sc(&d, &args), "sweep");
    let rows: Vec<Vec<&str>> = out
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    assert_eq!(out.lines().next().unwrap().split(',').count(), 10, "{out}");
    assert_eq!(rows.len(), 2, "{out}");
    let num = |r: usize, c: usize| rows[r][c].parse::<f64>().unwrap();
    assert_eq!((rows[0][2], rows[1][2]), ("16K", "1M"));
    assert!(num(0, 3) > num(1, 3), "more blocks at 16K: {out}");
    assert!(num(0, 5) > num(1, 5), "more framing at 16K: {out}");
    assert!(num(0, 4) > 50.0 && num(0, 4) < 100.0, "{out}");
    let svg = std::fs::read_to_string(d.join("charts/sweep.sample.svg")).expect("chart");
    assert!(svg.contains(">16K<") && svg.contains(">1M<") && svg.contains("Peak memory"));
}

/// A directory holding only a link to `cp`, as PATH: zstd and the rest are then missing.
#[cfg(unix)]
#[test]
fn bench_reports_missing_programs_and_checks_round_trips() {
    let Some(cp) = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join("cp"))
        .find(|p| p.is_file())
    else {
        return;
    };
    let (_t, d) = workdir();
    let bin = d.join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(&cp, bin.join("cp")).unwrap();
    let args = [
        "bench",
        TINY,
        "--runs",
        "2",
        "--against",
        "gzip,shuffle-zstd",
    ];
    let out = ok(sc_env(&d, &args, &[("PATH", bin.as_os_str())]), "bench");
    for tool in ["sc fast", "sc best", "cp"] {
        let r = row(&out, &["tiny", tool]);
        assert_eq!(r[7], "ok", "{tool}: {out}");
        let size: f64 = r[2].parse().unwrap();
        assert!(size > 0.0 && size <= 101.0, "{tool}: {out}");
    }
    assert_eq!(row(&out, &["tiny", "cp"])[2], "100.00");
    assert!(!out.contains("zstd -1"), "{out}");
    assert!(out.contains("Not installed, skipped: gzip, zstd."), "{out}");
    assert!(out.contains("Median of 2 runs, alternating"), "{out}");
}

#[test]
fn bench_takes_gguf_files() {
    let (_t, d) = workdir();
    let tiny = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/tiny.gguf");
    let out = ok(
        sc(&d, &["bench", tiny, "--runs", "1"]),
        "bench of a GGUF file",
    );
    for tool in ["sc fast", "sc best"] {
        let r = row(&out, &["tiny.gguf", tool]);
        assert_eq!(r[7], "ok", "{tool}: {out}");
        let size: f64 = r[2].parse().unwrap();
        assert!(size > 0.0 && size < 60.0, "{tool}: {out}");
    }
}

#[test]
fn bench_with_a_base_times_coding_against_it() {
    let (_t, d) = workdir();
    let testdata = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata");
    let tune = d.join("tune.safetensors");
    std::fs::copy(format!("{testdata}/tune.safetensors"), &tune).unwrap();
    let base = format!("{testdata}/tune-base.safetensors");
    let args = [
        "bench",
        tune.to_str().unwrap(),
        "--runs",
        "2",
        "--base",
        &base,
    ];
    let out = ok(sc(&d, &args), "bench --base");
    let size = |tool: &str| -> f64 {
        let r = row(&out, &["tune", tool]);
        assert_eq!(r[7], "ok", "{tool}: {out}");
        r[2].parse().unwrap()
    };
    for mode in ["fast", "best"] {
        let (plain, based) = (
            size(&format!("sc {mode}")),
            size(&format!("sc {mode} --base")),
        );
        assert!(based * 4.0 < plain, "{mode}: {based} vs {plain}: {out}");
    }
    assert!(
        out.contains("tune: decoding with the base (sc fast --base) takes"),
        "{out}"
    );
    // A base that cannot be opened is refused before anything runs.
    let args = [
        "bench",
        tune.to_str().unwrap(),
        "--base",
        "missing.safetensors",
    ];
    let err = fails(sc(&d, &args), "bench with a missing base");
    assert!(err.contains("missing.safetensors"), "{err}");
}

#[test]
fn shuffle_round_trips_through_files_and_pipes() {
    let (_t, d) = workdir();
    ok(sc(&d, &["shuffle", SAMPLE, "-o", "s.bin"]), "shuffle");
    let shuffled = std::fs::read(d.join("s.bin")).unwrap();
    let original = std::fs::read(SAMPLE).unwrap();
    assert_ne!(shuffled[5..5 + original.len()], original[..]);
    let back = sc(&d, &["shuffle", "--undo", "s.bin", "-o", "-"]);
    assert!(back.stdout == original, "unshuffled file differs");
    fails(
        sc(&d, &["shuffle", "--undo", SAMPLE, "-o", "x"]),
        "not shuffled",
    );
}

#[test]
fn verify_checks_directories_and_fails_if_any_archive_does() {
    let (_t, d) = workdir();
    std::fs::create_dir_all(d.join("set/sub")).unwrap();
    for (src, dest) in [(TINY, "set/a.sc"), (SAMPLE, "set/sub/b.sc")] {
        ok(sc(&d, &["encode", "-q", src, "-o", dest]), "encode");
    }
    std::fs::write(d.join("set/readme.txt"), "not an archive").unwrap();
    let out = ok(sc(&d, &["verify", "set"]), "verify set");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(
        lines[0].starts_with("set/a.sc: OK, 7544 bytes, md5 "),
        "{out}"
    );
    assert!(
        lines[1].starts_with("set/sub/b.sc: OK, 3908400 bytes"),
        "{out}"
    );
    assert!(
        lines[2].starts_with("total: 2 archives, 2 OK, 0 failed"),
        "{out}"
    );
    // Two archives are two archives, not an archive and its original.
    let two = ok(
        sc(&d, &["verify", "set/a.sc", "set/sub/b.sc"]),
        "verify two",
    );
    assert!(two.contains("total: 2 archives, 2 OK"), "{two}");

    let mut b = std::fs::read(d.join("set/sub/b.sc")).unwrap();
    let mid = b.len() / 2;
    b[mid] ^= 0x10;
    std::fs::write(d.join("set/sub/b.sc"), b).unwrap();
    let run = sc(&d, &["verify", "set"]);
    let out = text(&run.stdout);
    let err = fails(run, "verify with a corrupt archive");
    assert!(err.contains("1 of 2 archives failed"), "{err}");
    assert!(out.contains("set/a.sc: OK"), "{out}");
    assert!(out.contains("set/sub/b.sc: FAILED: "), "{out}");
    assert!(out.contains("total: 2 archives, 1 OK, 1 failed"), "{out}");

    std::fs::create_dir(d.join("empty")).unwrap();
    assert!(fails(sc(&d, &["verify", "empty"]), "empty").contains("no .sc archives"));
}

/// `--plot` names its files after known dtypes only: a header's dtype string such as
/// `/../../escaped` never becomes part of a path, so nothing is written outside the folder.
#[test]
fn analyze_plots_stay_inside_their_folder() {
    let (_t, d) = workdir();
    let st = safetensors(&[
        ("w", "BF16", vec![0x80, 0x3F, 0x00, 0x40], 2),
        ("x", "/../../escaped", vec![1, 2, 3, 4, 5, 6], 6),
    ]);
    std::fs::write(d.join("m.safetensors"), st).unwrap();
    let plots = d.join("plots");
    // Were the dtype spliced into the name, `plots/m./../../escaped.svg` would be `escaped.svg`
    // beside `plots`.
    std::fs::create_dir_all(plots.join("m.")).unwrap();
    ok(
        sc(&d, &["analyze", "m.safetensors", "--plot", "plots"]),
        "analyze",
    );
    let mut outside: Vec<String> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    outside.sort();
    assert_eq!(outside, ["m.safetensors", "plots"]);
    let mut inside: Vec<String> = std::fs::read_dir(&plots)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    inside.sort();
    assert_eq!(inside, ["m.", "m.BF16.svg", "m.unknown-dtype-1.svg"]);
}

/// `sc models` on a GGUF file: a table per quantized type, a column per plane, with what FAST
/// and BEST store; a cut file is a one-line error.
#[test]
fn models_measures_gguf_planes() {
    let (_t, d) = workdir();
    let tiny = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../testdata/tiny.gguf"
    ))
    .unwrap();
    std::fs::write(d.join("tiny.gguf"), &tiny).unwrap();
    let out = ok(sc(&d, &["models", "-T", "1", "tiny.gguf"]), "models");
    for ty in ["Q4_0", "Q4_1", "Q5_0", "Q8_0", "Q4_K", "Q6_K"] {
        assert!(out.contains(&format!("\n{ty}: 1 tensors")), "{ty}:\n{out}");
    }
    let q8 = &out[out.find("\nQ8_0:").unwrap()..];
    assert_eq!(
        row(q8, &["model variant"])[1..4],
        ["d high byte", "d low byte", "qs"]
    );
    // Every row has a cell per plane and one for the type; byctx codes no plane 0.
    let byctx = row(
        q8,
        &["byctx: given the block's scale high byte, plane 0 (sc best's model)"],
    );
    assert_eq!((byctx.len(), byctx[1].as_str()), (6, "-"));
    let fast: f64 = row(q8, &["sc fast: as the archive stores it"])[4]
        .parse()
        .unwrap();
    assert!(fast > 0.0 && fast <= 100.0, "{out}");
    assert!(out.contains("No F16 or BF16 tensors"), "{out}");
    assert_eq!(row(&out, &["F32"])[1], "exp32");
    for cut in [100, tiny.len() - 1] {
        std::fs::write(d.join("cut.gguf"), &tiny[..cut]).unwrap();
        let err = fails(sc(&d, &["models", "cut.gguf"]), "cut GGUF");
        assert!(
            err.contains("cut.gguf") && err.contains("not a GGUF file"),
            "{err}"
        );
    }
}
