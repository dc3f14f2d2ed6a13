//! The `sc` command line: argument parsing and the thin glue between files and the library.

mod access;
mod argv;
mod base;
mod catalog;
mod coding;
mod docs;
mod folder;
mod info;
mod input;
mod json;
mod lab;
pub(crate) mod level;
mod outdir;
mod output;
pub(crate) mod process;
mod relate;
mod remove;
mod resources;
mod text;
mod verify;

use anyhow::{anyhow, bail, Context, Result};
use clap::error::ErrorKind;
use clap::{ArgAction, Args, FromArgMatches, Parser, Subcommand};
use coding::*;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use input::*;
use md5::{Digest, Md5};
use output::{FileId, Output, Settings};
use resources::{archive_file_needs, encode_needs, memory};
use sc::{DecodeOptions, EncodeOptions, Kind, Mode};
use std::borrow::Cow;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::fs::{File, Metadata};
use std::io::{self, BufReader, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Lossless compression for LLM weight files (safetensors and GGUF).
#[derive(Parser, Debug)]
#[command(
    name = "sc",
    version,
    about,
    propagate_version = true,
    disable_help_subcommand = true,
    after_help = "`sc -z FILE...` is `sc encode FILE...`, `sc -d FILE...` is `sc decode FILE...`.\n\
                  As in zstd: `sc FILE...` and `sc -19 FILE` encode, `sc -t` verifies, `sc -l` is \
                  `sc info`, and with no FILE stdin is read (unless a terminal).\n\
                  `sc help formats` says which split each dtype gets."
)]
pub struct Cli {
    #[command(flatten)]
    talk: Talk,
    #[command(flatten)]
    remote: RemoteArgs,
    #[command(subcommand)]
    command: Command,
}

/// How much a run prints: `-v` and `-q`, given anywhere on the command line.
#[derive(Args, Clone, Copy, Debug, Default)]
pub(crate) struct Talk {
    /// Print more: a line per file with the codecs chosen and the time taken, and notes (such
    /// as -T capped to the cores)
    #[arg(short, long, global = true, action = ArgAction::Count, overrides_with = "quiet")]
    verbose: u8,
    /// No progress bar and no summary (failures and errors are still reported)
    #[arg(short, long, global = true, overrides_with = "verbose")]
    quiet: bool,
}

impl Talk {
    fn verbose(self) -> bool {
        self.verbose > 0 && !self.quiet
    }
}

/// How `http://`, `https://` and `s3://` locations are read and written, given anywhere on
/// the command line.
#[derive(Args, Clone, Copy, Debug, Default)]
#[command(next_help_heading = "Remote locations")]
struct RemoteArgs {
    /// Range requests (or upload parts) in flight at once [default: 4]
    #[arg(long, global = true, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    connections: Option<u16>,
    /// Seconds one request may take, connecting and transferring [default: 60]
    #[arg(long, global = true, value_name = "SECS", value_parser = parse_seconds)]
    timeout: Option<Duration>,
    /// Times a request is retried after a server error, a dropped connection or a timeout
    /// [default: 10]
    #[arg(long, global = true, value_name = "N")]
    retries: Option<usize>,
    /// Seconds after a request's first try past which it is no longer retried [default: 180]
    #[arg(long, global = true, value_name = "SECS", value_parser = parse_seconds)]
    retry_timeout: Option<Duration>,
}

impl RemoteArgs {
    fn options(self) -> sc::remote::RemoteOptions {
        let mut o = sc::remote::RemoteOptions::default();
        o.connections = self.connections.map_or(o.connections, usize::from);
        o.timeout = self.timeout.unwrap_or(o.timeout);
        o.retries = self.retries.unwrap_or(o.retries);
        o.retry_timeout = self.retry_timeout.unwrap_or(o.retry_timeout);
        o
    }
}

