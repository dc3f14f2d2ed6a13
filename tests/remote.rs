//! Remote archives against real servers on 127.0.0.1: nginx (range requests over HTTP) and
//! SeaweedFS (S3), with a proxy of the test's own for faults (`tests/servers`). Round trips are
//! exact; one tensor's read fetches the header, the index and its blocks only; 500s, dropped
//! connections, flipped bytes and a server killed mid-download are survived or fail with one
//! line.

mod common;
mod servers;

use common::{safetensors, tensor_ranges, Rng};
use sc::decode_url;
use sc::remote::RemoteOptions;
use sc::{Archive, DecodeOptions, EncodeOptions, Mode};
use servers::{Faults, Misdeed, Proxy, Rogue};
use std::io::Write;
use std::time::Duration;

/// A checkpoint of BF16-looking tensors, `mib` MiB in all, with one tensor of 1.5 MiB
/// ("middle.weight") among the others.
fn checkpoint(mib: usize) -> Vec<u8> {
    let mut rng = Rng(7);
    let mut weights = |n: usize| -> Vec<u8> {
        (0..n / 2)
            .flat_map(|_| {
                let r = rng.next();
                // Sign, an exponent near 0x7C, any mantissa: compressible as weights are.
                let exp = 0x78 + (r % 8) as u16;
                let v = ((r >> 8) as u16 & 0x8000) | (exp << 7) | ((r >> 20) as u16 & 0x7F);
                v.to_le_bytes()
            })
            .collect()
    };
    let part = (mib << 20) / 4;
    let tensors = vec![
        ("a.weight", "BF16", vec![(part / 2) as u64], weights(part)),
        ("b.weight", "BF16", vec![(part / 2) as u64], weights(part)),
        ("middle.weight", "BF16", vec![768, 1024], weights(3 << 19)),
        ("c.weight", "BF16", vec![(part / 2) as u64], weights(part)),
        ("d.bias", "BF16", vec![2048], weights(4096)),
    ];
    safetensors(&tensors, 0, "{\"format\":\"pt\"}")
}

fn fast(original: &[u8]) -> Vec<u8> {
    sc::encode_to_vec(original, &EncodeOptions::new(Mode::Fast)).unwrap()
}

/// Options for tests: quick retries.
fn quick() -> RemoteOptions {
    let mut o = RemoteOptions::default();
    o.retries = 4;
    o.retry_timeout = Duration::from_secs(20);
    o.timeout = Duration::from_secs(20);
    o
}

/// A checkpoint of `mib` MiB, its FAST archive, and nginx serving that as `m.sc` (`extra` in
/// its server block).
fn served(
    mib: usize,
    extra: &str,
) -> Option<(Vec<u8>, Vec<u8>, servers::Server, tempfile::TempDir)> {
    let original = checkpoint(mib);
    let archive = fast(&original);
    let (nginx, root) = serve(&[("m.sc", &archive)], extra)?;
    Some((original, archive, nginx, root))
}

/// Serves `files` from a temporary folder through nginx (`extra` in its server block).
fn serve(files: &[(&str, &[u8])], extra: &str) -> Option<(servers::Server, tempfile::TempDir)> {
    let root = tempfile::tempdir().unwrap();
    for (name, bytes) in files {
        std::fs::write(root.path().join(name), bytes).unwrap();
    }
    Some((servers::nginx(root.path(), extra)?, root))
}

