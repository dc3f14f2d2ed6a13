//! `sc analyze`: the entropy analysis behind the split-stream design, as tables and histograms.

use super::analysis::{Analysis, Counts, DtypeAnalysis};
use super::plot::{self, Axis, Mark, Panel};
use super::table::Table;
use crate::cli::text::printable;
use anyhow::{Context, Result};
use clap::Args;
use std::fmt::Write as _;
use std::fs::File;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct AnalyzeArgs {
    /// safetensors or GGUF file to analyse
    input: PathBuf,
    /// Largest tensors to list one by one
    #[arg(long, default_value_t = 10)]
    top: usize,
    /// Write SVG histograms of each dtype's byte planes and exponent into this directory
    #[arg(long, value_name = "DIR")]
    plot: Option<PathBuf>,
}

/// A library error as a message: the library's own "invalid argument: " prefix would only be
/// noise in front of "not a safetensors file".
pub(super) fn plain(e: sc::Error) -> anyhow::Error {
    match e {
        sc::Error::InvalidArgument(m) => anyhow::anyhow!(m),
        e => e.into(),
    }
}

fn open(path: &Path) -> Result<File> {
    File::open(path).with_context(|| format!("cannot open {}", path.display()))
}

/// Fails with a one-line reason unless `path` is a safetensors or GGUF file.
pub fn check_weights(path: &Path) -> Result<()> {
    if is_gguf(path)? {
        sc::lab::gguf::read_gguf_header(&mut open(path)?)
            .map_err(plain)
            .with_context(|| path.display().to_string())?;
        return Ok(());
    }
    sc::lab::read_file_header(&mut open(path)?)
        .map_err(plain)
        .with_context(|| path.display().to_string())?;
    Ok(())
}

pub fn run(a: &AnalyzeArgs) -> Result<()> {
    if is_gguf(&a.input)? {
        if a.plot.is_some() {
            anyhow::bail!("--plot draws safetensors files only");
        }
        let an = sc::lab::gguf::analyze_gguf(&mut open(&a.input)?)
            .map_err(plain)
            .with_context(|| a.input.display().to_string())?;
        return crate::cli::print_stdout(&gguf_report(&a.input, &an)?);
    }
    let an = super::analysis::analyze(&mut open(&a.input)?)
        .map_err(plain)
        .with_context(|| a.input.display().to_string())?;
    let mut t = report(&a.input, &an, a.top)?;
    if let Some(dir) = &a.plot {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        writeln!(t, "\nHistograms:")?;
        let mut unknown = 0;
        for d in &an.dtypes {
            // File names come from known dtypes only: the header's text never makes a path.
            let kind = match sc::Dtype::parse(&d.dtype) {
                Some(dt) => dt.name().to_string(),
                None => {
                    unknown += 1;
                    format!("unknown-dtype-{unknown}")
                }
            };
            let path = dir.join(format!("{}.{kind}.svg", stem(&a.input)));
            let title = format!(
                "{}: {} ({} elements in {} tensor{})",
                stem(&a.input),
                printable(&d.dtype),
                d.counts.elements,
                d.tensors,
                if d.tensors == 1 { "" } else { "s" }
            );
            std::fs::write(&path, plot::svg(&title, &panels(d)))
                .with_context(|| format!("cannot write {}", path.display()))?;
            writeln!(t, "- {}", path.display())?;
        }
    }
    crate::cli::print_stdout(&t)
}

/// Whether `path` starts with GGUF's magic bytes.
pub(super) fn is_gguf(path: &Path) -> Result<bool> {
    let mut magic = [0u8; 4];
    let n = std::io::Read::read(&mut open(path)?, &mut magic)
        .with_context(|| format!("cannot read {}", path.display()))?;
    Ok(n == 4 && magic == *b"GGUF")
}

/// The field entropies of a GGUF file, per ggml type, and the size they bound it to.
fn gguf_report(path: &Path, an: &sc::lab::gguf::GgufAnalysis) -> Result<String> {
    let mut t = String::new();
    let pct = |b: f64| 100.0 * b / an.file_len.max(1) as f64;
    let tensors: usize = an.types.iter().map(|ty| ty.tensors).sum();
    writeln!(
        t,
        "{}: GGUF version {}, {} bytes, {} tensors; header {} bytes ({} deflated), padding {} \
         bytes\n",
        path.display(),
        an.version,
        an.file_len,
        tensors,
        an.header_len,
        an.header_deflated,
        an.padding
    )?;
    writeln!(
        t,
        "Order-0 entropy of each field of each type's blocks (bits per symbol; per tensor: \
         each tensor's field with its own statistics, averaged; pooled: the type's tensors \
         together):\n"
    )?;
    let mut table = Table::new(&[
        "type",
        ">tensors",
        ">% of file",
        "field",
        ">bits",
        ">per tensor",
        ">pooled",
        ">bound % of field",
    ]);
    for ty in &an.types {
        for (i, f) in ty.fields.iter().enumerate() {
            let first = |s: String| if i == 0 { s } else { String::new() };
            let per_symbol = f.tensor_bits / f.symbols.max(1) as f64;
            table.row(vec![
                ty.name.to_string(),
                first(ty.tensors.to_string()),
                first(f2(pct(ty.bytes as f64))),
                printable(&f.name).into_owned(),
                f.symbol_bits.to_string(),
                f4(per_symbol),
                f4(f.pooled_bits_per_symbol),
                match f.in_bound {
                    true => f2(100.0 * f.tensor_bits / 8.0 / f.bytes.max(1) as f64),
                    false => "(joined)".into(),
                },
            ]);
        }
    }
    t += &table.markdown();
    writeln!(
        t,
        "\nBound: {:.0} bytes, {:.2}% of the file (the fields at their per-tensor order-0 \
         entropy, the header deflated, the padding stored)",
        an.bound_bytes(),
        pct(an.bound_bytes())
    )?;
    Ok(t)
}

