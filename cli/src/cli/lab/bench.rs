//! `sc bench`: sc's modes next to the compressors people already use, on the same files in the
//! same run, each as a whole process from file to file, every round trip checked.

use super::measure::{self, find_program, megabytes, Step, Trial};
use super::table::Table;
use anyhow::{bail, Result};
use clap::Args;
use sc::Mode;
use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// safetensors or GGUF files to compress
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// More compressors, comma-separated: zstd, xz, bzip2, gzip, shuffle-zstd (sc shuffle
    /// piped into zstd), cp, sc-6 to sc-9 (BEST's levels: sc-6 without sign models, sc-9 with them
    /// on every block they make smaller); NAME-LEVEL picks a level, as in zstd-19, xz-1,
    /// shuffle-zstd-1
    #[arg(long, value_delimiter = ',', value_parser = Tool::parse, value_name = "LIST")]
    against: Vec<Tool>,
    /// Runs of every compressor, alternating between them; medians are reported
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    runs: u32,
    /// Print CSV instead of a markdown table
    #[arg(long)]
    csv: bool,
    /// Worker threads for sc (0 = all cores)
    #[arg(short = 'T', long, default_value_t = 0)]
    threads: usize,
    /// Base checkpoint the files are fine-tunes of: adds sc fast and best coded against it
    /// (`--base`), and the ratio of their decode times to plain sc fast's
    #[arg(long, value_name = "BASE")]
    base: Option<PathBuf>,
}

/// A compressor and how it is run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tool {
    /// sc itself.
    Sc(Mode),
    /// sc at a BEST level, 6 to 9 (how much it uses the sign models).
    ScLevel(u32),
    /// sc coding against a base checkpoint.
    ScBase(Mode, PathBuf),
    /// Copying the file: the floor for any file-to-file tool.
    Cp,
    /// zstd at a level, one thread.
    Zstd(u32),
    /// xz at a level, one thread.
    Xz(u32),
    /// bzip2 at a block-size level.
    Bzip2(u32),
    /// gzip at a level.
    Gzip(u32),
    /// `sc shuffle` piped into zstd at a level: sc's planes without sc's coders.
    ShuffleZstd(u32),
}

impl Tool {
    fn parse(s: &str) -> std::result::Result<Tool, String> {
        let s = s.trim().to_ascii_lowercase();
        let (name, given) = match s.rsplit_once('-') {
            Some((n, l)) if l.parse::<u32>().is_ok() => (n, l.parse::<u32>().ok()),
            _ => (s.as_str(), None),
        };
        let level = |default: u32, range: std::ops::RangeInclusive<u32>| {
            let l = given.unwrap_or(default);
            match range.contains(&l) {
                true => Ok(l),
                false => Err(format!("{name} levels are {range:?}")),
            }
        };
        Ok(match name {
            "zstd" => Tool::Zstd(level(3, 1..=22)?),
            "xz" => Tool::Xz(level(6, 0..=9)?),
            "bzip2" => Tool::Bzip2(level(9, 1..=9)?),
            "gzip" => Tool::Gzip(level(6, 1..=9)?),
            "shuffle-zstd" => Tool::ShuffleZstd(level(3, 1..=22)?),
            "cp" if s == "cp" => Tool::Cp,
            "sc" if given.is_some() => Tool::ScLevel(level(9, 6..=9)?),
            _ => {
                return Err(format!(
                    "unknown compressor '{s}' (known: zstd, xz, bzip2, gzip, shuffle-zstd, cp, \
                     sc-6 to sc-9)"
                ))
            }
        })
    }

