//! `sc list` and `sc extract`: the tensors of an archive, read through its index.

use super::output::Settings;
use super::text::{left, printable, right};
use super::{
    destination, is_stdio, json, note, with_threads, write_stdout, write_with, Common, OutputArgs,
};
use anyhow::{bail, Context, Result};
use clap::Args;
use sc::remote::RemoteFile;
use sc::{Archive, Kind, StoredBytes};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fs::File;

/// What an archive is read from: a file or a remote location.
trait Reader: std::io::Read + std::io::Seek + Send {}
impl<R: std::io::Read + std::io::Seek + Send> Reader for R {}
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub(super) struct ListArgs {
    /// Archive of a safetensors or GGUF file, or a folder: a table for each archive below it
    input: PathBuf,
    /// Print one JSON document: every tensor's name, dtype, shape, offsets, original and
    /// stored bytes, and the archive's split
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
pub(super) struct ExtractArgs {
    /// Archive of a safetensors or GGUF file
    input: PathBuf,
    /// Tensor to extract (repeat for several); `sc list` shows the names
    #[arg(short, long = "tensor", value_name = "NAME", required = true)]
    tensors: Vec<String>,
    /// Write the tensors' bytes back to back, in the order given, instead of a safetensors (or
    /// GGUF) file
    #[arg(long)]
    raw: bool,
    #[command(flatten)]
    out: OutputArgs,
    #[command(flatten)]
    base: super::base::BaseArg,
    #[command(flatten)]
    pub(super) common: Common,
}

/// An archive opened for random access: a file, or a remote location.
enum Opened {
    File(Archive<File>),
    Remote(Archive<RemoteFile>),
}

/// Runs `$body` with `$archive` bound to the archive `$opened` holds, whichever reader it has.
macro_rules! with_archive {
    ($opened:expr, $archive:ident => $body:expr) => {
        match $opened {
            Opened::File($archive) => $body,
            Opened::Remote($archive) => $body,
        }
    };
}

/// Opens `path` (or the location it names) for random access, against `base` if given; it
/// must be an archive of a safetensors or GGUF file.
fn open(path: &Path, base: Option<sc::Base>) -> Result<Opened> {
    if is_stdio(path) {
        bail!("reading tensors needs a seekable archive file, not stdin");
    }
    let opened = match super::url_of(path) {
        Some(url) => {
            let opts = super::remote_options();
            match base {
                Some(base) => Archive::open_url_with_base(url, base, &opts),
                None => Archive::open_url(url, &opts),
            }
            .map(Opened::Remote)?
        }
        None => {
            let f = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
            match base {
                Some(base) => Archive::open_with_base(f, base),
                None => Archive::open(f),
            }
            .map(Opened::File)
            .with_context(|| format!("reading {}", path.display()))?
        }
    };
    with_archive!(opened, archive => with_tensors(path, archive).map(Opened::from))
}

impl From<Archive<File>> for Opened {
    fn from(a: Archive<File>) -> Opened {
        Opened::File(a)
    }
}

impl From<Archive<RemoteFile>> for Opened {
    fn from(a: Archive<RemoteFile>) -> Opened {
        Opened::Remote(a)
    }
}

/// `archive`, if it holds a file with tensors (safetensors or GGUF).
fn with_tensors<R: Reader>(path: &Path, archive: Archive<R>) -> Result<Archive<R>> {
    if !archive.kind().has_tensors() {
        bail!(
            "{} holds a generic file, not safetensors or GGUF: it has no tensors (use sc decode)",
            path.display()
        );
    }
    Ok(archive)
}

fn shape(dims: &[u64]) -> String {
    let dims: Vec<String> = dims.iter().map(u64::to_string).collect();
    format!("[{}]", dims.join(", "))
}

fn percent(part: u64, whole: u64) -> f64 {
    100.0 * part as f64 / whole.max(1) as f64
}

/// `sc list --json`.
#[derive(Serialize)]
struct ListDoc<'a, T> {
    file: String,
    archive_bytes: u64,
    original_bytes: u64,
    /// Tensor bytes, and the archive bytes charged to them.
    tensor_bytes: u64,
    stored_bytes: u64,
    between_tensors_bytes: u64,
    container_bytes: u64,
    metadata: Option<&'a BTreeMap<String, String>>,
    /// The base checkpoint the archive was coded against, as it records it, if it needs one.
    base: Option<&'a str>,
    tensors: T,
}

/// One tensor of `sc list --json`.
#[derive(Serialize)]
struct TensorDoc<'a> {
    name: &'a str,
    dtype: &'a str,
    shape: &'a [u64],
    /// `data_offsets`: relative to the end of the header.
    offsets: [u64; 2],
    original_bytes: u64,
    stored_bytes: u64,
    /// `"base"`, or `"= NAME"` for a repeat of the tensor NAME; absent when coded on its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    coded_against: Option<String>,
}

