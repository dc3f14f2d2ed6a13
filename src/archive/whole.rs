//! Whole archives decoded: a file (through memory maps or positioned reads), bytes in memory;
//! and the second reader a full decode opens for the sources of repeated tensors.

use super::*;

/// Decompresses the archive file `file` into `output`. A regular file is read from its start
/// (whatever its cursor) through memory maps of a few megabytes at a time, so that blocks are
/// decoded where the page cache holds them, or from its start with positioned reads when
/// [`DecodeOptions::map`] is off; anything else, or a file that cannot be mapped, is read as a
/// stream from its cursor.
///
/// Like every reader of mapped files, the process can be killed by SIGBUS if another process
/// truncates the file while it is being decoded through maps.
pub fn decode_file<W: Write + Send>(
    file: &File,
    output: W,
    opts: &DecodeOptions,
) -> Result<DecodeReport> {
    on_threads(opts.threads, || decode_file_here(file, output, opts))
}

/// [`decode_file`] on the current thread pool.
fn decode_file_here<W: Write + Send>(
    file: &File,
    output: W,
    opts: &DecodeOptions,
) -> Result<DecodeReport> {
    let meta = file.metadata()?;
    // Some regular files report no length (procfs, some FUSE file systems): `new` leaves
    // those, like files that cannot be mapped, to be streamed.
    let mapped = (meta.is_file() && opts.map)
        .then(|| MappedFile::new(file, meta.len()))
        .flatten();
    let whole = DecodeOptions {
        archive_len: Some(meta.len()),
        ..*opts
    };
    match mapped {
        Some(mapped) => decode_from(mapped, output, &whole, Some(reread(|| At::new(file)))),
        None if !opts.map && meta.is_file() && meta.len() > 0 => {
            let input = Stream(BufReader::with_capacity(64 << 10, At::new(file)?));
            decode_from(input, output, &whole, Some(reread(|| At::new(file))))
        }
        None => {
            let input = Stream(BufReader::with_capacity(64 << 10, file));
            decode_from(input, output, opts, None)
        }
    }
}

/// Decompresses the archive `archive` (in memory, or a memory map of a file) into `output`,
/// decoding its blocks where they lie instead of copying them out first.
pub fn decode_slice<W: Write + Send>(
    archive: &[u8],
    output: W,
    opts: &DecodeOptions,
) -> Result<DecodeReport> {
    let opts = DecodeOptions {
        archive_len: Some(archive.len() as u64),
        ..*opts
    };
    let again = reread(move || Ok(io::Cursor::new(archive)));
    on_threads(opts.threads, || {
        decode_from(archive, output, &opts, Some(again))
    })
}

/// Decompresses the archive `archive` into a new buffer.
pub fn decode_to_vec(archive: &[u8], opts: &DecodeOptions) -> Result<Vec<u8>> {
    // The trailer's length is only a hint, and bounded: a corrupt one must not allocate.
    let hint = Footer::read_from_end(&mut std::io::Cursor::new(archive), archive.len() as u64)
        .map_or(0, |f| f.original_len.min(archive.len() as u64 * 4));
    let mut out = Vec::with_capacity(hint as usize);
    decode_slice(archive, &mut out, opts)?;
    Ok(out)
}

/// The archive being decoded opened a second time (`open` gives a reader of it from its
/// start), with the base: where a full decode reads the sources of repeated tensors. Built
/// here, where archives are opened, and handed down to the decoder.
fn reread<'r, R: Read + Seek + Send + 'r>(
    open: impl FnOnce() -> io::Result<R> + Send + 'r,
) -> Reread<'r> {
    Box::new(move |base| {
        let archive = Archive::open_with(open()?, base)?;
        Ok(Box::new(Mutex::new(archive)) as Box<dyn OwnBytes + 'r>)
    })
}

/// An archive opened a second time, reading the sources of its repeated tensors.
impl<R: Read + Seek + Send> OwnBytes for Mutex<Archive<R>> {
    fn read_own(&self, range: Range<u64>, out: &mut [u8]) -> Result<()> {
        let mut archive = self
            .lock()
            .map_err(|_| Error::Io(io::Error::other("archive reader poisoned")))?;
        archive.read_range_into(range, out)
    }
}
