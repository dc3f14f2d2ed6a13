//! Timing whole processes for `sc bench` and `sc sweep`: wall time, and peak memory as the
//! kernel's high-water mark of each process's resident set (`wait4` rusage).

use anyhow::{bail, Context, Result};
use std::ffi::OsString;
use std::fs::File;
use std::io::{IsTerminal, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

/// One program of a pipeline.
#[derive(Clone, Debug)]
pub struct Step {
    /// Program to run.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// File on standard input (first step only; otherwise the previous step's output).
    pub stdin: Option<PathBuf>,
    /// File for standard output (last step only; otherwise piped to the next step).
    pub stdout: Option<PathBuf>,
}

impl Step {
    /// `program args...` reading and writing nothing on standard streams.
    pub fn new(program: &Path, args: &[&dyn AsRef<std::ffi::OsStr>]) -> Step {
        Step {
            program: program.to_path_buf(),
            args: args.iter().map(|a| a.as_ref().to_owned()).collect(),
            stdin: None,
            stdout: None,
        }
    }

    /// The same step with `args` appended.
    pub fn extra(mut self, args: Vec<OsString>) -> Step {
        self.args.extend(args);
        self
    }

    /// The same step with standard output to `path`.
    pub fn stdout(mut self, path: &Path) -> Step {
        self.stdout = Some(path.to_path_buf());
        self
    }
}

/// What a run cost.
#[derive(Clone, Copy, Debug)]
pub struct Cost {
    /// Wall-clock seconds from the first spawn to the last exit.
    pub secs: f64,
    /// Peak resident memory in bytes, summed over the processes of a pipeline (they run at the
    /// same time); `None` where the platform does not report it.
    pub peak: Option<u64>,
}

/// Runs `steps` as a pipeline and waits for all of them; fails if any exits non-zero, with the
/// first line of its error output.
pub fn run(steps: &[Step]) -> Result<Cost> {
    let start = Instant::now();
    let mut children: Vec<(Child, File, &Step)> = Vec::new();
    let mut previous = None;
    for (i, step) in steps.iter().enumerate() {
        let stdin = match (previous.take(), &step.stdin) {
            (Some(out), _) => Stdio::from(out),
            (None, Some(p)) => Stdio::from(open(p)?),
            (None, None) => Stdio::null(),
        };
        let stdout = match &step.stdout {
            Some(p) => Stdio::from(
                File::create(p).with_context(|| format!("cannot create {}", p.display()))?,
            ),
            None if i + 1 < steps.len() => Stdio::piped(),
            None => Stdio::null(),
        };
        // Error output goes to a file, not a pipe, so a chatty program can never block on it.
        let err = tempfile::tempfile().context("cannot create a temporary file")?;
        // The Command (and the parent's copies of the pipe ends it holds) is dropped right
        // after spawning, so the next step sees end of file when this one exits.
        let mut child = Command::new(&step.program)
            .args(&step.args)
            .stdin(stdin)
            .stdout(stdout)
            .stderr(err.try_clone()?)
            .spawn()
            .with_context(|| format!("cannot run {}", step.program.display()))?;
        previous = child.stdout.take();
        children.push((child, err, step));
    }
    drop(previous);
    let mut peak = Some(0u64);
    let mut failure = None;
    for (child, mut err, step) in children {
        let (ok, rss) = wait(child)?;
        peak = peak.zip(rss).map(|(a, b)| a + b);
        if !ok && failure.is_none() {
            let mut text = String::new();
            err.seek(SeekFrom::Start(0))?;
            // A message that is not text is still a failure; it only loses its wording.
            let _ = err.read_to_string(&mut text);
            let first = text.lines().next().unwrap_or("no error output").to_string();
            failure = Some(format!("{} failed: {first}", step.program.display()));
        }
    }
    let secs = start.elapsed().as_secs_f64();
    match failure {
        Some(f) => bail!(f),
        None => Ok(Cost { secs, peak }),
    }
}

fn open(p: &Path) -> Result<File> {
    File::open(p).with_context(|| format!("cannot open {}", p.display()))
}

/// Waits for `child`; returns whether it exited with status 0, and its peak resident memory.
#[cfg(unix)]
fn wait(child: Child) -> Result<(bool, Option<u64>)> {
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `pid` is our own unreaped child (std never reaps it: `child` is not waited
        // on), and both pointers are valid for writes for the duration of the call.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e).context("waiting for a child process");
        }
    }
    // Linux reports kilobytes, macOS bytes.
    let unit = if cfg!(target_os = "macos") { 1 } else { 1024 };
    let ok = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    Ok((ok, Some(usage.ru_maxrss.max(0) as u64 * unit)))
}

