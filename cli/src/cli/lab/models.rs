//! `sc models`: every coder variant over the BF16/F16 tensors of a file, block by block, next
//! to the order-0 entropies that bound them; for a GGUF file, over each plane of its quantized
//! types' blocks, next to what FAST and BEST store.

use super::analyze::{is_gguf, plain};
use super::table::Table;
use crate::cli::{parse_size, print_stdout, with_threads, Common};
use anyhow::{Context, Result};
use clap::Args;
use sc::lab::models::ModelReport;
use sc::lab::models_gguf::{row, GgufModels, ROWS};
use std::fmt::Write as _;
use std::fs::File;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct ModelsArgs {
    /// safetensors or GGUF file to measure
    input: PathBuf,
    /// Block size the coders see (as in encode)
    #[arg(short, long, default_value = "1M", value_parser = parse_size)]
    block_size: u32,
    #[command(flatten)]
    common: Common,
}

/// Runs `sc models`.
pub fn run(a: &ModelsArgs) -> Result<()> {
    with_threads(&a.common, || measure(a))
}

fn measure(a: &ModelsArgs) -> Result<()> {
    let mut f =
        File::open(&a.input).with_context(|| format!("cannot open {}", a.input.display()))?;
    let file_len = f.metadata()?.len();
    if is_gguf(&a.input)? {
        let rep = sc::lab::models_gguf::compare_gguf_models(&mut f, a.block_size)
            .map_err(plain)
            .with_context(|| a.input.display().to_string())?;
        return print_stdout(&gguf_report(a, &rep)?);
    }
    let rep = sc::lab::models::compare_models(&mut f, a.block_size)
        .with_context(|| format!("measuring {}", a.input.display()))?;
    let data = rep.values as f64 * 2.0;
    let mut t = String::new();
    writeln!(
        t,
        "{}: {} BF16/F16 values ({:.1}% of the file) in {} blocks of up to {} bytes, a tensor's \
         values to a block ({} blocks as BEST plans them)\n",
        a.input.display(),
        rep.values,
        100.0 * data / file_len.max(1) as f64,
        rep.blocks,
        a.block_size,
        rep.best_blocks
    )?;
    half_table(&mut t, &rep, file_len)?;
    print_stdout(&t)
}

/// The table of the 16-bit float variants of `rep`, in a file of `file_len` bytes.
fn half_table(t: &mut String, rep: &ModelReport, file_len: u64) -> Result<()> {
    let data = rep.values as f64 * 2.0;
    let other = file_len as f64 - data;
    writeln!(
        t,
        "| model variant | bits/value | % of 16-bit data | file % if the rest is stored |"
    )?;
    writeln!(t, "|---|---:|---:|---:|")?;
    for row in &rep.rows {
        writeln!(
            t,
            "| {} | {:.4} | {:.3} | {:.3} |",
            row.name,
            rep.bits_per_value(row),
            100.0 * row.bytes / data,
            100.0 * (row.bytes + other) / file_len.max(1) as f64
        )?;
    }
    Ok(())
}

/// `bytes` as a percentage of `of`, with three decimals.
fn pct(bytes: f64, of: u64) -> String {
    format!("{:.3}", 100.0 * bytes / of.max(1) as f64)
}

