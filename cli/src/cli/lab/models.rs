//! `sc models`: every coder variant over the BF16/F16 tensors of a file, block by block, next
//! to the order-0 entropies that bound them.

use crate::cli::{parse_size, print_stdout, with_threads, Common};
use anyhow::{Context, Result};
use clap::Args;
use std::fmt::Write as _;
use std::fs::File;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct ModelsArgs {
    /// safetensors file to measure
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
    let rep = sc::lab::models::compare_models(&mut f, a.block_size)
        .with_context(|| format!("measuring {}", a.input.display()))?;
    let data = rep.values as f64 * 2.0;
    let other = file_len as f64 - data;
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
    print_stdout(&t)
}
