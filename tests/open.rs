//! One way in and out (`sc::Location`, `sc::OpenOptions`, `sc::Source`, `sc::Output`): an
//! archive of a fine-tune opened from a path, from bytes and from an nginx URL, with and
//! without its base, reads the same tensors; the base an archive needs is named when the one
//! given cannot serve; an existing output is refused without `overwrite`.

mod common;
mod servers;

use sc::{Archive, Base, EncodeOptions, Error, Location, Mode, OpenOptions, Output, Source};
use std::io::Write;
use std::path::Path;

const BASE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/testdata/tune-base.safetensors"
);
const TUNE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/tune.safetensors");

/// The fine-tune, and its archive coded against the base.
fn tune_archive() -> (Vec<u8>, Vec<u8>) {
    let tune = std::fs::read(TUNE).unwrap();
    let base = Base::open(BASE).unwrap();
    let opts = EncodeOptions {
        base: Some(&base),
        block_size: 64 << 10,
        ..EncodeOptions::new(Mode::Fast)
    };
    let archive = sc::encode_to_vec(&tune, &opts).unwrap();
    (tune, archive)
}

/// Checks that `at` opens without its base (listing every tensor, but failing to read one
/// coded against it, naming the base) and with it (every tensor as in `tune`).
fn reads_with_and_without_base(at: &Location, tune: &[u8]) {
    let mut bare = Archive::open_at(at, &OpenOptions::default()).unwrap();
    assert_eq!(bare.base_name(), Some("tune-base.safetensors"));
    let based = (bare.tensors().iter())
        .find(|t| bare.reference(&t.name).is_some())
        .map(|t| t.name.clone())
        .expect("a tensor coded against the base");
    match bare.read_tensor(&based) {
        Err(Error::BaseNeeded { needed }) => assert_eq!(needed, "tune-base.safetensors"),
        other => panic!("{other:?}"),
    }

    let mut opts = OpenOptions::default();
    opts.base = Some(at.open_base(BASE).unwrap());
    opts.memory = Some(sc::DEFAULT_MEMORY);
    let mut archive = Archive::open_at(at, &opts).unwrap();
    let names: Vec<String> = archive.tensors().iter().map(|t| t.name.clone()).collect();
    for name in names {
        let t = archive.tensor(&name).unwrap().clone();
        let r = archive.tensor_range(&t);
        let got = archive.read_tensor(&name).unwrap();
        assert!(got == tune[r.start as usize..r.end as usize], "{name}");
    }
}

#[test]
fn a_path_and_bytes_open_alike_with_and_without_their_base() {
    let (tune, archive) = tune_archive();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tune.safetensors.sc");
    std::fs::write(&path, &archive).unwrap();

    let at = Location::parse(&path);
    assert_eq!(at.path(), Some(path.as_path()));
    reads_with_and_without_base(&at, &tune);
    reads_with_and_without_base(&Location::Bytes(archive.clone().into()), &tune);

    // A whole decode from the same source, with the base of the options.
    let mut opts = OpenOptions::default();
    opts.base = Some(Base::open(BASE).unwrap());
    let source = Source::open(&at, &opts).unwrap();
    assert_eq!(source.len(), Some(archive.len() as u64));
    let mut out = Vec::new();
    let decoded = source.decode(&mut out, &opts.decode_options()).unwrap();
    assert_eq!(decoded.report.original_len, tune.len() as u64);
    assert!(decoded.remote.is_none());
    assert!(out == tune);
}

#[test]
fn a_url_opens_as_the_file_does() {
    let (tune, archive) = tune_archive();
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("t.sc"), &archive).unwrap();
    let Some(nginx) = servers::nginx(root.path(), "") else {
        return;
    };
    let url = nginx.url("t.sc");
    let at = Location::parse(&url);
    assert_eq!(at.url(), Some(url.as_str()));
    reads_with_and_without_base(&at, &tune);

    // Whole, through the same source type, with what the requests did.
    let mut opts = OpenOptions::default();
    opts.base = Some(Base::open(BASE).unwrap());
    let mut out = Vec::new();
    let source = Source::open(&at, &opts).unwrap();
    let decoded = source.decode(&mut out, &opts.decode_options()).unwrap();
    assert!(out == tune);
    assert!(decoded.remote.is_some_and(|s| s.requests >= 1));
    let archive = Archive::open_at(&at, &opts).unwrap();
    assert!(archive.remote_stats().is_some_and(|s| s.requests >= 1));
}

