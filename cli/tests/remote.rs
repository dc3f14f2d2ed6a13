//! The command line on remote archives, against real servers on 127.0.0.1 (`tests/servers`):
//! `sc info|list|extract|decode|verify URL` through nginx, `sc encode -o s3://...` and
//! `sc decode s3://bucket/prefix/ -o DIR` through SeaweedFS.

mod common;
#[path = "../../tests/servers/mod.rs"]
mod servers;

use common::{fails, ok, tensor_ranges, Rng};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// Four tensors of `n` KiB of random bytes each.
fn checkpoint(seed: u64, n: usize) -> Vec<u8> {
    servers::random_checkpoint(seed, n << 10)
}

/// A new folder holding `original` encoded as `m.safetensors.sc`, for a server to serve.
fn served_archive(original: &[u8]) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("m.safetensors"), original).unwrap();
    ok(common::sc(
        root.path(),
        &["encode", "--rm", "m.safetensors"],
        None,
    ));
    root
}

/// Runs `sc args...` in `dir` with `env` set.
fn sc_env(dir: &Path, args: &[&str], env: &[(&str, String)]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_sc"))
        .args(args)
        .current_dir(dir)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .expect("run sc");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
    out
}

#[test]
fn commands_read_an_archive_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let original = checkpoint(3, 1500);
    let root = served_archive(&original);
    let Some(nginx) = servers::nginx(root.path(), "") else {
        return;
    };
    let url = nginx.url("m.safetensors.sc");

    let info = ok(common::sc(d, &["info", &url], None));
    let shown = String::from_utf8_lossy(&info.stdout);
    assert!(shown.contains("layer2.weight"), "{shown}");
    // No empty headings: what a remote summary cannot show is said.
    assert!(!shown.contains("transforms:"), "{shown}");
    assert!(
        shown.contains("codecs:      not fetched: a remote archive's"),
        "{shown}"
    );
    assert!(nginx.requests().len() <= 2, "{:?}", nginx.requests());
    let list = ok(common::sc(d, &["list", &url], None));
    assert!(String::from_utf8_lossy(&list.stdout).contains("layer3.weight"));

    let extracted = ok(common::sc(
        d,
        &[
            "extract",
            "-v",
            &url,
            "-t",
            "layer1.weight",
            "--raw",
            "-o",
            "t.bin",
        ],
        None,
    ));
    let (_, range) = tensor_ranges(&original).remove(1);
    assert!(std::fs::read(d.join("t.bin")).unwrap() == original[range]);
    let said = String::from_utf8_lossy(&extracted.stderr);
    assert!(
        said.contains(" requests, ") && said.contains("s decoding"),
        "{said}"
    );

    let decoded = ok(common::sc(d, &["decode", "-v", &url], None));
    assert!(std::fs::read(d.join("m.safetensors")).is_ok_and(|b| b == original));
    let said = String::from_utf8_lossy(&decoded.stderr);
    assert!(
        said.contains("requests") && said.contains("waiting on the network"),
        "{said}"
    );
    assert!(said.contains("a remote location"), "{said}");
    // Nothing overwritten without -f.
    fails(common::sc(d, &["decode", &url], None), "already exists");
    ok(common::sc(d, &["verify", &url], None));

    let missing = nginx.url("nothing.sc");
    fails(
        common::sc(d, &["decode", &missing, "-o", "x"], None),
        "not found (404)",
    );
    assert!(!d.join("x").exists());
}

