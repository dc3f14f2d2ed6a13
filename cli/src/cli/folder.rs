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
use anyhow::{bail, Context, Result};
use sc::folder::{Given, Job, Naming, Note, Outcome, Steps, Summary};
use std::fmt::Write as _;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Whether `path` names a directory to process as a folder.
pub fn is_dir(path: &Path) -> bool {
    !is_stdio(path) && path.is_dir()
}

pub use sc::folder::{archive_name, original_name};

/// The library's notes on what a plan left out, printed unless `quiet`.
fn noter(quiet: bool) -> impl FnMut(Note) {
    move |n| match n {
        _ if quiet => {}
        Note::Skipped(path, what) if super::url_of(&path).is_some() => note(format_args!(
            "sc: note: skipping {}: {what}",
            printable(&path.to_string_lossy())
        )),
        Note::Skipped(path, what) => note(format_args!(
            "sc: note: skipping {}: {what}; only regular files are coded or copied",
            printable(&path.to_string_lossy())
        )),
        Note::Warning(warning) => note(format_args!("sc: warning: {warning}")),
    }
}

/// Plans the jobs for `inputs` ([`sc::folder::plan`]), written as `out` says: never to stdout.
fn plan(
    inputs: &[PathBuf],
    out: &OutputArgs,
    quiet: bool,
    naming: &Naming<'_>,
) -> Result<Vec<Job>> {
    if out.stdout || out.output.as_deref().is_some_and(is_stdio) {
        bail!(
            "{} is a directory: it cannot go to stdout",
            inputs[0].display()
        );
    }
    Ok(sc::folder::plan(
        inputs,
        out.output.as_deref(),
        naming,
        &mut noter(quiet),
    )?)
}

/// Copies the file of `job` as it is (a remote object fetched), as the command line writes
/// its outputs; returns the bytes copied.
fn copy(job: &Job, force: bool) -> Result<u64> {
    if super::url_of(&job.src).is_some() {
        return super::copy_remote(&job.src.to_string_lossy(), &job.dest, force);
    }
    let mut f =
        File::open(&job.src).with_context(|| format!("cannot open {}", job.src.display()))?;
    let meta = f.metadata()?;
    let settings = Settings {
        force,
        like: Some(&meta),
        ..Settings::default()
    };
    let (copied, _) = write_with(Some(&job.dest), &settings, |w| {
        io::copy(&mut f, w).with_context(|| format!("copying {}", job.src.display()))
    })?;
    Ok(copied)
}

