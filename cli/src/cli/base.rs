//! `--base`: the base checkpoint a fine-tune is coded against (`sc encode --base`), and that
//! decoding, verifying and extracting its archive need.

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

/// The name of the base the archive `path` needs, if it is an archive file that needs one.
fn needed_base(path: &Path) -> Option<String> {
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