/// A positive number of seconds (fractions allowed).
fn parse_seconds(s: &str) -> std::result::Result<Duration, String> {
    s.parse::<f64>()
        .ok()
        .and_then(|x| Duration::try_from_secs_f64(x).ok())
        .filter(|d| !d.is_zero())
        .ok_or_else(|| format!("{s:?} is not a positive number of seconds"))
}

/// The remote options of the command line being run.
static REMOTE: std::sync::Mutex<Option<sc::remote::RemoteOptions>> = std::sync::Mutex::new(None);

/// How the command line being run reads and writes remote locations (its flags).
pub(crate) fn remote_options() -> sc::remote::RemoteOptions {
    let o = REMOTE.lock().unwrap_or_else(|e| e.into_inner());
    let mut o = o.clone().unwrap_or_default();
    o.cancel = Some(process::cancel());
    o
}

/// How the command line being run opens archives and outputs: its remote flags, no base,
/// the default memory.
pub(crate) fn open_options() -> sc::OpenOptions {
    let mut o = sc::OpenOptions::default();
    o.remote = remote_options();
    o.cancel = Some(process::cancel());
    o
}

/// `e`, said to be about `what` (a phrase naming the input) unless it names its remote
/// location itself.
pub(crate) fn about(e: anyhow::Error, what: impl FnOnce() -> String) -> anyhow::Error {
    let remote = e
        .downcast_ref::<sc::Error>()
        .is_some_and(|e| matches!(e, sc::Error::Remote { .. }));
    match remote {
        true => e,
        false => e.context(what()),
    }
}

/// The location `url` as lines show it: its password masked, control characters escaped.
pub(crate) fn shown_url(url: &str) -> String {
    text::printable(&sc::remote::shown(url)).into_owned()
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Compress files and folders (FILE -> FILE.sc; a folder: each *.safetensors and *.gguf
    /// below it)
    #[command(visible_alias = "compress", short_flag = 'z', long_flag = "compress")]
    Encode(EncodeArgs),
    /// Restore files from archives (FILE.sc -> FILE; a folder: each *.sc below it)
    #[command(
        visible_alias = "decompress",
        short_flag = 'd',
        long_flag = "decompress"
    )]
    Decode(DecodeArgs),
    /// Decode without writing; check every block checksum and the MD5 (and ORIGINAL's MD5);
    /// several archives or directories: one line per archive and a total
    Verify(VerifyArgs),
    /// Show an archive's mode, sizes, codecs and tensors per dtype (--json for scripts,
    /// --header for the kept safetensors header)
    Info(info::InfoArgs),
    /// List the tensors of a safetensors or GGUF archive: dtype (ggml type), shape, original
    /// and compressed bytes
    List(access::ListArgs),
    /// Write chosen tensors as a safetensors or GGUF file, as the archive's original was (or
    /// raw bytes), decoding only their blocks (default output: INPUT without .sc and
    /// .safetensors or .gguf, plus .extract.safetensors, .extract.gguf or .extract.bin)
    Extract(access::ExtractArgs),
    /// Print a completion script for a shell (bash, zsh, fish, powershell, elvish)
    Completions(docs::CompletionsArgs),
    /// Print the man page (sc.1), or write every page into a folder with --dir
    Manpage(docs::ManpageArgs),
    /// Print help: sc's, a command's, or a topic's (formats: which split each dtype gets)
    Help(docs::HelpArgs),
    /// Bits per value of each model variant on a safetensors file's BF16/F16 tensors, or on
    /// each plane of a GGUF file's quantized blocks, next to the order-0 entropies
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