#[test]
fn http_round_trip_and_one_tensor_fetches_its_blocks_only() {
    let Some((original, archive, nginx, _root)) = served(24, "") else {
        return;
    };
    let url = nginx.url("m.sc");

    // One tensor: header, index, its blocks.
    let mut a = Archive::open_url(&url, &quick()).unwrap();
    let (range, stored) = {
        let k = a
            .tensors()
            .iter()
            .position(|t| t.name == "middle.weight")
            .unwrap();
        (
            a.tensor_range(&a.tensors()[k]),
            a.stored_bytes().per_tensor[k],
        )
    };
    let got = a.read_tensor("middle.weight").unwrap();
    assert!(got == original[range.start as usize..range.end as usize]);
    let s = a.remote_stats();
    let log = nginx.requests();
    assert!(s.requests <= 4, "{} requests: {log:?}", s.requests);
    assert_eq!(log.len() as u64, s.requests, "{log:?}");
    let sent: u64 = log
        .iter()
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(sent, s.bytes_fetched);
    // Header and index (512 KiB at most), the tensor's blocks: two blocks at its ends may be
    // shared with its neighbours.
    let blocks = stored + 2 * (sc::DEFAULT_BLOCK_SIZE as u64);
    assert!(s.bytes_fetched <= (512 << 10) + blocks, "{s:?}");
    assert!(s.bytes_fetched < archive.len() as u64 / 4, "{s:?}");

    // The whole file, its MD5 checked.
    let mut out = Vec::new();
    let opts = DecodeOptions {
        check_md5: true,
        ..Default::default()
    };
    let (report, stats) = decode_url(&url, &mut out, &opts, &quick()).unwrap();
    assert!(out == original);
    assert_eq!(report.original_len, original.len() as u64);
    assert!(stats.bytes_fetched >= archive.len() as u64);

    // Every tensor at once into buffers of their own.
    let mut a = Archive::open_url(&url, &quick()).unwrap();
    let ranges: Vec<_> = tensor_ranges(&original)
        .into_iter()
        .map(|(_, r)| r)
        .collect();
    let bufs = common::read_each(&mut a, &ranges).unwrap();
    for (r, b) in ranges.iter().zip(&bufs) {
        assert!(original[r.clone()] == b[..]);
    }
}

#[test]
fn missing_and_refused_locations_are_one_line_naming_them() {
    let Some((nginx, _root)) = serve(&[], "location /secret { return 403; }") else {
        return;
    };
    for (path, says) in [
        ("nothing.sc", "not found (404)"),
        ("secret/m.sc", "access denied (403)"),
    ] {
        let url = nginx.url(path);
        let err = Archive::open_url(&url, &quick()).err().unwrap().to_string();
        assert_eq!(err, format!("{url}: {says}"));
    }
    let err = Archive::open_url("ftp://host/m.sc", &quick())
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("ftp://host/m.sc") && !err.contains('\n'),
        "{err}"
    );
}

/// Decodes the archive at `url` whole and returns it, or the error's text.
fn fetch(url: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let opts = DecodeOptions {
        check_md5: true,
        ..Default::default()
    };
    decode_url(url, &mut out, &opts, &quick())
        .map(|_| out)
        .map_err(|e| e.to_string())
}

#[test]
fn server_errors_and_dropped_connections_are_retried() {
    let Some((original, archive, nginx, _root)) = served(6, "") else {
        return;
    };
    // 500 for the first three tries of the first request, and for one piece later; a piece
    // cut in half twice.
    let faults = Faults {
        fail: vec![0, 1, 2, 5],
        cut: vec![6, 8],
        ..Default::default()
    };
    let proxy = Proxy::start(nginx.port, faults);
    assert!(fetch(&proxy.url("m.sc")).unwrap() == original);
    // A transfer cut short resumes where it stopped: what nginx sent adds up to little more
    // than the archive.
    let sent: u64 = nginx
        .requests()
        .iter()
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert!(sent < archive.len() as u64 + (2 << 20), "{sent}");
}

#[test]
fn a_block_spoilt_on_the_way_is_fetched_again_and_one_spoilt_twice_fails() {
    let Some((original, _, nginx, _root)) = served(6, "") else {
        return;
    };
    // Requests 0 and 1 are the index and the header; 2 on are blocks.
    let once = Proxy::start(
        nginx.port,
        Faults {
            flip: vec![2],
            ..Default::default()
        },
    );
    assert!(fetch(&once.url("m.sc")).unwrap() == original);
    let always = Proxy::start(
        nginx.port,
        Faults {
            flip_from: Some(2),
            ..Default::default()
        },
    );
    let err = fetch(&always.url("m.sc")).unwrap_err();
    assert!(
        err.starts_with("corrupt block ") && !err.contains('\n'),
        "{err}"
    );
}

