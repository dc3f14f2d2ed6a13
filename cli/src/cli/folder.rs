//! `sc encode DIR` / `sc decode DIR`: every safetensors file (or archive) of a model folder,
//! shards included, coded in parallel; with `-o OUTDIR` the folder is mirrored and every other
//! file (configs, tokenizer, `model.safetensors.index.json`) copied as it is.

use super::output::Settings;
use super::text::printable;
use super::{
    decode_one, encode_one, is_stdio, mb_per_s, memory, note, progress_bar, write_with, DecodeArgs,
    EncodeArgs, OutputArgs,
};
use anyhow::{anyhow, bail, Context, Result};
use std::fmt::Write as _;
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Instant;

/// Files coded at once. Each already spreads its blocks over every core; a second file in
/// flight hides the start-up and tail of the first (small shards, configs). They share the
/// memory budget, so it stays small.
const FILES_IN_FLIGHT: usize = 2;

/// The memory budget, shared by the files in flight.
struct Memory {
    free: Mutex<u64>,
    freed: Condvar,
    total: u64,
}

impl Memory {
    fn new(total: u64) -> Memory {
        Memory {
            free: Mutex::new(total),
            freed: Condvar::new(),
            total,
        }
    }

    /// Takes the memory for a file whose blocks need `needed` bytes: an equal share of the
    /// budget, or all of it when one block needs more (the file then runs alone). Waits until
    /// that much is free.
    fn take(&self, needed: u64) -> u64 {
        let want = needed
            .max(self.total / FILES_IN_FLIGHT as u64)
            .min(self.total);
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        while *free < want {
            free = self.freed.wait(free).unwrap_or_else(|e| e.into_inner());
        }
        *free -= want;
        want
    }

    fn give(&self, n: u64) {
        *self.free.lock().unwrap_or_else(|e| e.into_inner()) += n;
        self.freed.notify_all();
    }
}

/// Whether `path` names a directory to process as a folder.
pub fn is_dir(path: &Path) -> bool {
    !is_stdio(path) && path.is_dir()
}

/// The archive name for `path`: `.sc` appended.
pub fn archive_name(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".sc");
    PathBuf::from(s)
}

/// The original name for an archive path (`.sc` removed), if it has the suffix.
pub fn original_name(path: &Path) -> Option<PathBuf> {
    (path.extension()? == "sc").then(|| path.with_extension(""))
}

/// What happens to one file of the folder.
#[derive(Debug)]
struct Job {
    src: PathBuf,
    dest: PathBuf,
    /// Path below the folder, for the table.
    rel: PathBuf,
    len: u64,
    /// Encode or decode it (else: copy it as it is).
    code: bool,
}

/// How one job went: bytes in and out, seconds.
type Outcome = Result<(u64, u64, f64)>;

/// Every regular file below `root` (following links to files, not to directories), sorted,
/// leaving out `skip` (the output folder when it lies inside) and sc's own temporary files.
fn walk(root: &Path, skip: Option<&Path>, files: &mut Vec<PathBuf>) -> Result<()> {
    let mut entries: Vec<_> = fs::read_dir(root)
        .with_context(|| format!("cannot read {}", root.display()))?
        .collect::<io::Result<_>>()
        .with_context(|| format!("cannot read {}", root.display()))?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let path = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') && name.ends_with(".sc-tmp") {
            continue;
        }
        let kind = e.file_type()?;
        if kind.is_dir() {
            if skip.is_some_and(|s| super::same_file(&path, s)) {
                continue;
            }
            walk(&path, skip, files)?;
        } else if kind.is_file() || (kind.is_symlink() && path.is_file()) {
            files.push(path);
        }
    }
    Ok(())
}

