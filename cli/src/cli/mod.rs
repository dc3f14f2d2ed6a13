//! The `sc` command line: argument parsing and the thin glue between files and the library.

mod access;
mod collide;
mod folder;
mod lab;
mod output;
mod process;
mod remove;
mod resources;
mod text;
mod verify;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use md5::{Digest, Md5};
use output::{FileId, Output, Settings};
use sc::{DecodeOptions, EncodeOptions, Kind, Mode};
use std::fmt::Write as _;
use std::fs::{File, Metadata};
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
    /// Worker threads (0 = all cores; more than the cores are capped)
    #[arg(short = 'T', long, default_value_t = 0)]
    threads: usize,
    /// Memory for the blocks in flight, with K/M/G suffix (default 256M): fewer blocks are
    /// coded at once as blocks grow
    #[arg(long, value_name = "SIZE", value_parser = resources::parse_bytes)]
    memory: Option<u64>,
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

impl OutputArgs {
    /// How to write an output made from the input `meta` describes (none: stdin), which it
    /// takes its mode and times from; `rm`: synced, since the input goes.
    fn settings<'a>(&self, binary: bool, meta: Option<&'a Metadata>, rm: bool) -> Settings<'a> {
        Settings {
            force: self.force,
            binary,
            like: meta.filter(|m| m.is_file()),
            durable: rm,
        }
    }
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

