//! Runs over a folder or several inputs: `sc encode DIR`, `sc decode DIR`, `sc encode A B DIR`.
//! Every safetensors or GGUF file (or archive) of a model folder, shards included (split GGUF
//! files `-00001-of-00003.gguf` each their own archive), and every file named
//! is one job of one list, coded two at a time; with `-o` a folder is mirrored and every other
//! file (configs, tokenizer, `model.safetensors.index.json`) copied as it is. Collisions are
//! refused before anything is written, a failed file does not stop the others, and one table
//! at the end reports them all.

use super::base::BaseFiles;
use super::output::Settings;
use super::relate;
use super::text::{left, printable};
use super::{
    decode_one, encode_one, is_stdio, mb_per_s, memory, note, progress_bar, write_with, Common,
    DecodeArgs, EncodeArgs, OutputArgs,
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

/// What a run does with one file.
#[derive(Debug)]
enum Work {
    /// Encode or decode it.
    Code,
    /// Copy it as it is (a folder mirrored into an output folder).
    Copy,
    /// Nothing: it fails for this reason (an input whose output cannot be named).
    Fail(String),
}

/// One file of a run.
#[derive(Debug)]
struct Job {
    src: PathBuf,
    /// Where it goes (empty for a job that fails).
    dest: PathBuf,
    /// Its name in the table: the path below the folder for a run over one folder, the path
    /// as found otherwise.
    shown: String,
    len: u64,
    work: Work,
}

/// How one job went: bytes in and out, seconds.
type Outcome = Result<(u64, u64, f64)>;

/// Every regular file below `root` (following links to files, not to directories), sorted,
/// leaving out `skip` (the output folder when it lies inside) and sc's own temporary files;
/// the other entries that are not folders go to `others`, each with what it is.
fn walk(
    root: &Path,
    skip: Option<&Path>,
    files: &mut Vec<PathBuf>,
    others: &mut Vec<(PathBuf, String)>,
) -> Result<()> {
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
            walk(&path, skip, files, others)?;
        } else if kind.is_file() || (kind.is_symlink() && path.is_file()) {
            files.push(path);
        } else {
            let what = match kind.is_symlink() {
                true => match fs::metadata(&path) {
                    Ok(m) if m.is_dir() => "a link to a folder (not followed)".into(),
                    Ok(m) => format!("a link to {}", special(m.file_type())),
                    Err(e) => format!("a dangling link ({e})"),
                },
                false => special(kind).into(),
            };
            others.push((path, what));
        }
    }
    Ok(())
}

/// What a file of type `kind`, neither a regular file nor a folder, is.
fn special(kind: fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    match kind {
        k if k.is_fifo() => "a FIFO",
        k if k.is_socket() => "a socket",
        k if k.is_char_device() => "a character device",
        k if k.is_block_device() => "a block device",
        _ => "not a regular file",
    }
}

/// What a run does with an input named on the command line that is not a folder.
pub enum Given {
    /// Code it into this file (beside it, or in the output folder under its file name).
    Code(PathBuf),
    /// Leave it, with this warning (an archive given to `encode`).
    Skip(String),
    /// Fail it for this reason.
    Fail(String),
}

/// How a run names its outputs: `found` names the output of a file found in a folder (`None`:
/// copied into a mirrored folder, left alone otherwise), `given` says what becomes of a file
/// named on the command line, and `refuse` fails for an output the run must not write (over a
/// base the archives need).
struct Naming<'r, F, G> {
    found: F,
    given: G,
    refuse: &'r dyn Fn(&Path) -> Result<()>,
}

/// The name a folder input has inside the output folder of a run over several inputs.
fn folder_name(root: &Path) -> Result<PathBuf> {
    let named = root.file_name().map(PathBuf::from);
    match named.or_else(|| root.canonicalize().ok()?.file_name().map(PathBuf::from)) {
        Some(n) => Ok(n),
        None => bail!(
            "{} has no name to mirror it under in the output folder",
            root.display()
        ),
    }
}

