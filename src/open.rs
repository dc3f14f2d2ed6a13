//! One way in and one way out, for every front end: an archive opened from a path, a remote
//! location or bytes with one [`OpenOptions`] value ([`Source`], [`Archive::open_at`],
//! [`inspect_at`]), and one destination for outputs, a file or an upload ([`Output`]).
//!
//! The rules the command line and the Python package follow alike live here once: what names a
//! remote location ([`Location::parse`]), the base an archive needs ([`Location::open_base`]),
//! how many worker threads a run gets ([`worker_threads`]), and that an existing output is
//! replaced only when asked ([`Output::create`]).

use crate::archive::{decode_file, decode_slice, Archive};
use crate::base::Base;
use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::inspect::{inspect, ArchiveInfo};
use crate::output::OutputFile;
use crate::pipeline::decode::{DecodeOptions, DecodeReport};
use crate::read::Prefetch;
#[cfg(feature = "remote")]
use crate::remote::{RemoteFile, RemoteOptions, RemoteStats, Upload};
use std::borrow::Cow;
use std::fs::{File, Metadata};
use std::io::{self, BufReader, Cursor, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where an archive is, or where an output goes.
#[derive(Clone, Debug)]
pub enum Location {
    /// A local file (or FIFO, or device).
    Path(PathBuf),
    /// An `http://`, `https://` or `s3://` location (feature `remote`).
    Url(String),
    /// The bytes of an archive, in memory.
    Bytes(Arc<[u8]>),
}

impl Location {
    /// What `name` names: a remote location when it starts with `http://`, `https://` or
    /// `s3://` (in any case), a local path otherwise.
    pub fn parse(name: impl AsRef<Path>) -> Location {
        let name = name.as_ref();
        match Location::url_in(name) {
            Some(url) => Location::Url(url.to_string()),
            None => Location::Path(name.to_path_buf()),
        }
    }

    /// The remote location `name` names, if it names one: the one place where a location is
    /// told from a path.
    pub fn url_in(name: &Path) -> Option<&str> {
        const SCHEMES: [&str; 3] = ["http://", "https://", "s3://"];
        let s = name.to_str()?;
        let remote = SCHEMES.iter().any(|scheme| {
            s.get(..scheme.len())
                .is_some_and(|p| p.eq_ignore_ascii_case(scheme))
        });
        remote.then_some(s)
    }

    /// The remote location, if this is one.
    pub fn url(&self) -> Option<&str> {
        match self {
            Location::Url(u) => Some(u),
            _ => None,
        }
    }

    /// The local path, if this is one.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Location::Path(p) => Some(p),
            _ => None,
        }
    }

    /// The remote prefix (a folder of objects: the location ends with `/`), if this is one.
    pub fn prefix(&self) -> Option<&str> {
        self.url().filter(|u| u.ends_with('/'))
    }

    /// What an output named after this location is named after: a path as it is, a remote
    /// location's last part (without an `http(s)://` location's query or fragment); `None`
    /// for bytes and for a location without a last part.
    pub fn file_name(&self) -> Option<Cow<'_, Path>> {
        let url = match self {
            Location::Path(p) => return Some(Cow::Borrowed(p)),
            Location::Url(u) => u.as_str(),
            Location::Bytes(_) => return None,
        };
        let s3 = url
            .get(..5)
            .is_some_and(|p| p.eq_ignore_ascii_case("s3://"));
        let path = match s3 {
            true => url,
            false => url.split(['?', '#']).next().unwrap_or(url),
        };
        match path.rsplit('/').next() {
            Some(n) if !matches!(n, "" | "." | "..") => Some(Cow::Owned(PathBuf::from(n))),
            _ => None,
        }
    }

    /// The name of the base the archive here needs, if it is an archive (a file or bytes) that
    /// needs one; a remote archive is not asked (it would cost requests).
    pub fn needed_base(&self) -> Option<String> {
        let name = match self {
            Location::Path(p) => Archive::open(File::open(p).ok()?).ok()?.base_name()?.into(),
            Location::Bytes(b) => Archive::open(Cursor::new(&b[..])).ok()?.base_name()?.into(),
            Location::Url(_) => return None,
        };
        Some(name)
    }

    /// Opens the base at `base` for the archive here: when it cannot be used, the error says
    /// which base the archive needs ([`Error::ForBase`]).
    pub fn open_base(&self, base: impl AsRef<Path>) -> Result<Base> {
        Base::open(base).map_err(|e| match self.needed_base() {
            Some(needed) => Error::ForBase {
                error: Box::new(e),
                needed,
            },
            None => e,
        })
    }

    /// The location as messages name it.
    fn shown(&self) -> String {
        match self {
            Location::Path(p) => p.display().to_string(),
            Location::Url(u) => u.clone(),
            Location::Bytes(_) => "the archive in memory".into(),
        }
    }
}

