//! The `sc` command line: argument parsing and the thin glue between files and the library.

mod access;
mod folder;
mod lab;
mod output;
mod verify;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use md5::{Digest, Md5};
use output::Output;
use sc::{DecodeOptions, EncodeOptions, Kind, Mode};
use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, BufReader, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Lossless compression for LLM weight files (safetensors).
#[derive(Parser, Debug)]
#[command(name = "sc", version, about, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Compress a file (default output: INPUT.sc)
    Encode(EncodeArgs),
    /// Restore the original file from an archive (default output: INPUT without .sc)
    Decode(DecodeArgs),
    /// Decode without writing; check every block checksum and the MD5 (and ORIGINAL's MD5);
    /// several archives or directories: one line per archive and a total
    Verify(VerifyArgs),
    /// Show an archive's mode, sizes, codecs, dtypes and the kept safetensors header
    Info(InfoArgs),
    /// List the tensors of a safetensors archive: dtype, shape, original and compressed bytes
    List(access::ListArgs),
    /// Write chosen tensors as a safetensors file (or raw bytes), decoding only their blocks
    /// (default output: INPUT without .sc and .safetensors, plus .extract.safetensors or .bin)
    Extract(access::ExtractArgs),
    /// Bits per value of each model variant on a safetensors file's BF16/F16 tensors, next to
    /// the order-0 entropies
    #[command(hide = true)]
    Models(lab::models::ModelsArgs),
    /// Entropy of each byte plane, the exponent and sign/mantissa, conditional entropies and
    /// the bounds they set, per dtype and per tensor; --plot for histograms
    #[command(hide = true)]
    Analyze(lab::analyze::AnalyzeArgs),
    /// Size, speed and peak memory of each mode against block size
    #[command(hide = true)]
    Sweep(lab::sweep::SweepArgs),
    /// sc fast and best next to zstd -1 and cp (--against: xz, bzip2, gzip, shuffle+zstd,
    /// other levels), on the same files in the same run, round trips checked
    #[command(hide = true)]
    Bench(lab::bench::BenchArgs),
    /// Write a file's byte planes as FAST splits them, uncoded (the baseline behind
    /// `bench --against shuffle-zstd`), or restore the file with --undo
    #[command(hide = true)]
    Shuffle(lab::shuffle::ShuffleArgs),
}

/// Parses the command line. The experiment commands are hidden from clap's own list of
/// commands and listed under a heading of their own after it.
pub fn parse() -> Cli {
    use clap::{CommandFactory, FromArgMatches};
    let command = lab::with_heading(Cli::command());
    let matches = command.get_matches();
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

#[derive(Args, Debug)]
struct Common {
    /// Worker threads (0 = all cores)
    #[arg(short = 'T', long, default_value_t = 0)]
    threads: usize,
    /// No progress bar and no summary line
    #[arg(short, long)]
    quiet: bool,
}

#[derive(Args, Debug)]
struct OutputArgs {
    /// Output file ('-' for stdout)
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Write to stdout
    #[arg(short = 'c', long)]
    stdout: bool,
    /// Overwrite an existing output file
    #[arg(short, long)]
    force: bool,
}

#[derive(Args, Debug)]
struct EncodeArgs {
    /// File to compress ('-' for stdin)
    input: PathBuf,
    /// fast: Huffman-coded exponent plane, raw low plane; best: range coder on every plane
    #[arg(short, long, default_value = "fast", value_parser = mode_parser())]
    mode: Mode,
    /// Block size: bytes or with K/M suffix (KiB/MiB), even, 4K to 64M
    #[arg(short, long, default_value = "1M", value_parser = parse_size)]
    block_size: u32,
    #[command(flatten)]
    out: OutputArgs,
    /// Record the input's MD5 in the archive (BEST's default; FAST leaves it out because MD5
    /// alone runs slower than FAST's coding; blocks always carry checksums)
    #[arg(long, overrides_with = "no_md5")]
    md5: bool,
    /// Do not record the input's MD5, even in BEST mode
    #[arg(long)]
    no_md5: bool,
    /// Delete INPUT once the archive is written and verified by decoding it back (records the
    /// MD5, to compare)
    #[arg(long)]
    rm: bool,
    #[command(flatten)]
    common: Common,
}

#[derive(Args, Debug)]
struct DecodeArgs {
    /// Archive to restore ('-' for stdin)
    input: PathBuf,
    /// Also compute the output's MD5 and compare it with the recorded one (block checksums are
    /// always checked)
    #[arg(long)]
    md5: bool,
    /// Delete INPUT once the restored file is written and its MD5 checked, also on disk
    #[arg(long)]
    rm: bool,
    #[command(flatten)]
    out: OutputArgs,
    #[command(flatten)]
    common: Common,
}

#[derive(Args, Debug)]
struct VerifyArgs {
    /// Archives, or directories holding them (every *.sc below). `ARCHIVE ORIGINAL`: a second
    /// path that is not an archive is the original file, whose MD5 must equal the archive's
    #[arg(required = true, value_name = "PATH")]
    paths: Vec<PathBuf>,
    #[command(flatten)]
    common: Common,
}

#[derive(Args, Debug)]
struct InfoArgs {
    /// Archive to describe
    input: PathBuf,
}

/// Parses `4096`, `12K`, `1M`, `1MiB`, `64m`.
fn parse_size(s: &str) -> std::result::Result<u32, String> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let (num, mult) = match lower.trim_end_matches("ib").trim_end_matches('b') {
        x if x.ends_with('k') => (&x[..x.len() - 1], 1u64 << 10),
        x if x.ends_with('m') => (&x[..x.len() - 1], 1u64 << 20),
        x => (x, 1),
    };
    let n: u64 = num
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a size (examples: 4096, 64K, 1M)"))?;
    let bytes = n.checked_mul(mult).filter(|&b| b <= u32::MAX as u64);
    let bytes = bytes.ok_or_else(|| format!("'{s}' is too large"))? as u32;
    EncodeOptions::check_block_size(bytes).map_err(|e| match e {
        sc::Error::InvalidArgument(m) => m,
        e => e.to_string(),
    })?;
    Ok(bytes)
}