/// Plans the jobs for `inputs`, files and folders: files named are coded (as `naming.given`
/// says), and every file below a folder that `naming.found` names; other files of a folder
/// are copied when the folder is mirrored into the `-o` folder, and left alone otherwise.
/// With one folder, `-o` names its mirror; with several inputs, the folder every output goes
/// in (a folder's mirror under its name). Refuses any run in which two files meet.
fn plan<F, G>(
    inputs: &[PathBuf],
    out: &OutputArgs,
    quiet: bool,
    naming: Naming<'_, F, G>,
) -> Result<Vec<Job>>
where
    F: Fn(&Path) -> Option<PathBuf>,
    G: Fn(&Path) -> Given,
{
    if out.stdout || out.output.as_deref().is_some_and(is_stdio) {
        bail!(
            "{} is a directory: it cannot go to stdout",
            inputs[0].display()
        );
    }
    let target = out.output.as_deref();
    let several = inputs.len() > 1;
    if let Some(t) = target.filter(|t| t.exists() && !t.is_dir()) {
        bail!(super::outdir::not_a_folder(t));
    }
    let mut jobs = Vec::new();
    for input in inputs {
        if is_dir(input) {
            let base = match (target, several) {
                (Some(t), true) => Some(t.join(folder_name(input)?)),
                (t, _) => t.map(Path::to_path_buf),
            };
            let before = jobs.len();
            folder_jobs(
                input,
                target,
                base.as_deref(),
                several,
                &naming.found,
                quiet,
                &mut jobs,
            )?;
            if !jobs[before..].iter().any(|j| matches!(j.work, Work::Code)) {
                let why = format!("{}: nothing to do (no matching files)", input.display());
                if !several {
                    bail!(why);
                }
                jobs.truncate(before);
                jobs.push(failed(input, why));
            }
            continue;
        }
        let dest = match (naming.given)(input) {
            Given::Code(dest) => dest,
            Given::Skip(warning) => {
                if !quiet {
                    note(format_args!("sc: warning: {warning}"));
                }
                continue;
            }
            Given::Fail(why) => {
                jobs.push(failed(input, why));
                continue;
            }
        };
        let dest = match (target, dest.file_name()) {
            (Some(t), Some(name)) => t.join(name),
            _ => dest,
        };
        jobs.push(Job {
            len: fs::metadata(input).map_or(0, |m| m.len()),
            shown: printable(&input.to_string_lossy()).into_owned(),
            src: input.clone(),
            dest,
            work: Work::Code,
        });
    }
    if jobs.is_empty() {
        bail!("nothing to do: every input was skipped");
    }
    let written = || jobs.iter().filter(|j| !matches!(j.work, Work::Fail(_)));
    super::collide::check(written().map(|j| (j.src.as_path(), j.dest.as_path())))?;
    written().try_for_each(|j| (naming.refuse)(&j.dest))?;
    Ok(jobs)
}

/// A job that fails for `why`.
fn failed(src: &Path, why: String) -> Job {
    Job {
        src: src.to_path_buf(),
        dest: PathBuf::new(),
        shown: printable(&src.to_string_lossy()).into_owned(),
        len: 0,
        work: Work::Fail(why),
    }
}

