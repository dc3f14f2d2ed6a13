//! Doing the jobs of a folder run, two files at a time under one memory budget, and totalling
//! their outcomes.

use super::{Job, Work};
use std::fs;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Instant;

/// Files coded at once. Each already spreads its blocks over every core; a second file in
/// flight hides the start-up and tail of the first (small shards, configs). They share the
/// memory budget, so it stays small.
pub const FILES_IN_FLIGHT: usize = 2;

/// How one job went: bytes in and out, and seconds taken; or why it failed, on one line.
pub type Outcome = Result<Done, String>;

/// A job done.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Done {
    /// Bytes read.
    pub bytes_in: u64,
    /// Bytes written.
    pub bytes_out: u64,
    /// Seconds it took.
    pub secs: f64,
}

/// What the front end does for [`run`]: the coding and copying of one file, each writing its
/// output as the front end writes outputs, and when to stop.
pub struct Steps<'a> {
    /// The memory coding a job needs at least.
    pub needed: &'a (dyn Fn(&Job) -> u64 + Sync),
    /// Codes a job given its memory and a progress callback (bytes of that file so far);
    /// returns the bytes read and written, or why it failed.
    #[allow(clippy::type_complexity)]
    pub code: &'a (dyn Fn(&Job, u64, &(dyn Fn(u64) + Sync)) -> Result<(u64, u64), String> + Sync),
    /// Copies a job's file as it is; returns the bytes copied.
    pub copy: &'a (dyn Fn(&Job) -> Result<u64, String> + Sync),
    /// Whether to start no more jobs (an interrupted run).
    pub stopped: &'a (dyn Fn() -> bool + Sync),
    /// Hears of the bytes of all jobs done so far.
    pub progress: &'a (dyn Fn(u64) + Sync),
}

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

/// Whether `dest` names a remote location, which has no folders to make.
fn remote(dest: &std::path::Path) -> bool {
    #[cfg(feature = "remote")]
    return dest.to_str().is_some_and(crate::remote::is_url);
    #[cfg(not(feature = "remote"))]
    return {
        let _ = dest;
        false
    };
}

/// Runs `jobs`, largest first, [`FILES_IN_FLIGHT`] at a time, sharing `memory` bytes, with
/// `steps`; the outcomes come in the order of `jobs` (a job not started before the run was
/// stopped is "not processed"). The folder of each local output is made first. A job whose
/// [`Job::base`] is another job's output waits for that job's wave to end (bases first).
pub fn run(jobs: &[Job], memory: u64, steps: &Steps<'_>) -> Vec<Outcome> {
    let memory = Memory::new(memory);
    let wave = super::bases::waves(jobs).unwrap_or_else(|| vec![0; jobs.len()]);
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by_key(|&i| (wave[i], std::cmp::Reverse(jobs[i].len)));
    let waves: Vec<&[usize]> = order.chunk_by(|&a, &b| wave[a] == wave[b]).collect();
    let done = AtomicU64::new(0);
    let next = AtomicUsize::new(0);
    let outcomes: Mutex<Vec<Option<Outcome>>> = Mutex::new((0..jobs.len()).map(|_| None).collect());
    let one = |job: &Job| -> Outcome {
        let start = Instant::now();
        if let Work::Fail(why) = &job.work {
            return Err(why.clone());
        }
        if let Some(dir) = job.dest.parent().filter(|_| !remote(&job.dest)) {
            fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let last = AtomicU64::new(0);
        let progress = |n: u64| {
            let new = n.saturating_sub(last.swap(n, Ordering::Relaxed));
            let total = done.fetch_add(new, Ordering::Relaxed);
            (steps.progress)(total + new);
        };
        let (bytes_in, bytes_out) = match job.work {
            Work::Code => {
                let mine = memory.take((steps.needed)(job));
                let coded = (steps.code)(job, mine, &progress);
                memory.give(mine);
                coded?
            }
            _ => {
                let copied = (steps.copy)(job)?;
                progress(copied);
                (copied, copied)
            }
        };
        Ok(Done {
            bytes_in,
            bytes_out,
            secs: start.elapsed().as_secs_f64(),
        })
    };
    for order in waves {
        next.store(0, Ordering::Relaxed);
        rayon::scope(|s| {
            for _ in 0..FILES_IN_FLIGHT.min(order.len()) {
                s.spawn(|_| {
                    while let Some(&i) = order.get(next.fetch_add(1, Ordering::Relaxed)) {
                        if (steps.stopped)() {
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
    }
    let outcomes = outcomes.into_inner().unwrap_or_else(|e| e.into_inner());
    outcomes
        .into_iter()
        .map(|o| o.unwrap_or_else(|| Err("not processed".into())))
        .collect()
}

/// The totals of a run: what its table ends with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Bytes read by the jobs that succeeded.
    pub bytes_in: u64,
    /// Bytes written by them.
    pub bytes_out: u64,
    /// Jobs that coded their file.
    pub coded: usize,
    /// Jobs that failed.
    pub failed: usize,
    /// Jobs in all.
    pub jobs: usize,
}

impl Summary {
    /// The totals of `jobs` and their `outcomes` (in the same order).
    pub fn of(jobs: &[Job], outcomes: &[Outcome]) -> Summary {
        let mut s = Summary {
            jobs: jobs.len(),
            ..Summary::default()
        };
        for (job, outcome) in jobs.iter().zip(outcomes) {
            match outcome {
                Ok(d) => {
                    s.bytes_in += d.bytes_in;
                    s.bytes_out += d.bytes_out;
                    s.coded += job.codes() as usize;
                }
                Err(_) => s.failed += 1,
            }
        }
        s
    }
}