/// Parses `fast` or `best`, listing both in help and in errors.
pub(crate) fn mode_parser() -> impl clap::builder::TypedValueParser<Value = Mode> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(["fast", "best"])
        .try_map(|s| s.parse::<Mode>().map_err(|e| e.to_string()))
}

/// Runs the parsed command line.
pub fn run(cli: Cli) -> Result<()> {
    output::install_interrupt_cleanup();
    match cli.command {
        Command::Encode(a) => with_threads(a.common.threads, || encode(&a)),
        Command::Decode(a) => with_threads(a.common.threads, || decode(&a)),
        Command::Verify(a) => with_threads(a.common.threads, || verify(&a)),
        Command::Info(a) => info(&a),
        Command::List(a) => access::list(&a),
        Command::Extract(a) => access::extract(&a),
        Command::Models(a) => lab::models::run(&a),
        Command::Analyze(a) => lab::analyze::run(&a),
        Command::Sweep(a) => lab::sweep::run(&a),
        Command::Bench(a) => lab::bench::run(&a),
        Command::Shuffle(a) => lab::shuffle::run(&a),
    }
}

fn with_threads<T: Send>(threads: usize, f: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .context("cannot start worker threads")?;
    pool.install(f)
}

fn is_stdio(p: &Path) -> bool {
    p.as_os_str() == "-"
}

/// Buffer size for file and pipe I/O. Blocks (and their coded forms) are larger, so the
/// buffers only gather the small records between them: block data goes straight between the
/// kernel and the pipeline's own buffers, never copied through these.
pub(crate) const IO_BUFFER: usize = 64 << 10;

/// Opens an input; returns the reader and its length when it is a regular file.
fn open_input(path: &Path) -> Result<(Box<dyn Read + Send>, Option<u64>)> {
    if is_stdio(path) {
        return Ok((
            Box::new(BufReader::with_capacity(IO_BUFFER, io::stdin())),
            None,
        ));
    }
    let (f, len) = open_file(path)?;
    Ok((Box::new(BufReader::with_capacity(IO_BUFFER, f)), len))
}

/// Opens a file that is not a directory; its length when it is a regular file.
fn open_file(path: &Path) -> Result<(File, Option<u64>)> {
    let f = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let meta = f
        .metadata()
        .with_context(|| format!("cannot read {}", path.display()))?;
    if meta.is_dir() {
        bail!("{} is a directory", path.display());
    }
    Ok((f, meta.is_file().then_some(meta.len())))
}