/// Parses the command line `args` (the program's name first): clap's definitions, then the
/// checks between arguments that clap cannot express (a level against `-m`, several inputs
/// against stdin and stdout); a failed check is a usage error (exit 2), like clap's own.
/// `--help` and `--version` come back as clap's errors that print to stdout and exit 0.
pub fn parse_from(
    args: impl IntoIterator<Item = impl Into<OsString> + Clone>,
) -> std::result::Result<Cli, clap::Error> {
    let mut cmd = docs::command();
    let args = args.into_iter().map(Into::into).collect();
    let args = argv::rewrite(args, &cmd).map_err(|r| {
        cmd.build();
        match cmd.find_subcommand_mut(&r.command) {
            Some(sub) => sub.error(ErrorKind::InvalidValue, r.message),
            None => cmd.error(ErrorKind::InvalidValue, r.message),
        }
    })?;
    let matches = cmd.try_get_matches_from_mut(args)?;
    let mut cli = Cli::from_arg_matches(&matches).map_err(|e| e.format(&mut cmd))?;
    if let Err(msg) = cli.settle(cmd.get_bin_name()) {
        let name = matches.subcommand_name().unwrap_or_default();
        return Err(match cmd.find_subcommand_mut(name) {
            Some(sub) => sub.error(ErrorKind::ArgumentConflict, msg),
            None => cmd.error(ErrorKind::ArgumentConflict, msg),
        });
    }
    Ok(cli)
}

impl Cli {
    /// Checks the arguments against each other, settles the mode, and hands `-v`/`-q` to the
    /// command (and the name sc runs as, `invoked`, to `completions`).
    fn settle(&mut self, invoked: Option<&str>) -> std::result::Result<(), String> {
        let talk = self.talk;
        match &mut self.command {
            Command::Encode(a) => {
                a.mode = Some(a.level.resolve(a.mode)?);
                stdin_when_none(&mut a.inputs)?;
                several_inputs(&a.inputs, &a.out)?;
                remove::local_only(a.rm, &a.inputs, a.out.output.as_deref())?;
                a.common.talk = talk;
                if let Some(note) = a.level.note().filter(|_| talk.verbose()) {
                    self::note(format_args!("{note}"));
                }
            }
            Command::Decode(a) => {
                stdin_when_none(&mut a.inputs)?;
                several_inputs(&a.inputs, &a.out)?;
                remove::local_only(a.rm, &a.inputs, a.out.output.as_deref())?;
                a.common.talk = talk;
            }
            Command::Verify(a) => {
                stdin_when_none(&mut a.paths)?;
                a.common.talk = talk;
            }
            Command::Extract(a) => a.common.talk = talk,
            Command::Completions(a) => a.invoked(invoked),
            _ => {}
        }
        Ok(())
    }
}

/// No input named: stdin, as zstd and gzip read it, unless it is a terminal (or closed).
fn stdin_when_none(inputs: &mut Vec<PathBuf>) -> std::result::Result<(), String> {
    if inputs.is_empty() {
        if process::stdin_closed() || io::stdin().is_terminal() {
            return Err(
                "no INPUT given: name files or folders, or pipe the data into stdin".into(),
            );
        }
        inputs.push(PathBuf::from("-"));
    }
    Ok(())
}

/// Several inputs each go to their own output: not one of them stdin, and not to stdout.
fn several_inputs(inputs: &[PathBuf], out: &OutputArgs) -> std::result::Result<(), String> {
    if inputs.len() < 2 {
        return Ok(());
    }
    if inputs.iter().any(|p| is_stdio(p)) {
        return Err("'-' (stdin) cannot be one of several inputs".into());
    }
    if out.stdout || out.output.as_deref().is_some_and(is_stdio) {
        return Err("several inputs cannot all go to stdout: give -o a folder, or none".into());
    }
    Ok(())
}

#[derive(Args, Debug)]
struct Common {
    /// Worker threads (0 = all cores; more than the cores are capped, with a note under -v)
    #[arg(short = 'T', long, default_value_t = 0)]
    threads: usize,
    /// Memory for the blocks in flight, with K/M/G suffix (default 256M): fewer blocks are
    /// coded at once as blocks grow
    #[arg(long, value_name = "SIZE", value_parser = resources::parse_bytes)]
    memory: Option<u64>,
    /// `-v` and `-q`, given to the whole command line.
    #[arg(skip)]
    talk: Talk,
}

