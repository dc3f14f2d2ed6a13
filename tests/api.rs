//! The public API's entry points beside `encode`/`decode`: the in-memory ones, the streaming
//! adapters, the thread-count option and mode names. Each must give exactly what `encode` and
//! `decode` give.

mod common;

use common::Rng;
use sc::{DecodeOptions, Decoder, EncodeOptions, Encoder, Error, Mode};
use std::io::{Cursor, Read, Write};

const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/sample.safetensors");

fn sample() -> Vec<u8> {
    std::fs::read(SAMPLE).expect("testdata/sample.safetensors")
}

/// The archive `encode` writes for `input` with `opts` (length known).
fn reference(input: &[u8], opts: &EncodeOptions) -> Vec<u8> {
    let mut archive = Vec::new();
    let opts = EncodeOptions {
        input_len: Some(input.len() as u64),
        ..*opts
    };
    sc::encode(input, &mut archive, &opts).expect("encode");
    archive
}

#[test]
fn in_memory_entry_points_match_the_streaming_ones() {
    let input = sample();
    for mode in [Mode::Fast, Mode::Best] {
        let opts = EncodeOptions {
            block_size: 64 << 10,
            ..EncodeOptions::new(mode)
        };
        let archive = sc::encode_to_vec(&input, &opts).unwrap();
        assert!(archive == reference(&input, &opts), "{mode:?}");
        let opts = DecodeOptions {
            check_md5: true,
            ..Default::default()
        };
        assert!(
            sc::decode_to_vec(&archive, &opts).unwrap() == input,
            "{mode:?}"
        );
        let mut bad = archive.clone();
        let n = bad.len();
        bad[n / 2] ^= 0x40;
        assert!(sc::decode_to_vec(&bad, &opts).is_err(), "{mode:?}");
    }
}

#[test]
fn encoder_writes_the_archive_encode_writes() {
    let input = sample();
    for mode in [Mode::Fast, Mode::Best] {
        let opts = EncodeOptions {
            input_len: Some(input.len() as u64),
            ..EncodeOptions::new(mode)
        };
        // Writes of awkward sizes, and a flush in the middle.
        let mut encoder = Encoder::new(Vec::new(), &opts).unwrap();
        let mut rng = Rng(3);
        let mut at = 0;
        while at < input.len() {
            let n = (rng.next() % 300_000) as usize + 1;
            let end = (at + n).min(input.len());
            encoder.write_all(&input[at..end]).unwrap();
            if at == 0 {
                encoder.flush().unwrap();
            }
            at = end;
        }
        let (archive, report) = encoder.finish().unwrap();
        assert!(archive == reference(&input, &opts), "{mode:?}");
        assert_eq!(report.archive_len, archive.len() as u64);
        assert_eq!(report.original_len, input.len() as u64);
    }
    // No input at all is an archive of nothing.
    let (empty, _) = Encoder::new(Vec::new(), &EncodeOptions::default())
        .unwrap()
        .finish()
        .unwrap();
    assert_eq!(
        sc::decode_to_vec(&empty, &DecodeOptions::default()).unwrap(),
        b""
    );
}

