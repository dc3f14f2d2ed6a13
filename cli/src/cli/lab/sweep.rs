//! `sc sweep`: the block-size trade-off. Small blocks adapt to local statistics and bound
//! memory but pay framing and code tables per block; large blocks amortise them.

use super::measure::{self, megabytes, Step, Tally, Trial};
use super::plot::{self, Axis, Mark, Panel};
use super::table::Table;
use anyhow::{bail, Context, Result};
use clap::Args;
use sc::Mode;
use std::fs::File;
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct SweepArgs {
    /// safetensors or GGUF files to compress
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// Block sizes to try, comma-separated (bytes or K/M suffix)
    #[arg(long, value_delimiter = ',', value_parser = crate::cli::parse_size, value_name = "LIST",
          default_values = ["64K", "128K", "256K", "512K", "1M", "4M", "16M"])]
    block_sizes: Vec<u32>,
    /// Modes to try, comma-separated
    #[arg(long = "mode", value_delimiter = ',', value_parser = crate::cli::mode_parser(),
          value_name = "LIST", default_values = ["fast", "best"])]
    modes: Vec<Mode>,
    /// Runs of every setting, alternating between settings; medians are reported
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    runs: u32,
    /// Print CSV instead of a markdown table
    #[arg(long)]
    csv: bool,
    /// Write an SVG chart per file (size, framing, speed and memory against block size) here
    #[arg(long, value_name = "DIR")]
    plot: Option<PathBuf>,
    /// Worker threads for sc (0 = all cores)
    #[arg(short = 'T', long, default_value_t = 0)]
    threads: usize,
}

/// One measured setting.
struct Point {
    mode: Mode,
    block_size: u32,
    blocks: usize,
    size_pct: f64,
    framing_pct: f64,
    encode: f64,
    decode: f64,
    tally: Tally,
}

/// `65536` -> `64K`, `1048576` -> `1M`, other sizes in bytes.
fn size_name(b: u32) -> String {
    match b {
        b if b % (1 << 20) == 0 => format!("{}M", b >> 20),
        b if b % (1 << 10) == 0 => format!("{}K", b >> 10),
        b => b.to_string(),
    }
}

pub fn run(a: &SweepArgs) -> Result<()> {
    let (sc, dir) = measure::prepare(&a.inputs)?;
    let mut table = Table::new(&[
        "file",
        "mode",
        ">block size",
        ">blocks",
        ">size %",
        ">framing %",
        ">encode MB/s",
        ">decode MB/s",
        ">peak MB encode",
        ">peak MB decode",
    ]);
    let mut charts = Vec::new();
    for f in &a.inputs {
        let points = sweep_file(&sc, f, dir.path(), a)?;
        let name = super::analyze::stem(f);
        for p in &points {
            table.row(vec![
                name.clone(),
                p.mode.name().into(),
                size_name(p.block_size),
                p.blocks.to_string(),
                format!("{:.3}", p.size_pct),
                format!("{:.4}", p.framing_pct),
                format!("{:.0}", p.encode),
                format!("{:.0}", p.decode),
                megabytes(p.tally.encode_peak),
                megabytes(p.tally.decode_peak),
            ]);
        }
        if let Some(d) = &a.plot {
            std::fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
            let path = d.join(format!("sweep.{name}.svg"));
            let title = format!("{name}: block size trade-off");
            std::fs::write(&path, plot::svg(&title, &panels(&points)))
                .with_context(|| format!("cannot write {}", path.display()))?;
            charts.push(path);
        }
    }
    measure::done();
    let mut out = match a.csv {
        true => table.csv(),
        false => table.markdown(),
    };
    if !a.csv {
        let threads = measure::threads(a.threads);
        out += &format!(
            "\nMedian of {} runs of `sc encode` and `sc decode` as whole processes, alternating between \
             settings in an order rotated each run, \
             from file to file, page cache warm and nothing left to write back (sync before \
             each step), sc using {threads}; MB/s is original bytes / \
             10^6 per second. Framing is the archive's block records, index, fixed header and \
             trailer, as % of the original (code tables are inside the coded planes and show in size %). \
             Peak MB is the largest resident set of the sc process over the runs (wait4 rusage). \
             Every restored file was compared byte for byte with the original.\n",
            a.runs
        );
        for c in &charts {
            out += &format!("\nChart: {}\n", c.display());
        }
    }
    crate::cli::print_stdout(&out)
}