#[test]
fn locations_are_told_from_paths_once() {
    for url in ["http://h/a.sc", "HTTPS://h/a.sc?x=1", "s3://b/k/a.sc"] {
        assert_eq!(Location::parse(url).url(), Some(url), "{url}");
    }
    for path in ["a.sc", "http:/a.sc", "s3:/b", "./http://x"] {
        assert_eq!(
            Location::parse(path).path(),
            Some(Path::new(path)),
            "{path}"
        );
    }
    let name = |s: &str| Location::parse(s).file_name().map(|n| n.into_owned());
    assert_eq!(name("https://h/m/a.sc?sig=1#x"), Some("a.sc".into()));
    assert_eq!(name("s3://b/m/a?b.sc"), Some("a?b.sc".into()));
    assert_eq!(name("s3://b/m/"), None);
    assert_eq!(name("dir/a.sc"), Some("dir/a.sc".into()));
    assert_eq!(Location::parse("s3://b/m/").prefix(), Some("s3://b/m/"));
    assert_eq!(Location::parse("s3://b/m").prefix(), None);
}

#[test]
fn a_base_that_cannot_serve_names_the_one_needed() {
    let (_, archive) = tune_archive();
    let at = Location::Bytes(archive.into());
    assert_eq!(at.needed_base().as_deref(), Some("tune-base.safetensors"));
    let e = at.open_base("/nonexistent/base.safetensors").unwrap_err();
    assert!(matches!(e, Error::ForBase { .. }), "{e:?}");
    assert!(
        e.to_string()
            .ends_with("(the archive needs the base \"tune-base.safetensors\")"),
        "{e}"
    );
    // No archive, no note.
    let e = Location::parse(TUNE)
        .open_base("/nonexistent/base.safetensors")
        .unwrap_err();
    assert!(!matches!(e, Error::ForBase { .. }), "{e:?}");
}

#[test]
fn a_missing_file_or_a_folder_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.sc");
    let e = Source::open(&Location::parse(&missing), &OpenOptions::default())
        .err()
        .unwrap();
    assert!(
        matches!(&e, Error::File { source, writing: false, .. } if source.kind() == std::io::ErrorKind::NotFound)
    );
    assert!(e
        .to_string()
        .starts_with(&format!("cannot open {}: ", missing.display())));
    let e = Archive::open_at(&Location::parse(dir.path()), &OpenOptions::default())
        .err()
        .unwrap();
    assert_eq!(
        e.to_string(),
        format!("{} is a directory", dir.path().display())
    );
}

#[test]
fn an_existing_output_is_replaced_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.sc");
    std::fs::write(&path, b"kept").unwrap();
    let at = Location::parse(&path);
    let opts = OpenOptions::default();
    match Output::create(&at, false, &opts) {
        Err(Error::File { source, .. }) => {
            assert_eq!(source.kind(), std::io::ErrorKind::AlreadyExists)
        }
        Err(e) => panic!("{e:?}"),
        Ok(_) => panic!("an existing output was opened without overwrite"),
    }
    // Dropped unfinished, nothing changes.
    let mut out = Output::create(&at, true, &opts).unwrap();
    out.write_all(b"new").unwrap();
    drop(out);
    assert_eq!(std::fs::read(&path).unwrap(), b"kept");
    let mut out = Output::create(&at, true, &opts).unwrap();
    out.write_all(b"new").unwrap();
    assert!(matches!(
        out.commit(false).unwrap(),
        sc::Committed::File(Some(_))
    ));
    assert_eq!(std::fs::read(&path).unwrap(), b"new");
    assert!(Output::create(&Location::Bytes(Vec::new().into()), true, &opts).is_err());
}

#[test]
fn threads_are_capped_to_the_cores() {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    assert_eq!(sc::worker_threads(0), cores);
    assert_eq!(sc::worker_threads(1), 1);
    assert_eq!(sc::worker_threads(usize::MAX), cores);
}

/// The front ends hold no local-versus-remote dispatch of their own, nor a copy of the rules
/// `sc::Location`, `sc::Output` and `sc::worker_threads` hold: no URL test, no remote-only
/// opening or decoding, no upload refusal, no thread cap.
#[test]
fn front_ends_call_the_library_to_tell_locations_apart() {
    const FORBIDDEN: [&str; 10] = [
        "sc::remote::is_url",
        "starts_with(\"http",
        "starts_with(\"s3",
        "open_url",
        "decode_url",
        "inspect_url",
        "Upload::exists",
        "Upload::create",
        "available_parallelism",
        "open_with_base",
    ];
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    let mut dirs = vec![root.join("cli/src"), root.join("python/src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let p = entry.unwrap().path();
            match p.is_dir() {
                true => dirs.push(p),
                false if p.extension().is_some_and(|e| e == "rs") => files.push(p),
                false => {}
            }
        }
    }
    assert!(files.len() > 10, "{files:?}");
    let mut found = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for bad in FORBIDDEN.iter().filter(|b| code.contains(*b)) {
                found.push(format!("{}:{}: {bad}", f.display(), n + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "dispatch left in the front ends:\n{}",
        found.join("\n")
    );
}
