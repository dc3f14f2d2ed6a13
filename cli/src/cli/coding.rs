//! The everyday commands on one file: `encode`, `decode` (a remote prefix too) and `verify`,
//! with their summary lines.

use super::*;

pub(super) fn encode(a: &EncodeArgs) -> Result<()> {
    let auto = relate::is_auto(a.base.base.as_deref());
    if !auto && !a.auto.base_from.is_empty() {
        bail!("--base-from offers bases to --base auto: give --base auto too");
    }
    if auto && a.rm {
        bail!("--rm cannot be used with --base auto: the inputs serve as bases for one another");
    }
    let base = match auto {
        true => None,
        false => a.base.open(None)?,
    };
    let input = match a.inputs.as_slice() {
        [one] if !folder::is_dir(one) => one,
        _ => return folder::encode(a, base.as_ref()),
    };
    let base = match auto && !is_stdio(input) {
        true => {
            let verbose = a.common.talk.verbose();
            relate::pick_one(input, &a.auto, a.mode(), verbose)?
        }
        false => base,
    };
    if let Some(why) = already_archive(input, a.out.force) {
        bail!("{why}");
    }
    let dest = destination(input, &a.out, |p| Ok(folder::archive_name(p)))?;
    let base_files = base::BaseFiles::of(&a.base, base.as_ref());
    base_files.check_input(input)?;
    if let Some(d) = &dest {
        base_files.check_output(d)?;
    }
    let bar = progress_bar(input_len(input), a.common.talk.quiet);
    let start = Instant::now();
    let base = base.as_ref();
    let memory = memory(&a.common, || encode_needs(a, base));
    let report = encode_one(input, dest.as_deref(), a, a.rm, memory, base, &|n| {
        bar.set_position(n)
    })?;
    bar.finish_and_clear();
    match a.common.talk {
        t if t.verbose() => note(format_args!(
            "{}",
            encoded_lines(input, dest.as_deref(), a, &report, start)
        )),
        t if !t.quiet => note(format_args!("{}", encoded_line(input, a, &report, start))),
        _ => {}
    }
    Ok(())
}

/// Why `encode` skips `input` (a name already ending in `.sc`), unless `force`.
pub(super) fn already_archive(input: &Path, force: bool) -> Option<String> {
    let archive = !force && !is_stdio(input) && input.extension().is_some_and(|e| e == "sc");
    archive.then(|| {
        format!(
            "{} already ends in .sc: skipped (sc -d {} restores it; -f compresses it all the same)",
            name(input),
            input.display()
        )
    })
}

/// The summary line of a file encoded from `input`.
pub(super) fn encoded_line(
    input: &Path,
    a: &EncodeArgs,
    r: &sc::EncodeReport,
    start: Instant,
) -> String {
    let how = match (r.kind, &r.generic_reason) {
        (Kind::Safetensors | Kind::Gguf, _) => String::new(),
        (Kind::Generic, Some(why)) => format!(" [not safetensors: {why}; generic path]"),
        (Kind::Generic, None) => " [generic path]".into(),
    };
    // With --base auto, the base each input took, as its archive records it.
    let given = match relate::is_auto(a.base.base.as_deref()) {
        true => r.base_name.as_deref().map(Path::new),
        false => a.base.base.as_deref(),
    };
    let refs = base::summary(r.based_tensors, r.repeated_tensors, given);
    format!(
        "{}: {} -> {} bytes ({:.2}%), {}, {:.0} MB/s{refs}{how}",
        name(input),
        r.original_len,
        r.archive_len,
        100.0 * r.archive_len as f64 / r.original_len.max(1) as f64,
        a.mode().name(),
        mb_per_s(r.original_len, start)
    )
}

/// What `-v` prints for a file encoded from `input` into `dest` (`None`: stdout): the summary
/// line, then the codecs chosen, read back from the archive, and the time taken.
pub(super) fn encoded_lines(
    input: &Path,
    dest: Option<&Path>,
    a: &EncodeArgs,
    r: &sc::EncodeReport,
    start: Instant,
) -> String {
    let summary = encoded_line(input, a, r, start);
    details(summary, dest.and_then(inspect_file), start)
}