/// The file name without its directory and its `.safetensors` extension.
pub fn stem(p: &Path) -> String {
    let name = p.file_name().unwrap_or(p.as_os_str()).to_string_lossy();
    name.trim_end_matches(".safetensors").to_string()
}

/// Four decimals; an entropy of -0 (from summing -p log p with p = 1) prints as 0.
fn f4(x: f64) -> String {
    format!("{:.4}", x + 0.0)
}

fn f2(x: f64) -> String {
    format!("{:.2}", x + 0.0)
}

fn opt(x: Option<f64>) -> String {
    x.map_or("-".into(), f4)
}

fn report(path: &Path, an: &Analysis, top: usize) -> Result<String> {
    let mut t = String::new();
    let pct = |b: u64| 100.0 * b as f64 / an.file_len.max(1) as f64;
    writeln!(
        t,
        "{}: {} bytes, {} tensors; header {} bytes ({:.3}%)\n",
        path.display(),
        an.file_len,
        an.tensors.len(),
        an.header_len,
        pct(an.header_len)
    )?;
    writeln!(
        t,
        "Order-0 entropy of each plane and field, and the conditional entropies the design \
         relies on (bits per element of the field):\n"
    )?;
    let mut planes = Table::new(&[
        "dtype",
        ">tensors",
        ">elements",
        ">% of file",
        "plane or field",
        ">bits",
        ">entropy",
        ">% of bits",
    ]);
    for d in &an.dtypes {
        let l = d.counts.layout;
        let e = d.entropies();
        let mut rows: Vec<(String, u32, f64)> = (0..l.width)
            .map(|k| (l.plane_name(k), 8, e.planes[k]))
            .collect();
        if let (Some((_, eb)), Some(ex), Some(sm)) = (l.exponent, e.exponent, e.sign_mantissa) {
            rows.push(("exponent".into(), eb, ex));
            rows.push(("sign + mantissa (top word)".into(), l.word_bits - eb, sm));
        }
        if let Some(c) = e.second_given_high() {
            rows.push((
                format!("{} given {}", l.plane_name(1), l.plane_name(0)),
                8,
                c,
            ));
        }
        if let (Some((_, eb)), Some(c)) = (l.exponent, e.sign_mantissa_given_exponent()) {
            rows.push(("sign + mantissa given exponent".into(), l.word_bits - eb, c));
        }
        if l.width >= 2 {
            rows.push(("top word (2 high bytes) jointly".into(), 16, e.word));
        }
        for (i, (name, bits, h)) in rows.into_iter().enumerate() {
            let first = |s: String| if i == 0 { s } else { String::new() };
            planes.row(vec![
                printable(&d.dtype).into_owned(),
                first(d.tensors.to_string()),
                first(d.counts.elements.to_string()),
                first(f2(pct(d.bytes))),
                name,
                bits.to_string(),
                f4(h),
                f2(100.0 * h / bits as f64),
            ]);
        }
    }
    t += &planes.markdown();
    writeln!(
        t,
        "\nLower bounds for coders that model the data that way (other bytes stored as they are):\n"
    )?;
    let mut bounds = Table::new(&[
        "dtype",
        "model",
        ">bits/element",
        ">% of dtype data",
        ">% of file",
    ]);
    for d in &an.dtypes {
        let raw = d.raw_bits();
        let stored = std::iter::once(("stored as is", raw));
        for (name, bits) in stored.chain(d.bounds().iter().map(|b| (b.name, b.bits))) {
            bounds.row(vec![
                printable(&d.dtype).into_owned(),
                name.into(),
                f4(bits),
                f2(100.0 * bits / raw),
                f2(an.file_percent(d, bits)),
            ]);
        }
    }
    t += &bounds.markdown();
    writeln!(
        t,
        "\nEvery dtype at its per-tensor joint bound: {:.2}% of the file.\n",
        an.best_percent()
    )?;
    writeln!(
        t,
        "Largest tensors ({} of {}; entropies in bits; \"2nd\" is the low byte of 16-bit types):\n",
        top.min(an.tensors.len()),
        an.tensors.len()
    )?;
    let mut tensors = Table::new(&[
        "tensor",
        "dtype",
        "shape",
        ">MB",
        ">high",
        ">2nd",
        ">2nd given high",
        ">exponent",
        ">sign+mantissa",
        ">joint bits/element",
        ">% of tensor",
    ]);
    for ts in an.tensors.iter().take(top) {
        let e = &ts.entropies;
        let raw = 8.0 * ts.bytes as f64 / ts.elements.max(1) as f64;
        let shape: Vec<String> = ts.shape.iter().map(|d| d.to_string()).collect();
        tensors.row(vec![
            printable(&ts.name).into_owned(),
            printable(&ts.dtype).into_owned(),
            format!("[{}]", shape.join(", ")),
            f2(ts.bytes as f64 / 1e6),
            f4(e.planes[0]),
            opt(e.planes.get(1).copied()),
            opt(e.second_given_high()),
            opt(e.exponent),
            opt(e.sign_mantissa),
            f4(e.joint()),
            f2(100.0 * e.joint() / raw),
        ]);
    }
    t += &tensors.markdown();
    Ok(t)
}