    fn label(&self) -> String {
        match self {
            Tool::Sc(m) => format!("sc {}", m.name()),
            Tool::ScLevel(l) => format!("sc -{l}"),
            Tool::ScBase(m, _) => format!("sc {} --base", m.name()),
            Tool::Cp => "cp".into(),
            Tool::Zstd(l) => format!("zstd -{l} -T1"),
            Tool::Xz(l) => format!("xz -{l} -T1"),
            Tool::Bzip2(l) => format!("bzip2 -{l}"),
            Tool::Gzip(l) => format!("gzip -{l}"),
            Tool::ShuffleZstd(l) => format!("shuffle+zstd -{l} -T1"),
        }
    }

    /// The program it needs besides sc and cp.
    fn program(&self) -> Option<&'static str> {
        match self {
            Tool::Sc(_) | Tool::ScLevel(_) | Tool::ScBase(..) => None,
            Tool::Cp => Some("cp"),
            Tool::Zstd(_) | Tool::ShuffleZstd(_) => Some("zstd"),
            Tool::Xz(_) => Some("xz"),
            Tool::Bzip2(_) => Some("bzip2"),
            Tool::Gzip(_) => Some("gzip"),
        }
    }

    /// Encode and decode pipelines; `prog` is the resolved [`Tool::program`].
    fn trial(&self, sc: &Path, prog: &Path, threads: usize, input: &Path, dir: &Path) -> Trial {
        let n = |ext: &str| dir.join(format!("{}.{ext}", self.label().replace([' ', '-'], "")));
        let (archive, restored) = (n("archive"), n("restored"));
        let level = |l: &u32| format!("-{l}");
        // sc's own steps: encode with `flag` and `extra`, decode with `extra`.
        let sc_steps = |flag: String, extra: Vec<OsString>| {
            let t = threads.to_string();
            (
                vec![Step::new(
                    sc,
                    &[&"encode", &"-qf", &"-T", &t, &flag, &input, &"-o", &archive],
                )
                .extra(extra.clone())],
                vec![Step::new(
                    sc,
                    &[&"decode", &"-qf", &"-T", &t, &archive, &"-o", &restored],
                )
                .extra(extra)],
            )
        };
        let (encode, decode) = match self {
            Tool::Sc(m) => sc_steps(format!("--mode={}", m.name()), Vec::new()),
            Tool::ScLevel(l) => sc_steps(level(l), Vec::new()),
            Tool::ScBase(m, b) => sc_steps(
                format!("--mode={}", m.name()),
                vec!["--base".into(), b.into()],
            ),
            Tool::Cp => (
                vec![Step::new(prog, &[&input, &archive])],
                vec![Step::new(prog, &[&archive, &restored])],
            ),
            Tool::Zstd(l) => (
                vec![Step::new(prog, &[&"-qf", &"-T1", &input, &"-o", &archive]).extra(zstd(*l))],
                vec![Step::new(prog, &[&"-qfd", &archive, &"-o", &restored])],
            ),
            Tool::Xz(l) => streamed(prog, &[&"-T1", &level(l)], input, &archive, &restored),
            Tool::Bzip2(l) | Tool::Gzip(l) => {
                streamed(prog, &[&level(l)], input, &archive, &restored)
            }
            Tool::ShuffleZstd(l) => (
                vec![
                    Step::new(sc, &[&"shuffle", &input]),
                    Step::new(prog, &[&"-qc", &"-T1"])
                        .extra(zstd(*l))
                        .stdout(&archive),
                ],
                vec![
                    Step::new(prog, &[&"-qdc", &archive]),
                    Step::new(sc, &[&"shuffle", &"--undo", &"-"]).stdout(&restored),
                ],
            ),
        };
        Trial {
            encode,
            decode,
            archive,
            restored,
        }
    }
}

/// zstd's level options (levels above 19 need `--ultra`).
fn zstd(level: u32) -> Vec<OsString> {
    let mut v = vec![OsString::from(format!("-{level}"))];
    if level > 19 {
        v.push("--ultra".into());
    }
    v
}

