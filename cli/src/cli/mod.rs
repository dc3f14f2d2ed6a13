//! The `sc` command line: argument parsing and the thin glue between files and the library.

mod access;
mod argv;
mod base;
mod catalog;
mod docs;
mod folder;
mod info;
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
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
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

/// An input to encode: a file, read with random access, or a stream (stdin).
enum Input {
    File(File),
    Stream(Box<dyn Read + Send>),
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
    /// An `http://`, `https://` or `s3://` location.
    Remote(String),
}

/// The remote location `path` names, if it names one.
pub(crate) fn url_of(path: &Path) -> Option<&str> {
    path.to_str().filter(|p| sc::remote::is_url(p))
}

/// What `-v` says of the requests to `url`: how many, the bytes, and the time waiting on the
/// network against the rest (decoding).
pub(crate) fn remote_line(url: &str, s: &sc::remote::RemoteStats) -> String {
    let wait = s.network_wait.as_secs_f64();
    format!(
        "{}: {} requests, {} bytes fetched; {wait:.3} s waiting on the network, {:.3} s decoding",
        shown_url(url),
        s.requests,
        s.bytes_fetched,
        (s.elapsed.as_secs_f64() - wait).max(0.0)
    )
}

impl ArchiveInput {
    fn open(path: &Path) -> Result<ArchiveInput> {
        if let Some(url) = url_of(path) {
            return Ok(ArchiveInput::Remote(url.to_string()));
        }
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
            ArchiveInput::Stream(_) | ArchiveInput::Remote(_) => None,
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
        base: Option<&sc::Base>,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<sc::DecodeReport> {
        let cancel = process::cancel();
        let opts = DecodeOptions {
            check_md5,
            archive_len: self.len(),
            progress: Some(progress),
            memory,
            base,
            cancel: Some(&cancel),
            ..Default::default()
        };
        match self {
            ArchiveInput::File(f, _) => sc::decode_file(&f, out, &opts),
            ArchiveInput::Stream(r) => sc::decode(r, out, &opts),
            ArchiveInput::Remote(url) => {
                sc::decode_url(&url, out, &opts, &remote_options()).map(|(report, stats)| {
                    if process::verbose() {
                        note(format_args!("{}", remote_line(&url, &stats)));
                    }
                    report
                })
            }
        }
        .map_err(base::hint)
    }
}

/// Chooses the destination: `None` means stdout. `default` names the output after the input,
/// and is given a remote input's last part: an output named after a remote archive goes in
/// the current folder, as one named after a local file goes beside it; only `-o` names a
/// remote output.
fn destination(
    input: &Path,
    out: &OutputArgs,
    default: impl Fn(&Path) -> Result<PathBuf>,
) -> Result<Option<PathBuf>> {
    let named = || local_name(input);
    let dest = match &out.output {
        Some(o) if is_stdio(o) => None,
        Some(o) if outdir::is_folder(o) => Some(outdir::inside(o, &named()?, &default)?),
        Some(o) => Some(o.clone()),
        None if out.stdout || is_stdio(input) => None,
        None => Some(default(&named()?)?),
    };
    if let Some(d) = &dest {
        if !is_stdio(input) && same_file(input, d) {
            bail!("output {} is the input file", d.display());
        }
    }
    Ok(dest)
}

/// What an output named after `input` is named after: a remote location's last part (without
/// an `http(s)://` location's query), `input` itself otherwise.
pub(crate) fn local_name(input: &Path) -> Result<Cow<'_, Path>> {
    let Some(url) = url_of(input) else {
        return Ok(Cow::Borrowed(input));
    };
    let path = match url.starts_with("http") {
        true => url.split(['?', '#']).next().unwrap_or(url),
        false => url,
    };
    match path.rsplit('/').next() {
        Some(n) if !matches!(n, "" | "." | "..") => Ok(Cow::Owned(PathBuf::from(n))),
        _ => bail!("{url} has no file name to name the output after: use -o"),
    }
}

