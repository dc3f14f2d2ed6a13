//! Inputs and their names: files, standard input and archives the library opens (a file or a
//! remote location), where outputs go and what they are named after.

use super::*;

/// Opens an input; returns the reader and, for a file, its metadata.
pub(super) fn open_input(path: &Path) -> Result<(Box<dyn Read + Send>, Option<Metadata>)> {
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
pub(super) fn open_file(path: &Path) -> Result<(File, Metadata)> {
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
pub(super) enum Input {
    File(File),
    Stream(Box<dyn Read + Send>),
}

/// An archive to decode: one the library opened (a file, which it reads through memory maps
/// when it is a regular one, or a remote location), or standard input, read as a stream.
pub(super) enum Incoming {
    At(Box<sc::Source>),
    Stdin(Box<dyn Read + Send>),
}

/// The remote location `path` names, if it names one.
pub(crate) fn url_of(path: &Path) -> Option<&str> {
    sc::Location::url_in(path)
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

/// `e`, a failure to read the archive `path`, said to be about it unless it names its file or
/// location itself.
pub(crate) fn reading(e: sc::Error, path: &Path) -> anyhow::Error {
    match e {
        e @ (sc::Error::File { .. } | sc::Error::Remote { .. }) => e.into(),
        e => anyhow::Error::new(e).context(format!("reading {}", path.display())),
    }
}

impl Incoming {
    pub(super) fn open(path: &Path) -> Result<Incoming> {
        if is_stdio(path) {
            let (reader, _) = open_input(path)?;
            return Ok(Incoming::Stdin(reader));
        }
        let at = sc::Location::parse(path);
        Ok(Incoming::At(Box::new(sc::Source::open(
            &at,
            &open_options(),
        )?)))
    }

    /// The archive file's metadata (none for stdin and remote locations).
    pub(super) fn meta(&self) -> Option<&Metadata> {
        match self {
            Incoming::At(s) => s.metadata(),
            Incoming::Stdin(_) => None,
        }
    }

    /// Length of the archive, when it is known.
    pub(super) fn len(&self) -> Option<u64> {
        match self {
            Incoming::At(s) => s.len(),
            Incoming::Stdin(_) => None,
        }
    }

    pub(super) fn decode<W: Write + Send>(
        self,
        url: &Path,
        out: W,
        check_md5: bool,
        memory: u64,
        base: Option<&sc::Base>,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<sc::DecodeReport> {
        let mut open = open_options();
        open.base = base.cloned();
        open.memory = Some(memory);
        let opts = DecodeOptions {
            check_md5,
            progress: Some(progress),
            ..open.decode_options()
        };
        match self {
            Incoming::Stdin(r) => sc::decode(r, out, &opts),
            Incoming::At(source) => (*source).decode(out, &opts).map(|d| {
                if let Some(stats) = d.remote.filter(|_| process::verbose()) {
                    note(format_args!(
                        "{}",
                        remote_line(&url.to_string_lossy(), &stats)
                    ));
                }
                d.report
            }),
        }
        .map_err(base::hint)
    }
}

/// Chooses the destination: `None` means stdout. `default` names the output after the input,
/// and is given a remote input's last part: an output named after a remote archive goes in
/// the current folder, as one named after a local file goes beside it; only `-o` names a
/// remote output.
pub(super) fn destination(
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
    match sc::Location::parse(input).file_name() {
        Some(n) => Ok(Cow::Owned(n.into_owned())),
        None => bail!("{url} has no file name to name the output after: use -o"),
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
pub(super) fn starts_as_archive(path: &Path) -> bool {
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

pub(super) fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

pub(super) fn progress_bar(total: Option<u64>, quiet: bool) -> ProgressBar {
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

pub(super) fn name(p: &Path) -> String {
    if is_stdio(p) {
        "stdin".into()
    } else if let Some(url) = url_of(p) {
        shown_url(url)
    } else {
        p.display().to_string()
    }
}

pub(super) fn mb_per_s(bytes: u64, start: Instant) -> f64 {
    bytes as f64 / 1e6 / start.elapsed().as_secs_f64().max(1e-9)
}

/// Runs `job` writing to `dest`; commits on success and removes the temporary file otherwise.
/// Returns the job's result and the identity of the file renamed into place, if one was.
pub(super) fn write_with<T>(
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
