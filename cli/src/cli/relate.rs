//! `--base auto`: each input coded against the base that makes it smallest, found by
//! measurement among `--base-from` candidates and the run's other inputs (`sc::relate`,
//! through `sc::folder::relate_jobs` for a run of several files).

use super::note;
use anyhow::Result;
use clap::Args;
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

/// The relate options `auto` and `mode` give.
fn options(auto: &AutoArgs, mode: sc::Mode) -> sc::RelateOptions {
    sc::RelateOptions {
        mode,
        max_depth: auto.base_depth,
        ..sc::RelateOptions::default()
    }
}

/// Sets each coded job's base to the one of the others and `auto.base_from` that codes it
/// smallest, coding in `mode` ([`sc::folder::relate_jobs`]); under `verbose`, says what each
/// took and what the sample says it saves.
pub(super) fn pick(
    jobs: &mut [sc::folder::Job],
    auto: &AutoArgs,
    mode: sc::Mode,
    verbose: bool,
) -> Result<()> {
    let found = sc::folder::relate_jobs(jobs, &auto.base_from, &options(auto, mode))?;
    for (job, r) in jobs.iter().zip(found) {
        if let Some(r) = r.filter(|_| verbose) {
            said(&job.src, job.base.as_deref(), &r);
        }
    }
    Ok(())
}

/// The base of the one file `input` among `auto.base_from`, if one codes it smaller.
pub(super) fn pick_one(
    input: &Path,
    auto: &AutoArgs,
    mode: sc::Mode,
    verbose: bool,
) -> Result<Option<sc::Base>> {
    let inputs = [input.to_path_buf()];
    let plan = sc::relate(&inputs, &auto.base_from, &options(auto, mode))?;
    let base = plan.base_path(0, &inputs, &auto.base_from);
    if verbose {
        said(input, base, &plan.inputs[0]);
    }
    Ok(base.map(sc::Base::open).transpose()?)
}

/// Says which base `input` took (or none) and what the sample says it saves.
fn said(input: &Path, base: Option<&Path>, r: &sc::Related) {
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