/// The description of the archive file `path`; `None` unless it is a regular file: stdin and
/// stdout, and a device or FIFO, which reading would not give back what was written (or would
/// take it from the decoder).
pub(super) fn inspect_file(path: &Path) -> Option<sc::Result<sc::ArchiveInfo>> {
    let regular = !is_stdio(path) && std::fs::metadata(path).is_ok_and(|m| m.is_file());
    regular.then(|| {
        File::open(path)
            .map_err(sc::Error::from)
            .and_then(|mut f| sc::inspect(&mut f))
    })
}

/// `summary` followed by what `-v` adds about an archive: its blocks by transform and the
/// codecs of their planes (when the archive is a file), and the seconds since `start`.
pub(super) fn details(
    summary: String,
    archive: Option<sc::Result<sc::ArchiveInfo>>,
    start: Instant,
) -> String {
    let secs = start.elapsed().as_secs_f64();
    let mut t = summary;
    match archive {
        Some(Ok(info)) => {
            let transforms: Vec<String> = info
                .transforms
                .iter()
                .map(|(name, u)| format!("{name} {}", u.blocks))
                .collect();
            let codecs: Vec<String> = info
                .codecs
                .iter()
                .map(|(name, u)| {
                    let pct = 100.0 * u.coded as f64 / u.original.max(1) as f64;
                    format!("{name} {} {pct:.2}%", text::count(u.planes, "plane"))
                })
                .collect();
            let _ = write!(
                t,
                "\n  blocks:  {} {}, {} bytes each at most ({})\n  codecs:  {}",
                info.blocks,
                info.mode.name(),
                info.block_size,
                transforms.join(", "),
                codecs.join(", ")
            );
        }
        Some(Err(e)) => {
            let _ = write!(t, "\n  codecs:  the archive cannot be read back: {e}");
        }
        None => t.push_str(
            "\n  codecs:  not shown: the archive is not a local file to read back (a stream, a device or a remote location)",
        ),
    }
    let _ = write!(t, "\n  time:    {secs:.3} s");
    t
}

/// Length of a regular input file, for progress (`None` for stdin, pipes and errors).
pub(super) fn input_len(path: &Path) -> Option<u64> {
    match is_stdio(path) {
        true => None,
        false => std::fs::metadata(path)
            .ok()
            .filter(|m| m.is_file())
            .map(|m| m.len()),
    }
}