/// The output `decode` names after `input` (its local name `named`): `.sc` removed. An input
/// without the suffix that is not an archive at all (its first bytes say so) is refused as
/// such; another is told `hint` (how to give it a name).
pub(crate) fn decoded_name(named: &Path, input: &Path, hint: &str) -> Result<PathBuf> {
    if let Some(o) = folder::original_name(named) {
        return Ok(o);
    }
    if !starts_as_archive(input) {
        bail!("decoding {}: {}", input.display(), sc::Error::BadMagic);
    }
    bail!(
        "cannot name the output of {} (no .sc suffix): {hint}",
        input.display()
    )
}

/// Whether `path` may be an archive by its first bytes: false only for a regular file that can
/// be read and does not start as sc's magic does (a shorter file that does is a truncated
/// archive; one that cannot be read fails later, saying why). A FIFO or device is not read
/// here: what this took from it would be lost.
fn starts_as_archive(path: &Path) -> bool {
    let regular = std::fs::metadata(path).is_ok_and(|m| m.is_file());
    if url_of(path).is_some() || is_stdio(path) || !regular {
        return true;
    }
    let mut start = Vec::with_capacity(sc::MAGIC.len());
    match File::open(path).and_then(|f| f.take(sc::MAGIC.len() as u64).read_to_end(&mut start)) {
        Ok(n) => sc::MAGIC.starts_with(&start[..n]),
        Err(_) => true,
    }
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
            // Decimal units, as the summary's MB/s.
            ProgressStyle::with_template(
                "{bar:40} {decimal_bytes}/{decimal_total_bytes} {decimal_bytes_per_sec} eta {eta}",
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
    } else if let Some(url) = url_of(p) {
        shown_url(url)
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
    let auto = relate::is_auto(a.base.base.as_deref());
    if !auto && !a.auto.base_from.is_empty() {
        bail!("--base-from offers bases to --base auto: give --base auto too");
    }
    if auto && a.rm {
        bail!("--rm cannot be used with --base auto: the inputs serve as bases for one another");
    }
    let base = match auto {
        true => None,
        false => a.base.open(None)?,
    };
    let input = match a.inputs.as_slice() {
        [one] if !folder::is_dir(one) => one,
        _ => return folder::encode(a, base.as_ref()),
    };
    let base = match auto && !is_stdio(input) {
        true => {
            let verbose = a.common.talk.verbose();
            relate::pick_one(input, &a.auto, a.mode(), verbose)?
        }
        false => base,
    };
    if let Some(why) = already_archive(input, a.out.force) {
        bail!("{why}");
    }
    let dest = destination(input, &a.out, |p| Ok(folder::archive_name(p)))?;
    let base_files = base::BaseFiles::of(&a.base, base.as_ref());
    base_files.check_input(input)?;
    if let Some(d) = &dest {
        base_files.check_output(d)?;
    }
    let bar = progress_bar(input_len(input), a.common.talk.quiet);
    let start = Instant::now();
    let base = base.as_ref();
    let memory = memory(&a.common, || encode_needs(a, base));
    let report = encode_one(input, dest.as_deref(), a, a.rm, memory, base, &|n| {
        bar.set_position(n)
    })?;
    bar.finish_and_clear();
    match a.common.talk {
        t if t.verbose() => note(format_args!(
            "{}",
            encoded_lines(input, dest.as_deref(), a, &report, start)
        )),
        t if !t.quiet => note(format_args!("{}", encoded_line(input, a, &report, start))),
        _ => {}
    }
    Ok(())
}

/// Why `encode` skips `input` (a name already ending in `.sc`), unless `force`.
fn already_archive(input: &Path, force: bool) -> Option<String> {
    let archive = !force && !is_stdio(input) && input.extension().is_some_and(|e| e == "sc");
    archive.then(|| {
        format!(
            "{} already ends in .sc: skipped (sc -d {} restores it; -f compresses it all the same)",
            name(input),
            input.display()
        )
    })
}

/// The summary line of a file encoded from `input`.
fn encoded_line(input: &Path, a: &EncodeArgs, r: &sc::EncodeReport, start: Instant) -> String {
    let how = match (r.kind, &r.generic_reason) {
        (Kind::Safetensors | Kind::Gguf, _) => String::new(),
        (Kind::Generic, Some(why)) => format!(" [not safetensors: {why}; generic path]"),
        (Kind::Generic, None) => " [generic path]".into(),
    };
    // With --base auto, the base each input took, as its archive records it.
    let given = match relate::is_auto(a.base.base.as_deref()) {
        true => r.base_name.as_deref().map(Path::new),
        false => a.base.base.as_deref(),
    };
    let refs = base::summary(r.based_tensors, r.repeated_tensors, given);
    format!(
        "{}: {} -> {} bytes ({:.2}%), {}, {:.0} MB/s{refs}{how}",
        name(input),
        r.original_len,
        r.archive_len,
        100.0 * r.archive_len as f64 / r.original_len.max(1) as f64,
        a.mode().name(),
        mb_per_s(r.original_len, start)
    )
}

/// What `-v` prints for a file encoded from `input` into `dest` (`None`: stdout): the summary
/// line, then the codecs chosen, read back from the archive, and the time taken.
fn encoded_lines(
    input: &Path,
    dest: Option<&Path>,
    a: &EncodeArgs,
    r: &sc::EncodeReport,
    start: Instant,
) -> String {
    let summary = encoded_line(input, a, r, start);
    details(summary, dest.and_then(inspect_file), start)
}

/// The description of the archive file `path`; `None` unless it is a regular file: stdin and
/// stdout, and a device or FIFO, which reading would not give back what was written (or would
/// take it from the decoder).
fn inspect_file(path: &Path) -> Option<sc::Result<sc::ArchiveInfo>> {
    let regular = !is_stdio(path) && std::fs::metadata(path).is_ok_and(|m| m.is_file());
    regular.then(|| {
        File::open(path)
            .map_err(sc::Error::from)
            .and_then(|mut f| sc::inspect(&mut f))
    })
}

/// `summary` followed by what `-v` adds about an archive: its blocks by transform and the
/// codecs of their planes (when the archive is a file), and the seconds since `start`.
fn details(
    summary: String,
    archive: Option<sc::Result<sc::ArchiveInfo>>,
    start: Instant,
) -> String {
    let secs = start.elapsed().as_secs_f64();
    let mut t = summary;
    match archive {
        Some(Ok(info)) => {
            let transforms: Vec<String> = info
                .transforms
                .iter()
                .map(|(name, u)| format!("{name} {}", u.blocks))
                .collect();
            let codecs: Vec<String> = info
                .codecs
                .iter()
                .map(|(name, u)| {
                    let pct = 100.0 * u.coded as f64 / u.original.max(1) as f64;
                    format!("{name} {} {pct:.2}%", text::count(u.planes, "plane"))
                })
                .collect();
            let _ = write!(
                t,
                "\n  blocks:  {} {}, {} bytes each at most ({})\n  codecs:  {}",
                info.blocks,
                info.mode.name(),
                info.block_size,
                transforms.join(", "),
                codecs.join(", ")
            );
        }
        Some(Err(e)) => {
            let _ = write!(t, "\n  codecs:  the archive cannot be read back: {e}");
        }
        None => t.push_str(
            "\n  codecs:  not shown: the archive is not a local file to read back (a stream, a device or a remote location)",
        ),
    }
    let _ = write!(t, "\n  time:    {secs:.3} s");
    t
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

/// Encodes `input` into `dest` (`None`: stdout) with `a`'s settings, `memory` bytes for blocks
/// and against `base` if given, then deletes `input` if `rm` (`--rm`, unless the run keeps it).
fn encode_one(
    input: &Path,
    dest: Option<&Path>,
    a: &EncodeArgs,
    rm: bool,
    memory: u64,
    base: Option<&sc::Base>,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<sc::EncodeReport> {
    if rm {
        remove::check(input, dest)?;
    }
    // A file is read with random access, which finding repeated tensors needs.
    let (source, meta) = match is_stdio(input) {
        true => (Input::Stream(open_input(input)?.0), None),
        false => open_file(input).map(|(f, m)| (Input::File(f), Some(m)))?,
    };
    let cancel = process::cancel();
    let opts = EncodeOptions {
        block_size: a.block_size,
        md5: rm || a.md5 || (!a.no_md5 && EncodeOptions::new(a.mode()).md5),
        progress: Some(progress),
        memory,
        base,
        sign_models: a.level.sign_models(),
        cancel: Some(&cancel),
        ..EncodeOptions::new(a.mode())
    };
    let settings = a.out.settings(meta.as_ref(), rm);
    let (report, written) = write_with(dest, &settings, |out| {
        match source {
            Input::File(f) => sc::encode_file(&f, out, &opts),
            Input::Stream(r) => sc::encode(r, out, &opts),
        }
        .with_context(|| format!("encoding {}", name(input)))
    })?;
    if rm {
        let (dest, id, meta) = remove::written(input, dest, written, meta.as_ref())?;
        // Decode the archive as it lies on disk and compare with the MD5 of what was read,
        // against the base as it lies on disk now (opened again, its digests taken again).
        let verifying = || format!("verifying {} before --rm", dest.display());
        let base = match base {
            Some(_) => a.base.open(None).with_context(verifying)?,
            None => None,
        };
        let f = remove::reopen(dest, id).with_context(verifying)?;
        let m = f.metadata().with_context(verifying)?;
        let back = ArchiveInput::File(f, m)
            .decode(io::sink(), true, memory, base.as_ref(), &|_| {})
            .with_context(verifying)?;
        let verified = back.md5.is_some() && back.md5 == report.md5;
        let read = remove::Snapshot::of(meta);
        remove::remove_input(input, read, report.original_len, dest, id, verified)?;
    }
    Ok(report)
}

fn decode(a: &DecodeArgs) -> Result<()> {
    let input = match a.inputs.as_slice() {
        [one] if url_of(one).is_some_and(|u| u.ends_with('/')) => {
            return decode_prefix(a, url_of(one).unwrap_or_default())
        }
        [one] if !folder::is_dir(one) => one,
        _ => return folder::decode(a, a.base.open(None)?.as_ref()),
    };
    let base = a.base.open(Some(input))?;
    let dest = destination(input, &a.out, |p| decoded_name(p, input, "use -o"))?;
    let talk = a.common.talk;
    let archive = talk.verbose().then(|| inspect_file(input)).flatten();
    let bar = progress_bar(input_len(input), talk.quiet);
    let start = Instant::now();
    let base = base.as_ref();
    let memory = memory(&a.common, || archive_file_needs(input));
    let report = decode_one(input, dest.as_deref(), a, memory, base, &|n| {
        bar.set_position(n)
    })?;
    bar.finish_and_clear();
    if !talk.quiet {
        let line = decoded_line(input, &report, start);
        match talk.verbose() {
            true => note(format_args!("{}", details(line, archive, start))),
            false => note(format_args!("{line}")),
        }
    }
    Ok(())
}

/// `sc decode PREFIX/ -o DIR`: every archive under the remote prefix decoded into `DIR`, every
/// other object copied (see [`folder::decode_prefix`]).
fn decode_prefix(a: &DecodeArgs, prefix: &str) -> Result<()> {
    let Some(dir) = a.out.output.as_deref().filter(|o| !is_stdio(o)) else {
        bail!("decoding the remote folder {prefix} needs -o DIR");
    };
    let listing = sc::remote::list_skipping(prefix, &remote_options())?;
    for url in listing.skipped.iter().filter(|_| !a.common.talk.quiet) {
        note(format_args!(
            "sc: note: skipping {}: its key is not one sc can read (a control character, or an \
             empty, \".\" or \"..\" part)",
            text::printable(url)
        ));
    }
    let objects = &listing.objects;
    folder::decode_prefix(a, prefix, dir, objects, a.base.open(None)?.as_ref())
}

/// Copies the object at `url` to the file `dest` as it is; returns the bytes copied.
fn copy_remote(url: &str, dest: &Path, force: bool) -> Result<u64> {
    let mut file = sc::remote::RemoteFile::open(url, &remote_options())?;
    let whole = 0..file.len();
    file.will_read(std::slice::from_ref(&whole));
    let settings = Settings {
        force,
        binary: true,
        ..Default::default()
    };
    let (copied, _) = write_with(Some(dest), &settings, |w| {
        io::copy(&mut file, w).map_err(|e| {
            about(sc::Error::from(e).into(), || {
                format!("copying {}", shown_url(url))
            })
        })
    })?;
    Ok(copied)
}

/// The summary line of a file decoded from `input`.
fn decoded_line(input: &Path, r: &sc::DecodeReport, start: Instant) -> String {
    let md5 = match (r.stored_md5, r.md5) {
        (Some(_), Some(_)) => ", MD5 OK".to_string(),
        (None, Some(m)) => format!(", MD5 {} (not recorded in the archive)", hex(&m)),
        (_, None) => String::new(),
    };
    format!(
        "{}: {} -> {} bytes, {:.0} MB/s{md5}",
        name(input),
        r.archive_len,
        r.original_len,
        mb_per_s(r.original_len, start),
    )
}

/// Decodes `input` into `dest` (`None`: stdout) with `a`'s settings, `memory` bytes for blocks
/// and `base` for an archive coded against one, then handles `--rm`.
fn decode_one(
    input: &Path,
    dest: Option<&Path>,
    a: &DecodeArgs,
    memory: u64,
    base: Option<&sc::Base>,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<sc::DecodeReport> {
    if a.rm {
        remove::check(input, dest)?;
    }
    let archive = ArchiveInput::open(input)?;
    let meta = archive.meta().cloned();
    let settings = a.out.settings(meta.as_ref(), a.rm);
    let (report, written) = write_with(dest, &settings, |out| {
        archive
            .decode(out, a.md5 || a.rm, memory, base, progress)
            .map_err(|e| about(e, || format!("decoding {}", name(input))))
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
    if let Some(seed) = &a.derives {
        return verify::derives(seed, &a.paths, &a.common);
    }
    let file = |p: &Path| !p.is_dir();
    let first = a.paths.first().filter(|p| file(p));
    let base = a.base.open(first.map(PathBuf::as_path))?;
    let base = base.as_ref();
    match &a.paths[..] {
        [one] if file(one) => verify_one(one, None, base, &a.common),
        [archive, original] if file(archive) && file(original) && !verify::is_archive(original) => {
            verify_one(archive, Some(original), base, &a.common)
        }
        paths => verify::many(paths, base, &a.common),
    }
}

/// Decodes the archive `input` (against `base`) without writing it, checking every block and
/// computing the MD5 (compared with the recorded one, if any).
fn check_archive(
    input: &Path,
    base: Option<&sc::Base>,
    common: &Common,
) -> Result<sc::DecodeReport> {
    let archive = ArchiveInput::open(input)?;
    let bar = progress_bar(archive.len(), common.talk.quiet);
    let memory = memory(common, || archive_file_needs(input));
    let report = archive.decode(io::sink(), true, memory, base, &|n| bar.set_position(n));
    bar.finish_and_clear();
    report
}

fn verify_one(
    input: &Path,
    original: Option<&Path>,
    base: Option<&sc::Base>,
    common: &Common,
) -> Result<()> {
    let (report, orig_md5) = rayon::join(
        || {
            check_archive(input, base, common)
                .map_err(|e| about(e, || format!("verifying {}", name(input))))
        },
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
    if !common.talk.quiet {
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