#[cfg(not(unix))]
fn wait(mut child: Child) -> Result<(bool, Option<u64>)> {
    Ok((child.wait()?.success(), None))
}

/// The directory entries of `PATH` holding an executable `name`, first match.
pub fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Whether two files have the same bytes.
pub fn same_contents(a: &Path, b: &Path) -> Result<bool> {
    let (mut fa, mut fb) = (open(a)?, open(b)?);
    let mut left = fa.metadata()?.len();
    if fb.metadata()?.len() != left {
        return Ok(false);
    }
    let (mut ba, mut bb) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    while left > 0 {
        let n = left.min(ba.len() as u64) as usize;
        fa.read_exact(&mut ba[..n])?;
        fb.read_exact(&mut bb[..n])?;
        if ba[..n] != bb[..n] {
            return Ok(false);
        }
        left -= n as u64;
    }
    Ok(true)
}

/// What `sc bench` and `sc sweep` start from: the sc executable to run, after checking that
/// every input is a safetensors file, and a temporary directory for the outputs.
pub fn prepare(inputs: &[PathBuf]) -> Result<(PathBuf, tempfile::TempDir)> {
    let sc = std::env::current_exe().context("cannot find the sc executable")?;
    for f in inputs {
        super::analyze::check_weights(f)?;
    }
    let dir = tempfile::tempdir().context("cannot create a temporary directory")?;
    Ok((sc, dir))
}

/// How many threads sc runs with, in words.
pub fn threads(n: usize) -> String {
    match n {
        0 => format!("all {} cores", rayon::current_num_threads()),
        n => format!("{n} threads"),
    }
}

/// Shows which run of `file` is under way, on a terminal only; [`done`] clears the line.
pub fn show_run(file: &Path, runs: u32) -> impl FnMut(u32) + '_ {
    move |r| {
        if std::io::stderr().is_terminal() {
            eprint!("\r{}: run {} of {runs}  ", file.display(), r + 1);
        }
    }
}

/// Clears the line [`show_run`] wrote.
pub fn done() {
    if std::io::stderr().is_terminal() {
        eprint!("\r\x1b[K");
    }
}

/// Median of `v` (the mean of the middle two for an even count); 0 when empty.
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => 0.0,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// Reads the whole file once so that every tool starts with it in the page cache.
pub fn warm_cache(path: &Path) -> Result<()> {
    std::io::copy(&mut open(path)?, &mut std::io::sink())
        .with_context(|| format!("reading {}", path.display()))?;
    Ok(())
}

/// One way of compressing a file and restoring it.
pub struct Trial {
    /// Writes `archive` from the original.
    pub encode: Vec<Step>,
    /// Writes `restored` from `archive`.
    pub decode: Vec<Step>,
    /// The compressed file.
    pub archive: PathBuf,
    /// The restored file, compared with the original after every run.
    pub restored: PathBuf,
}

/// What the runs of one trial measured.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    /// Seconds of each encode run.
    pub encode: Vec<f64>,
    /// Seconds of each decode run.
    pub decode: Vec<f64>,
    /// Largest peak memory of any encode run.
    pub encode_peak: Option<u64>,
    /// Largest peak memory of any decode run.
    pub decode_peak: Option<u64>,
    /// Size of the archive.
    pub archive_len: u64,
    /// Why the trial stopped: a failing program or a round trip that changed the file.
    pub error: Option<String>,
}

impl Tally {
    /// Median MB/s (10^6 bytes of the original per second) of encode and decode.
    pub fn speeds(&self, original_len: u64) -> (f64, f64) {
        let mbps = |t: &[f64]| original_len as f64 / 1e6 / median(t).max(1e-9);
        (mbps(&self.encode), mbps(&self.decode))
    }
}

/// CPU time the hypervisor gave to other guests ("steal") and all CPU time, in ticks since
/// boot, from `/proc/stat`; `None` where that is unavailable (not Linux, or not a VM's kernel).
pub fn cpu_steal() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let ticks: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|t| t.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal
    Some((*ticks.get(7)?, ticks.iter().sum()))
}

/// The share of CPU time stolen between two [`cpu_steal`] readings, in percent.
pub fn steal_percent(before: Option<(u64, u64)>, after: Option<(u64, u64)>) -> Option<f64> {
    let ((s0, t0), (s1, t1)) = (before?, after?);
    (t1 > t0).then(|| 100.0 * s1.saturating_sub(s0) as f64 / (t1 - t0) as f64)
}

/// Peak memory in MB (10^6 bytes), or "-" where it is unknown.
pub fn megabytes(peak: Option<u64>) -> String {
    peak.map_or("-".into(), |p| format!("{:.1}", p as f64 / 1e6))
}