/// Encodes `input` into `dest` (`None`: stdout) with `a`'s settings, `memory` bytes for blocks
/// and against `base` if given, then deletes `input` if `rm` (`--rm`, unless the run keeps it).
pub(super) fn encode_one(
    input: &Path,
    dest: Option<&Path>,
    a: &EncodeArgs,
    rm: bool,
    memory: u64,
    base: Option<&sc::Base>,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<sc::EncodeReport> {
    if rm {
        remove::check(input, dest)?;
    }
    // A file is read with random access, which finding repeated tensors needs.
    let (source, meta) = match is_stdio(input) {
        true => (Input::Stream(open_input(input)?.0), None),
        false => open_file(input).map(|(f, m)| (Input::File(f), Some(m)))?,
    };
    let cancel = process::cancel();
    let opts = EncodeOptions {
        block_size: a.block_size,
        md5: rm || a.md5 || (!a.no_md5 && EncodeOptions::new(a.mode()).md5),
        progress: Some(progress),
        memory,
        base,
        sign_models: a.level.sign_models(),
        cancel: Some(&cancel),
        ..EncodeOptions::new(a.mode())
    };
    let settings = a.out.settings(meta.as_ref(), rm);
    let (report, written) = write_with(dest, &settings, |out| {
        match source {
            Input::File(f) => sc::encode_file(&f, out, &opts),
            Input::Stream(r) => sc::encode(r, out, &opts),
        }
        .with_context(|| format!("encoding {}", name(input)))
    })?;
    if rm {
        let (dest, id, meta) = remove::written(input, dest, written, meta.as_ref())?;
        // Decode the archive as it lies on disk and compare with the MD5 of what was read,
        // against the base as it lies on disk now (opened again, its digests taken again).
        let verifying = || format!("verifying {} before --rm", dest.display());
        let base = match base {
            Some(_) => a.base.open(None).with_context(verifying)?,
            None => None,
        };
        let f = remove::reopen(dest, id).with_context(verifying)?;
        let back = Incoming::At(Box::new(sc::Source::file(f).with_context(verifying)?))
            .decode(dest, io::sink(), true, memory, base.as_ref(), &|_| {})
            .with_context(verifying)?;
        let verified = back.md5.is_some() && back.md5 == report.md5;
        let read = remove::Snapshot::of(meta);
        remove::remove_input(input, read, report.original_len, dest, id, verified)?;
    }
    Ok(report)
}

pub(super) fn decode(a: &DecodeArgs) -> Result<()> {
    let input = match a.inputs.as_slice() {
        [one] if sc::Location::parse(one).prefix().is_some() => {
            return decode_prefix(a, url_of(one).unwrap_or_default())
        }
        [one] if !folder::is_dir(one) => one,
        _ => return folder::decode(a, a.base.open(None)?.as_ref()),
    };
    let base = a.base.open(Some(input))?;
    let dest = destination(input, &a.out, |p| decoded_name(p, input, "use -o"))?;
    let talk = a.common.talk;
    let archive = talk.verbose().then(|| inspect_file(input)).flatten();
    let bar = progress_bar(input_len(input), talk.quiet);
    let start = Instant::now();
    let base = base.as_ref();
    let memory = memory(&a.common, || archive_file_needs(input));
    let report = decode_one(input, dest.as_deref(), a, memory, base, &|n| {
        bar.set_position(n)
    })?;
    bar.finish_and_clear();
    if !talk.quiet {
        let line = decoded_line(input, &report, start);
        match talk.verbose() {
            true => note(format_args!("{}", details(line, archive, start))),
            false => note(format_args!("{line}")),
        }
    }
    Ok(())
}

/// `sc decode PREFIX/ -o DIR`: every archive under the remote prefix decoded into `DIR`, every
/// other object copied (see [`folder::decode_prefix`]).
pub(super) fn decode_prefix(a: &DecodeArgs, prefix: &str) -> Result<()> {
    let Some(dir) = a.out.output.as_deref().filter(|o| !is_stdio(o)) else {
        bail!("decoding the remote folder {prefix} needs -o DIR");
    };
    let listing = sc::remote::list_skipping(prefix, &remote_options())?;
    for url in listing.skipped.iter().filter(|_| !a.common.talk.quiet) {
        note(format_args!(
            "sc: note: skipping {}: its key is not one sc can read (a control character, or an \
             empty, \".\" or \"..\" part)",
            text::printable(url)
        ));
    }
    let objects = &listing.objects;
    folder::decode_prefix(a, prefix, dir, objects, a.base.open(None)?.as_ref())
}

/// Copies the object at `url` to the file `dest` as it is; returns the bytes copied.
pub(super) fn copy_remote(url: &str, dest: &Path, force: bool) -> Result<u64> {
    let mut file = sc::remote::RemoteFile::open(url, &remote_options())?;
    let whole = 0..file.len();
    file.will_read(std::slice::from_ref(&whole));
    let settings = Settings {
        force,
        binary: true,
        ..Default::default()
    };
    let (copied, _) = write_with(Some(dest), &settings, |w| {
        io::copy(&mut file, w).map_err(|e| {
            about(sc::Error::from(e).into(), || {
                format!("copying {}", shown_url(url))
            })
        })
    })?;
    Ok(copied)
}

/// The summary line of a file decoded from `input`.
pub(super) fn decoded_line(input: &Path, r: &sc::DecodeReport, start: Instant) -> String {
    let md5 = match (r.stored_md5, r.md5) {
        (Some(_), Some(_)) => ", MD5 OK".to_string(),
        (None, Some(m)) => format!(", MD5 {} (not recorded in the archive)", hex(&m)),
        (_, None) => String::new(),
    };
    format!(
        "{}: {} -> {} bytes, {:.0} MB/s{md5}",
        name(input),
        r.archive_len,
        r.original_len,
        mb_per_s(r.original_len, start),
    )
}

/// Decodes `input` into `dest` (`None`: stdout) with `a`'s settings, `memory` bytes for blocks
/// and `base` for an archive coded against one, then handles `--rm`.
pub(super) fn decode_one(
    input: &Path,
    dest: Option<&Path>,
    a: &DecodeArgs,
    memory: u64,
    base: Option<&sc::Base>,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<sc::DecodeReport> {
    if a.rm {
        remove::check(input, dest)?;
    }
    let archive = Incoming::open(input)?;
    let meta = archive.meta().cloned();
    let settings = a.out.settings(meta.as_ref(), a.rm);
    let (report, written) = write_with(dest, &settings, |out| {
        archive
            .decode(input, out, a.md5 || a.rm, memory, base, progress)
            .map_err(|e| about(e, || format!("decoding {}", name(input))))
    })?;
    if a.rm {
        let (dest, id, meta) = remove::written(input, dest, written, meta.as_ref())?;
        // The MD5 was computed on the way out (and checked if recorded); check the file on
        // disk against it as well.
        let f = remove::reopen(dest, id)?;
        let verified = Some(md5_of(f, dest)?) == report.md5;
        let read = remove::Snapshot::of(meta);
        remove::remove_input(input, read, report.archive_len, dest, id, verified)?;
    }
    Ok(report)
}

pub(super) fn md5_of_file(path: &Path) -> Result<[u8; 16]> {
    let (input, _) = open_input(path)?;
    md5_of(input, path)
}

/// The MD5 of everything `input` (the file `path`) holds.
pub(super) fn md5_of(mut input: impl Read, path: &Path) -> Result<[u8; 16]> {
    let mut d = Md5::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = input
            .read(&mut buf)
            .with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            return Ok(d.finalize().into());
        }
        d.update(&buf[..n]);
    }
}

