//! Streaming adapters: an [`Encoder`] that is a [`Write`] and a [`Decoder`] that is a [`Read`],
//! so sc can sit in any pipeline of readers and writers.
//!
//! Each runs [`encode`] or [`decode`] on a thread of its own, fed or drained through a bounded
//! queue of chunks, so the archive is exactly the one [`encode`] writes and every check of
//! [`decode`] applies; memory stays bounded by the queue and the pipeline's window of blocks.
//! The wrapped writer or reader moves to that thread, hence the `Send + 'static` bounds.

use crate::error::{Error, Result};
use crate::pipeline::decode::{decode, DecodeOptions, DecodeReport};
use crate::pipeline::encode::{encode, EncodeOptions, EncodeReport};
use std::io::{self, Read, Write};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;

/// Bytes handed between the caller and the coding thread at a time.
const CHUNK: usize = 256 << 10;
/// Chunks queued between them: with [`CHUNK`], at most 2 MiB.
const QUEUE: usize = 8;

/// Appends to `chunk` (shorter than [`CHUNK`]) what of `buf` fits in it; returns how much.
fn fill(chunk: &mut Vec<u8>, buf: &[u8]) -> usize {
    let n = buf.len().min(CHUNK - chunk.len());
    chunk.extend_from_slice(&buf[..n]);
    n
}

/// Copies what of `chunk` from `*pos` on fits into `buf`, advancing `*pos`; returns how much.
fn drain(chunk: &[u8], pos: &mut usize, buf: &mut [u8]) -> usize {
    let n = buf.len().min(chunk.len() - *pos);
    buf[..n].copy_from_slice(&chunk[*pos..*pos + n]);
    *pos += n;
    n
}

/// What the caller sends the encoding thread.
enum Input {
    Data(Vec<u8>),
    /// [`Encoder::finish`]: the input is complete.
    End,
}

/// The encoding thread's input: the chunks the caller wrote.
struct Chunks {
    rx: Receiver<Input>,
    chunk: Vec<u8>,
    pos: usize,
    ended: bool,
}

impl Read for Chunks {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.chunk.len() && !self.ended {
            match self.rx.recv() {
                Ok(Input::Data(chunk)) => (self.chunk, self.pos) = (chunk, 0),
                Ok(Input::End) => self.ended = true,
                // Dropped without `finish`: the input is not complete, so no archive may be.
                Err(_) => return Err(io::Error::other("the encoder was dropped before finish")),
            }
        }
        Ok(drain(&self.chunk, &mut self.pos, buf))
    }
}

/// A [`Write`] that compresses what is written to it into an archive on the writer it wraps;
/// [`Encoder::finish`] completes the archive.
///
/// ```
/// use std::io::Write;
/// let weights = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/tiny.safetensors"))?;
/// let mut encoder = sc::Encoder::new(Vec::new(), &sc::EncodeOptions::new(sc::Mode::Fast))?;
/// encoder.write_all(&weights)?;
/// let (archive, report) = encoder.finish()?;
/// assert_eq!(report.archive_len, archive.len() as u64);
/// # Ok::<(), sc::Error>(())
/// ```
///
/// An encoder dropped without `finish` leaves an incomplete archive (no index or trailer),
/// which decoders refuse.
pub struct Encoder<W> {
    tx: Option<SyncSender<Input>>,
    pending: Vec<u8>,
    worker: Option<JoinHandle<Result<(W, EncodeReport)>>>,
}

impl<W: Write + Send + 'static> Encoder<W> {
    /// An encoder writing to `output` with `opts` (whose `input_len` says how many bytes will
    /// be written, if known).
    pub fn new(output: W, opts: &EncodeOptions<'static>) -> Result<Encoder<W>> {
        let (tx, rx) = sync_channel(QUEUE);
        let opts = *opts;
        let input = Chunks {
            rx,
            chunk: Vec::new(),
            pos: 0,
            ended: false,
        };
        let worker = std::thread::Builder::new()
            .name("sc-encoder".into())
            .spawn(move || {
                let mut output = output;
                let report = encode(input, &mut output, &opts)?;
                Ok((output, report))
            })?;
        Ok(Encoder {
            tx: Some(tx),
            pending: Vec::with_capacity(CHUNK),
            worker: Some(worker),
        })
    }

    /// Completes the archive; returns the writer and what was encoded.
    pub fn finish(mut self) -> Result<(W, EncodeReport)> {
        self.send_pending()?;
        if let Some(tx) = self.tx.take() {
            // A failed send means the thread ended already; joining says why.
            let _ = tx.send(Input::End);
        }
        self.join()
    }

    /// Hands the bytes gathered so far to the encoding thread.
    fn send_pending(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let chunk = std::mem::replace(&mut self.pending, Vec::with_capacity(CHUNK));
        let sent = self
            .tx
            .as_ref()
            .is_some_and(|tx| tx.send(Input::Data(chunk)).is_ok());
        if sent {
            return Ok(());
        }
        self.tx = None;
        self.join().map(|_| ())
    }

    /// Waits for the encoding thread and returns its outcome (once; later calls say that it
    /// has ended).
    fn join(&mut self) -> Result<(W, EncodeReport)> {
        let worker = self.worker.take().ok_or_else(|| {
            Error::Io(io::Error::other(
                "the encoder has already failed or finished",
            ))
        })?;
        match worker.join() {
            Ok(result) => result,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}

impl<W: Write + Send + 'static> Write for Encoder<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = fill(&mut self.pending, buf);
        // Shorter than CHUNK between calls: a full chunk goes at once.
        if self.pending.len() == CHUNK {
            self.send_pending()?;
        }
        Ok(n)
    }

    /// Hands buffered bytes to the encoding thread. The archive reaches the wrapped writer as
    /// its blocks are coded, and is complete only after [`Encoder::finish`].
    fn flush(&mut self) -> io::Result<()> {
        Ok(self.send_pending()?)
    }
}

