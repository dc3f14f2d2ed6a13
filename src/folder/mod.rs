//! Runs over a folder or several inputs, for both front ends: every weights file (or archive)
//! of a model folder, shards included, and every file named is one [`Job`] of one list; with
//! an output folder, a folder is mirrored and every other file (configs, tokenizer,
//! `model.safetensors.index.json`) copied as it is. Collisions are refused before anything is
//! written (`collide`), a failed file does not stop the others, and the run's [`Summary`]
//! reports them all.
//!
//! A run is three steps: [`plan`] (or [`plan_prefix`] for a remote listing) makes the jobs,
//! [`run`] does them with the caller's coding and copying (which write the outputs as the
//! front end writes them), and [`Summary::of`] totals the outcomes for the table the front
//! end prints. Between the first two, each job's [`Job::base`] may be set: the base its input
//! is coded against, when it is not the run's.

mod bases;
mod collide;
mod run;

use crate::error::{Error, Result};
use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

pub use bases::{relate_jobs, restore_bases};
pub use collide::check as check_collisions;
pub use run::{run, Done, Outcome, Steps, Summary, FILES_IN_FLIGHT};

/// What a run does with one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Work {
    /// Encode or decode it.
    Code,
    /// Copy it as it is (a folder mirrored into an output folder).
    Copy,
    /// Nothing: it fails for this reason (an input whose output cannot be named).
    Fail(String),
}

/// One file of a run.
#[derive(Clone, Debug)]
pub struct Job {
    /// The file read (a path, or a remote location).
    pub src: PathBuf,
    /// Where it goes (empty for a job that fails).
    pub dest: PathBuf,
    /// Its name in the table: the path below the folder for a run over one folder, the path
    /// as found otherwise (control characters not yet escaped).
    pub shown: String,
    /// Its length in bytes (0 when unknown).
    pub len: u64,
    /// What becomes of it.
    pub work: Work,
    /// The base this job's input is coded against when it is not the run's own: `None` from
    /// [`plan`], set by a step that chooses each input's base before [`run`].
    pub base: Option<PathBuf>,
}

impl Job {
    /// Whether the job codes its file (neither a copy nor a failure).
    pub fn codes(&self) -> bool {
        self.work == Work::Code
    }

    /// A job that fails for `why`.
    fn failed(src: &Path, why: String) -> Job {
        Job {
            src: src.to_path_buf(),
            dest: PathBuf::new(),
            shown: src.to_string_lossy().into_owned(),
            len: 0,
            work: Work::Fail(why),
            base: None,
        }
    }
}

/// What a run does with an input named directly that is not a folder.
pub enum Given {
    /// Code it into this file (beside it, or in the output folder under its file name).
    Code(PathBuf),
    /// Leave it, with this warning (an archive given to encode).
    Skip(String),
    /// Fail it for this reason.
    Fail(String),
}

/// What the planning of a run has to say before the run: the front end prints these unless
/// told to be quiet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Note {
    /// An entry of a folder that is not a regular file, left out: its path and what it is
    /// ("a FIFO", "a dangling link (...)").
    Skipped(PathBuf, String),
    /// An input named directly, left out with this warning ([`Given::Skip`]).
    Warning(String),
}

/// How a run names its outputs: `found` names the output of a file found below a folder (its
/// path below the folder; `None`: copied into a mirrored folder, left alone otherwise),
/// `given` says what becomes of an input named directly, and `refuse` fails for an output the
/// run must not write (over a base the archives need).
pub struct Naming<'r> {
    /// The output name of a file found below a folder.
    pub found: &'r dyn Fn(&Path) -> Option<PathBuf>,
    /// What becomes of an input that is not a folder.
    pub given: &'r dyn Fn(&Path) -> Given,
    /// Fails for an output the run must not write.
    pub refuse: &'r dyn Fn(&Path) -> Result<()>,
}