/// Adds the jobs for the files below `root`, written below `base` (or beside them) and shown
/// by their paths below `root`, or as found when the run has `several` inputs. `target`, the
/// `-o` folder, is not walked into. Other entries that would be coded or copied were they
/// regular files (FIFOs, devices, dangling links) are each named in a note unless `quiet`.
fn folder_jobs(
    root: &Path,
    target: Option<&Path>,
    base: Option<&Path>,
    several: bool,
    found: impl Fn(&Path) -> Option<PathBuf>,
    quiet: bool,
    jobs: &mut Vec<Job>,
) -> Result<()> {
    let (mut files, mut others) = (Vec::new(), Vec::new());
    walk(root, target, &mut files, &mut others)?;
    for (path, what) in others {
        let rel = path.strip_prefix(root).unwrap_or(&path);
        if !quiet && (base.is_some() || found(rel).is_some()) {
            note(format_args!(
                "sc: note: skipping {}: {what}; only regular files are coded or copied",
                printable(&path.to_string_lossy())
            ));
        }
    }
    for src in files {
        let rel = src.strip_prefix(root).unwrap_or(&src).to_path_buf();
        let (dest, work) = match found(&rel) {
            Some(name) => (base.unwrap_or(root).join(name), Work::Code),
            None => match base {
                Some(b) => (b.join(&rel), Work::Copy),
                None => continue,
            },
        };
        let shown = if several { &src } else { &rel };
        jobs.push(Job {
            len: fs::metadata(&src).map_or(0, |m| m.len()),
            shown: printable(&shown.to_string_lossy()).into_owned(),
            src,
            dest,
            work,
        });
    }
    Ok(())
}

/// Runs `jobs`, largest first, `FILES_IN_FLIGHT` at a time, with one progress bar over all
/// of them, sharing `memory` bytes; `needed` tells the memory coding a file needs at least, and
/// `code` codes it given its memory and a progress callback (bytes of that file so far).
fn run(
    jobs: &[Job],
    wave: &[usize],
    quiet: bool,
    force: bool,
    memory: u64,
    needed: impl Fn(&Job) -> u64 + Sync,
    code: impl Fn(&Job, u64, &(dyn Fn(u64) + Sync)) -> Result<(u64, u64)> + Sync,
) -> Vec<Outcome> {
    let memory = Memory::new(memory);
    let mut order: Vec<usize> = wave.to_vec();
    order.sort_by_key(|&i| std::cmp::Reverse(jobs[i].len));
    let bar = progress_bar(Some(wave.iter().map(|&i| jobs[i].len).sum()), quiet);
    let done = AtomicU64::new(0);
    let next = AtomicUsize::new(0);
    let outcomes: Mutex<Vec<Option<Outcome>>> = Mutex::new((0..jobs.len()).map(|_| None).collect());
    let one = |job: &Job| -> Outcome {
        let start = Instant::now();
        if let Work::Fail(why) = &job.work {
            bail!("{why}");
        }
        // A remote prefix has no folders to make.
        if let Some(dir) = job
            .dest
            .parent()
            .filter(|_| super::url_of(&job.dest).is_none())
        {
            fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let last = AtomicU64::new(0);
        let progress = |n: u64| {
            let new = n.saturating_sub(last.swap(n, Ordering::Relaxed));
            let total = done.fetch_add(new, Ordering::Relaxed);
            bar.set_position(total + new);
        };
        let (a, b) = match job.work {
            Work::Code => {
                let mine = memory.take(needed(job));
                let coded = code(job, mine, &progress);
                memory.give(mine);
                coded?
            }
            _ if super::url_of(&job.src).is_some() => {
                let copied = super::copy_remote(&job.src.to_string_lossy(), &job.dest, force)?;
                progress(copied);
                (copied, copied)
            }
            _ => {
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
                    if super::process::stopped() {
                        break;
                    }
                    let outcome = one(&jobs[i]);
                    if let Ok(mut o) = outcomes.lock() {
                        o[i] = Some(outcome);
                    }
                }
            });
        }
    });
    bar.finish_and_clear();
    let mut outcomes = outcomes.into_inner().unwrap_or_else(|e| e.into_inner());
    wave.iter()
        .map(|&i| {
            outcomes[i]
                .take()
                .unwrap_or_else(|| Err(anyhow!("not processed")))
        })
        .collect()
}