/// Bars of the values `shown` of a histogram, as percentages of its total; and the tallest.
fn percent_bars(h: &[u64], shown: RangeInclusive<usize>, color: &'static str) -> (Mark, f64) {
    let total = h.iter().sum::<u64>().max(1) as f64;
    let points: Vec<(f64, f64)> = h
        .iter()
        .enumerate()
        .filter(|&(v, &c)| c > 0 && shown.contains(&v))
        .map(|(v, &c)| (v as f64, 100.0 * c as f64 / total))
        .collect();
    let top = points.iter().map(|p| p.1).fold(0.0, f64::max);
    let bars = Mark::Bars {
        color,
        points,
        width: 0.8,
    };
    (bars, top)
}

/// The range of values holding all but about 0.01% of a histogram at each end (so that a few
/// zeros or outliers do not squeeze the interesting part into a sliver), widened by two, and
/// how many elements fall outside it.
fn central(h: &[u64]) -> (usize, usize, u64) {
    let total: u64 = h.iter().sum();
    let tail = total / 10_000;
    let mut acc = 0;
    let lo = h.iter().position(|&c| {
        acc += c;
        acc > tail
    });
    acc = 0;
    let hi = h.iter().rposition(|&c| {
        acc += c;
        acc > tail
    });
    let (lo, hi) = (lo.unwrap_or(0), hi.unwrap_or(h.len() - 1));
    let (lo, hi) = (lo.saturating_sub(2), (hi + 2).min(h.len() - 1));
    let outside = h[..lo].iter().chain(&h[hi + 1..]).sum();
    (lo, hi, outside)
}

/// One panel per byte plane (at most three for wide types: the two high ones and the lowest)
/// and one for the exponent.
fn panels(d: &DtypeAnalysis) -> Vec<Panel> {
    let c: &Counts = &d.counts;
    let l = c.layout;
    let e = d.entropies();
    let mut out = Vec::new();
    let shown: Vec<usize> = match l.width {
        w if w <= 4 => (0..w).collect(),
        w => vec![0, 1, w - 1],
    };
    let hex_ticks: Vec<(f64, String)> = (0..=8)
        .map(|i| (i as f64 * 32.0, format!("0x{:02X}", (i * 32).min(255))))
        .collect();
    for k in shown {
        let (bars, top) = percent_bars(&c.plane(k), 0..=255, plot::COLORS[0]);
        let uniform = 100.0 / 256.0;
        out.push(Panel {
            title: format!("{}: H = {:.3} of 8 bits", l.plane_name(k), e.planes[k]),
            x: Axis::with_ticks("byte value", -1.0, 256.0, hex_ticks.clone()),
            y: Axis::from_zero("% of elements", top.max(uniform)),
            marks: vec![
                bars,
                Mark::Rule {
                    name: "uniform (8 bits)".into(),
                    color: plot::COLORS[1],
                    y: uniform,
                },
            ],
        });
    }
    if let (Some(h), Some((_, bits)), Some(ex)) = (c.exponent(), l.exponent, e.exponent) {
        let (lo, hi, outside) = central(&h);
        let (bars, top) = percent_bars(&h, lo..=hi, plot::COLORS[2]);
        let bias = (1u32 << (bits - 1)) - 1;
        let label = format!("exponent field (value = 2^(field - {bias}))");
        let (a, b) = (lo as f64 - 0.5, hi as f64 + 0.5);
        let note = match outside {
            0 => String::new(),
            n => format!("; {n} elements outside the range shown"),
        };
        out.push(Panel {
            title: format!("exponent ({bits} bits): H = {ex:.3} bits{note}"),
            x: Axis::with_ticks(&label, a, b, Axis::linear("", a, b).ticks_within(a, b)),
            y: Axis::from_zero("% of elements", top),
            marks: vec![bars],
        });
    }
    out
}