/// Writes `archive`'s tensors as one JSON document, each tensor serialized as it is written.
fn list_json<R: Reader>(path: &Path, archive: &Archive<R>, sizes: &StoredBytes) -> Result<()> {
    let tensors = archive.tensors();
    let doc = ListDoc {
        file: path.to_string_lossy().into_owned(),
        archive_bytes: archive.archive_len(),
        original_bytes: archive.original_len(),
        tensor_bytes: tensors.iter().map(|t| t.len()).sum(),
        stored_bytes: sizes.per_tensor.iter().sum(),
        between_tensors_bytes: sizes.between_tensors,
        container_bytes: sizes.container,
        metadata: archive.metadata(),
        base: archive.base_name(),
        tensors: json::Lazy(|| {
            tensors
                .iter()
                .zip(&sizes.per_tensor)
                .map(|(t, &stored)| TensorDoc {
                    name: &t.name,
                    dtype: &t.dtype_name,
                    shape: &t.shape,
                    offsets: [t.begin, t.end],
                    original_bytes: t.len(),
                    stored_bytes: stored,
                    coded_against: against(archive, &t.name),
                })
        }),
    };
    write_stdout(|w| json::write_document(w, &doc))
}

pub(super) fn list(a: &ListArgs) -> Result<()> {
    if let Some(prefix) = super::url_of(&a.input).filter(|u| u.ends_with('/')) {
        return list_prefix(prefix, a.json);
    }
    if super::folder::is_dir(&a.input) {
        return super::catalog::list(&a.input, a.json, |p| {
            list(&ListArgs {
                input: p.to_path_buf(),
                json: false,
            })
        });
    }
    with_archive!(open(&a.input, None)?, archive => list_archive(a, archive))
}

/// `sc list s3://bucket/prefix/`: each archive under the prefix, named, and its table.
fn list_prefix(prefix: &str, json: bool) -> Result<()> {
    if json {
        bail!("{prefix} is a prefix: --json describes one archive (without --json, one table per archive)");
    }
    let listed = sc::remote::list(prefix, &super::remote_options())?;
    let archives: Vec<PathBuf> = (listed.into_iter())
        .filter(|(url, _)| url.ends_with(".sc"))
        .map(|(url, _)| PathBuf::from(url))
        .collect();
    if archives.is_empty() {
        bail!("{prefix}: no .sc archive under it");
    }
    for (k, url) in archives.iter().enumerate() {
        let gap = if k == 0 { "" } else { "\n" };
        let shown = super::shown_url(&url.to_string_lossy());
        super::print_stdout(&format!("{gap}{shown}:\n"))?;
        list(&ListArgs {
            input: url.clone(),
            json: false,
        })?;
    }
    Ok(())
}