#[test]
fn a_sharded_checkpoint_goes_to_s3_and_back() {
    let Some(s3) = servers::weed() else {
        return;
    };
    let env = s3.env();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("model")).unwrap();
    let shards = [
        ("model-00001-of-00002.safetensors", checkpoint(1, 700)),
        ("model-00002-of-00002.safetensors", checkpoint(2, 900)),
    ];
    for (name, bytes) in &shards {
        std::fs::write(d.join("model").join(name), bytes).unwrap();
        let dest = format!("s3://{}/ckpt/model/{name}.sc", servers::BUCKET);
        let src = format!("model/{name}");
        ok(sc_env(d, &["encode", &src, "-o", &dest], &env));
        // Nothing overwritten without -f.
        fails(
            sc_env(d, &["encode", &src, "-o", &dest], &env),
            "already exists",
        );
    }
    let prefix = format!("s3://{}/ckpt/model/", servers::BUCKET);
    ok(sc_env(d, &["decode", &prefix, "-o", "back"], &env));
    for (name, bytes) in &shards {
        assert!(
            std::fs::read(d.join("back").join(name)).unwrap() == *bytes,
            "{name}"
        );
    }

    // A folder encoded straight to a prefix, its other files copied there; decoded back
    // whole, and listed.
    std::fs::write(d.join("model/config.json"), b"{\"layers\": 4}").unwrap();
    let to = format!("s3://{}/folder/", servers::BUCKET);
    ok(sc_env(d, &["encode", "model", "-o", &to], &env));
    let from = to.clone();
    ok(sc_env(d, &["decode", &from, "-o", "again"], &env));
    for name in [
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "config.json",
    ] {
        let want = std::fs::read(d.join("model").join(name)).unwrap();
        assert!(
            std::fs::read(d.join("again").join(name)).unwrap() == want,
            "{name}"
        );
    }
    let listed = ok(sc_env(d, &["list", &from], &env));
    let text = String::from_utf8_lossy(&listed.stdout);
    assert!(
        text.contains("model-00002-of-00002.safetensors.sc:") && text.contains("layer3.weight"),
        "{text}"
    );
    assert!(
        !d.join("s3:").exists(),
        "a local folder named after the URL"
    );
    drop(s3);
}