/// A compressor that writes to standard output (`-c`), as xz, bzip2 and gzip do.
fn streamed(
    prog: &Path,
    opts: &[&dyn AsRef<OsStr>],
    input: &Path,
    archive: &Path,
    restored: &Path,
) -> (Vec<Step>, Vec<Step>) {
    let mut enc: Vec<&dyn AsRef<OsStr>> = vec![&"-qc"];
    enc.extend_from_slice(opts);
    enc.push(&input);
    (
        vec![Step::new(prog, &enc).stdout(archive)],
        vec![Step::new(prog, &[&"-qdc", &archive]).stdout(restored)],
    )
}

pub fn run(a: &BenchArgs) -> Result<()> {
    let (sc, dir) = measure::prepare(&a.inputs)?;
    let mut tools = vec![Tool::Sc(Mode::Fast), Tool::Sc(Mode::Best)];
    if let Some(base) = &a.base {
        sc::Base::open(base)?;
        tools.push(Tool::ScBase(Mode::Fast, base.clone()));
        tools.push(Tool::ScBase(Mode::Best, base.clone()));
    }
    tools.extend([Tool::Zstd(1), Tool::Cp]);
    for t in &a.against {
        if !tools.contains(t) {
            tools.push(t.clone());
        }
    }
    let mut missing = BTreeSet::new();
    let tools: Vec<(Tool, PathBuf)> = tools
        .into_iter()
        .filter_map(|t| match t.program() {
            None => Some((t, sc.clone())),
            Some(p) => match find_program(p) {
                Some(path) => Some((t, path)),
                None => {
                    missing.insert(p);
                    None
                }
            },
        })
        .collect();
    let mut table = Table::new(&[
        "file",
        "tool",
        ">size %",
        ">encode MB/s",
        ">decode MB/s",
        ">peak MB encode",
        ">peak MB decode",
        "round trip",
    ]);
    let mut failed = 0;
    let mut ratios = Vec::new();
    let steal_before = measure::cpu_steal();
    for f in &a.inputs {
        measure::warm_cache(f)?;
        let len = std::fs::metadata(f)?.len();
        let trials: Vec<Trial> = tools
            .iter()
            .map(|(t, prog)| t.trial(&sc, prog, a.threads, f, dir.path()))
            .collect();
        let tallies = measure::alternate(f, &trials, a.runs, measure::show_run(f, a.runs));
        let name = super::analyze::stem(f);
        if let Some(r) = base_ratio(&tools, &tallies) {
            ratios.push((name.clone(), r));
        }
        for ((tool, _), t) in tools.iter().zip(&tallies) {
            let (enc, dec) = t.speeds(len);
            let ok = match &t.error {
                None => "ok".to_string(),
                Some(e) => {
                    failed += 1;
                    format!("FAILED: {e}")
                }
            };
            let num = |x: f64, d: usize| match t.encode.is_empty() {
                true => "-".to_string(),
                false => format!("{x:.d$}"),
            };
            table.row(vec![
                name.clone(),
                tool.label(),
                num(100.0 * t.archive_len as f64 / len.max(1) as f64, 2),
                num(enc, 0),
                num(dec, 0),
                megabytes(t.encode_peak),
                megabytes(t.decode_peak),
                ok,
            ]);
        }
        for t in &trials {
            // Already gone after a successful round trip.
            let _ = std::fs::remove_file(&t.archive);
            let _ = std::fs::remove_file(&t.restored);
        }
    }
    measure::done();
    let steal = measure::steal_percent(steal_before, measure::cpu_steal());
    let out = match a.csv {
        true => table.csv(),
        false => format!(
            "{}\n{}{}",
            table.markdown(),
            notes(a, &missing, steal),
            ratio_notes(&ratios)
        ),
    };
    crate::cli::print_stdout(&out)?;
    if failed > 0 {
        bail!("{failed} round trip(s) failed");
    }
    if a.csv && !missing.is_empty() {
        let m: Vec<&str> = missing.into_iter().collect();
        crate::cli::note(format_args!("not installed, skipped: {}", m.join(", ")));
    }
    Ok(())
}

