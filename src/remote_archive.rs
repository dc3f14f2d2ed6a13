//! Archives at remote locations (`remote` feature): [`Archive`] over a
//! [`RemoteFile`](crate::remote::RemoteFile), and a whole archive decoded from one
//! ([`decode_url`]). The archive reads them as it reads files, telling the reader what it will
//! read so that the blocks are fetched ahead, in parallel.

use crate::archive::Archive;
use crate::base::Base;
use crate::container::checksum::FileDigest;
use crate::error::{Error, Result};
use crate::inspect::{inspect_with, ArchiveInfo};
use crate::pipeline::decode::{check_md5, DecodeOptions, DecodeReport};
use crate::pipeline::on_threads;
use crate::pipeline::one_block_needs;
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
/// [`DecodeOptions::cancel`] stops it as [`RemoteOptions::cancel`] does: between blocks, and
/// within 50 ms of a wait for the server.
pub fn decode_url<W: Write + Send>(
    url: &str,
    output: W,
    opts: &DecodeOptions,
    remote: &RemoteOptions,
) -> Result<(DecodeReport, RemoteStats)> {
    on_threads(opts.threads, || {
        // The decode's token stops the reader's waits too.
        let mut remote = remote.clone();
        remote.cancel = remote.cancel.or_else(|| opts.cancel.cloned());
        let mut archive = Archive::open_url_with(url, opts.base.cloned(), &remote)?;
        fit_memory(&mut archive, opts.memory)?;
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

/// Shares the memory budget `memory` between the blocks in flight of `archive` and its
/// reader's read-ahead: the reader takes what one block in flight leaves, up to what it holds
/// by default ([`RemoteFile::hold_at_most`]), and the blocks the rest.
fn fit_memory(archive: &mut Archive<RemoteFile>, memory: u64) -> Result<()> {
    let needs = one_block_needs(archive.block_size(), archive.has_references());
    let held = archive.reader().hold_at_most(memory.saturating_sub(needs));
    archive
        .set_memory(memory.saturating_sub(held))
        .map_err(|e| match e {
            Error::InvalidArgument(why) => Error::InvalidArgument(format!(
                "{why}, besides the {} KiB that the remote reader holds at least",
                held >> 10
            )),
            e => e,
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