/// Plans the jobs for folder `root`: files `coded` names get coded into the name it returns,
/// others are copied when writing to a separate `out` folder and left alone otherwise.
fn plan(
    root: &Path,
    out: &OutputArgs,
    coded: impl Fn(&Path) -> Option<PathBuf>,
) -> Result<Vec<Job>> {
    if out.stdout || out.output.as_deref().is_some_and(is_stdio) {
        bail!("{} is a directory: it cannot go to stdout", root.display());
    }
    let target = out.output.as_deref();
    if let Some(t) = target.filter(|t| t.exists() && !t.is_dir()) {
        bail!("{} exists and is not a directory", t.display());
    }
    let mut files = Vec::new();
    walk(root, target, &mut files)?;
    let mut jobs = Vec::new();
    for src in files {
        let rel = src.strip_prefix(root).unwrap_or(&src).to_path_buf();
        let base = target.unwrap_or(root);
        let (dest, code) = match coded(&rel) {
            Some(name) => (base.join(name), true),
            None if target.is_some() => (base.join(&rel), false),
            None => continue,
        };
        let len = fs::metadata(&src).map(|m| m.len()).unwrap_or(0);
        jobs.push(Job {
            src,
            dest,
            rel,
            len,
            code,
        });
    }
    if !jobs.iter().any(|j| j.code) {
        bail!("{}: nothing to do (no matching files)", root.display());
    }
    super::collide::check(jobs.iter().map(|j| (j.src.as_path(), j.dest.as_path())))?;
    Ok(jobs)
}

/// Runs `jobs`, largest first, `FILES_IN_FLIGHT` at a time, with one progress bar over all
/// of them, sharing `memory` bytes; `block_size` tells the block size of a file to code, and
/// `code` codes it given its memory and a progress callback (bytes of that file so far).
fn run(
    jobs: &[Job],
    quiet: bool,
    force: bool,
    memory: u64,
    block_size: impl Fn(&Job) -> u32 + Sync,
    code: impl Fn(&Job, u64, &(dyn Fn(u64) + Sync)) -> Result<(u64, u64)> + Sync,
) -> Vec<Outcome> {
    let memory = Memory::new(memory);
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(jobs[i].len));
    let bar = progress_bar(Some(jobs.iter().map(|j| j.len).sum()), quiet);
    let done = AtomicU64::new(0);
    let next = AtomicUsize::new(0);
    let outcomes: Mutex<Vec<Option<Outcome>>> = Mutex::new((0..jobs.len()).map(|_| None).collect());
    let one = |job: &Job| -> Outcome {
        let start = Instant::now();
        if let Some(dir) = job.dest.parent() {
            fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let last = AtomicU64::new(0);
        let progress = |n: u64| {
            let new = n.saturating_sub(last.swap(n, Ordering::Relaxed));
            let total = done.fetch_add(new, Ordering::Relaxed);
            bar.set_position(total + new);
        };
        let (a, b) = match job.code {
            true => {
                let mine = memory.take(sc::memory_needed(block_size(job)));
                let coded = code(job, mine, &progress);
                memory.give(mine);
                coded?
            }
            false => {
                let mut f = File::open(&job.src)
                    .with_context(|| format!("cannot open {}", job.src.display()))?;
                let meta = f.metadata()?;
                let settings = Settings {
                    force,
                    like: Some(&meta),
                    ..Settings::default()
                };
                let (copied, _) = write_with(Some(&job.dest), &settings, |w| {
                    io::copy(&mut f, w).with_context(|| format!("copying {}", job.src.display()))
                })?;
                progress(copied);
                (copied, copied)
            }
        };
        Ok((a, b, start.elapsed().as_secs_f64()))
    };
    rayon::scope(|s| {
        for _ in 0..FILES_IN_FLIGHT.min(jobs.len()) {
            s.spawn(|_| {
                while let Some(&i) = order.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let outcome = one(&jobs[i]);
                    if let Ok(mut o) = outcomes.lock() {
                        o[i] = Some(outcome);
                    }
                }
            });
        }
    });
    bar.finish_and_clear();
    let outcomes = outcomes.into_inner().unwrap_or_else(|e| e.into_inner());
    outcomes
        .into_iter()
        .map(|o| o.unwrap_or_else(|| Err(anyhow!("not processed"))))
        .collect()
}