#[test]
fn a_server_killed_mid_download_is_waited_for_or_fails_with_one_line() {
    // Slow enough to be killed mid-transfer.
    let Some((original, _, mut nginx, _root)) = served(16, "limit_rate 4m;") else {
        return;
    };
    let url = nginx.url("m.sc");
    // Retries whose backoff outlasts the outage and the restart, however loaded the machine.
    let mut patient = quick();
    patient.retries = 10;
    let download = std::thread::spawn(move || {
        let mut out = Vec::new();
        let opts = DecodeOptions {
            check_md5: true,
            ..Default::default()
        };
        decode_url(&url, &mut out, &opts, &patient).map(|_| out)
    });
    while nginx.requests().len() < 2 {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    nginx.kill();
    std::thread::sleep(Duration::from_millis(500));
    nginx.restart();
    assert!(download.join().unwrap().unwrap() == original);

    // Killed for good: the download fails, with one line naming the location.
    let url = nginx.url("m.sc");
    let mut opts = quick();
    opts.retries = 2;
    let download = std::thread::spawn(move || {
        let mut out = Vec::new();
        decode_url(&url, &mut out, &Default::default(), &opts).map(|_| ())
    });
    std::thread::sleep(Duration::from_millis(400));
    nginx.kill();
    let err = download.join().unwrap().unwrap_err().to_string();
    assert!(err.contains("m.sc") && !err.contains('\n'), "{err}");
}

#[test]
fn s3_upload_list_and_read_back() {
    let Some(s3) = servers::weed() else {
        return;
    };
    let original = checkpoint(12);
    let opts = RemoteOptions::default();
    let url = format!("s3://{}/model/m.safetensors.sc", servers::BUCKET);
    let mut up = sc::remote::Upload::create(&url, &opts).unwrap();
    sc::encode(&original[..], &mut up, &EncodeOptions::new(Mode::Fast)).unwrap();
    // Nothing is there before the upload completes.
    assert!(Archive::open_url(&url, &opts).is_err());
    up.finish().unwrap();

    // An upload that fails midway leaves nothing.
    let broken = format!("s3://{}/model/broken.sc", servers::BUCKET);
    {
        let mut up = sc::remote::Upload::create(&broken, &opts).unwrap();
        up.write_all(&vec![1u8; 9 << 20]).unwrap();
    }
    let listed = sc::remote::list(&format!("s3://{}/model/", servers::BUCKET), &opts).unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].0, url);

    let mut out = Vec::new();
    let dopts = DecodeOptions {
        check_md5: true,
        ..Default::default()
    };
    decode_url(&url, &mut out, &dopts, &opts).unwrap();
    assert!(out == original);
    let mut a = Archive::open_url(&url, &opts).unwrap();
    let (name, range) = tensor_ranges(&original).remove(2);
    assert!(a.read_tensor(&name).unwrap() == original[range]);
    assert!(a.remote_stats().requests <= 4);
    drop(s3);
}

/// Two checkpoints, and archives of them of one layout and length whose blocks differ.
fn twins() -> (Vec<u8>, Vec<u8>, Vec<u8>, Vec<u8>) {
    let (one, two) = (
        servers::random_checkpoint(1, 3 << 20),
        servers::random_checkpoint(2, 3 << 20),
    );
    let (a, b) = (fast(&one), fast(&two));
    assert_eq!(a.len(), b.len(), "the twins have one layout");
    (one, a, two, b)
}

