//! `--base auto`: each input coded against the base that makes it smallest, found by
//! measurement among `--base-from` candidates and the run's other inputs (`sc::relate`); and
//! the order a folder decode restores such archives in (each base before the archives that
//! need it).

use super::base::needed_base;
use super::note;
use anyhow::{bail, Result};
use clap::Args;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

#[derive(Args, Debug, Default)]
pub(super) struct AutoArgs {
    /// With --base auto: files, .sc archives or folders offered as bases, besides the run's
    /// other inputs (each input takes the one that codes it smallest, measured on a sample, or
    /// none)
    #[arg(long, value_name = "PATH", num_args = 1..)]
    pub base_from: Vec<PathBuf>,
    /// With --base auto: longest chain of inputs coded against inputs of the run (checkpoint 3
    /// against 2 against 1 is 2)
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub base_depth: usize,
}

/// Whether `--base` asks for bases found automatically.
pub(super) fn is_auto(base: Option<&Path>) -> bool {
    base == Some(Path::new("auto"))
}

/// The base chosen for each file of a run, by the path the run knows it by.
#[derive(Debug, Default)]
pub(super) struct Picked {
    bases: HashMap<PathBuf, PathBuf>,
}

impl Picked {
    /// The base of `src`, if it takes one.
    pub fn of(&self, src: &Path) -> Option<&Path> {
        self.bases.get(src).map(PathBuf::as_path)
    }

    /// Opens the base of `src`, if it takes one.
    pub fn open(&self, src: &Path) -> Result<Option<sc::Base>> {
        Ok(match self.of(src) {
            Some(b) => Some(sc::Base::open(b)?),
            None => None,
        })
    }
}

/// Picks a base for each of `inputs` among the others and `auto.base_from`, coding in `mode`;
/// under `verbose`, says what each took and what the sample says it saves.
pub(super) fn pick(
    inputs: &[PathBuf],
    auto: &AutoArgs,
    mode: sc::Mode,
    verbose: bool,
) -> Result<Picked> {
    let opts = sc::RelateOptions {
        mode,
        max_depth: auto.base_depth,
        ..sc::RelateOptions::default()
    };
    let plan = sc::relate(inputs, &auto.base_from, &opts)?;
    let mut picked = Picked::default();
    for (i, input) in inputs.iter().enumerate() {
        let base = plan.base_path(i, inputs, &auto.base_from);
        if verbose {
            let r = &plan.inputs[i];
            match base {
                Some(b) => note(format_args!(
                    "sc: {}: base {} (the sample says it saves {:.1}% of the file)",
                    input.display(),
                    b.display(),
                    100.0 * r.saving as f64 / r.len.max(1) as f64
                )),
                None => note(format_args!(
                    "sc: {}: no base makes it smaller: coded alone",
                    input.display()
                )),
            }
        }
        if let Some(b) = base {
            picked.bases.insert(input.clone(), b.to_path_buf());
        }
    }
    Ok(picked)
}

/// The waves a folder decode runs in, given each job's archive `src` and output `dest`
/// (`None` for a job that is not decoded): an archive that needs a base another job of the
/// run restores (found by the base's recorded name among the outputs, beside its own output
/// first) waits for that job's wave; it is then decoded against that output. An archive whose
/// base no job restores is left to `--base`, as alone.
pub(super) fn decode_waves(jobs: &[Option<(&Path, &Path)>]) -> Result<(Vec<Vec<usize>>, Picked)> {
    let needed: Vec<Option<String>> = jobs
        .iter()
        .map(|j| j.and_then(|(src, _)| needed_base(src)))
        .collect();
    let mut on: Vec<Option<usize>> = vec![None; jobs.len()];
    for (i, name) in needed.iter().enumerate() {
        let (Some(name), Some((_, dest))) = (name, jobs[i]) else {
            continue;
        };
        let restores = |k: &usize| {
            let out = jobs[*k].map(|(_, d)| d);
            *k != i && out.is_some_and(|d| d.file_name() == Some(name.as_ref()))
        };
        let beside = |k: &usize| jobs[*k].is_some_and(|(_, d)| d.parent() == dest.parent());
        let found: Vec<usize> = (0..jobs.len()).filter(restores).collect();
        on[i] = match found.iter().copied().find(beside) {
            Some(k) => Some(k),
            None if found.len() == 1 => Some(found[0]),
            None => None,
        };
    }
    let mut wave: Vec<Option<usize>> = vec![None; jobs.len()];
    for i in 0..jobs.len() {
        let mut depth = 0;
        let mut at = i;
        while let Some(up) = on[at] {
            depth += 1;
            at = up;
            if depth > jobs.len() {
                bail!(
                    "{}: its base is restored from an archive that needs it in turn",
                    jobs[i].map_or(Path::new(""), |j| j.0).display()
                );
            }
        }
        wave[i] = Some(depth);
    }
    let waves = wave.iter().flatten().max().map_or(0, |&w| w + 1);
    let mut out = vec![Vec::new(); waves];
    for (i, w) in wave.iter().enumerate() {
        if let Some(w) = w {
            out[*w].push(i);
        }
    }
    let mut picked = Picked::default();
    for (i, up) in on.iter().enumerate() {
        if let (Some(up), Some((src, _))) = (up, jobs[i]) {
            if let Some((_, base)) = jobs[*up] {
                picked.bases.insert(src.to_path_buf(), base.to_path_buf());
            }
        }
    }
    Ok((out, picked))
}