/// Runs every trial `runs` times, alternating between trials within each run so that all of
/// them see the same machine conditions, and checks each round trip against `original`. Each
/// run starts one trial later than the run before: what a step costs can depend on the steps
/// just before it (on a virtual machine whose host takes back freed memory, the first write
/// into it after a pause costs several times the usual), so no trial keeps the same place.
/// `progress` is told the run number before each run.
pub fn alternate(
    original: &Path,
    trials: &[Trial],
    runs: u32,
    mut progress: impl FnMut(u32),
) -> Vec<Tally> {
    let mut tallies = vec![Tally::default(); trials.len()];
    let n = trials.len();
    for r in 0..runs {
        progress(r);
        for k in (0..n).map(|i| (i + r as usize) % n) {
            let (trial, tally) = (&trials[k], &mut tallies[k]);
            if tally.error.is_none() {
                if let Err(e) = run_once(original, trial, tally) {
                    tally.error = Some(format!("{e:#}"));
                }
            }
        }
    }
    tallies
}

fn run_once(original: &Path, trial: &Trial, tally: &mut Tally) -> Result<()> {
    // Every tool writes a new file: replacing one costs ext4 an early writeback, and tools
    // differ in how they replace (rename over it, or truncate it).
    let _ = std::fs::remove_file(&trial.archive);
    // Each step starts with nothing left to write back: the gigabytes the tools before it
    // wrote would otherwise be flushed while it runs, taking a core from whichever tool uses
    // them all (its own output's writeback still counts against it).
    flush_all();
    let enc = run(&trial.encode)?;
    flush_all();
    let dec = run(&trial.decode)?;
    if !same_contents(original, &trial.restored)? {
        bail!("the restored file differs from the original");
    }
    tally.archive_len = std::fs::metadata(&trial.archive)?.len();
    tally.encode.push(enc.secs);
    tally.decode.push(dec.secs);
    tally.encode_peak = tally.encode_peak.max(enc.peak);
    tally.decode_peak = tally.decode_peak.max(dec.peak);
    // The next run writes it again; meanwhile it need not take disk space.
    std::fs::remove_file(&trial.restored)?;
    Ok(())
}

/// Writes every file's dirty pages back to disk (sync(2)); the page cache stays warm.
fn flush_all() {
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steal_share_of_the_ticks_in_between() {
        assert_eq!(
            steal_percent(Some((10, 1000)), Some((30, 1100))),
            Some(20.0)
        );
        assert_eq!(steal_percent(Some((10, 1000)), Some((10, 1000))), None);
        assert_eq!(steal_percent(None, Some((10, 1000))), None);
        // On Linux the reading exists and steal never exceeds the total.
        if let Some((steal, total)) = cpu_steal() {
            assert!(steal <= total);
        }
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }

    /// Each run starts one trial later, and every round trip is checked.
    #[cfg(unix)]
    #[test]
    fn runs_rotate_the_order_of_trials() {
        let (Some(sh), Some(cp)) = (find_program("sh"), find_program("cp")) else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let (original, log) = (dir.path().join("original"), dir.path().join("log"));
        std::fs::write(&original, b"weights").unwrap();
        let trials: Vec<Trial> = ["a", "b", "c"]
            .iter()
            .map(|name| {
                let archive = dir.path().join(format!("{name}.archive"));
                let restored = dir.path().join(format!("{name}.restored"));
                let script = format!(
                    "printf {name} >> '{}' && cp '{}' '{}'",
                    log.display(),
                    original.display(),
                    archive.display()
                );
                Trial {
                    encode: vec![Step::new(&sh, &[&"-c", &script])],
                    decode: vec![Step::new(&cp, &[&archive, &restored])],
                    archive,
                    restored,
                }
            })
            .collect();
        let tallies = alternate(&original, &trials, 4, |_| {});
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "abcbcacababc");
        for t in &tallies {
            assert!(t.error.is_none() && t.encode.len() == 4 && t.archive_len == 7);
        }
    }

    #[cfg(unix)]
    #[test]
    fn pipelines_run_and_failures_are_reported() {
        let (Some(sh), Some(cat)) = (find_program("sh"), find_program("cat")) else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let cost = run(&[
            Step::new(&sh, &[&"-c", &"echo hello"]),
            Step::new(&cat, &[]).stdout(&out),
        ])
        .unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "hello\n");
        assert!(cost.peak.unwrap() > 0 && cost.secs > 0.0);
        assert!(same_contents(&out, &out).unwrap());
        let e = run(&[Step::new(&sh, &[&"-c", &"echo nope >&2; exit 3"])]).unwrap_err();
        assert!(e.to_string().contains("failed: nope"), "{e}");
    }
}