/// An archive to decode: a named file (which the library reads through memory maps when it is
/// a regular one), or standard input.
enum ArchiveInput {
    File(File, Option<u64>),
    Stream(Box<dyn Read + Send>),
}

impl ArchiveInput {
    fn open(path: &Path) -> Result<ArchiveInput> {
        if is_stdio(path) {
            let (reader, _) = open_input(path)?;
            return Ok(ArchiveInput::Stream(reader));
        }
        let (f, len) = open_file(path)?;
        Ok(ArchiveInput::File(f, len))
    }

    /// Length of the archive, when it is known.
    fn len(&self) -> Option<u64> {
        match self {
            ArchiveInput::File(_, len) => *len,
            ArchiveInput::Stream(_) => None,
        }
    }

    fn decode<W: Write + Send>(
        self,
        out: W,
        check_md5: bool,
        progress: &(dyn Fn(u64) + Sync),
    ) -> sc::Result<sc::DecodeReport> {
        let opts = DecodeOptions {
            check_md5,
            archive_len: self.len(),
            progress: Some(progress),
            ..Default::default()
        };
        match self {
            ArchiveInput::File(f, _) => sc::decode_file(&f, out, &opts),
            ArchiveInput::Stream(r) => sc::decode(r, out, &opts),
        }
    }
}