/// Whether `rel`, a file's name, says it is weights an encode run codes: a safetensors or GGUF
/// file by its extension.
pub fn is_weights(rel: &Path) -> bool {
    crate::container::Kind::of_name(rel).is_some()
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

/// The output an encode run names after a file found below a folder: its archive, for a
/// weights file ([`is_weights`]).
pub fn encoded_name(rel: &Path) -> Option<PathBuf> {
    is_weights(rel).then(|| archive_name(rel))
}

/// The message of an output folder that is a file.
pub fn not_a_folder(out: &Path) -> String {
    format!(
        "-o {}: with several inputs or a folder, -o names the folder the outputs go in, and it \
         is a file",
        out.display()
    )
}

/// Plans the jobs for `inputs`, files and folders: files named are coded (as `naming.given`
/// says), and every file below a folder that `naming.found` names; other files of a folder
/// are copied when the folder is mirrored into the `output` folder, and left alone otherwise.
/// With one folder, `output` names its mirror; with several inputs, the folder every output
/// goes in (a folder's mirror under its name). Refuses any run in which two files meet.
/// `note` hears of what is left out.
pub fn plan(
    inputs: &[PathBuf],
    output: Option<&Path>,
    naming: &Naming<'_>,
    note: &mut dyn FnMut(Note),
) -> Result<Vec<Job>> {
    let several = inputs.len() > 1;
    if let Some(t) = output.filter(|t| t.exists() && !t.is_dir()) {
        return Err(Error::Folder(not_a_folder(t)));
    }
    let mut jobs = Vec::new();
    for input in inputs {
        // `-` names a standard stream, never a folder.
        if input.as_os_str() != "-" && input.is_dir() {
            let base = match (output, several) {
                (Some(t), true) => Some(t.join(folder_name(input)?)),
                (t, _) => t.map(Path::to_path_buf),
            };
            let before = jobs.len();
            let mirror = Mirror {
                root: input,
                target: output,
                base: base.as_deref(),
                several,
            };
            mirror.jobs(naming.found, note, &mut jobs)?;
            if !jobs[before..].iter().any(Job::codes) {
                let why = format!("{}: nothing to do (no matching files)", input.display());
                if !several {
                    return Err(Error::Folder(why));
                }
                jobs.truncate(before);
                jobs.push(Job::failed(input, why));
            }
            continue;
        }
        let dest = match (naming.given)(input) {
            Given::Code(dest) => dest,
            Given::Skip(warning) => {
                note(Note::Warning(warning));
                continue;
            }
            Given::Fail(why) => {
                jobs.push(Job::failed(input, why));
                continue;
            }
        };
        let dest = match (output, dest.file_name()) {
            (Some(t), Some(name)) => t.join(name),
            _ => dest,
        };
        jobs.push(Job {
            len: fs::metadata(input).map_or(0, |m| m.len()),
            shown: input.to_string_lossy().into_owned(),
            src: input.clone(),
            dest,
            work: Work::Code,
            base: None,
        });
    }
    if jobs.is_empty() {
        return Err(Error::Folder(
            "nothing to do: every input was skipped".into(),
        ));
    }
    let written = || jobs.iter().filter(|j| !matches!(j.work, Work::Fail(_)));
    collide::check(written().map(|j| (j.src.as_path(), j.dest.as_path())))?;
    written().try_for_each(|j| (naming.refuse)(&j.dest))?;
    Ok(jobs)
}

/// Plans the restoring of a remote prefix into the folder `dir`: every object `listed` under
/// `prefix` (location and length) at the same relative path below `dir`, archives decoded
/// (`.sc` removed) and other objects copied. An object whose key makes no path inside `dir`
/// is left out (`note` hears of it); a listing without an archive, and two objects that would
/// be written to one file, are refused.
pub fn plan_prefix(
    prefix: &str,
    dir: &Path,
    listed: &[(String, u64)],
    note: &mut dyn FnMut(Note),
) -> Result<Vec<Job>> {
    let mut jobs = Vec::new();
    for (url, len) in listed {
        let rel = url.strip_prefix(prefix).unwrap_or_default();
        let archive = rel.strip_suffix(".sc");
        let path = Path::new(archive.unwrap_or(rel));
        let inside = path.components().all(|c| matches!(c, Component::Normal(_)));
        if rel.is_empty() || !inside {
            let why = format!("its name makes no path inside {}", dir.display());
            note(Note::Skipped(PathBuf::from(url), why));
            continue;
        }
        jobs.push(Job {
            src: PathBuf::from(url),
            dest: dir.join(path),
            shown: rel.to_string(),
            len: *len,
            work: match archive {
                Some(_) => Work::Code,
                None => Work::Copy,
            },
            base: None,
        });
    }
    if !jobs.iter().any(Job::codes) {
        return Err(Error::Folder(format!("{prefix}: no .sc archive under it")));
    }
    collide::check(jobs.iter().map(|j| (j.src.as_path(), j.dest.as_path())))?;
    Ok(jobs)
}

/// The name a folder input has inside the output folder of a run over several inputs.
fn folder_name(root: &Path) -> Result<PathBuf> {
    let named = root.file_name().map(PathBuf::from);
    match named.or_else(|| root.canonicalize().ok()?.file_name().map(PathBuf::from)) {
        Some(n) => Ok(n),
        None => Err(Error::Folder(format!(
            "{} has no name to mirror it under in the output folder",
            root.display()
        ))),
    }
}

/// One folder of a run: `root`, written below `base` (or beside its files) and its files shown
/// by their paths below `root`, or as found when the run has `several` inputs; `target`, the
/// output folder, is not walked into.
struct Mirror<'a> {
    root: &'a Path,
    target: Option<&'a Path>,
    base: Option<&'a Path>,
    several: bool,
}

