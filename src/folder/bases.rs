//! Each job's own base, chosen between [`super::plan`] and [`super::run`]: at encode by
//! measurement among the run's other inputs and the candidates offered ([`relate_jobs`],
//! `sc encode --base auto`), at decode as the output of the job that restores the base an
//! archive records ([`restore_bases`]). [`waves`] then orders the run so that a base another
//! job writes is written before the jobs that read it.

use super::Job;
use crate::error::{Error, Result};
use crate::relate::{relate, RelateOptions, Related};
use std::path::PathBuf;

/// Sets [`Job::base`] of each coded job to the base [`relate`] picks for its input among the
/// other coded jobs' inputs and `candidates` (none where coding alone is smallest); returns
/// what was found, by job (`None` for a job that is not coded).
pub fn relate_jobs(
    jobs: &mut [Job],
    candidates: &[PathBuf],
    opts: &RelateOptions,
) -> Result<Vec<Option<Related>>> {
    let coded: Vec<usize> = (0..jobs.len()).filter(|&i| jobs[i].codes()).collect();
    let inputs: Vec<PathBuf> = coded.iter().map(|&i| jobs[i].src.clone()).collect();
    let plan = relate(&inputs, candidates, opts)?;
    let mut found = vec![None; jobs.len()];
    for (k, &i) in coded.iter().enumerate() {
        jobs[i].base = plan.base_path(k, &inputs, candidates).map(PathBuf::from);
        found[i] = plan.inputs.get(k).cloned();
    }
    Ok(found)
}

/// Sets [`Job::base`] of each coded job whose archive records a base that another coded job
/// of the run restores (an output of that name, the one beside its own output first) to that
/// job's output; an archive whose base no job restores keeps the run's base. Fails when
/// archives need one another's outputs in a cycle.
pub fn restore_bases(jobs: &mut [Job]) -> Result<()> {
    let needed: Vec<Option<String>> = jobs
        .iter()
        .map(|j| match j.codes() {
            true => recorded_base(j),
            false => None,
        })
        .collect();
    for (i, name) in needed.iter().enumerate() {
        let Some(name) = name else { continue };
        let restores = |k: &usize| {
            *k != i
                && jobs[*k].codes()
                && jobs[*k].dest.file_name() == Some(std::ffi::OsStr::new(name))
        };
        let found: Vec<usize> = (0..jobs.len()).filter(restores).collect();
        let beside = |k: &usize| jobs[*k].dest.parent() == jobs[i].dest.parent();
        let on = match found.iter().copied().find(beside) {
            Some(k) => Some(k),
            None if found.len() == 1 => Some(found[0]),
            None => None,
        };
        if let Some(k) = on {
            jobs[i].base = Some(jobs[k].dest.clone());
        }
    }
    match waves(jobs).is_some() {
        true => Ok(()),
        false => Err(Error::Folder(
            "archives of the run need one another's outputs as bases, in a cycle".into(),
        )),
    }
}

/// The base name the archive of `job` records, if it can be read and has one.
fn recorded_base(job: &Job) -> Option<String> {
    let file = std::fs::File::open(&job.src).ok()?;
    let archive = crate::archive::Archive::open(file).ok()?;
    archive.base_name().map(str::to_string)
}

/// The wave of each job: 0 for a job whose base no other coded job of the run writes, else
/// one more than the wave of the job that writes it; `None` when bases form a cycle.
pub(super) fn waves(jobs: &[Job]) -> Option<Vec<usize>> {
    let writer = |i: usize| {
        let base = jobs[i].base.as_deref()?;
        (0..jobs.len()).find(|&k| k != i && jobs[k].codes() && jobs[k].dest == base)
    };
    let on: Vec<Option<usize>> = (0..jobs.len()).map(writer).collect();
    (0..jobs.len())
        .map(|i| {
            let (mut depth, mut at) = (0, i);
            while let Some(up) = on[at] {
                depth += 1;
                at = up;
                if depth > jobs.len() {
                    return None;
                }
            }
            Some(depth)
        })
        .collect()
}