/// How an archive is opened and read: the one options value of [`Archive::open_at`],
/// [`Source::open`] and [`Output::create`].
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct OpenOptions {
    /// The base the archive is coded against ([`Location::open_base`] opens it).
    pub base: Option<Base>,
    /// How remote locations are read and written.
    #[cfg(feature = "remote")]
    pub remote: RemoteOptions,
    /// Memory for the blocks a read decodes at once; `None`: [`crate::DEFAULT_MEMORY`], or
    /// what one block needs where that is more.
    pub memory: Option<u64>,
    /// Worker threads for a whole decode ([`OpenOptions::decode_options`]); 0: the current
    /// rayon pool. [`worker_threads`] caps a request to the cores.
    pub threads: usize,
    /// What stops a whole decode (between blocks) and a remote reader's waits, ending them in
    /// [`Error::Cancelled`]; a remote reader also stops on its own `remote.cancel`.
    pub cancel: Option<Cancel>,
}

impl OpenOptions {
    /// The options of a whole decode with this base, memory and threads; the caller sets the
    /// rest (`check_md5`, `progress`, `map`).
    pub fn decode_options(&self) -> DecodeOptions<'_> {
        let d = DecodeOptions::default();
        DecodeOptions {
            base: self.base.as_ref(),
            memory: self.memory.unwrap_or(d.memory),
            threads: self.threads,
            cancel: self.cancel.as_ref(),
            ..d
        }
    }
}

/// The worker threads for a request of `requested`: all cores for 0, and never more than the
/// cores, where more threads only add memory and switching.
pub fn worker_threads(requested: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    match requested {
        0 => cores,
        n => n.min(cores),
    }
}

/// The bytes of an archive, wherever they are: what [`Archive::open_at`] reads, carrying the
/// read-ahead hint a remote reader takes (told each read's blocks ahead, it fetches them in
/// parallel).
pub struct Source {
    inner: Inner,
    /// A local file's metadata, taken when it was opened.
    meta: Option<Metadata>,
}

enum Inner {
    File(BufReader<File>),
    Bytes(Cursor<Arc<[u8]>>),
    #[cfg(feature = "remote")]
    Remote(RemoteFile),
}

/// Buffer for a local archive's header and index reads; blocks are read whole past it.
const FILE_BUFFER: usize = 64 << 10;

impl Source {
    /// Opens the archive at `at`: a file (not a folder), bytes, or a remote location (two
    /// requests, for its end and its start). A file that cannot be opened is an
    /// [`Error::File`].
    pub fn open(at: &Location, opts: &OpenOptions) -> Result<Source> {
        #[cfg(not(feature = "remote"))]
        let _ = opts;
        let (inner, meta) = match at {
            Location::Path(p) => {
                let (f, meta) = open_file(p)?;
                (
                    Inner::File(BufReader::with_capacity(FILE_BUFFER, f)),
                    Some(meta),
                )
            }
            Location::Bytes(b) => (Inner::Bytes(Cursor::new(b.clone())), None),
            #[cfg(feature = "remote")]
            Location::Url(u) => {
                let mut remote = opts.remote.clone();
                remote.cancel = remote.cancel.or_else(|| opts.cancel.clone());
                (Inner::Remote(RemoteFile::open(u, &remote)?), None)
            }
            #[cfg(not(feature = "remote"))]
            Location::Url(u) => {
                return Err(Error::InvalidArgument(format!(
                    "{u}: remote locations need sc's `remote` feature"
                )))
            }
        };
        Ok(Source { inner, meta })
    }

    /// The archive in `file`, opened already (not a folder).
    pub fn file(file: File) -> Result<Source> {
        let meta = file.metadata()?;
        if meta.is_dir() {
            return Err(io::Error::from(io::ErrorKind::IsADirectory).into());
        }
        let inner = Inner::File(BufReader::with_capacity(FILE_BUFFER, file));
        Ok(Source {
            inner,
            meta: Some(meta),
        })
    }

    /// A local file's metadata, as it was when it was opened (`None` for bytes and remote
    /// locations).
    pub fn metadata(&self) -> Option<&Metadata> {
        self.meta.as_ref()
    }

    /// Length of the archive, where it is known before reading it (a regular file, bytes, a
    /// remote object).
    pub fn len(&self) -> Option<u64> {
        match &self.inner {
            Inner::File(_) => self
                .meta
                .as_ref()
                .filter(|m| m.is_file())
                .map(Metadata::len),
            Inner::Bytes(b) => Some(b.get_ref().len() as u64),
            #[cfg(feature = "remote")]
            Inner::Remote(r) => Some(r.len()),
        }
    }