#[test]
fn an_object_changed_mid_decode_fails_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Random bytes: every block stored, so the two archives have one layout and length.
    let archives: Vec<Vec<u8>> = [5, 6]
        .iter()
        .map(|&seed| {
            let name = format!("m{seed}.safetensors");
            std::fs::write(d.join(&name), checkpoint(seed, 1500)).unwrap();
            ok(common::sc(d, &["encode", &name], None));
            std::fs::read(d.join(format!("{name}.sc"))).unwrap()
        })
        .collect();
    assert_eq!(archives[0].len(), archives[1].len());
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("m.sc"), &archives[0]).unwrap();
    // Slow enough that the decode is still going when the object changes.
    let Some(nginx) = servers::nginx(root.path(), "limit_rate 256k;") else {
        return;
    };
    let url = nginx.url("m.sc");
    let out = tempfile::tempdir().unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_sc"))
        .args(["decode", &url, "-o", "back.safetensors"])
        .current_dir(out.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The opening requests (end and start) are logged once done.
    let start = std::time::Instant::now();
    while nginx.requests().len() < 2 && start.elapsed().as_secs() < 60 {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    servers::replace_later(&root.path().join("m.sc"), &archives[1]);
    let err = fails(
        child.wait_with_output().unwrap(),
        "changed while it was read",
    );
    assert_eq!(err.matches(&url).count(), 1, "{err}");
    let left: Vec<_> = std::fs::read_dir(out.path()).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn timeouts_are_flags_and_a_timeout_says_which() {
    let rogue = servers::Rogue::start(servers::Misdeed::Silent);
    let url = rogue.url("m.sc");
    let dir = tempfile::tempdir().unwrap();
    let start = std::time::Instant::now();
    let out = common::sc(
        dir.path(),
        &["info", &url, "--timeout", "1", "--retry-timeout", "1.5"],
        None,
    );
    assert!(start.elapsed().as_secs() < 30, "{:?}", start.elapsed());
    let err = fails(out, "timed out");
    assert!(err.contains("request timeout (1 s"), "{err}");
    let zero = common::sc(dir.path(), &["info", &url, "--timeout", "0"], None);
    assert_eq!(zero.status.code(), Some(2));
    let said = String::from_utf8_lossy(&zero.stderr);
    assert!(said.contains("not a positive number of seconds"), "{said}");
}

#[test]
fn remote_errors_name_the_location_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let root = tempfile::tempdir().unwrap();
    let Some(nginx) = servers::nginx(root.path(), "") else {
        return;
    };
    let missing = nginx.url("nothing.sc");
    let refused = format!("http://127.0.0.1:{}/m.sc", servers::free_port());
    for (url, says) in [
        (&missing, "not found (404)"),
        (&refused, "cannot connect: connection refused"),
    ] {
        for cmd in ["decode", "verify", "extract"] {
            let mut args = vec![cmd, url.as_str(), "--retries", "0"];
            if cmd == "decode" {
                args.extend(["-o", "x"]);
            }
            if cmd == "extract" {
                args.extend(["-t", "a", "-o", "x"]);
            }
            let err = fails(common::sc(d, &args, None), says);
            assert_eq!(err, format!("sc: error: {url}: {says}\n"), "{cmd}");
        }
    }
    assert!(!d.join("x").exists());
    // A password is refused, and never printed.
    let err = fails(
        common::sc(d, &["info", "http://me:s3cret@127.0.0.1:9/m.sc"], None),
        "http://me:***@127.0.0.1:9/m.sc: a user name or password",
    );
    assert!(!err.contains("s3cret"), "{err}");
}

#[test]
fn an_s3_redirect_to_another_host_is_refused_and_no_credential_leaves() {
    let other = servers::Rogue::start(servers::Misdeed::NotFound);
    let endpoint = servers::Rogue::start(servers::Misdeed::Redirect(other.port));
    let env = [
        ("AWS_ACCESS_KEY_ID", "sc-key".to_string()),
        ("AWS_SECRET_ACCESS_KEY", "sc-secret".to_string()),
        ("AWS_SESSION_TOKEN", "sc-session-token".to_string()),
        ("AWS_REGION", "us-east-1".to_string()),
        (
            "AWS_ENDPOINT_URL",
            format!("http://127.0.0.1:{}", endpoint.port),
        ),
        ("AWS_ALLOW_HTTP", "true".to_string()),
    ];
    let dir = tempfile::tempdir().unwrap();
    let out = sc_env(
        dir.path(),
        &["info", "s3://bkt/m.sc", "--retries", "0"],
        &env,
    );
    let err = fails(out, "redirect");
    assert!(!endpoint.heads().is_empty(), "{err}");
    let leaked: Vec<String> = other.heads();
    assert!(
        leaked
            .iter()
            .all(|h| !h.contains("sc-session-token") && !h.contains("x-amz-security-token")),
        "{leaked:?}"
    );
}

/// An output named after a remote archive goes in the current folder, as `decode URL` writes
/// it: `extract` over HTTP (no upload to try) and over S3 (nothing put in the bucket read),
/// `decode` of several remote archives; only `-o` names a remote output.
#[test]
fn outputs_named_after_a_remote_archive_are_local() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let original = checkpoint(5, 300);
    std::fs::write(d.join("m.safetensors"), &original).unwrap();
    let (_, range) = tensor_ranges(&original).remove(1);
    let extracted = |d: &Path| {
        let path = d.join("m.extract.safetensors");
        let bytes = std::fs::read(&path).unwrap();
        assert!(bytes.ends_with(&original[range.clone()]));
        std::fs::remove_file(path).unwrap();
    };

    let root = served_archive(&original);
    let Some(nginx) = servers::nginx(root.path(), "") else {
        return;
    };
    let here = tempfile::tempdir().unwrap();
    let url = nginx.url("m.safetensors.sc");
    ok(common::sc(
        here.path(),
        &["extract", &url, "-t", "layer1.weight"],
        None,
    ));
    extracted(here.path());
    // A query is no part of the name.
    let signed = format!("{url}?signature=x/y");
    ok(common::sc(
        here.path(),
        &["extract", &signed, "-t", "layer1.weight"],
        None,
    ));
    extracted(here.path());
    drop(nginx);

    let Some(s3) = servers::weed() else {
        return;
    };
    let env = s3.env();
    let prefix = format!("s3://{}/local/", servers::BUCKET);
    for name in ["m", "n"] {
        let dest = format!("{prefix}{name}.safetensors.sc");
        ok(sc_env(d, &["encode", "m.safetensors", "-o", &dest], &env));
    }
    let m = format!("{prefix}m.safetensors.sc");
    let n = format!("{prefix}n.safetensors.sc");
    ok(sc_env(
        here.path(),
        &["extract", &m, "-t", "layer1.weight"],
        &env,
    ));
    extracted(here.path());
    ok(sc_env(here.path(), &["decode", &m, &n], &env));
    for name in ["m.safetensors", "n.safetensors"] {
        assert!(
            std::fs::read(here.path().join(name)).unwrap() == original,
            "{name}"
        );
    }
    // Nothing was written under the prefix read: it holds the two archives only.
    ok(sc_env(d, &["decode", &prefix, "-o", "back"], &env));
    let mut back: Vec<_> = std::fs::read_dir(d.join("back"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    back.sort();
    assert_eq!(back, ["m.safetensors", "n.safetensors"]);
    drop(s3);
}

/// The multipart uploads in progress in the test bucket, as SeaweedFS's S3 API lists them
/// (`GET /BUCKET?uploads`, ListMultipartUploads): the response's XML.
fn uploads_in_progress(s3: &servers::S3) -> String {
    use object_store::signer::{Method, SignedUrlOptions, Signer};
    use std::io::Read;
    let store = object_store::aws::AmazonS3Builder::new()
        .with_endpoint(format!("http://127.0.0.1:{}", s3.server.port))
        .with_allow_http(true)
        .with_bucket_name(servers::BUCKET)
        .with_region("us-east-1")
        .with_access_key_id(servers::ACCESS_KEY)
        .with_secret_access_key(servers::SECRET_KEY)
        .build()
        .unwrap();
    let mut options = SignedUrlOptions::new();
    options.extra_query.push(("uploads".into(), String::new()));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let path = object_store::path::Path::from("");
    let url = rt
        .block_on(store.signed_url_opts(Method::GET, &path, Duration::from_secs(300), &options))
        .unwrap();
    let target = format!("{}?{}", url.path(), url.query().unwrap_or_default());
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", s3.server.port)).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        conn,
        "GET {target} HTTP/1.0\r\nHost: 127.0.0.1:{}\r\n\r\n",
        s3.server.port
    )
    .unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).unwrap();
    assert!(
        answer.lines().next().is_some_and(|l| l.contains(" 200 ")),
        "{answer}"
    );
    answer
}