/// The measurements of a GGUF file: a table per quantized type (a column per plane), the
/// other blocks, the F16/BF16 variants, and the totals.
fn gguf_report(a: &ModelsArgs, rep: &GgufModels) -> Result<String> {
    let an = &rep.analysis;
    let file = an.file_len;
    let mut t = String::new();
    writeln!(
        t,
        "{}: GGUF version {}, {} bytes; header {} bytes ({} deflated, as the archive keeps \
         it); {} archive blocks of up to {} bytes as encode plans them\n",
        a.input.display(),
        an.version,
        file,
        an.header_len,
        an.header_deflated,
        rep.blocks,
        rep.block_size
    )?;
    writeln!(
        t,
        "Each quantized type's planes, each coded on its own in each archive block: bytes as % \
         of the plane's bytes (the joined quants take a byte a value), and the type's total as \
         % of its bytes where the row applies to every plane; \"-\" where it does not apply.\n"
    )?;
    for q in &rep.quant {
        writeln!(
            t,
            "{}: {} tensors, {} bytes ({}% of the file) in {} blocks; its fields' order-0 \
             bound (sc analyze): {}% of its bytes\n",
            q.name,
            q.tensors,
            q.bytes,
            pct(q.bytes as f64, file),
            q.blocks,
            pct(q.field_bound, q.bytes)
        )?;
        write!(t, "| model variant |")?;
        for p in &q.planes {
            write!(t, " {} |", p.name)?;
        }
        writeln!(t, " {} |", q.name)?;
        writeln!(t, "|---|{}---:|", "---:|".repeat(q.planes.len()))?;
        write!(t, "| plane bytes |")?;
        for p in &q.planes {
            write!(t, " {} |", p.bytes)?;
        }
        writeln!(t, " {} |", q.bytes)?;
        for (r, name) in ROWS.iter().enumerate() {
            write!(t, "| {name} |")?;
            for p in &q.planes {
                let cell = p.sizes[r].map_or("-".into(), |b| pct(b, p.bytes));
                write!(t, " {cell} |")?;
            }
            let total = q.total(r).map_or("-".into(), |b| pct(b, q.bytes));
            writeln!(t, " {total} |")?;
        }
        for (name, which) in [
            ("smallest: coders (blocks)", 0),
            ("sc fast: codecs (blocks)", 1),
            ("sc best: codecs (blocks)", 2),
        ] {
            write!(t, "| {name} |")?;
            for p in &q.planes {
                let codecs = [&p.smallest_coders, &p.fast_codecs, &p.best_codecs][which];
                let list: Vec<String> = codecs.iter().map(|(c, n)| format!("{c} {n}")).collect();
                write!(t, " {} |", list.join(", "))?;
            }
            writeln!(t, " |")?;
        }
        writeln!(t)?;
    }
    if rep.quant.is_empty() {
        writeln!(
            t,
            "No tensors of a quantized type coded in planes of its fields.\n"
        )?;
    }
    writeln!(
        t,
        "The other blocks, as FAST and BEST code them (% of their bytes):\n"
    )?;
    let mut table = Table::new(&[
        "holding",
        "transform",
        ">tensors",
        ">bytes",
        ">% of file",
        ">sc fast",
        ">sc best",
    ]);
    for p in &rep.plain {
        table.row(vec![
            p.name.clone(),
            p.transform.to_string(),
            p.tensors.to_string(),
            p.bytes.to_string(),
            pct(p.bytes as f64, file),
            pct(p.fast as f64, p.bytes),
            pct(p.best as f64, p.bytes),
        ]);
    }
    t += &table.markdown();
    writeln!(t)?;
    match &rep.half {
        Some(h) => {
            writeln!(
                t,
                "The F16 and BF16 tensors: {} values in {} blocks, a tensor's values to a block \
                 ({} blocks as BEST plans them):\n",
                h.values, h.blocks, h.best_blocks
            )?;
            half_table(&mut t, h, file)?;
            writeln!(t)?;
        }
        None => writeln!(
            t,
            "No F16 or BF16 tensors: the 16-bit float variants have nothing to measure.\n"
        )?,
    }
    let data = rep.data_bytes();
    let head = an.header_deflated as f64;
    writeln!(t, "Totals (payloads, without block records and index):\n")?;
    writeln!(
        t,
        "| | bytes | % of the data after the header | % of the file |"
    )?;
    writeln!(t, "|---|---:|---:|---:|")?;
    // Each row's share of the file counts the header as the archive keeps it, but the first's.
    let mut total = |name: &str, bytes: f64, header: f64| {
        let whole = bytes + header;
        writeln!(
            t,
            "| {name} | {:.0} | {} | {} |",
            bytes,
            pct(bytes, data),
            pct(whole, file)
        )
    };
    total(
        "data after the header (tensors and padding)",
        data as f64,
        0.0,
    )?;
    total(
        "order-0 bound of its fields (sc analyze; the header deflated)",
        rep.data_bound(),
        head,
    )?;
    total(
        "sc fast (the header deflated)",
        rep.fast_bytes() as f64,
        head,
    )?;
    total(
        "sc best (the header deflated)",
        rep.best_bytes() as f64,
        head,
    )?;
    let smallest: f64 = rep
        .quant
        .iter()
        .filter_map(|q| q.total(row::SMALLEST))
        .sum::<f64>()
        + rep.plain.iter().map(|p| p.best as f64).sum::<f64>();
    total(
        "smallest measured coder per plane and block, the rest as sc best",
        smallest,
        head,
    )?;
    Ok(t)
}