/// Prints the table of a folder run (failures even when quiet) and fails if any job failed.
fn report(
    root: &Path,
    jobs: &[Job],
    outcomes: &[Outcome],
    verb: &str,
    quiet: bool,
    start: Instant,
) -> Result<()> {
    let width = jobs
        .iter()
        .map(|j| printable(&j.rel.to_string_lossy()).len())
        .max()
        .unwrap_or(4)
        .max(5);
    let mut t = String::new();
    let _ = writeln!(
        t,
        "{:<width$} {:>14} {:>14} {:>8} {:>7}  result",
        "file", "in", "out", "out/in", "MB/s"
    );
    let (mut total_in, mut total_out, mut coded, mut failed) = (0u64, 0u64, 0, 0);
    for (job, outcome) in jobs.iter().zip(outcomes) {
        let rel = printable(&job.rel.to_string_lossy()).into_owned();
        match outcome {
            Ok((a, b, secs)) => {
                total_in += a;
                total_out += b;
                coded += job.code as usize;
                let what = if job.code { verb } else { "copied" };
                let _ = writeln!(
                    t,
                    "{rel:<width$} {a:>14} {b:>14} {:>7.2}% {:>7.0}  {what}",
                    100.0 * *b as f64 / (*a).max(1) as f64,
                    *a as f64 / 1e6 / secs.max(1e-9)
                );
            }
            Err(e) => {
                failed += 1;
                let _ = writeln!(t, "{rel:<width$} {:>48}  FAILED: {e:#}", "");
            }
        }
    }
    let _ = writeln!(
        t,
        "{:<width$} {total_in:>14} {total_out:>14} {:>7.2}%           {} files, {coded} {verb}, {failed} failed",
        "total",
        100.0 * total_out as f64 / total_in.max(1) as f64,
        jobs.len()
    );
    if !quiet || failed > 0 {
        note(format_args!("{}", t.trim_end()));
    }
    if !quiet {
        note(format_args!(
            "{}: {total_in} bytes in {:.2} s, {:.0} MB/s",
            root.display(),
            start.elapsed().as_secs_f64(),
            mb_per_s(total_in, start)
        ));
    }
    match failed {
        0 => Ok(()),
        n => bail!("{n} of {} files in {} failed", jobs.len(), root.display()),
    }
}

/// `sc encode DIR`: every `*.safetensors` file below DIR gets an archive (beside it, or in the
/// mirrored `-o` folder, where all other files are copied).
pub fn encode(a: &EncodeArgs) -> Result<()> {
    let root = &a.input;
    let jobs = plan(root, &a.out, |rel| {
        let is_st = rel.extension().is_some_and(|e| e == "safetensors");
        is_st.then(|| archive_name(rel))
    })?;
    let start = Instant::now();
    let outcomes = run(
        &jobs,
        a.common.quiet,
        a.out.force,
        memory(&a.common),
        |_| a.block_size,
        |job, memory, progress| {
            let r = encode_one(&job.src, Some(&job.dest), a, memory, progress)?;
            Ok((r.original_len, r.archive_len))
        },
    );
    report(root, &jobs, &outcomes, a.mode.name(), a.common.quiet, start)
}

/// `sc decode DIR`: every `*.sc` archive below DIR is restored (beside it, or in the mirrored
/// `-o` folder, where all other files are copied).
pub fn decode(a: &DecodeArgs) -> Result<()> {
    let root = &a.input;
    let jobs = plan(root, &a.out, original_name)?;
    let start = Instant::now();
    let outcomes = run(
        &jobs,
        a.common.quiet,
        a.out.force,
        memory(&a.common),
        |job| archive_block_size(&job.src),
        |job, memory, progress| {
            let r = decode_one(&job.src, Some(&job.dest), a, memory, progress)?;
            Ok((r.archive_len, r.original_len))
        },
    );
    report(root, &jobs, &outcomes, "decoded", a.common.quiet, start)
}

/// The block size an archive records (the largest there is, when it cannot be read: decoding
/// it then fails on its own).
fn archive_block_size(path: &Path) -> u32 {
    File::open(path)
        .ok()
        .and_then(|f| sc::Archive::open(f).ok())
        .map_or(sc::MAX_BLOCK_SIZE, |a| a.block_size())
}
