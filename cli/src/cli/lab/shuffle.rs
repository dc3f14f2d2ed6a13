//! `sc shuffle`: a file's byte planes as FAST splits them, uncoded, for other compressors.

use anyhow::{Context, Result};
use clap::Args;
use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct ShuffleArgs {
    /// File to shuffle; with --undo, a shuffled stream ('-' for stdin)
    input: PathBuf,
    /// Restore the original file from a shuffled stream
    #[arg(long)]
    undo: bool,
    /// Block size, as in encode
    #[arg(short, long, default_value = "1M", value_parser = crate::cli::parse_size)]
    block_size: u32,
    /// Output file (default: stdout)
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Overwrite an existing output file
    #[arg(short, long)]
    force: bool,
}

pub fn run(a: &ShuffleArgs) -> Result<()> {
    let dest = a.output.as_deref().filter(|o| !crate::cli::is_stdio(o));
    let what = crate::cli::name(&a.input);
    let settings = crate::cli::output::Settings {
        force: a.force,
        binary: true,
        ..Default::default()
    };
    crate::cli::write_with(dest, &settings, |out| {
        if a.undo {
            let (mut input, _) = crate::cli::open_input(&a.input)?;
            sc::lab::shuffle::unshuffle(&mut input, out)
                .with_context(|| format!("restoring {what}"))?;
        } else {
            let f = File::open(&a.input)
                .with_context(|| format!("cannot open {}", a.input.display()))?;
            let mut input = BufReader::with_capacity(1 << 20, f);
            sc::lab::shuffle::shuffle(&mut input, out, a.block_size)
                .with_context(|| format!("shuffling {what}"))?;
        }
        Ok(())
    })
    .map(drop)
}