/// The decoding thread's output: chunks for the caller.
struct Sink {
    tx: SyncSender<Vec<u8>>,
    chunk: Vec<u8>,
}

impl Sink {
    fn send(&mut self) -> io::Result<()> {
        if self.chunk.is_empty() {
            return Ok(());
        }
        let chunk = std::mem::take(&mut self.chunk);
        self.tx
            .send(chunk)
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the decoder was dropped"))
    }
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.chunk.is_empty() && buf.len() >= CHUNK {
            // A whole block: one copy, sent as it is.
            self.chunk = buf.to_vec();
            self.send()?;
            return Ok(buf.len());
        }
        let n = fill(&mut self.chunk, buf);
        // Shorter than CHUNK between calls: a full chunk goes at once.
        if self.chunk.len() == CHUNK {
            self.send()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.send()
    }
}

/// A [`Read`] that yields the original bytes of the archive read from the reader it wraps.
///
/// ```
/// use std::io::Read;
/// let weights = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/tiny.safetensors"))?;
/// let archive = sc::encode_to_vec(&weights, &sc::EncodeOptions::default())?;
/// let mut decoder = sc::Decoder::new(std::io::Cursor::new(archive), &sc::DecodeOptions::default())?;
/// let mut restored = Vec::new();
/// decoder.read_to_end(&mut restored)?;
/// assert_eq!(restored, weights);
/// # Ok::<(), sc::Error>(())
/// ```
///
/// Every check of [`decode`] applies. Bytes of the blocks before a corrupt one are delivered
/// before the error that names it, and checks of the whole file (the MD5, the trailer) end the
/// stream: only a read that returns 0 says the output is complete and correct.
pub struct Decoder {
    rx: Receiver<Vec<u8>>,
    chunk: Vec<u8>,
    pos: usize,
    worker: Option<JoinHandle<Result<DecodeReport>>>,
    report: Option<DecodeReport>,
}

impl Decoder {
    /// A decoder of the archive read from `input`, with `opts`.
    pub fn new<R: Read + Send + 'static>(
        input: R,
        opts: &DecodeOptions<'static>,
    ) -> Result<Decoder> {
        let (tx, rx) = sync_channel(QUEUE);
        let opts = *opts;
        let worker = std::thread::Builder::new()
            .name("sc-decoder".into())
            .spawn(move || {
                let mut sink = Sink {
                    tx,
                    chunk: Vec::new(),
                };
                decode(input, &mut sink, &opts)
            })?;
        Ok(Decoder {
            rx,
            chunk: Vec::new(),
            pos: 0,
            worker: Some(worker),
            report: None,
        })
    }

    /// What was decoded, once a read has returned 0.
    pub fn report(&self) -> Option<&DecodeReport> {
        self.report.as_ref()
    }
}

impl Read for Decoder {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.chunk.len() {
            match self.rx.recv() {
                Ok(chunk) => (self.chunk, self.pos) = (chunk, 0),
                // The thread has ended: its outcome decides between the end and an error.
                Err(_) => {
                    let Some(worker) = self.worker.take() else {
                        return match self.report {
                            Some(_) => Ok(0),
                            None => Err(io::Error::other("the archive failed to decode")),
                        };
                    };
                    match worker.join() {
                        Ok(Ok(report)) => {
                            self.report = Some(report);
                            return Ok(0);
                        }
                        Ok(Err(e)) => return Err(e.into()),
                        Err(panic) => std::panic::resume_unwind(panic),
                    }
                }
            }
        }
        Ok(drain(&self.chunk, &mut self.pos, buf))
    }
}
