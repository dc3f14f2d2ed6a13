//! `--base`: the base checkpoint a fine-tune is coded against (`sc encode --base`), and that
//! decoding, verifying and extracting its archive need.

use super::output::FileId;
use anyhow::{anyhow, Result};
use clap::Args;
use std::path::{Path, PathBuf};

#[derive(Args, Debug, Default)]
pub(super) struct BaseArg {
    /// Base checkpoint (safetensors file, .sc archive, or folder of shards) the fine-tune is
    /// coded against; decoding the archive needs the same base
    #[arg(long, value_name = "BASE")]
    pub base: Option<PathBuf>,
}

impl BaseArg {
    /// Opens the base, if one was given. `archive`, when the base is for decoding it, is read
    /// for the name of the base it needs, for the error message when the base cannot be used.
    pub fn open(&self, archive: Option<&Path>) -> Result<Option<sc::Base>> {
        let Some(path) = &self.base else {
            return Ok(None);
        };
        sc::Base::open(path).map(Some).map_err(|e| {
            let needed = archive.and_then(needed_base);
            match needed {
                Some(n) => anyhow!("{e} (the archive needs the base {n:?})"),
                None => e.into(),
            }
        })
    }
}

/// The files of the base an encode codes against, by identity (device and inode, whatever the
/// path that names them): an input among them would be coded against itself, and an output
/// written over one would replace the base its archive needs.
pub(super) struct BaseFiles<'a> {
    /// The base as given.
    given: Option<&'a Path>,
    ids: Vec<FileId>,
}

impl BaseFiles<'_> {
    /// The files of `base`, given as `arg`.
    pub fn of<'a>(arg: &'a BaseArg, base: Option<&sc::Base>) -> BaseFiles<'a> {
        let files = base.map_or(&[][..], sc::Base::files);
        BaseFiles {
            given: arg.base.as_deref(),
            ids: files.iter().filter_map(|f| id(f)).collect(),
        }
    }

    /// Whether `path` names one of the base's files (following links).
    pub fn holds(&self, path: &Path) -> bool {
        id(path).is_some_and(|i| self.ids.contains(&i))
    }

    /// What a file of the base is to it: the base, or part of the folder given.
    fn of_the_base(&self) -> String {
        match self.given {
            Some(b) if b.is_dir() => format!("part of the base {}", b.display()),
            _ => "the base".into(),
        }
    }

    /// Fails if the output `dest` would be written over a file of the base.
    pub fn check_output(&self, dest: &Path) -> Result<()> {
        match self.holds(dest) {
            true => Err(anyhow!(
                "{} is {}: writing over it would lose the base its archive needs; nothing was \
                 written",
                dest.display(),
                self.of_the_base()
            )),
            false => Ok(()),
        }
    }

    /// Fails if `input` is (part of) the base: it would be coded against itself.
    pub fn check_input(&self, input: &Path) -> Result<()> {
        match self.holds(input) {
            true => Err(anyhow!(
                "{} is {}: it cannot be coded against itself (encode it without --base)",
                input.display(),
                self.of_the_base()
            )),
            false => Ok(()),
        }
    }

    /// The note for a file of a folder run that is (part of) the base: coded without it, and
    /// kept under `rm`, since the run's other archives need it.
    pub fn note(&self, input: &Path, rm: bool) -> String {
        let kept = match rm {
            true => ", and kept (the other archives need it)",
            false => "",
        };
        format!(
            "sc: note: {} is {}: coded without it{kept}",
            input.display(),
            self.of_the_base()
        )
    }
}

/// The identity of the file at `path`, if there is one.
fn id(path: &Path) -> Option<FileId> {
    std::fs::metadata(path).ok().map(|m| FileId::of(&m))
}

/// The name of the base the archive `path` needs, if it is an archive file that needs one.
pub(super) fn needed_base(path: &Path) -> Option<String> {
    let archive = sc::Archive::open(std::fs::File::open(path).ok()?).ok()?;
    archive.base_name().map(str::to_string)
}

/// A library error, with the command line's way to give a missing base.
pub(super) fn hint(e: sc::Error) -> anyhow::Error {
    match e {
        e @ sc::Error::BaseNeeded { .. } => anyhow!("{e} (give it with --base)"),
        e => e.into(),
    }
}

/// What an archive's summary line says about its references: the base it was coded against
/// (`base`, as given) and the repeated tensors stored once.
pub(super) fn summary(based: usize, repeated: usize, base: Option<&Path>) -> String {
    let mut s = String::new();
    match (base, based) {
        (Some(b), 0) => s += &format!(", no tensor matches base {:?}", b.display().to_string()),
        (Some(b), n) => s += &format!(", {n} tensors against base {:?}", b.display().to_string()),
        (None, _) => {}
    }
    if repeated > 0 {
        s += &format!(", {repeated} repeated tensors stored once");
    }
    s
}