/// Runs `jobs` ([`sc::folder::run`]) with one progress bar over all of them, sharing `memory`
/// bytes; `needed` tells the memory coding a file needs at least, and `code` codes it given
/// its memory and a progress callback (bytes of that file so far).
fn run(
    jobs: &[Job],
    quiet: bool,
    force: bool,
    memory: u64,
    needed: &(dyn Fn(&Job) -> u64 + Sync),
    code: impl Fn(&Job, u64, &(dyn Fn(u64) + Sync)) -> Result<(u64, u64)> + Sync,
) -> Vec<Outcome> {
    let bar = progress_bar(Some(jobs.iter().map(|j| j.len).sum()), quiet);
    let steps = Steps {
        needed,
        code: &|job, memory, progress| code(job, memory, progress).map_err(|e| format!("{e:#}")),
        copy: &|job| copy(job, force).map_err(|e| format!("{e:#}")),
        stopped: &super::process::stopped,
        progress: &|n| bar.set_position(n),
    };
    let outcomes = sc::folder::run(jobs, memory, &steps);
    bar.finish_and_clear();
    outcomes
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
    let shown: Vec<_> = jobs.iter().map(|j| printable(&j.shown)).collect();
    let width = shown
        .iter()
        .map(|s| s.chars().count())
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
    for ((job, outcome), rel) in jobs.iter().zip(outcomes).zip(&shown) {
        match outcome {
            Ok(d) => {
                let (a, b) = (d.bytes_in, d.bytes_out);
                let what = if job.codes() { verb } else { "copied" };
                let _ = writeln!(
                    t,
                    "{} {a:>14} {b:>14} {:>7.2}% {:>7.0}  {what}",
                    left(rel, width),
                    100.0 * b as f64 / a.max(1) as f64,
                    a as f64 / 1e6 / d.secs.max(1e-9)
                );
            }
            Err(e) => {
                let _ = writeln!(t, "{} {:>48}  FAILED: {e}", left(rel, width), "");
            }
        }
    }
    let Summary {
        bytes_in: total_in,
        bytes_out: total_out,
        coded,
        failed,
        ..
    } = Summary::of(jobs, outcomes);
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
        found: &sc::folder::encoded_name,
        given: &|p: &Path| match super::already_archive(p, a.out.force) {
            Some(why) => Given::Skip(why),
            None => Given::Code(archive_name(p)),
        },
        // No output may replace a file of the base, which the archives need.
        refuse: &|dest| {
            base_files
                .check_output(dest)
                .map_err(|e| sc::Error::Folder(format!("{e:#}")))
        },
    };
    let talk = a.common.talk;
    let mode = a.mode().name();
    plan_run_report(
        &a.inputs,
        &a.out,
        &a.common,
        naming,
        mode,
        |jobs| match relate::is_auto(a.base.base.as_deref()) {
            true => relate::pick(jobs, &a.auto, a.mode(), talk.verbose()),
            false => Ok(()),
        },
        // Any file may hold repeated tensors, which take the memory of references.
        |_| sc::memory_needed_with_references(a.block_size),
        |job, memory, progress| {
            let started = Instant::now();
            // A base chosen for this input alone replaces the run's.
            let own = job.base.as_deref().map(sc::Base::open).transpose()?;
            let base = own.as_ref().or(base);
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
        found: &original_name,
        given: &|p: &Path| {
            let hint = "decode it alone with -o";
            match super::local_name(p).and_then(|n| super::decoded_name(&n, p, hint)) {
                Ok(o) => Given::Code(o),
                Err(why) => Given::Fail(why.to_string()),
            }
        },
        refuse: &|_| Ok(()),
    };
    let talk = a.common.talk;
    plan_run_report(
        &a.inputs,
        &a.out,
        &a.common,
        naming,
        "decoded",
        // Archives coded against another file of the run, each with that file's output as
        // base, restored after it.
        |jobs| match base {
            Some(_) => Ok(()),
            None => Ok(sc::folder::restore_bases(jobs)?),
        },
        |job| archive_memory_needed(&job.src),
        |job, memory, progress| {
            let started = Instant::now();
            let archive = talk
                .verbose()
                .then(|| super::inspect_file(&job.src))
                .flatten();
            let own = job.base.as_deref().map(sc::Base::open).transpose()?;
            let base = own.as_ref().or(base);
            let r = decode_one(&job.src, Some(&job.dest), a, memory, base, progress)?;
            if talk.verbose() {
                let line = super::decoded_line(&job.src, &r, started);
                note(format_args!("{}", super::details(line, archive, started)));
            }
            Ok((r.archive_len, r.original_len))
        },
    )
}

/// The steps folder encode and decode share: plans the jobs of `inputs` (written as `out`
/// says) with `naming`, lets `choose` set each job's base, runs them with `common`'s memory ([`run`] tells `needed` and `code`;
/// the default budget takes the largest `needed` of a job) and reports the run with `verb`.
#[allow(clippy::too_many_arguments)]
fn plan_run_report(
    inputs: &[PathBuf],
    out: &OutputArgs,
    common: &Common,
    naming: Naming<'_>,
    verb: &str,
    choose: impl FnOnce(&mut [Job]) -> Result<()>,
    needed: impl Fn(&Job) -> u64 + Sync,
    code: impl Fn(&Job, u64, &(dyn Fn(u64) + Sync)) -> Result<(u64, u64)> + Sync,
) -> Result<()> {
    let quiet = common.talk.quiet;
    let mut jobs = plan(inputs, out, quiet, &naming)?;
    let start = Instant::now();
    choose(&mut jobs)?;
    let coded = jobs.iter().filter(|j| j.codes());
    let memory = memory(common, || coded.map(&needed).max().unwrap_or(0));
    let outcomes = run(&jobs, quiet, out.force, memory, &needed, code);
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
/// others ([`sc::folder::plan_prefix`]).
pub fn decode_prefix(
    a: &DecodeArgs,
    prefix: &str,
    dir: &Path,
    listed: &[(String, u64)],
    base: Option<&sc::Base>,
) -> Result<()> {
    let quiet = a.common.talk.quiet;
    let jobs = sc::folder::plan_prefix(prefix, dir, listed, &mut noter(quiet))?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let start = Instant::now();
    let memory = memory(&a.common, || 0);
    let outcomes = run(
        &jobs,
        quiet,
        a.out.force,
        memory,
        &|_| 0,
        |job, memory, progress| {
            let r = decode_one(&job.src, Some(&job.dest), a, memory, base, progress)?;
            Ok((r.archive_len, r.original_len))
        },
    );
    report(prefix, &jobs, &outcomes, "decoded", quiet, start)
}