fn sweep_file(sc: &Path, f: &Path, dir: &Path, a: &SweepArgs) -> Result<Vec<Point>> {
    measure::warm_cache(f)?;
    let len = std::fs::metadata(f)?.len();
    let t = a.threads.to_string();
    let settings: Vec<(Mode, u32)> = a
        .modes
        .iter()
        .flat_map(|&m| a.block_sizes.iter().map(move |&b| (m, b)))
        .collect();
    let trials: Vec<Trial> = settings
        .iter()
        .map(|&(mode, bs)| {
            let archive = dir.join(format!("{}-{bs}.sc", mode.name()));
            let restored = dir.join(format!("{}-{bs}.out", mode.name()));
            let (m, b) = (mode.name(), bs.to_string());
            Trial {
                encode: vec![Step::new(
                    sc,
                    &[
                        &"encode", &"-qf", &"-T", &t, &"-m", &m, &"-b", &b, &f, &"-o", &archive,
                    ],
                )],
                decode: vec![Step::new(
                    sc,
                    &[&"decode", &"-qf", &"-T", &t, &archive, &"-o", &restored],
                )],
                archive,
                restored,
            }
        })
        .collect();
    let tallies = measure::alternate(f, &trials, a.runs, measure::show_run(f, a.runs));
    let mut points = Vec::new();
    for ((&(mode, block_size), trial), tally) in settings.iter().zip(&trials).zip(tallies) {
        if let Some(e) = &tally.error {
            bail!(
                "{}: {} mode, block size {}: {e}",
                f.display(),
                mode.name(),
                size_name(block_size)
            );
        }
        let mut file = File::open(&trial.archive)?;
        let info = sc::inspect(&mut file)
            .with_context(|| format!("reading {}", trial.archive.display()))?;
        let payload: u64 = info.codecs.values().map(|c| c.coded).sum();
        // The kept safetensors header is the file's own bytes, not framing.
        let framing = info.archive_len - payload - info.kept_header_stored;
        let (encode, decode) = tally.speeds(len);
        std::fs::remove_file(&trial.archive)?;
        points.push(Point {
            mode,
            block_size,
            blocks: info.blocks as usize,
            size_pct: 100.0 * info.archive_len as f64 / len.max(1) as f64,
            framing_pct: 100.0 * framing as f64 / len.max(1) as f64,
            encode,
            decode,
            tally,
        });
    }
    Ok(points)
}

/// A named quantity measured at each point.
type Series = (&'static str, fn(&Point) -> f64);

/// Lines of `value` against block size, one per mode (and per `what`, for two-valued panels).
fn lines(points: &[Point], what: &[Series]) -> Vec<Mark> {
    let mut modes: Vec<Mode> = points.iter().map(|p| p.mode).collect();
    modes.dedup();
    let mut marks: Vec<Mark> = Vec::new();
    for (i, m) in modes.iter().enumerate() {
        for (j, (name, value)) in what.iter().enumerate() {
            let pts = points.iter().filter(|p| p.mode == *m);
            let pts: Vec<(f64, f64)> = pts.map(|p| (p.block_size as f64, value(p))).collect();
            let label = match name.is_empty() {
                true => m.name().to_string(),
                false => format!("{} {name}", m.name()),
            };
            // Identical lines (framing depends only on the blocks) would hide one another.
            let same = marks.iter_mut().find_map(|mk| match mk {
                Mark::Line { name, points, .. } if *points == pts => Some(name),
                _ => None,
            });
            match same {
                Some(n) => *n = format!("{n} = {label}"),
                None => marks.push(Mark::Line {
                    name: label,
                    color: plot::COLORS[i % plot::COLORS.len()],
                    points: pts,
                    dashed: j > 0,
                }),
            }
        }
    }
    marks
}

/// The vertical extent of `marks`' lines.
fn extent(marks: &[Mark]) -> (f64, f64) {
    let ys = marks.iter().flat_map(|m| match m {
        Mark::Line { points, .. } => points.iter().map(|p| p.1).collect(),
        _ => Vec::new(),
    });
    ys.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), y| {
        (lo.min(y), hi.max(y))
    })
}

fn peak_mb(peak: Option<u64>) -> f64 {
    peak.unwrap_or(0) as f64 / 1e6
}

fn panels(points: &[Point]) -> Vec<Panel> {
    let sizes: Vec<f64> = {
        let mut s: Vec<u32> = points.iter().map(|p| p.block_size).collect();
        s.sort_unstable();
        s.dedup();
        s.into_iter().map(f64::from).collect()
    };
    let x = Axis::log2("block size (log scale)", &sizes, |v| size_name(v as u32));
    let specs: [(&str, &str, Vec<Series>, bool); 4] = [
        (
            "Archive size (lower is better)",
            "% of original",
            vec![("", |p| p.size_pct)],
            false,
        ),
        (
            "Framing: block records, index, container header (shrinks as blocks grow)",
            "% of original",
            vec![("", |p| p.framing_pct)],
            true,
        ),
        (
            "Speed, whole process (solid: encode, dashed: decode)",
            "MB/s",
            vec![("encode", |p| p.encode), ("decode", |p| p.decode)],
            true,
        ),
        (
            "Peak memory (solid: encode, dashed: decode)",
            "MB resident",
            vec![
                ("encode", |p| peak_mb(p.tally.encode_peak)),
                ("decode", |p| peak_mb(p.tally.decode_peak)),
            ],
            true,
        ),
    ];
    specs
        .into_iter()
        .map(|(title, unit, what, from_zero)| {
            let marks = lines(points, &what);
            let (lo, hi) = extent(&marks);
            let y = match from_zero {
                true => Axis::from_zero(unit, hi),
                false => Axis::linear(unit, lo, hi),
            };
            Panel {
                title: title.into(),
                x: x.clone(),
                y,
                marks,
            }
        })
        .collect()
}