/// Chooses the destination: `None` means stdout.
fn destination(
    input: &Path,
    out: &OutputArgs,
    default: impl Fn(&Path) -> Result<PathBuf>,
) -> Result<Option<PathBuf>> {
    let dest = match &out.output {
        Some(o) if is_stdio(o) => None,
        Some(o) => Some(o.clone()),
        None if out.stdout || is_stdio(input) => None,
        None => Some(default(input)?),
    };
    if let Some(d) = &dest {
        if !is_stdio(input) && same_file(input, d) {
            bail!("output {} is the input file", d.display());
        }
    }
    Ok(dest)
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

fn progress_bar(total: Option<u64>, quiet: bool) -> ProgressBar {
    if quiet || !io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = match total {
        Some(t) => ProgressBar::new(t).with_style(
            ProgressStyle::with_template(
                "{bar:40} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        ),
        None => ProgressBar::new_spinner(),
    };
    bar.set_draw_target(ProgressDrawTarget::stderr());
    bar
}

fn name(p: &Path) -> String {
    if is_stdio(p) {
        "stdin".into()
    } else {
        p.display().to_string()
    }
}

fn mb_per_s(bytes: u64, start: Instant) -> f64 {
    bytes as f64 / 1e6 / start.elapsed().as_secs_f64().max(1e-9)
}

/// Runs `job` writing to `dest`; commits on success and removes the temporary file otherwise.
fn write_with<T>(
    dest: Option<&Path>,
    force: bool,
    binary: bool,
    job: impl FnOnce(&mut Output) -> Result<T>,
) -> Result<T> {
    let mut out = Output::open(dest, force, binary)?;
    match job(&mut out) {
        Ok(v) => {
            out.commit()?;
            Ok(v)
        }
        Err(e) => {
            out.abandon();
            Err(e)
        }
    }
}

fn encode(a: &EncodeArgs) -> Result<()> {
    if folder::is_dir(&a.input) {
        return folder::encode(a);
    }
    let dest = destination(&a.input, &a.out, |p| Ok(folder::archive_name(p)))?;
    let len = input_len(&a.input);
    let bar = progress_bar(len, a.common.quiet);
    let start = Instant::now();
    let report = encode_one(&a.input, dest.as_deref(), a, &|n| bar.set_position(n))?;
    bar.finish_and_clear();
    if !a.common.quiet {
        let pct = 100.0 * report.archive_len as f64 / report.original_len.max(1) as f64;
        let how = match (report.kind, &report.generic_reason) {
            (Kind::Safetensors, _) => String::new(),
            (Kind::Generic, Some(r)) => format!(" [not safetensors: {r}; generic path]"),
            (Kind::Generic, None) => " [generic path]".into(),
        };
        note(format_args!(
            "{}: {} -> {} bytes ({pct:.2}%), {}, {:.0} MB/s{how}",
            name(&a.input),
            report.original_len,
            report.archive_len,
            a.mode.name(),
            mb_per_s(report.original_len, start)
        ));
    }
    Ok(())
}

/// Length of a regular input file, for progress (`None` for stdin, pipes and errors).
fn input_len(path: &Path) -> Option<u64> {
    match is_stdio(path) {
        true => None,
        false => std::fs::metadata(path)
            .ok()
            .filter(|m| m.is_file())
            .map(|m| m.len()),
    }
}

/// Encodes `input` into `dest` (`None`: stdout) with `a`'s settings, then handles `--rm`.
fn encode_one(
    input: &Path,
    dest: Option<&Path>,
    a: &EncodeArgs,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<sc::EncodeReport> {
    if a.rm {
        check_rm(input, dest)?;
    }
    let (reader, len) = open_input(input)?;
    let opts = EncodeOptions {
        block_size: a.block_size,
        md5: a.rm || a.md5 || (!a.no_md5 && EncodeOptions::new(a.mode).md5),
        input_len: len,
        progress: Some(progress),
        ..EncodeOptions::new(a.mode)
    };
    let report = write_with(dest, a.out.force, true, |out| {
        sc::encode(reader, out, &opts).with_context(|| format!("encoding {}", name(input)))
    })?;
    if a.rm {
        // Decode the archive as written and compare with the MD5 of what was read.
        let dest = dest.unwrap_or(Path::new("-"));
        let back = ArchiveInput::open(dest)?
            .decode(io::sink(), true, &|_| {})
            .with_context(|| format!("verifying {} before --rm", dest.display()))?;
        remove_input(input, back.md5.is_some() && back.md5 == report.md5)?;
    }
    Ok(report)
}

/// `--rm`: deletes `input` once its output was verified; refuses otherwise.
fn remove_input(input: &Path, verified: bool) -> Result<()> {
    if !verified {
        bail!("output does not verify; keeping {}", input.display());
    }
    std::fs::remove_file(input).with_context(|| format!("cannot remove {}", input.display()))
}

/// `--rm` needs a real input to delete and a real output to read back.
fn check_rm(input: &Path, dest: Option<&Path>) -> Result<()> {
    if is_stdio(input) || dest.is_none() {
        bail!("--rm needs a file input and a file output (not stdin or stdout)");
    }
    Ok(())
}

fn decode(a: &DecodeArgs) -> Result<()> {
    if folder::is_dir(&a.input) {
        return folder::decode(a);
    }
    let dest = destination(&a.input, &a.out, |p| match folder::original_name(p) {
        Some(o) => Ok(o),
        None => bail!(
            "cannot name the output of {} (no .sc suffix): use -o",
            p.display()
        ),
    })?;
    let bar = progress_bar(input_len(&a.input), a.common.quiet);
    let start = Instant::now();
    let report = decode_one(&a.input, dest.as_deref(), a, &|n| bar.set_position(n))?;
    bar.finish_and_clear();
    if !a.common.quiet {
        note(format_args!(
            "{}: {} -> {} bytes, {:.0} MB/s{}",
            name(&a.input),
            report.archive_len,
            report.original_len,
            mb_per_s(report.original_len, start),
            if a.md5 || a.rm { ", MD5 OK" } else { "" }
        ));
    }
    Ok(())
}

/// Decodes `input` into `dest` (`None`: stdout) with `a`'s settings, then handles `--rm`.
fn decode_one(
    input: &Path,
    dest: Option<&Path>,
    a: &DecodeArgs,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<sc::DecodeReport> {
    if a.rm {
        check_rm(input, dest)?;
    }
    let archive = ArchiveInput::open(input)?;
    let report = write_with(dest, a.out.force, false, |out| {
        archive
            .decode(out, a.md5 || a.rm, progress)
            .with_context(|| format!("decoding {}", name(input)))
    })?;
    if let (true, Some(dest)) = (a.rm, dest) {
        // The MD5 was checked on the way out; check the file that landed as well.
        remove_input(input, Some(md5_of_file(dest)?) == report.md5)?;
    }
    Ok(report)
}

fn md5_of_file(path: &Path) -> Result<[u8; 16]> {
    let (mut input, _) = open_input(path)?;
    let mut d = Md5::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = input
            .read(&mut buf)
            .with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            return Ok(d.finalize().into());
        }
        d.update(&buf[..n]);
    }
}

fn verify(a: &VerifyArgs) -> Result<()> {
    let file = |p: &Path| !p.is_dir();
    match &a.paths[..] {
        [one] if file(one) => verify_one(one, None, &a.common),
        [archive, original] if file(archive) && file(original) && !verify::is_archive(original) => {
            verify_one(archive, Some(original), &a.common)
        }
        paths => verify::many(paths, a.common.quiet),
    }
}

/// Decodes the archive `input` without writing it, checking every block and computing the MD5
/// (compared with the recorded one, if any).
fn check_archive(input: &Path, quiet: bool) -> Result<sc::DecodeReport> {
    let archive = ArchiveInput::open(input)?;
    let bar = progress_bar(archive.len(), quiet);
    let report = archive.decode(io::sink(), true, &|n| bar.set_position(n));
    bar.finish_and_clear();
    Ok(report?)
}

fn verify_one(input: &Path, original: Option<&Path>, common: &Common) -> Result<()> {
    let (report, orig_md5) = rayon::join(
        || check_archive(input, common.quiet).with_context(|| format!("verifying {}", name(input))),
        || original.map(md5_of_file).transpose(),
    );
    let report = report?;
    if let (Some(path), Some(m)) = (original, orig_md5?) {
        if Some(m) != report.md5 {
            bail!(
                "{}: MD5 {} does not match {} ({})",
                name(input),
                verify::md5_text(&report),
                path.display(),
                hex(&m)
            );
        }
    }
    if !common.quiet {
        print_stdout(&format!(
            "{}: OK, {} bytes, md5 {}{}\n",
            name(input),
            report.original_len,
            verify::md5_text(&report),
            original.map_or(String::new(), |p| format!(", matches {}", p.display()))
        ))?;
    }
    Ok(())
}

fn info(a: &InfoArgs) -> Result<()> {
    let mut f =
        File::open(&a.input).with_context(|| format!("cannot open {}", a.input.display()))?;
    let info = sc::inspect(&mut f).with_context(|| format!("reading {}", a.input.display()))?;
    let orig = info.original_len;
    let kind = match info.kind {
        Kind::Safetensors => "safetensors",
        Kind::Generic => "generic (not safetensors)",
    };
    let mut t = String::new();
    writeln!(t, "file:        {}", a.input.display())?;
    writeln!(t, "format:      sc version {}", info.format_version)?;
    writeln!(t, "mode:        {}", info.mode.name())?;
    writeln!(t, "block size:  {} bytes", info.block_size)?;
    writeln!(
        t,
        "input:       {kind}, {orig} bytes, md5 {}",
        info.md5.map_or("not recorded".into(), |m| hex(&m))
    )?;
    writeln!(
        t,
        "archive:     {} bytes ({:.2}% of original), {} blocks",
        info.archive_len,
        100.0 * info.archive_len as f64 / orig.max(1) as f64,
        info.blocks
    )?;
    for (name, u) in &info.transforms {
        writeln!(t, "  {name:<9} {} blocks, {} bytes", u.blocks, u.original)?;
    }
    for (codec, u) in &info.codecs {
        let (planes, raw, coded) = (u.planes, u.original, u.coded);
        let pct = 100.0 * coded as f64 / raw.max(1) as f64;
        writeln!(
            t,
            "  {codec:<9} {planes} planes, {raw} -> {coded} bytes ({pct:.2}%)"
        )?;
    }
    if let Some(tensors) = &info.tensors {
        writeln!(t, "tensors:     {}", tensors.len())?;
        for (dtype, bytes) in info.dtype_bytes() {
            writeln!(t, "  {dtype:<9} {bytes} bytes")?;
        }
    }
    if let Some(json) = info.header_json() {
        writeln!(t, "header:      {}", json.trim_end())?;
    }
    print_stdout(&t)
}

/// Writes a command's result to stdout; a closed or full stdout is an error, not a panic.
fn print_stdout(text: &str) -> Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .context("writing to stdout")
}

/// Lower-case hex of a digest, as `md5sum` prints it.
fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Prints a summary line on stderr; there is nowhere to report a failure to do so.
fn note(args: std::fmt::Arguments) {
    let _ = writeln!(io::stderr(), "{args}");
}