/// A writer that records what reached it, readable after the encoder that owns it is gone.
#[derive(Clone, Default)]
struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn an_encoder_dropped_unfinished_leaves_no_valid_archive() {
    let input = sample();
    let out = Shared::default();
    let mut encoder = Encoder::new(out.clone(), &EncodeOptions::default()).unwrap();
    encoder.write_all(&input[..input.len() / 2]).unwrap();
    drop(encoder);
    // The encoding thread notices and stops; what it wrote is not an archive of half the input.
    for _ in 0..200 {
        if std::sync::Arc::strong_count(&out.0) == 1 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let written = out.0.lock().unwrap().clone();
    assert!(sc::decode_to_vec(&written, &DecodeOptions::default()).is_err());
}

#[test]
fn decoder_reads_the_original_and_reports_corruption() {
    let input = sample();
    let archive = sc::encode_to_vec(&input, &EncodeOptions::new(Mode::Best)).unwrap();
    let opts = DecodeOptions {
        check_md5: true,
        ..Default::default()
    };
    let mut decoder = Decoder::new(Cursor::new(archive.clone()), &opts).unwrap();
    // Reads of awkward sizes.
    let mut out = Vec::new();
    let mut buf = vec![0u8; 77_777];
    loop {
        let n = decoder.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    assert!(out == input);
    let report = decoder.report().expect("a report at the end");
    assert_eq!(report.original_len, input.len() as u64);
    assert!(report.md5.is_some() && report.md5 == report.stored_md5);
    // A corrupt block: an error, not the end of the data, and never an end after it.
    let mut bad = archive;
    let n = bad.len();
    bad[n / 2] ^= 0x10;
    let mut decoder = Decoder::new(Cursor::new(bad), &opts).unwrap();
    let mut out = Vec::new();
    assert!(decoder.read_to_end(&mut out).is_err());
    assert!(out.len() < input.len());
    assert!(decoder.read(&mut buf).is_err());
    assert!(decoder.report().is_none());
}

#[test]
fn any_thread_count_writes_the_same_archive() {
    let input = sample();
    let [one, three] = [1, 3].map(|threads| {
        let opts = EncodeOptions {
            threads,
            ..EncodeOptions::new(Mode::Best)
        };
        sc::encode_to_vec(&input, &opts).unwrap()
    });
    assert!(one == three);
    let opts = DecodeOptions {
        threads: 1,
        ..Default::default()
    };
    assert!(sc::decode_to_vec(&one, &opts).unwrap() == input);
}

#[test]
fn modes_parse_from_their_names() {
    for mode in [Mode::Fast, Mode::Best] {
        assert_eq!(mode.to_string().parse::<Mode>().unwrap(), mode);
        assert_eq!(mode.name().to_uppercase().parse::<Mode>().unwrap(), mode);
    }
    assert!(matches!(
        "quick".parse::<Mode>(),
        Err(Error::InvalidArgument(_))
    ));
    assert!(EncodeOptions::check_block_size(4096).is_ok());
    assert!(EncodeOptions::check_block_size(4097).is_err());
    assert!(EncodeOptions::check_block_size(sc::MAX_BLOCK_SIZE + 2).is_err());
}

/// A writer that truncates the file `path` to `len` bytes on its first write.
struct TruncateOnWrite<'a> {
    path: &'a std::path::Path,
    len: u64,
    done: bool,
}

impl Write for TruncateOnWrite<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if !self.done {
            std::fs::OpenOptions::new()
                .write(true)
                .open(self.path)?
                .set_len(self.len)?;
            self.done = true;
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Without maps, `decode_file` reads the archive with positioned reads: it decodes what the
/// maps decode, and an archive truncated by another process meanwhile is an error, where a
/// map would kill the process with SIGBUS.
#[test]
fn decode_file_without_maps_fails_cleanly_on_a_file_truncated_meanwhile() {
    let dir = tempfile::tempdir().unwrap();
    let input = sample();
    let path = dir.path().join("sample.sc");
    std::fs::write(&path, reference(&input, &EncodeOptions::default())).unwrap();
    let unmapped = DecodeOptions {
        map: false,
        check_md5: true,
        ..Default::default()
    };
    let mut out = Vec::new();
    sc::decode_file(&std::fs::File::open(&path).unwrap(), &mut out, &unmapped).unwrap();
    assert!(out == input);

    // Incompressible: the archive is as long as the input, 32 MiB, much more than the blocks
    // one thread decodes ahead of the first write.
    let input = Rng(7).bytes(32 << 20);
    std::fs::write(&path, reference(&input, &EncodeOptions::default())).unwrap();
    let truncating = TruncateOnWrite {
        path: &path,
        len: 16 << 20,
        done: false,
    };
    let opts = DecodeOptions {
        threads: 1,
        ..unmapped
    };
    let r = sc::decode_file(&std::fs::File::open(&path).unwrap(), truncating, &opts);
    assert!(
        matches!(r, Err(Error::Truncated(_)) | Err(Error::Io(_))),
        "{r:?}"
    );
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 16 << 20);
}