/// Prints the table of a run (failures even when quiet) and fails if any job failed; `what`
/// names the run: its folder, or how many inputs it had.
fn report(
    what: &str,
    jobs: &[Job],
    outcomes: &[Outcome],
    verb: &str,
    quiet: bool,
    start: Instant,
) -> Result<()> {
    let width = jobs
        .iter()
        .map(|j| j.shown.chars().count())
        .max()
        .unwrap_or(4)
        .max(5);
    let mut t = String::new();
    let _ = writeln!(
        t,
        "{} {:>14} {:>14} {:>8} {:>7}  result",
        left("file", width),
        "in",
        "out",
        "out/in",
        "MB/s"
    );
    let (mut total_in, mut total_out, mut coded, mut failed) = (0u64, 0u64, 0, 0);
    for (job, outcome) in jobs.iter().zip(outcomes) {
        let rel = &job.shown;
        match outcome {
            Ok((a, b, secs)) => {
                total_in += a;
                total_out += b;
                let coded_it = matches!(job.work, Work::Code);
                coded += coded_it as usize;
                let what = if coded_it { verb } else { "copied" };
                let _ = writeln!(
                    t,
                    "{} {a:>14} {b:>14} {:>7.2}% {:>7.0}  {what}",
                    left(rel, width),
                    100.0 * *b as f64 / (*a).max(1) as f64,
                    *a as f64 / 1e6 / secs.max(1e-9)
                );
            }
            Err(e) => {
                failed += 1;
                let _ = writeln!(t, "{} {:>48}  FAILED: {e:#}", left(rel, width), "");
            }
        }
    }
    let _ = writeln!(
        t,
        "{} {total_in:>14} {total_out:>14} {:>7.2}%           {}, {coded} {verb}, {failed} failed",
        left("total", width),
        100.0 * total_out as f64 / total_in.max(1) as f64,
        super::text::count(jobs.len() as u64, "file")
    );
    if !quiet || failed > 0 {
        note(format_args!("{}", t.trim_end()));
    }
    if !quiet {
        note(format_args!(
            "{what}: {total_in} bytes in {:.2} s, {:.0} MB/s",
            start.elapsed().as_secs_f64(),
            mb_per_s(total_in, start)
        ));
    }
    match failed {
        0 => Ok(()),
        n => bail!("{n} of {} files in {what} failed", jobs.len()),
    }
}

/// What a run over `inputs` is called in its summary: its folder, or how many inputs it had.
fn label(inputs: &[PathBuf]) -> String {
    match inputs {
        [one] => one.display().to_string(),
        many => format!("{} inputs", many.len()),
    }
}

/// `sc encode INPUT...` with a folder or several inputs: every `*.safetensors` and `*.gguf` file
/// below a folder gets an archive (beside it, or in the mirrored `-o` folder, where all other
/// files are copied), and every file named gets one (beside it, or in the `-o` folder); a name
/// already ending in `.sc` is skipped with a warning unless `-f`. With `base` (a file, an
/// archive or a folder of shards), each file's tensors are coded against their namesakes in
/// it, whatever shard holds them.
pub fn encode(a: &EncodeArgs, base: Option<&sc::Base>) -> Result<()> {
    let base_files = BaseFiles::of(&a.base, base);
    let naming = Naming {
        found: |rel: &Path| {
            let weights = rel
                .extension()
                .is_some_and(|e| e == "safetensors" || e == "gguf");
            weights.then(|| archive_name(rel))
        },
        given: |p: &Path| match super::already_archive(p, a.out.force) {
            Some(why) => Given::Skip(why),
            None => Given::Code(archive_name(p)),
        },
        // No output may replace a file of the base, which the archives need.
        refuse: &|dest| base_files.check_output(dest),
    };
    let talk = a.common.talk;
    let mode = a.mode().name();
    // With --base auto, each file's base, picked once the run's files are known.
    let picked = std::sync::OnceLock::new();
    plan_run_report(
        &a.inputs,
        &a.out,
        &a.common,
        naming,
        mode,
        |jobs| {
            if relate::is_auto(a.base.base.as_deref()) {
                let coded = jobs.iter().filter(|j| matches!(j.work, Work::Code));
                let srcs: Vec<PathBuf> = coded.map(|j| j.src.clone()).collect();
                let p = relate::pick(&srcs, &a.auto, a.mode(), talk.verbose())?;
                let _ = picked.set(p);
            }
            one_wave(jobs)
        },
        // Any file may hold repeated tensors, which take the memory of references.
        |_| sc::memory_needed_with_references(a.block_size),
        |job, memory, progress| {
            let started = Instant::now();
            let mine = match picked.get() {
                Some(p) => p.open(&job.src)?,
                None => None,
            };
            let base = mine.as_ref().or(base);
            // A file of the base is coded without it, and kept: the other archives need it.
            let (base, rm) = match base_files.holds(&job.src) {
                true => {
                    if !talk.quiet {
                        note(format_args!("{}", base_files.note(&job.src, a.rm)));
                    }
                    (None, false)
                }
                false => (base, a.rm),
            };
            let r = encode_one(&job.src, Some(&job.dest), a, rm, memory, base, progress)?;
            if talk.verbose() {
                note(format_args!(
                    "{}",
                    super::encoded_lines(&job.src, Some(&job.dest), a, &r, started)
                ));
            }
            Ok((r.original_len, r.archive_len))
        },
    )
}