/// The median over runs of each run's decode time with the base over plain FAST's, when both
/// ran and round-tripped.
fn base_ratio(tools: &[(Tool, PathBuf)], tallies: &[measure::Tally]) -> Option<f64> {
    let find = |want: &dyn Fn(&Tool) -> bool| {
        let k = tools.iter().position(|(t, _)| want(t))?;
        let t = &tallies[k];
        (t.error.is_none() && !t.decode.is_empty()).then_some(t)
    };
    let plain = find(&|t| *t == Tool::Sc(Mode::Fast))?;
    let based = find(&|t| matches!(t, Tool::ScBase(Mode::Fast, _)))?;
    let per_run: Vec<f64> = based
        .decode
        .iter()
        .zip(&plain.decode)
        .map(|(b, p)| b / p.max(1e-9))
        .collect();
    Some(measure::median(&per_run))
}

/// The lines that give [`base_ratio`] per file.
fn ratio_notes(ratios: &[(String, f64)]) -> String {
    let mut s = String::new();
    for (name, r) in ratios {
        s += &format!(
            "\n{name}: decoding with the base (sc fast --base) takes {r:.2} times as long as plain \
             sc fast (median of the runs' own ratios).\n"
        );
    }
    s
}

fn notes(a: &BenchArgs, missing: &BTreeSet<&str>, steal: Option<f64>) -> String {
    let threads = measure::threads(a.threads);
    let mut s = format!(
        "Median of {} runs, alternating between tools in an order rotated each run; each tool runs as a whole process from file to file, \
         page cache warm and nothing left to write back (sync before each step); MB/s is \
         original bytes / 10^6 per second in both directions. Peak MB is \
         the largest resident set of the process over the runs (wait4 rusage), summed over the \
         two processes of a pipeline. Every restored file was compared byte for byte with the \
         original. sc uses {threads}; zstd and xz run with -T1; bzip2, gzip and cp are \
         single-threaded. cp copies the file (encode) and the copy (decode). shuffle+zstd is \
         `sc shuffle` (the planes FAST splits, uncoded) piped into zstd.\n",
        a.runs
    );
    if let Some(base) = &a.base {
        s += &format!(
            "\n`--base`: sc coded against the base {} (encode and decode both read it, and \
             check the digest of every base tensor used).\n",
            base.display()
        );
    }
    if let Some(p) = steal.filter(|&p| p >= 0.5) {
        s += &format!(
            "\nThe hypervisor took {p:.0}% of this machine's CPU time (steal) during the run: \
             speeds are lower than on an idle machine, most for tools using several threads.\n"
        );
    }
    if !missing.is_empty() {
        let m: Vec<&str> = missing.iter().copied().collect();
        s += &format!("\nNot installed, skipped: {}.\n", m.join(", "));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compressor_names_and_levels() {
        assert_eq!(Tool::parse("zstd"), Ok(Tool::Zstd(3)));
        assert_eq!(Tool::parse("xz-1"), Ok(Tool::Xz(1)));
        assert_eq!(Tool::parse("shuffle-zstd"), Ok(Tool::ShuffleZstd(3)));
        assert_eq!(Tool::parse("Shuffle-Zstd-19"), Ok(Tool::ShuffleZstd(19)));
        assert_eq!(Tool::parse("cp"), Ok(Tool::Cp));
        assert!(Tool::parse("gzip-0").is_err());
        assert!(Tool::parse("cp-3").is_err());
        assert_eq!(Tool::parse("sc-9"), Ok(Tool::ScLevel(9)));
        assert_eq!(Tool::parse("sc-6"), Ok(Tool::ScLevel(6)));
        assert!(Tool::parse("sc-5").is_err());
        assert!(Tool::parse("sc").is_err());
        assert!(Tool::parse("lz4").unwrap_err().contains("unknown"));
    }
}