impl Mirror<'_> {
    /// Adds the jobs for the files below the root. Other entries that would be coded or
    /// copied were they regular files (FIFOs, devices, dangling links) are each told to
    /// `note`.
    fn jobs(
        &self,
        found: &dyn Fn(&Path) -> Option<PathBuf>,
        note: &mut dyn FnMut(Note),
        jobs: &mut Vec<Job>,
    ) -> Result<()> {
        let (root, base) = (self.root, self.base);
        let (mut files, mut others) = (Vec::new(), Vec::new());
        walk(root, self.target, &mut files, &mut others)?;
        for (path, what) in others {
            let rel = path.strip_prefix(root).unwrap_or(&path);
            if base.is_some() || found(rel).is_some() {
                note(Note::Skipped(path, what));
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
            let shown = if self.several { &src } else { &rel };
            jobs.push(Job {
                len: fs::metadata(&src).map_or(0, |m| m.len()),
                shown: shown.to_string_lossy().into_owned(),
                src,
                dest,
                work,
                base: None,
            });
        }
        Ok(())
    }
}

/// Whether `a` and `b` name the same file.
fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

/// Every regular file below `root` (following links to files, not to directories), sorted,
/// leaving out `skip` (the output folder when it lies inside) and sc's own temporary files;
/// the other entries that are not folders go to `others`, each with what it is.
fn walk(
    root: &Path,
    skip: Option<&Path>,
    files: &mut Vec<PathBuf>,
    others: &mut Vec<(PathBuf, String)>,
) -> Result<()> {
    let cannot_read = |e: io::Error| Error::Folder(format!("cannot read {}: {e}", root.display()));
    let mut entries: Vec<_> = fs::read_dir(root)
        .map_err(cannot_read)?
        .collect::<io::Result<_>>()
        .map_err(cannot_read)?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let path = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') && name.ends_with(".sc-tmp") {
            continue;
        }
        let kind = e.file_type()?;
        if kind.is_dir() {
            if skip.is_some_and(|s| same_file(&path, s)) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn naming<'r>(found: &'r dyn Fn(&Path) -> Option<PathBuf>) -> Naming<'r> {
        Naming {
            found,
            given: &|p| Given::Code(archive_name(p)),
            refuse: &|_| Ok(()),
        }
    }

    #[test]
    fn a_mirrored_folder_codes_weights_and_copies_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("in");
        fs::create_dir_all(src.join("sub")).unwrap();
        fs::write(src.join("a.safetensors"), b"12").unwrap();
        fs::write(src.join("sub/b.gguf"), b"1").unwrap();
        fs::write(src.join("config.json"), b"{}").unwrap();
        let out = dir.path().join("out");
        let mut notes = Vec::new();
        let naming = naming(&encoded_name);
        let jobs = plan(std::slice::from_ref(&src), Some(&out), &naming, &mut |n| {
            notes.push(n)
        })
        .unwrap();
        let got: Vec<_> = jobs
            .iter()
            .map(|j| {
                (
                    j.shown.as_str(),
                    j.dest.strip_prefix(&out).unwrap(),
                    &j.work,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("a.safetensors", Path::new("a.safetensors.sc"), &Work::Code),
                ("config.json", Path::new("config.json"), &Work::Copy),
                ("sub/b.gguf", Path::new("sub/b.gguf.sc"), &Work::Code),
            ]
        );
        assert!(notes.is_empty() && jobs.iter().all(|j| j.base.is_none()));
        // Without an output folder, only the weights are coded, beside them.
        let beside = plan(std::slice::from_ref(&src), None, &naming, &mut |_| {}).unwrap();
        assert!(beside.iter().all(|j| j.codes() && j.dest.starts_with(&src)));

        // Run: the copies and codings are the caller's; the totals add up.
        let coded = AtomicUsize::new(0);
        let steps = Steps {
            needed: &|_| 0,
            code: &|job, _, progress| {
                coded.fetch_add(1, Ordering::Relaxed);
                progress(job.len);
                match job.shown.as_str() {
                    "sub/b.gguf" => Err("no".into()),
                    _ => Ok((job.len, 1)),
                }
            },
            copy: &|job| Ok(job.len),
            stopped: &|| false,
            progress: &|_| {},
        };
        let outcomes = run(&jobs, 1 << 20, &steps);
        assert_eq!(outcomes[2], Err("no".to_string()));
        let s = Summary::of(&jobs, &outcomes);
        assert_eq!(
            (s.bytes_in, s.bytes_out, s.coded, s.failed, s.jobs),
            (4, 3, 1, 1, 3)
        );
        assert_eq!(coded.load(Ordering::Relaxed), 2);
        assert!(
            out.join("sub").is_dir(),
            "the folder of each output is made"
        );
    }

    #[test]
    fn two_sources_for_one_output_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        for d in [&a, &b] {
            fs::create_dir_all(d).unwrap();
            fs::write(d.join("m.safetensors"), b"x").unwrap();
        }
        let out = dir.path().join("out");
        // Both folders' archives would go to out/m.safetensors.sc if mirrored flat.
        let flat = |rel: &Path| encoded_name(Path::new(rel.file_name()?));
        let naming = naming(&flat);
        let e = plan(std::slice::from_ref(&a), Some(&out), &naming, &mut |_| {});
        assert!(e.is_ok());
        let inputs = [a.join("m.safetensors"), b.join("m.safetensors")];
        let e = plan(&inputs, Some(&out), &naming, &mut |_| {}).unwrap_err();
        assert!(
            matches!(&e, Error::Folder(m) if m.contains("would both be written")),
            "{e}"
        );
        let empty = dir.path().join("empty");
        fs::create_dir_all(&empty).unwrap();
        let e = plan(&[empty], None, &naming, &mut |_| {}).unwrap_err();
        assert!(e.to_string().contains("nothing to do"), "{e}");
    }

    #[test]
    fn a_prefix_listing_is_planned_inside_the_folder() {
        let dir = Path::new("/tmp/x");
        let listed = [
            ("s3://b/p/m.safetensors.sc".to_string(), 5),
            ("s3://b/p/config.json".to_string(), 2),
            ("s3://b/p/../escape.sc".to_string(), 1),
        ];
        let mut notes = Vec::new();
        let jobs = plan_prefix("s3://b/p/", dir, &listed, &mut |n| notes.push(n)).unwrap();
        assert_eq!(jobs.len(), 2);
        assert_eq!(jobs[0].dest, dir.join("m.safetensors"));
        assert_eq!(jobs[1].work, Work::Copy);
        assert!(matches!(&notes[..], [Note::Skipped(p, _)] if p.ends_with("escape.sc")));
        assert!(plan_prefix("s3://b/q/", dir, &[], &mut |_| {}).is_err());
    }
}
