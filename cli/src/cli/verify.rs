//! `sc verify` over many archives: one line per archive and a total, the MD5 verification run
//! over a whole collection.

use super::text::{count, printable};
use super::{check_archive, hex, print_stdout, Common};
use anyhow::{bail, Context, Result};
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Whether `p` is a file starting with the `.sc` magic bytes.
pub fn is_archive(p: &Path) -> bool {
    let mut magic = [0u8; 4];
    File::open(p)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok_and(|()| magic == sc::MAGIC)
}

/// The archives to check: files as given, directories searched for `*.sc` files (recursively,
/// in name order; symbolic links to directories are not followed, so there are no cycles).
pub fn collect(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            walk(p, &mut out)?;
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .and_then(|rd| rd.collect::<std::io::Result<Vec<_>>>())
        .with_context(|| format!("cannot read directory {}", dir.display()))?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let path = e.path();
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            walk(&path, out)?;
        } else if path.extension().is_some_and(|x| x == "sc") && path.is_file() {
            out.push(path);
        }
    }
    Ok(())
}

/// The MD5 of a verified archive's original, saying whether it was only computed (the archive
/// records none, so the block checksums are what proved the bytes).
pub fn md5_text(r: &sc::DecodeReport) -> String {
    match (r.md5, r.stored_md5) {
        (Some(m), None) => format!("{} (computed; none recorded)", hex(&m)),
        (Some(m), Some(_)) | (None, Some(m)) => hex(&m),
        (None, None) => "not computed".into(),
    }
}

/// Verifies every archive in `paths` (against `base`, for those coded against one); fails at
/// the end if any did not verify.
pub fn many(paths: &[PathBuf], base: Option<&sc::Base>, common: &Common) -> Result<()> {
    let quiet = common.talk.quiet;
    let files = collect(paths)?;
    if files.is_empty() {
        bail!("no .sc archives found");
    }
    let start = Instant::now();
    let (mut failed, mut bytes) = (0usize, 0u64);
    for f in &files {
        // Names found in directories are printed escaped, like any text from a file.
        let shown = printable(&f.to_string_lossy()).into_owned();
        match check_archive(f, base, common) {
            Ok(r) => {
                bytes += r.original_len;
                if !quiet {
                    print_stdout(&format!(
                        "{shown}: OK, {} bytes, md5 {}\n",
                        r.original_len,
                        md5_text(&r)
                    ))?;
                }
            }
            Err(e) => {
                failed += 1;
                print_stdout(&format!("{shown}: FAILED: {e:#}\n"))?;
            }
        }
    }
    if !quiet {
        let secs = start.elapsed().as_secs_f64();
        print_stdout(&format!(
            "total: {}, {} OK, {failed} failed; {bytes} bytes verified in {secs:.1} s \
             ({:.0} MB/s)\n",
            count(files.len() as u64, "archive"),
            files.len() - failed,
            bytes as f64 / 1e6 / secs.max(1e-9)
        ))?;
    }
    if failed > 0 {
        bail!("{failed} of {} archives failed verification", files.len());
    }
    Ok(())
}

/// `sc verify --derives SEED QUANT`: tensor by tensor, whether the GGUF file `quant` derives
/// bit for bit from the seed `seed` (a GGUF file, its archive, or a folder), one line each and
/// a verdict; an error when some tensor does not.
pub fn derives(seed: &Path, quant: &[PathBuf], common: &Common) -> Result<()> {
    let [quant] = quant else {
        bail!("--derives SEED takes one quant file to check");
    };
    let base = sc::Base::open(seed)?;
    let file = File::open(quant).with_context(|| format!("cannot open {}", quant.display()))?;
    let len = file.metadata()?.len();
    let report = sc::verify_derives(&base, &file, len)
        .map_err(|e| anyhow::anyhow!("{}: {e}", quant.display()))?;
    let mut text = String::new();
    for t in &report {
        let verdict = match (&t.not_derivable, t.derives()) {
            (Some(why), _) => format!("cannot be re-derived: {why}"),
            (None, true) => "derives".into(),
            (None, false) => "differs".into(),
        };
        text += &format!(
            "{}  {}  {}/{} blocks exact  {verdict}\n",
            printable(&t.name),
            t.dtype,
            t.exact,
            t.blocks
        );
    }
    let bad = report.iter().filter(|t| !t.derives()).count();
    if !common.talk.quiet {
        print_stdout(&text)?;
    }
    if bad > 0 {
        bail!(
            "{} does not derive bit for bit from {}: {} of {} differ ({})",
            quant.display(),
            seed.display(),
            bad,
            count(report.len() as u64, "tensor"),
            sc::derive::QUANTIZER
        );
    }
    if !common.talk.quiet {
        print_stdout(&format!(
            "{}: derives bit for bit from {} ({}, {})\n",
            quant.display(),
            seed.display(),
            count(report.len() as u64, "tensor"),
            sc::derive::QUANTIZER
        ))?;
    }
    Ok(())
}