#[test]
fn an_object_replaced_while_it_is_read_is_an_error_naming_it() {
    let (one, a, _, b) = twins();
    let Some((nginx, root)) = serve(&[("m.sc", &a)], "") else {
        return;
    };
    let url = nginx.url("m.sc");
    let ranges = tensor_ranges(&one);
    let mut archive = Archive::open_url(&url, &quick()).unwrap();
    let (name, range) = &ranges[0];
    assert!(archive.read_tensor(name).unwrap() == one[range.clone()]);
    servers::replace_later(&root.path().join("m.sc"), &b);
    let err = archive.read_tensor(&ranges[3].0).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!("{url}: ")) && err.contains("changed while it was read"),
        "{err}"
    );
    assert_eq!(err.matches(&url).count(), 1, "{err}");
}

#[test]
fn s3_object_replaced_while_it_is_read_is_an_error_naming_it() {
    let Some(s3) = servers::weed() else {
        return;
    };
    let (one, a, _, b) = twins();
    let opts = RemoteOptions::default();
    let url = format!("s3://{}/twins/m.sc", servers::BUCKET);
    let put = |bytes: &[u8]| {
        let mut up = sc::remote::Upload::create(&url, &opts).unwrap();
        up.write_all(bytes).unwrap();
        up.finish().unwrap();
    };
    put(&a);
    let ranges = tensor_ranges(&one);
    let mut archive = Archive::open_url(&url, &opts).unwrap();
    assert!(archive.read_tensor(&ranges[0].0).unwrap() == one[ranges[0].1.clone()]);
    put(&b);
    let err = archive.read_tensor(&ranges[3].0).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!("{url}: ")) && err.contains("changed while it was read"),
        "{err}"
    );
    drop(s3);
}

#[test]
fn a_body_longer_or_shorter_than_asked_is_a_server_error() {
    for (misdeed, says) in [
        (
            Misdeed::LongBody,
            "the server sent more than the 262144 bytes asked for",
        ),
        (
            Misdeed::ShortBody,
            "the server sent 131072 bytes for bytes 786432..1048576",
        ),
    ] {
        let rogue = Rogue::start(misdeed);
        let url = rogue.url("m.sc");
        let err = sc::remote::RemoteFile::open(&url, &quick())
            .err()
            .unwrap()
            .to_string();
        assert!(err.starts_with(&format!("{url}: {says}")), "{err}");
        assert!(!err.contains("truncated"), "{err}");
    }
}

#[test]
fn a_silent_or_dripping_server_times_out_saying_which_timeout() {
    for misdeed in [Misdeed::Silent, Misdeed::Drip] {
        let rogue = Rogue::start(misdeed);
        let url = rogue.url("m.sc");
        let mut opts = quick();
        opts.timeout = Duration::from_secs(1);
        opts.retry_timeout = Duration::from_secs(2);
        let start = std::time::Instant::now();
        let err = Archive::open_url(&url, &opts).err().unwrap().to_string();
        let took = start.elapsed();
        assert!(took < Duration::from_secs(30), "{misdeed:?}: {took:?}");
        assert!(
            err.starts_with(&format!("{url}: timed out")) && err.contains("request timeout (1 s"),
            "{misdeed:?}: {err}"
        );
    }
}

#[test]
fn an_unreachable_server_says_connection_refused_naming_it_once() {
    let url = format!("http://127.0.0.1:{}/m.sc", servers::free_port());
    let mut opts = quick();
    opts.retries = 1;
    let err = Archive::open_url(&url, &opts).err().unwrap().to_string();
    assert_eq!(err, format!("{url}: cannot connect: connection refused"));
}

#[test]
fn a_password_in_a_location_is_refused_and_never_shown() {
    let err = Archive::open_url("http://reader:s3cret@127.0.0.1:9/m.sc", &quick())
        .err()
        .unwrap()
        .to_string();
    assert_eq!(
        err,
        "http://reader:***@127.0.0.1:9/m.sc: a user name or password in the location is not supported"
    );
    assert_eq!(sc::remote::shown("s3://k:p@b/x@y:z"), "s3://k:***@b/x@y:z");
}