/// Parses a block size: `4096`, `12K`, `1M`, `1MiB`, `64m`.
fn parse_size(s: &str) -> std::result::Result<u32, String> {
    let bytes = resources::parse_bytes(s)?;
    let bytes = u32::try_from(bytes).map_err(|_| format!("'{s}' is too large"))?;
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
    process::setup();
    match cli.command {
        Command::Encode(a) => with_threads(&a.common, || encode(&a)),
        Command::Decode(a) => with_threads(&a.common, || decode(&a)),
        Command::Verify(a) => with_threads(&a.common, || verify(&a)),
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

/// Runs `f` on a pool of `-T` worker threads, at most one per core.
fn with_threads<T: Send>(common: &Common, f: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(resources::threads(common.threads, common.quiet))
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

/// Opens an input; returns the reader and, for a file, its metadata.
fn open_input(path: &Path) -> Result<(Box<dyn Read + Send>, Option<Metadata>)> {
    if is_stdio(path) {
        if process::stdin_closed() {
            bail!("standard input is closed");
        }
        return Ok((
            Box::new(BufReader::with_capacity(IO_BUFFER, io::stdin())),
            None,
        ));
    }
    let (f, meta) = open_file(path)?;
    Ok((Box::new(BufReader::with_capacity(IO_BUFFER, f)), Some(meta)))
}

/// Opens a file that is not a directory, with its metadata.
fn open_file(path: &Path) -> Result<(File, Metadata)> {
    let f = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let meta = f
        .metadata()
        .with_context(|| format!("cannot read {}", path.display()))?;
    if meta.is_dir() {
        bail!("{} is a directory", path.display());
    }
    Ok((f, meta))
}

/// The length of a regular file's metadata.
fn regular_len(meta: Option<&Metadata>) -> Option<u64> {
    meta.filter(|m| m.is_file()).map(Metadata::len)
}

/// An archive to decode: a named file (which the library reads through memory maps when it is
/// a regular one), or standard input.
enum ArchiveInput {
    File(File, Metadata),
    Stream(Box<dyn Read + Send>),
}

impl ArchiveInput {
    fn open(path: &Path) -> Result<ArchiveInput> {
        if is_stdio(path) {
            let (reader, _) = open_input(path)?;
            return Ok(ArchiveInput::Stream(reader));
        }
        let (f, meta) = open_file(path)?;
        Ok(ArchiveInput::File(f, meta))
    }

    /// The archive file's metadata (none for stdin).
    fn meta(&self) -> Option<&Metadata> {
        match self {
            ArchiveInput::File(_, meta) => Some(meta),
            ArchiveInput::Stream(_) => None,
        }
    }

    /// Length of the archive, when it is known.
    fn len(&self) -> Option<u64> {
        regular_len(self.meta())
    }

    fn decode<W: Write + Send>(
        self,
        out: W,
        check_md5: bool,
        memory: u64,
        progress: &(dyn Fn(u64) + Sync),
    ) -> sc::Result<sc::DecodeReport> {
        let opts = DecodeOptions {
            check_md5,
            archive_len: self.len(),
            progress: Some(progress),
            memory,
            ..Default::default()
        };
        match self {
            ArchiveInput::File(f, _) => sc::decode_file(&f, out, &opts),
            ArchiveInput::Stream(r) => sc::decode(r, out, &opts),
        }
    }
}

/// The memory budget `--memory` sets.
fn memory(common: &Common) -> u64 {
    common.memory.unwrap_or(sc::DEFAULT_MEMORY)
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
/// Returns the job's result and the identity of the file renamed into place, if one was.
fn write_with<T>(
    dest: Option<&Path>,
    settings: &Settings,
    job: impl FnOnce(&mut Output) -> Result<T>,
) -> Result<(T, Option<FileId>)> {
    let mut out = Output::open(dest, settings)?;
    match job(&mut out) {
        Ok(v) => Ok((v, out.commit()?)),
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
    let report = encode_one(&a.input, dest.as_deref(), a, memory(&a.common), &|n| {
        bar.set_position(n)
    })?;
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

/// Encodes `input` into `dest` (`None`: stdout) with `a`'s settings and `memory` bytes for
/// blocks, then handles `--rm`.
fn encode_one(
    input: &Path,
    dest: Option<&Path>,
    a: &EncodeArgs,
    memory: u64,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<sc::EncodeReport> {
    if a.rm {
        remove::check(input, dest)?;
    }
    let (reader, meta) = open_input(input)?;
    let opts = EncodeOptions {
        block_size: a.block_size,
        md5: a.rm || a.md5 || (!a.no_md5 && EncodeOptions::new(a.mode).md5),
        input_len: regular_len(meta.as_ref()),
        progress: Some(progress),
        memory,
        ..EncodeOptions::new(a.mode)
    };
    let settings = a.out.settings(true, meta.as_ref(), a.rm);
    let (report, written) = write_with(dest, &settings, |out| {
        sc::encode(reader, out, &opts).with_context(|| format!("encoding {}", name(input)))
    })?;
    if a.rm {
        let (dest, id, meta) = remove::written(input, dest, written, meta.as_ref())?;
        // Decode the archive as it lies on disk and compare with the MD5 of what was read.
        let verifying = || format!("verifying {} before --rm", dest.display());
        let f = remove::reopen(dest, id).with_context(verifying)?;
        let m = f.metadata().with_context(verifying)?;
        let back = ArchiveInput::File(f, m)
            .decode(io::sink(), true, memory, &|_| {})
            .with_context(verifying)?;
        let verified = back.md5.is_some() && back.md5 == report.md5;
        let read = remove::Snapshot::of(meta);
        remove::remove_input(input, read, report.original_len, dest, id, verified)?;
    }
    Ok(report)
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
    let report = decode_one(&a.input, dest.as_deref(), a, memory(&a.common), &|n| {
        bar.set_position(n)
    })?;
    bar.finish_and_clear();
    if !a.common.quiet {
        let md5 = match (report.stored_md5, report.md5) {
            (Some(_), Some(_)) => ", MD5 OK".to_string(),
            (None, Some(m)) => format!(", MD5 {} (not recorded in the archive)", hex(&m)),
            (_, None) => String::new(),
        };
        note(format_args!(
            "{}: {} -> {} bytes, {:.0} MB/s{md5}",
            name(&a.input),
            report.archive_len,
            report.original_len,
            mb_per_s(report.original_len, start),
        ));
    }
    Ok(())
}

/// Decodes `input` into `dest` (`None`: stdout) with `a`'s settings and `memory` bytes for
/// blocks, then handles `--rm`.
fn decode_one(
    input: &Path,
    dest: Option<&Path>,
    a: &DecodeArgs,
    memory: u64,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<sc::DecodeReport> {
    if a.rm {
        remove::check(input, dest)?;
    }
    let archive = ArchiveInput::open(input)?;
    let meta = archive.meta().cloned();
    let settings = a.out.settings(false, meta.as_ref(), a.rm);
    let (report, written) = write_with(dest, &settings, |out| {
        archive
            .decode(out, a.md5 || a.rm, memory, progress)
            .with_context(|| format!("decoding {}", name(input)))
    })?;
    if a.rm {
        let (dest, id, meta) = remove::written(input, dest, written, meta.as_ref())?;
        // The MD5 was computed on the way out (and checked if recorded); check the file on
        // disk against it as well.
        let f = remove::reopen(dest, id)?;
        let verified = Some(md5_of(f, dest)?) == report.md5;
        let read = remove::Snapshot::of(meta);
        remove::remove_input(input, read, report.archive_len, dest, id, verified)?;
    }
    Ok(report)
}

fn md5_of_file(path: &Path) -> Result<[u8; 16]> {
    let (input, _) = open_input(path)?;
    md5_of(input, path)
}

/// The MD5 of everything `input` (the file `path`) holds.
fn md5_of(mut input: impl Read, path: &Path) -> Result<[u8; 16]> {
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
        paths => verify::many(paths, &a.common),
    }
}

/// Decodes the archive `input` without writing it, checking every block and computing the MD5
/// (compared with the recorded one, if any).
fn check_archive(input: &Path, common: &Common) -> Result<sc::DecodeReport> {
    let archive = ArchiveInput::open(input)?;
    let bar = progress_bar(archive.len(), common.quiet);
    let report = archive.decode(io::sink(), true, memory(common), &|n| bar.set_position(n));
    bar.finish_and_clear();
    Ok(report?)
}

fn verify_one(input: &Path, original: Option<&Path>, common: &Common) -> Result<()> {
    let (report, orig_md5) = rayon::join(
        || check_archive(input, common).with_context(|| format!("verifying {}", name(input))),
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
            writeln!(t, "  {:<9} {bytes} bytes", text::printable(&dtype))?;
        }
    }
    // The kept header is written as it is read, escaped, however large it is.
    write_stdout(|w| {
        w.write_all(t.as_bytes())?;
        if let Some(json) = info.header_json() {
            w.write_all(b"header:      ")?;
            text::write_printable(w, json.trim_end())?;
            w.write_all(b"\n")?;
        }
        Ok(())
    })
}

/// Writes a command's result to stdout through `write`; a closed or full stdout is an error,
/// not a panic.
fn write_stdout(write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<()> {
    if process::stdout_closed() {
        bail!("standard output is closed");
    }
    let mut out = io::BufWriter::with_capacity(IO_BUFFER, io::stdout().lock());
    write(&mut out)
        .and_then(|()| out.flush())
        .context("writing to stdout")
}

/// Writes a command's result to stdout.
fn print_stdout(text: &str) -> Result<()> {
    write_stdout(|w| w.write_all(text.as_bytes()))
}

/// Lower-case hex of a digest, as `md5sum` prints it.
fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Prints a summary line on stderr; there is nowhere to report a failure to do so.
fn note(args: std::fmt::Arguments) {
    let _ = writeln!(io::stderr(), "{args}");
}