#[derive(Args, Debug)]
struct OutputArgs {
    /// Output file ('-' for stdout), or a folder the outputs go in (created if missing): when
    /// OUT ends in '/' or is a folder, and with several inputs or a folder input (mirrored in it)
    #[arg(short, long, value_name = "OUT")]
    output: Option<PathBuf>,
    /// Write to stdout
    #[arg(short = 'c', long, conflicts_with = "output")]
    stdout: bool,
    /// Overwrite existing outputs; write binary data to a terminal
    #[arg(short, long)]
    force: bool,
}

impl OutputArgs {
    /// How to write an output made from the input `meta` describes (none: stdin), which it
    /// takes its mode and times from; `rm`: synced, since the input goes.
    fn settings<'a>(&self, meta: Option<&'a Metadata>, rm: bool) -> Settings<'a> {
        Settings {
            force: self.force,
            binary: true,
            like: meta.filter(|m| m.is_file()),
            durable: rm,
        }
    }
}

#[derive(Args, Debug)]
struct EncodeArgs {
    /// Files, folders, or '-' for stdin (none: stdin, unless a terminal; several: one table)
    ///
    /// A file becomes FILE.sc beside it (a name already ending in .sc is skipped, unless -f).
    /// A folder: every *.safetensors and *.gguf below it (shards and split files each
    /// their own) gets an archive beside it; with -o OUTDIR the
    /// folder is mirrored there instead, other files copied, so decoding OUTDIR gives the
    /// folder back. '-' reads stdin and writes stdout (or -o), and so does no INPUT when stdin
    /// is not a terminal (`cat F | sc -z > F.sc`). Several inputs, files and
    /// folders mixed, are one run: each to its default output, or all into the folder -o
    /// names (a folder under its own name); two files are coded at a time, a failed one does
    /// not stop the others, one table at the end lists them all, and the run exits 1 if any
    /// failed. Two inputs that would be written to one path are refused before anything is
    /// written.
    #[arg(value_name = "INPUT")]
    inputs: Vec<PathBuf>,
    /// fast: Huffman codes, near-random planes stored as they are (default); best: adaptive
    /// range coding, smaller and slower. `sc help formats` says more
    #[arg(short, long, value_parser = mode_parser())]
    mode: Option<Mode>,
    #[command(flatten)]
    level: level::Level,
    /// Block size: bytes or with K/M suffix (KiB/MiB), even, 4K to 64M
    #[arg(short, long, default_value = "1M", value_parser = parse_size)]
    block_size: u32,
    #[command(flatten)]
    out: OutputArgs,
    /// Record the input's MD5 in the archive (BEST's default; FAST leaves it out because MD5
    /// alone runs slower than FAST's coding; blocks always carry checksums)
    #[arg(long, conflicts_with = "no_md5")]
    md5: bool,
    /// Do not record the input's MD5, even in BEST mode
    #[arg(long)]
    no_md5: bool,
    /// Delete INPUT once the archive is written and verified by decoding it back (records the
    /// MD5, to compare)
    #[arg(long)]
    rm: bool,
    /// Keep INPUT: the default (accepted as gzip and zstd take it)
    #[arg(short, long, conflicts_with = "rm")]
    keep: bool,
    #[command(flatten)]
    base: base::BaseArg,
    #[command(flatten)]
    auto: relate::AutoArgs,
    #[command(flatten)]
    common: Common,
}

impl EncodeArgs {
    /// The mode to code with, settled by [`Cli::settle`] from `-m` and the level flags.
    fn mode(&self) -> Mode {
        self.mode.unwrap_or(Mode::Fast)
    }
}

