//! Archives at remote locations (`remote` feature): [`Archive`] over a
//! [`RemoteFile`](crate::remote::RemoteFile), and a whole archive decoded from one
//! ([`decode_url`]). The archive reads them as it reads files, telling the reader what it will
//! read so that the blocks are fetched ahead, in parallel.

use crate::archive::Archive;
use crate::base::Base;
use crate::container::checksum::FileDigest;
use crate::error::Result;
use crate::inspect::{inspect_with, ArchiveInfo};
use crate::pipeline::decode::{check_md5, DecodeOptions, DecodeReport};
use crate::pipeline::on_threads;
use crate::remote::{RemoteFile, RemoteOptions, RemoteStats};
use std::io::{self, Write};

impl Archive<RemoteFile> {
    /// Opens the archive at `url` (`http://`, `https://`, `s3://`;
    /// [`crate::remote`] says how S3 is configured) with two requests, for its end (trailer
    /// and index) and its start (file header). Reads fetch only the blocks they need, adjacent
    /// blocks in one range, over [`RemoteOptions::connections`] connections at once, decoding
    /// as the bytes arrive; a block that fails to decode is fetched once more before its read
    /// fails.
    ///
    /// ```no_run
    /// let opts = sc::remote::RemoteOptions::default();
    /// let mut archive = sc::Archive::open_url("s3://models/llama.safetensors.sc", &opts)?;
    /// let bytes = archive.read_tensor("lm_head.weight")?;
    /// println!("{} requests", archive.remote_stats().requests);
    /// # Ok::<(), sc::Error>(())
    /// ```
    pub fn open_url(url: &str, opts: &RemoteOptions) -> Result<Self> {
        Self::open_url_with(url, None, opts)
    }

    /// [`Archive::open_url`] for an archive coded against `base`
    /// ([`Archive::open_with_base`]).
    pub fn open_url_with_base(url: &str, base: Base, opts: &RemoteOptions) -> Result<Self> {
        Self::open_url_with(url, Some(base), opts)
    }

    fn open_url_with(url: &str, base: Option<Base>, opts: &RemoteOptions) -> Result<Self> {
        let file = RemoteFile::open(url, opts)?;
        let prefetch = file.prefetch();
        let mut archive = Archive::open_with(file, base)?;
        archive.set_prefetch(prefetch);
        Ok(archive)
    }

    /// What the requests for this archive did so far.
    pub fn remote_stats(&self) -> RemoteStats {
        self.reader().stats()
    }
}

/// What the archive at `url` says of itself ([`crate::inspect`]), from its header and index
/// alone (two requests): its transforms and codecs, which only its block records tell, are
/// left empty.
pub fn inspect_url(url: &str, opts: &RemoteOptions) -> Result<(ArchiveInfo, RemoteStats)> {
    let mut file = RemoteFile::open(url, opts)?;
    let info = inspect_with(&mut file, false)?;
    Ok((info, file.stats()))
}

/// Decompresses the whole archive at `url` into `output`, reading it as
/// [`Archive::open_url`] does, with what `opts` asks for ([`DecodeOptions::progress`] and
/// [`DecodeOptions::map`] aside); returns the report and what the requests did.
pub fn decode_url<W: Write + Send>(
    url: &str,
    output: W,
    opts: &DecodeOptions,
    remote: &RemoteOptions,
) -> Result<(DecodeReport, RemoteStats)> {
    decode_remote(RemoteFile::open(url, remote)?, output, opts)
}

/// [`decode_url`] of the remote file `file`, opened already.
pub(crate) fn decode_remote<W: Write + Send>(
    file: RemoteFile,
    output: W,
    opts: &DecodeOptions,
) -> Result<(DecodeReport, RemoteStats)> {
    on_threads(opts.threads, || {
        let prefetch = file.prefetch();
        let mut archive = Archive::open_with(file, opts.base.cloned())?;
        archive.set_prefetch(prefetch);
        archive.set_memory(opts.memory)?;
        let mut out = Hashing {
            out: output,
            digest: opts.check_md5.then(FileDigest::new),
        };
        archive.read_range_to(0..archive.original_len(), &mut out)?;
        out.flush()?;
        let stored_md5 = archive.recorded_md5()?;
        let md5 = out.digest.map(FileDigest::finish);
        check_md5(stored_md5, md5)?;
        let report = DecodeReport {
            mode: archive.mode(),
            kind: archive.kind(),
            block_size: archive.block_size(),
            original_len: archive.original_len(),
            archive_len: archive.archive_len(),
            blocks: archive.blocks(),
            stored_md5,
            md5,
        };
        Ok((report, archive.remote_stats()))
    })
}

/// A writer that computes the MD5 of what passes through it, when asked to.
struct Hashing<W> {
    out: W,
    digest: Option<FileDigest>,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.out.write(buf)?;
        if let Some(d) = &mut self.digest {
            d.update(&buf[..n]);
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}