    /// Whether the archive is known to be empty.
    pub fn is_empty(&self) -> bool {
        self.len() == Some(0)
    }

    /// What the requests of a remote archive did so far (`None` for a local one).
    #[cfg(feature = "remote")]
    pub fn remote_stats(&self) -> Option<RemoteStats> {
        match &self.inner {
            Inner::Remote(r) => Some(r.stats()),
            _ => None,
        }
    }

    /// The archive's bytes as a local file, for readers that need one (an encode, which finds
    /// repeated tensors by reading its input twice): a local file itself, bytes and a remote
    /// object copied into an unnamed temporary file (each piece of the object fetched once).
    pub fn to_file(&mut self) -> Result<File> {
        let mut tmp = match &mut self.inner {
            Inner::File(f) => return Ok(f.get_ref().try_clone()?),
            _ => tempfile::tempfile()?,
        };
        if let Some(p) = self.prefetch() {
            let whole = 0..self.len().unwrap_or(0);
            p.will_read(std::slice::from_ref(&whole));
        }
        self.seek(SeekFrom::Start(0))?;
        io::copy(self, &mut tmp)?;
        tmp.seek(SeekFrom::Start(0))?;
        Ok(tmp)
    }

    /// What plans a remote reader's fetching ahead.
    fn prefetch(&self) -> Option<Arc<dyn Prefetch>> {
        match &self.inner {
            #[cfg(feature = "remote")]
            Inner::Remote(r) => Some(r.prefetch()),
            _ => None,
        }
    }

    /// Decompresses the whole archive into `output` with `opts`
    /// ([`OpenOptions::decode_options`]): a file through [`decode_file`], bytes where they
    /// lie, a remote archive as `decode_url` does. Returns the report and, for a
    /// remote archive, what its requests did.
    pub fn decode<W: Write + Send>(self, output: W, opts: &DecodeOptions) -> Result<Decoded> {
        let report = match self.inner {
            Inner::File(f) => decode_file(f.get_ref(), output, opts)?,
            Inner::Bytes(b) => decode_slice(b.get_ref(), output, opts)?,
            #[cfg(feature = "remote")]
            Inner::Remote(r) => {
                let (report, stats) = crate::remote_archive::decode_remote(r, output, opts)?;
                return Ok(Decoded {
                    report,
                    remote: Some(stats),
                });
            }
        };
        Ok(Decoded {
            report,
            #[cfg(feature = "remote")]
            remote: None,
        })
    }
}

/// What [`Source::decode`] did.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Decoded {
    /// The decode's report.
    pub report: DecodeReport,
    /// What the requests of a remote archive did (`None` for a local one).
    #[cfg(feature = "remote")]
    pub remote: Option<RemoteStats>,
}

impl Read for Source {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match &mut self.inner {
            Inner::File(f) => f.read(buf),
            Inner::Bytes(b) => b.read(buf),
            #[cfg(feature = "remote")]
            Inner::Remote(r) => r.read(buf),
        }
    }
}

impl Seek for Source {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        match &mut self.inner {
            Inner::File(f) => f.seek(pos),
            Inner::Bytes(b) => b.seek(pos),
            #[cfg(feature = "remote")]
            Inner::Remote(r) => r.seek(pos),
        }
    }
}

/// Opens the file at `path`, which must not be a folder, with its metadata.
fn open_file(path: &Path) -> Result<(File, Metadata)> {
    let failed = |source: io::Error| Error::File {
        location: path.display().to_string(),
        source,
        writing: false,
    };
    let f = File::open(path).map_err(failed)?;
    let meta = f.metadata().map_err(failed)?;
    if meta.is_dir() {
        return Err(failed(io::ErrorKind::IsADirectory.into()));
    }
    Ok((f, meta))
}

impl Archive<Source> {
    /// Opens the archive at `at` for random access with `opts`' base, memory and remote
    /// options: the one way to open an archive from a path, a remote location or bytes.
    ///
    /// ```
    /// # let tiny = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/tiny.safetensors"))?;
    /// let bytes = sc::encode_to_vec(&tiny, &Default::default())?;
    /// let at = sc::Location::Bytes(bytes.into());
    /// let mut archive = sc::Archive::open_at(&at, &sc::OpenOptions::default())?;
    /// let name = archive.tensors()[0].name.clone();
    /// assert!(!archive.read_tensor(&name)?.is_empty());
    /// # Ok::<(), sc::Error>(())
    /// ```
    pub fn open_at(at: &Location, opts: &OpenOptions) -> Result<Self> {
        Archive::open_source(Source::open(at, opts)?, opts)
    }