#[derive(Args, Debug)]
struct DecodeArgs {
    /// Archives, folders, or '-' for stdin (none: stdin, unless a terminal; several: one table)
    ///
    /// FILE.sc is restored to FILE beside it (an archive without the .sc suffix needs -o).
    /// A folder: every *.sc below it is restored beside itself; with -o OUTDIR the folder is
    /// mirrored there instead, other files copied. '-' reads stdin and writes stdout (or -o),
    /// and so does no INPUT when stdin is not a terminal (`sc -d < F.sc > F`).
    /// Several inputs, archives and folders mixed, are one run: each to its default output, or
    /// all into the folder -o names (a folder under its own name); two files are decoded at a
    /// time, a failed one does not stop the others, one table at the end lists them all, and
    /// the run exits 1 if any failed. Two inputs that would be written to one path are
    /// refused before anything is written.
    #[arg(value_name = "INPUT")]
    inputs: Vec<PathBuf>,
    /// Also compute the output's MD5 and compare it with the recorded one (block checksums are
    /// always checked)
    #[arg(long)]
    md5: bool,
    /// Delete INPUT once the restored file is written and its MD5 checked, also on disk
    #[arg(long)]
    rm: bool,
    /// Keep INPUT: the default (accepted as gzip and zstd take it)
    #[arg(short, long, conflicts_with = "rm")]
    keep: bool,
    #[command(flatten)]
    out: OutputArgs,
    #[command(flatten)]
    base: base::BaseArg,
    #[command(flatten)]
    common: Common,
}

#[derive(Args, Debug)]
struct VerifyArgs {
    /// Archives, or directories holding them (every *.sc below); none: stdin, unless a
    /// terminal. `ARCHIVE ORIGINAL`: a second path that is not an archive is the original file,
    /// whose MD5 must equal the archive's
    #[arg(value_name = "PATH")]
    paths: Vec<PathBuf>,
    /// Check instead whether the GGUF quant PATH derives bit for bit from the seed SEED (a
    /// GGUF file or its archive), tensor by tensor, with llama.cpp's reference quantizers
    #[arg(long, value_name = "SEED", conflicts_with = "base")]
    derives: Option<PathBuf>,
    #[command(flatten)]
    base: base::BaseArg,
    #[command(flatten)]
    common: Common,
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

/// Runs the parsed command line as the `sc` program, set up as [`process::setup`] says.
pub fn run(cli: Cli) -> Result<()> {
    process::setup();
    run_hosted(cli)
}

/// Runs the parsed command line inside another program, whose process-wide settings (signal
/// handlers) stay as they are.
pub fn run_hosted(cli: Cli) -> Result<()> {
    *REMOTE.lock().unwrap_or_else(|e| e.into_inner()) = Some(cli.remote.options());
    match cli.command {
        Command::Encode(a) => with_threads(&a.common, || encode(&a)),
        Command::Decode(a) => with_threads(&a.common, || decode(&a)),
        Command::Verify(a) => with_threads(&a.common, || verify(&a)),
        Command::Info(a) => info::info(&a),
        Command::List(a) => access::list(&a),
        Command::Extract(a) => access::extract(&a),
        Command::Completions(a) => docs::completions(&a),
        Command::Manpage(a) => docs::manpage(&a),
        Command::Help(a) => docs::help(&a),
        Command::Models(a) => lab::models::run(&a),
        Command::Analyze(a) => lab::analyze::run(&a),
        Command::Sweep(a) => lab::sweep::run(&a),
        Command::Bench(a) => lab::bench::run(&a),
        Command::Shuffle(a) => lab::shuffle::run(&a),
    }
}

/// Runs `f` on a pool of `-T` worker threads, at most one per core.
fn with_threads<T: Send>(common: &Common, f: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    let threads = resources::threads(common.threads, common.talk.verbose());
    process::set_verbose(common.talk.verbose());
    // The pool's error shows its cause and names it as its source: shown once here.
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| anyhow!("cannot start {threads} worker threads: {e}"))?;
    pool.install(f)
}

fn is_stdio(p: &Path) -> bool {
    p.as_os_str() == "-"
}

/// Buffer size for file and pipe I/O. Blocks (and their coded forms) are larger, so the
/// buffers only gather the small records between them: block data goes straight between the
/// kernel and the pipeline's own buffers, never copied through these.
pub(crate) const IO_BUFFER: usize = 64 << 10;

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