/// `sc decode INPUT...` with a folder or several inputs: every `*.sc` archive below a folder
/// is restored (beside it, or in the mirrored `-o` folder, where all other files are copied),
/// and every archive named (beside it, or in the `-o` folder), with `base` for those coded
/// against one.
pub fn decode(a: &DecodeArgs, base: Option<&sc::Base>) -> Result<()> {
    let naming = Naming {
        found: original_name,
        given: |p: &Path| {
            let hint = "decode it alone with -o";
            match super::local_name(p).and_then(|n| super::decoded_name(&n, p, hint)) {
                Ok(o) => Given::Code(o),
                Err(why) => Given::Fail(why.to_string()),
            }
        },
        refuse: &|_| Ok(()),
    };
    let talk = a.common.talk;
    // Archives coded against another file of the run, each with that file's output as base.
    let picked = std::sync::OnceLock::new();
    plan_run_report(
        &a.inputs,
        &a.out,
        &a.common,
        naming,
        "decoded",
        |jobs| {
            if base.is_some() {
                return one_wave(jobs);
            }
            let coded = |j: &Job| matches!(j.work, Work::Code);
            let pairs: Vec<_> = jobs
                .iter()
                .map(|j| coded(j).then_some((j.src.as_path(), j.dest.as_path())))
                .collect();
            let (waves, p) = relate::decode_waves(&pairs)?;
            let _ = picked.set(p);
            // Copies and failures go with the first wave.
            let mut waves = waves;
            let rest = jobs.iter().enumerate().filter(|(_, j)| !coded(j));
            match waves.first_mut() {
                Some(w) => w.extend(rest.map(|(i, _)| i)),
                None => return one_wave(jobs),
            }
            Ok(waves)
        },
        |job| archive_memory_needed(&job.src),
        |job, memory, progress| {
            let started = Instant::now();
            let archive = talk
                .verbose()
                .then(|| super::inspect_file(&job.src))
                .flatten();
            let mine = match picked.get() {
                Some(p) => p.open(&job.src)?,
                None => None,
            };
            let base = mine.as_ref().or(base);
            let r = decode_one(&job.src, Some(&job.dest), a, memory, base, progress)?;
            if talk.verbose() {
                let line = super::decoded_line(&job.src, &r, started);
                note(format_args!("{}", super::details(line, archive, started)));
            }
            Ok((r.archive_len, r.original_len))
        },
    )
}

/// Which jobs of a run go in which wave, by index: a wave runs once the one before has ended.
type Waves = Vec<Vec<usize>>;

/// Every job of a run in one wave.
fn one_wave(jobs: &[Job]) -> Result<Waves> {
    Ok(vec![(0..jobs.len()).collect()])
}