/// An upload to `s3://` interrupted by SIGINT, SIGTERM or SIGHUP is aborted before `sc`
/// exits: its parts do not stay at the store.
#[test]
fn a_signal_aborts_the_upload_in_progress() {
    let Some(s3) = servers::weed() else {
        return;
    };
    let env = s3.env();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (signal, number) in [("INT", 2), ("TERM", 15), ("HUP", 1)] {
        let fifo = d.join(format!("{signal}.fifo"));
        let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        let key = format!("signals/{signal}.sc");
        let mut child = Command::new(env!("CARGO_BIN_EXE_sc"))
            .args(["encode", "-q"])
            .arg(&fifo)
            .args(["-o", &format!("s3://{}/{key}", servers::BUCKET)])
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Random bytes, stored as they are: more than two parts' worth goes out, and the
        // FIFO, held open, keeps the run waiting for more.
        let mut feed = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
        feed.write_all(&Rng(number as u64).bytes(24 << 20)).unwrap();
        let start = Instant::now();
        while !uploads_in_progress(&s3).contains(&key) {
            assert!(start.elapsed() < Duration::from_secs(60), "no upload began");
            std::thread::sleep(Duration::from_millis(100));
        }
        let st = Command::new("kill")
            .args([&format!("-{signal}"), &child.id().to_string()])
            .status()
            .unwrap();
        assert!(st.success());
        let start = Instant::now();
        while child.try_wait().unwrap().is_none() && start.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(50));
        }
        if child.try_wait().unwrap().is_none() {
            let _ = child.kill();
        }
        let out = child.wait_with_output().unwrap();
        drop(feed);
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(128 + number), "{signal}: {said}");
        let left = uploads_in_progress(&s3);
        assert!(!left.contains(&key), "{signal}: {left}");
    }
    drop(s3);
}

