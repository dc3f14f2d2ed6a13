//! `sc info DIR` and `sc list DIR`: every archive below a folder (as `verify` finds them),
//! one line each for `info` with a total, one table each for `list`.

use super::text::{count, printable};
use super::{print_stdout, verify};
use anyhow::{bail, Context, Result};
use sc::Kind;
use std::fs::File;
use std::path::{Path, PathBuf};

/// The archives below `dir`; an error when there are none, or with `json`, which describes one
/// archive.
fn archives(dir: &Path, json: bool) -> Result<Vec<PathBuf>> {
    if json {
        bail!(
            "{} is a folder: --json describes one archive (without --json, one line or table \
             per archive)",
            dir.display()
        );
    }
    let found = verify::collect(&[dir.to_path_buf()])?;
    if found.is_empty() {
        bail!("no .sc archives found in {}", dir.display());
    }
    Ok(found)
}

/// The path as printed: escaped, as any text from a file.
fn shown(path: &Path) -> String {
    printable(&path.to_string_lossy()).into_owned()
}

/// Fails when any of `total` archives failed.
fn outcome(failed: usize, total: usize) -> Result<()> {
    match failed {
        0 => Ok(()),
        n => bail!(
            "{n} of {} could not be read",
            count(total as u64, "archive")
        ),
    }
}

/// `sc info DIR`: a line per archive (mode, sizes, blocks, tensors) and a total.
pub fn info(dir: &Path, json: bool, header: bool) -> Result<()> {
    if header {
        bail!(
            "{} is a folder: --header shows one archive's header",
            dir.display()
        );
    }
    let found = archives(dir, json)?;
    let (mut failed, mut original, mut stored) = (0, 0u64, 0u64);
    for path in &found {
        let read = File::open(path)
            .map_err(sc::Error::from)
            .and_then(|mut f| sc::inspect(&mut f));
        let line = match read {
            Ok(i) => {
                original += i.original_len;
                stored += i.archive_len;
                let what = match (&i.tensors, i.kind) {
                    (Some(t), Kind::Safetensors | Kind::Gguf) => count(t.len() as u64, "tensor"),
                    _ => "generic (not safetensors)".into(),
                };
                let base = match &i.base_name {
                    Some(b) => format!(", coded against {:?}", printable(b)),
                    None => String::new(),
                };
                format!(
                    "{}: {}, {} -> {} bytes ({:.2}%), {}, {what}{base}",
                    shown(path),
                    i.mode.name(),
                    i.original_len,
                    i.archive_len,
                    100.0 * i.archive_len as f64 / i.original_len.max(1) as f64,
                    count(i.blocks, "block"),
                )
            }
            Err(e) => {
                failed += 1;
                format!("{}: FAILED: {e}", shown(path))
            }
        };
        print_stdout(&format!("{line}\n"))?;
    }
    print_stdout(&format!(
        "total: {}, {original} -> {stored} bytes ({:.2}%)\n",
        count(found.len() as u64, "archive"),
        100.0 * stored as f64 / original.max(1) as f64
    ))?;
    outcome(failed, found.len())
}

/// `sc list DIR`: each archive's name and its table, as `one` lists a single archive.
pub fn list(dir: &Path, json: bool, one: impl Fn(&Path) -> Result<()>) -> Result<()> {
    let found = archives(dir, json)?;
    let mut failed = 0;
    for (k, path) in found.iter().enumerate() {
        let gap = if k == 0 { "" } else { "\n" };
        print_stdout(&format!("{gap}{}:\n", shown(path)))?;
        if let Err(e) = one(path).with_context(|| shown(path)) {
            failed += 1;
            print_stdout(&format!("FAILED: {e:#}\n"))?;
        }
    }
    outcome(failed, found.len())
}