    /// [`Archive::open_at`] of a source opened already.
    pub fn open_source(source: Source, opts: &OpenOptions) -> Result<Self> {
        let prefetch = source.prefetch();
        let mut archive = Archive::open_with(source, opts.base.clone())?;
        if let Some(p) = prefetch {
            archive.set_prefetch(p);
        }
        if let Some(memory) = opts.memory {
            archive.set_memory(memory)?;
        }
        Ok(archive)
    }

    /// What the requests of a remote archive did so far (`None` for a local one).
    #[cfg(feature = "remote")]
    pub fn remote_stats(&self) -> Option<RemoteStats> {
        self.reader().remote_stats()
    }
}

/// What the archive at `at` says of itself ([`inspect`]); a remote one from its header and
/// index alone (two requests), its transforms and codecs, which only its block records tell,
/// left empty.
pub fn inspect_at(at: &Location, opts: &OpenOptions) -> Result<ArchiveInfo> {
    let mut source = Source::open(at, opts)?;
    match source.inner {
        #[cfg(feature = "remote")]
        Inner::Remote(ref mut r) => crate::inspect::inspect_with(r, false),
        _ => inspect(&mut source),
    }
}

/// Where an output goes: a local file written through [`OutputFile`] (a temporary file
/// renamed into place once complete), or an upload (`remote` feature: visible once complete).
/// Dropped without [`Output::commit`], nothing is left.
pub struct Output {
    inner: Sink,
}

enum Sink {
    File(OutputFile),
    #[cfg(feature = "remote")]
    Upload(Box<Upload>),
}

/// What [`Output::commit`] made.
#[derive(Debug)]
#[non_exhaustive]
pub enum Committed {
    /// A file: the metadata of the file renamed into place (none for one written in place).
    File(Option<Metadata>),
    /// An upload: what its requests did.
    #[cfg(feature = "remote")]
    Upload(RemoteStats),
}

impl Output {
    /// Starts the output at `at`. Without `overwrite`, an existing file or object is refused
    /// ([`Error::File`], of kind `AlreadyExists`), and an upload that another completes
    /// meanwhile is not replaced either (as far as the store can say: see
    /// `Upload::create_new`). Bytes are not a destination.
    pub fn create(at: &Location, overwrite: bool, opts: &OpenOptions) -> Result<Output> {
        let refused = |source: io::Error| Error::File {
            location: at.shown(),
            source,
            writing: true,
        };
        let inner = match at {
            Location::Path(p) => Sink::File(OutputFile::create(p, overwrite).map_err(refused)?),
            #[cfg(feature = "remote")]
            Location::Url(u) => {
                if !overwrite && Upload::exists(u, &opts.remote)? {
                    return Err(refused(io::ErrorKind::AlreadyExists.into()));
                }
                Sink::Upload(Box::new(match overwrite {
                    true => Upload::create(u, &opts.remote)?,
                    false => Upload::create_new(u, &opts.remote)?,
                }))
            }
            _ => {
                let _ = opts;
                return Err(Error::InvalidArgument(format!(
                    "{} cannot be written to",
                    at.shown()
                )));
            }
        };
        Ok(Output { inner })
    }

    /// The local file being written, if the output is one.
    pub fn file(&self) -> Option<&OutputFile> {
        match &self.inner {
            Sink::File(f) => Some(f),
            #[cfg(feature = "remote")]
            Sink::Upload(_) => None,
        }
    }

    /// Completes the output: a temporary file renamed over the destination (synced first,
    /// with its folder, when `durable`), an upload completed.
    pub fn commit(self, durable: bool) -> Result<Committed> {
        match self.inner {
            Sink::File(f) => {
                let location = f.path().display().to_string();
                let made = f.commit(durable).map_err(|source| Error::File {
                    location,
                    source,
                    writing: true,
                })?;
                Ok(Committed::File(made))
            }
            #[cfg(feature = "remote")]
            Sink::Upload(u) => Ok(Committed::Upload(u.finish()?)),
        }
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.inner {
            Sink::File(f) => f.write(buf),
            #[cfg(feature = "remote")]
            Sink::Upload(u) => u.write(buf),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match &mut self.inner {
            Sink::File(f) => f.write_all(buf),
            #[cfg(feature = "remote")]
            Sink::Upload(u) => u.write_all(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.inner {
            Sink::File(f) => f.flush(),
            #[cfg(feature = "remote")]
            Sink::Upload(u) => u.flush(),
        }
    }
}