pub(super) fn verify(a: &VerifyArgs) -> Result<()> {
    if let Some(seed) = &a.derives {
        return verify::derives(seed, &a.paths, &a.common);
    }
    let file = |p: &Path| !p.is_dir();
    let first = a.paths.first().filter(|p| file(p));
    let base = a.base.open(first.map(PathBuf::as_path))?;
    let base = base.as_ref();
    match &a.paths[..] {
        [one] if file(one) => verify_one(one, None, base, &a.common),
        [archive, original] if file(archive) && file(original) && !verify::is_archive(original) => {
            verify_one(archive, Some(original), base, &a.common)
        }
        paths => verify::many(paths, base, &a.common),
    }
}

/// Decodes the archive `input` (against `base`) without writing it, checking every block and
/// computing the MD5 (compared with the recorded one, if any).
pub(super) fn check_archive(
    input: &Path,
    base: Option<&sc::Base>,
    common: &Common,
) -> Result<sc::DecodeReport> {
    let archive = Incoming::open(input)?;
    let bar = progress_bar(archive.len(), common.talk.quiet);
    let memory = memory(common, || archive_file_needs(input));
    let report = archive.decode(input, io::sink(), true, memory, base, &|n| {
        bar.set_position(n)
    });
    bar.finish_and_clear();
    report
}

pub(super) fn verify_one(
    input: &Path,
    original: Option<&Path>,
    base: Option<&sc::Base>,
    common: &Common,
) -> Result<()> {
    let (report, orig_md5) = rayon::join(
        || {
            check_archive(input, base, common)
                .map_err(|e| about(e, || format!("verifying {}", name(input))))
        },
        || original.map(md5_of_file).transpose(),
    );
    let report = report?;
    if let (Some(path), Some(m)) = (original, orig_md5?) {
        if Some(m) != report.md5 {
            bail!(
                "{}: MD5 {} does not match {} ({})",
                name(input),
                verify::md5_text(&report),
                path.display(),
                hex(&m)
            );
        }
    }
    if !common.talk.quiet {
        print_stdout(&format!(
            "{}: OK, {} bytes, md5 {}{}\n",
            name(input),
            report.original_len,
            verify::md5_text(&report),
            original.map_or(String::new(), |p| format!(", matches {}", p.display()))
        ))?;
    }
    Ok(())
}