/// The steps folder encode and decode share: plans the jobs of `inputs` (written as `out`
/// says) with `naming`, runs them with `common`'s memory ([`run`] tells `needed` and `code`;
/// the default budget takes the largest `needed` of a job) and reports the run with `verb`.
#[allow(clippy::too_many_arguments)]
fn plan_run_report<F, G>(
    inputs: &[PathBuf],
    out: &OutputArgs,
    common: &Common,
    naming: Naming<'_, F, G>,
    verb: &str,
    arrange: impl FnOnce(&[Job]) -> Result<Waves>,
    needed: impl Fn(&Job) -> u64 + Sync,
    code: impl Fn(&Job, u64, &(dyn Fn(u64) + Sync)) -> Result<(u64, u64)> + Sync,
) -> Result<()>
where
    F: Fn(&Path) -> Option<PathBuf>,
    G: Fn(&Path) -> Given,
{
    let quiet = common.talk.quiet;
    let jobs = plan(inputs, out, quiet, naming)?;
    let start = Instant::now();
    let waves = arrange(&jobs)?;
    let coded = jobs.iter().filter(|j| matches!(j.work, Work::Code));
    let memory = memory(common, || coded.map(&needed).max().unwrap_or(0));
    let mut outcomes: Vec<Outcome> = jobs.iter().map(|_| Err(anyhow!("not processed"))).collect();
    for wave in waves {
        let done = run(&jobs, &wave, quiet, out.force, memory, &needed, &code);
        for (i, o) in wave.into_iter().zip(done) {
            outcomes[i] = o;
        }
    }
    report(&label(inputs), &jobs, &outcomes, verb, quiet, start)
}

/// The memory decoding an archive needs at least, from the block size it records and whether
/// it has references (for the largest block size, when it cannot be read: decoding it then
/// fails on its own).
pub(super) fn archive_memory_needed(path: &Path) -> u64 {
    File::open(path)
        .ok()
        .and_then(|mut f| sc::archive_memory_needed(&mut f).ok())
        .unwrap_or(sc::memory_needed(sc::MAX_BLOCK_SIZE))
}

/// `sc decode PREFIX/ -o DIR`: every object `listed` under the remote prefix (a sharded
/// checkpoint made by `sc encode DIR -o PREFIX/`) restored into `dir` at the same relative
/// path, archives decoded and other files copied, as a local folder run does: an object whose
/// key makes no path inside `dir` is skipped with a note, two objects that would be written to
/// one file are refused before anything is written, and a failed object does not stop the
/// others.
pub fn decode_prefix(
    a: &DecodeArgs,
    prefix: &str,
    dir: &Path,
    listed: &[(String, u64)],
    base: Option<&sc::Base>,
) -> Result<()> {
    let quiet = a.common.talk.quiet;
    let mut jobs = Vec::new();
    for (url, len) in listed {
        let rel = url.strip_prefix(prefix).unwrap_or_default();
        let archive = rel.strip_suffix(".sc");
        let path = Path::new(archive.unwrap_or(rel));
        let inside = path
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
        if rel.is_empty() || !inside {
            if !quiet {
                note(format_args!(
                    "sc: note: skipping {}: its name makes no path inside {}",
                    printable(url),
                    dir.display()
                ));
            }
            continue;
        }
        jobs.push(Job {
            src: PathBuf::from(url),
            dest: dir.join(path),
            shown: printable(rel).into_owned(),
            len: *len,
            work: match archive {
                Some(_) => Work::Code,
                None => Work::Copy,
            },
        });
    }
    if !jobs.iter().any(|j| matches!(j.work, Work::Code)) {
        bail!("{prefix}: no .sc archive under it");
    }
    super::collide::check(jobs.iter().map(|j| (j.src.as_path(), j.dest.as_path())))?;
    fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let start = Instant::now();
    let memory = memory(&a.common, || 0);
    let all: Vec<usize> = (0..jobs.len()).collect();
    let outcomes = run(
        &jobs,
        &all,
        quiet,
        a.out.force,
        memory,
        |_| 0,
        |job, memory, progress| {
            let r = decode_one(&job.src, Some(&job.dest), a, memory, base, progress)?;
            Ok((r.archive_len, r.original_len))
        },
    );
    report(prefix, &jobs, &outcomes, "decoded", quiet, start)
}