/// An upload that must not replace an object looks again before completing: an object another
/// uploader completed meanwhile is kept, and the upload is aborted with an error.
#[test]
fn an_upload_without_force_keeps_an_object_that_appeared_meanwhile() {
    use std::io::Read;
    let Some(s3) = servers::weed() else {
        return;
    };
    let opts = sc::remote::RemoteOptions::default();
    let url = format!("s3://{}/race/m.sc", servers::BUCKET);
    let mut ours = sc::remote::Upload::create_new(&url, &opts).unwrap();
    ours.write_all(b"ours").unwrap();
    let mut theirs = sc::remote::Upload::create(&url, &opts).unwrap();
    theirs.write_all(b"theirs").unwrap();
    theirs.finish().unwrap();
    let err = ours.finish().unwrap_err().to_string();
    assert!(err.contains("appeared there during the upload"), "{err}");
    let mut back = Vec::new();
    let mut file = sc::remote::RemoteFile::open(&url, &opts).unwrap();
    file.read_to_end(&mut back).unwrap();
    assert_eq!(back, b"theirs");
    assert!(!uploads_in_progress(&s3).contains("race/m.sc"));
    let again = sc::remote::Upload::create_new(&url, &opts)
        .err()
        .map(|e| e.to_string());
    assert!(again.is_some_and(|e| e.contains("already exists")));
}

/// Puts `bytes` at `url` (the test process's environment points at the store).
fn put(url: &str, bytes: &[u8]) {
    let mut up = sc::remote::Upload::create(url, &sc::remote::RemoteOptions::default()).unwrap();
    up.write_all(bytes).unwrap();
    up.finish().unwrap();
}

/// `sc decode PREFIX/ -o DIR` as a local folder run: two objects meeting at one file are
/// refused before anything is written, and a failed object does not stop the others.
#[test]
fn a_remote_prefix_decodes_as_a_folder_run_does() {
    let Some(s3) = servers::weed() else {
        return;
    };
    let env = s3.env();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let original = checkpoint(7, 300);
    std::fs::write(d.join("m.safetensors"), &original).unwrap();
    let bucket = servers::BUCKET;
    let meet = format!("s3://{bucket}/meet/");
    ok(sc_env(
        d,
        &[
            "encode",
            "m.safetensors",
            "-o",
            &format!("{meet}m.safetensors.sc"),
        ],
        &env,
    ));
    put(&format!("{meet}m.safetensors"), b"plain");
    let err = fails(
        sc_env(d, &["decode", "-f", &meet, "-o", "back"], &env),
        "would both be written",
    );
    assert!(err.contains("nothing was written"), "{err}");
    assert!(!d.join("back").exists());

    let mixed = format!("s3://{bucket}/mixed/");
    ok(sc_env(
        d,
        &[
            "encode",
            "m.safetensors",
            "-o",
            &format!("{mixed}good.safetensors.sc"),
        ],
        &env,
    ));
    put(&format!("{mixed}bad.safetensors.sc"), b"not an archive");
    put(&format!("{mixed}config.json"), b"{}");
    let out = sc_env(d, &["decode", &mixed, "-o", "out"], &env);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("1 of 3 files in"), "{err}");
    assert!(
        err.contains("bad.safetensors") && err.contains("FAILED"),
        "{err}"
    );
    assert!(std::fs::read(d.join("out/good.safetensors")).unwrap() == original);
    assert_eq!(std::fs::read(d.join("out/config.json")).unwrap(), b"{}");
    assert!(!d.join("out/bad.safetensors").exists());
    drop(s3);
}

/// An object whose key sc cannot read (a control character) is skipped with a note naming it
/// escaped, and the rest of the prefix is restored.
#[test]
fn a_remote_prefix_skips_a_key_it_cannot_read_with_a_note() {
    let Some(s3) = servers::weed() else {
        return;
    };
    let env = s3.env();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let original = checkpoint(8, 300);
    std::fs::write(d.join("m.safetensors"), &original).unwrap();
    let prefix = format!("s3://{}/odd/", servers::BUCKET);
    let good = format!("{prefix}m.safetensors.sc");
    ok(sc_env(d, &["encode", "m.safetensors", "-o", &good], &env));
    let bucket = format!("s3://{}/", servers::BUCKET);
    let opts = sc::remote::RemoteOptions::default();
    sc::remote::put_crafted(&bucket, "odd/x\u{1b}y.sc", &opts).unwrap();
    let out = sc_env(d, &["decode", &prefix, "-o", "out"], &env);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let shown = format!("{prefix}x\\u{{1b}}y.sc");
    assert!(
        err.contains(&format!(
            "sc: note: skipping {shown}: its key is not one sc can read"
        )),
        "{err}"
    );
    assert!(!err.contains('\u{1b}'), "{err:?}");
    assert!(std::fs::read(d.join("out/m.safetensors")).unwrap() == original);
    drop(s3);
}