#[test]
fn control_characters_in_a_location_are_escaped_in_errors() {
    for url in [
        "http://127.0.0.1:9/a\u{1b}[31m.sc",
        "s3://bucket/a\u{1b}[31m.sc",
    ] {
        let err = Archive::open_url(url, &quick()).err().unwrap().to_string();
        let shown = url.replace('\u{1b}', "\\u{1b}");
        assert!(err.starts_with(&format!("{shown}: ")), "{err}");
        assert!(!err.contains('\u{1b}'), "{err:?}");
    }
}

#[test]
fn a_remote_decode_holds_its_read_ahead_within_the_memory_budget() {
    // Blocks of 64 MiB, one of them here, stored as they are: what the reader fetches ahead
    // is the block's 12 MiB payload, in pieces.
    let original = servers::random_checkpoint(3, 3 << 20);
    let block_size = 64 << 20;
    let opts = EncodeOptions {
        block_size,
        ..EncodeOptions::new(Mode::Fast)
    };
    let archive = sc::encode_to_vec(&original, &opts).unwrap();
    let Some((nginx, _root)) = serve(&[("m.sc", &archive)], "") else {
        return;
    };
    let url = nginx.url("m.sc");
    let needs = sc::memory_needed(block_size);
    // Room for the start and end the reader opened with and a little more, and room for
    // what it holds by default (8 pieces of 2 MiB at most at 4 connections, and 512 KiB).
    for (memory, room) in [(needs + (1 << 20), 1 << 20), (needs + (64 << 20), 33 << 19)] {
        let mut out = Vec::new();
        let dopts = DecodeOptions {
            memory,
            ..Default::default()
        };
        let (_, stats) = decode_url(&url, &mut out, &dopts, &quick()).unwrap();
        assert!(out == original, "memory {memory}");
        assert!(
            stats.most_held <= room,
            "memory {memory}: the reader held {} bytes, with room for {room}",
            stats.most_held
        );
    }
    // A budget too small for one block and the reader's least says both.
    let dopts = DecodeOptions {
        memory: needs,
        ..Default::default()
    };
    let err = decode_url(&url, Vec::new(), &dopts, &quick())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("too small") && err.contains("remote reader"),
        "{err}"
    );
}

#[test]
fn a_cancelled_remote_read_stops_waiting_for_the_server() {
    let rogue = Rogue::start(Misdeed::Silent);
    let url = rogue.url("m.sc");
    let mut opts = quick();
    let cancel = sc::Cancel::new();
    opts.cancel = Some(cancel.clone());
    let start = std::time::Instant::now();
    let later = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        cancel.cancel();
    });
    let err = sc::remote::RemoteFile::open(&url, &opts).err().unwrap();
    later.join().unwrap();
    assert!(matches!(err, sc::Error::Cancelled), "{err}");
    // Well before the request timeout (20 s).
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn s3_listing_skips_a_key_it_cannot_read_and_names_it() {
    let Some(s3) = servers::weed() else {
        return;
    };
    let opts = RemoteOptions::default();
    let at = |key: &str| format!("s3://{}/{key}", servers::BUCKET);
    for key in ["odd/a.sc", "odd/z.sc"] {
        let mut up = sc::remote::Upload::create(&at(key), &opts).unwrap();
        up.write_all(b"fine").unwrap();
        up.finish().unwrap();
    }
    // A key with a control character, which `object_store` cannot make a path of.
    let crafted = "odd/b\u{1b}x.sc";
    sc::remote::put_crafted(&at(""), crafted, &opts).unwrap();
    let listing = sc::remote::list_skipping(&at("odd/"), &opts).unwrap();
    let names: Vec<&str> = listing.objects.iter().map(|(u, _)| u.as_str()).collect();
    assert_eq!(names, [at("odd/a.sc"), at("odd/z.sc")]);
    assert_eq!(listing.objects[0].1, 4);
    assert_eq!(listing.skipped, [at(crafted)]);
    assert_eq!(
        sc::remote::list(&at("odd/"), &opts).unwrap(),
        listing.objects
    );
    drop(s3);
}