/// `sc list` of the archive `archive` opened from `a.input`.
fn list_archive<R: Reader>(a: &ListArgs, archive: Archive<R>) -> Result<()> {
    let sizes = archive.stored_bytes();
    if a.json {
        return list_json(&a.input, &archive, &sizes);
    }
    let tensors = archive.tensors();
    // Rows are made twice, to measure the columns and to print them, so that a header of a
    // million tensors never becomes a million rows of strings at once.
    let row = |k: usize| {
        let (t, stored) = (&tensors[k], sizes.per_tensor[k]);
        let len = t.end - t.begin;
        [
            printable(&t.name).into_owned(),
            printable(&t.dtype_name).into_owned(),
            shape(&t.shape),
            len.to_string(),
            stored.to_string(),
            format!("{:.2}", percent(stored, len)),
            against(&archive, &t.name).map_or(String::new(), |s| printable(&s).into_owned()),
        ]
    };
    let original: u64 = tensors.iter().map(|t| t.end - t.begin).sum();
    let stored: u64 = sizes.per_tensor.iter().sum();
    let head = [
        "name",
        "dtype",
        "shape",
        "original",
        "compressed",
        "%",
        "coded against",
    ]
    .map(String::from);
    let total = [
        format!("total ({} tensors)", tensors.len()),
        String::new(),
        String::new(),
        original.to_string(),
        stored.to_string(),
        format!("{:.2}", percent(stored, original)),
        String::new(),
    ];
    let rows = || {
        std::iter::once(head.clone())
            .chain((0..tensors.len()).map(row))
            .chain([total.clone()])
    };
    // The last column only when some tensor is coded against something.
    let refs = archive.has_references();
    let mut widths = [0usize; 7];
    for row in rows() {
        for (w, cell) in widths.iter_mut().zip(&row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    write_stdout(|out| {
        for [name, dtype, dims, orig, comp, pct, against] in rows() {
            let [w0, w1, w2, w3, w4, w5, _] = widths;
            let line = format!(
                "{}  {}  {}  {}  {}  {}",
                left(&name, w0),
                left(&dtype, w1),
                left(&dims, w2),
                right(&orig, w3),
                right(&comp, w4),
                right(&pct, w5)
            );
            match refs {
                true => writeln!(out, "{}", format!("{line}  {against}").trim_end())?,
                false => writeln!(out, "{line}")?,
            }
        }
        writeln!(
            out,
            "archive: {} bytes = {stored} tensors + {} between tensors + {} header and index",
            archive.archive_len(),
            sizes.between_tensors,
            sizes.container
        )?;
        if let Some(base) = archive.base_name() {
            // Quoted as Rust quotes text: control characters escaped once, as `\u{1b}`.
            writeln!(
                out,
                "base: coded against {base:?}; reading the tensors marked base or seed needs it \
                 (--base)"
            )?;
        }
        Ok(())
    })
}

/// What the tensor `name` is coded against, if anything but itself: `base`, `seed E/B` for a
/// quant re-derived from its seed (E of its B ggml blocks exactly), or `= NAME` for a repeat
/// of the tensor NAME.
fn against<R: Reader>(archive: &Archive<R>, name: &str) -> Option<String> {
    match archive.reference(name)? {
        sc::Reference::Base(_) => Some("base".into()),
        sc::Reference::Repeats(t) => Some(format!("= {t}")),
        sc::Reference::Derived { blocks, exact, .. } => Some(format!("seed {exact}/{blocks}")),
        _ => None,
    }
}

/// `INPUT` without `.sc` and the format's suffix, plus `.extract.` and `bin` (for `--raw`),
/// `gguf` or `safetensors`.
fn default_output(input: &Path, raw: bool, gguf: bool) -> Result<PathBuf> {
    let name = input
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = name.strip_suffix(".sc").unwrap_or(&name);
    let format = if gguf { "gguf" } else { "safetensors" };
    let stem = stem.strip_suffix(&format!(".{format}")).unwrap_or(stem);
    let ext = if raw { "bin" } else { format };
    Ok(input.with_file_name(format!("{stem}.extract.{ext}")))
}

pub(super) fn extract(a: &ExtractArgs) -> Result<()> {
    with_threads(&a.common, || extract_on_pool(a))
}

fn extract_on_pool(a: &ExtractArgs) -> Result<()> {
    let base = a.base.open(Some(&a.input))?;
    match open(&a.input, base)? {
        Opened::File(archive) => extract_from(a, archive).map(drop),
        Opened::Remote(archive) => {
            let archive = extract_from(a, archive)?;
            if a.common.talk.verbose() {
                let line = super::remote_line(&a.input.to_string_lossy(), &archive.remote_stats());
                note(format_args!("{line}"));
            }
            Ok(())
        }
    }
}

/// `sc extract` from the archive `archive` opened from `a.input`; gives the archive back, for
/// what its reads fetched.
fn extract_from<R: Reader>(a: &ExtractArgs, mut archive: Archive<R>) -> Result<Archive<R>> {
    archive
        .set_memory(super::resources::memory(&a.common, || {
            super::resources::archive_needs(&archive)
        }))
        .with_context(|| format!("reading {}", a.input.display()))?;
    for name in &a.tensors {
        if archive.tensor(name).is_none() {
            let near = sc::closest_names(name, archive.tensors().iter().map(|t| t.name.as_str()));
            let hint = match near.as_slice() {
                [] => String::new(),
                n => {
                    let quoted: Vec<String> = n.iter().map(|n| format!("{n:?}")).collect();
                    format!("; did you mean {}?", quoted.join(", "))
                }
            };
            bail!(
                "no tensor named {name:?} in {}{hint} (sc list {} shows all {})",
                a.input.display(),
                a.input.display(),
                archive.tensors().len()
            );
        }
    }
    let gguf = archive.kind() == Kind::Gguf;
    let dest = destination(&a.input, &a.out, |p| default_output(p, a.raw, gguf))?;
    let names: Vec<&str> = a.tensors.iter().map(String::as_str).collect();
    let settings = Settings {
        force: a.out.force,
        binary: true,
        ..Settings::default()
    };
    let (written, _) = write_with(dest.as_deref(), &settings, |out| {
        let written = if a.raw {
            let mut n = 0;
            for name in &names {
                archive
                    .read_tensor_to(name, out)
                    .map_err(super::base::hint)?;
                n += archive.tensor(name).map_or(0, |t| t.end - t.begin);
            }
            n
        } else if gguf {
            archive.write_gguf(&names, out).map_err(super::base::hint)?
        } else {
            archive
                .write_safetensors(&names, out)
                .map_err(super::base::hint)?
        };
        Ok(written)
    })
    .map_err(|e| super::about(e, || format!("extracting from {}", super::name(&a.input))))?;
    let s = archive.stats();
    if a.common.talk.verbose() {
        note(format_args!(
            "{}: decoded {} of {} blocks: {} archive bytes read for them, {} bytes decoded; {} archive bytes read in all",
            a.input.display(),
            s.blocks_decoded,
            archive.blocks(),
            s.block_bytes_read,
            s.bytes_decoded,
            s.archive_bytes_read
        ));
    }
    if !a.common.talk.quiet {
        note(format_args!(
            "{}: {} tensor(s), {written} bytes -> {}",
            a.input.display(),
            a.tensors.len(),
            dest.as_deref()
                .map_or("stdout".into(), |d| d.display().to_string())
        ));
    }
    Ok(archive)
}
