//! `sc info`: what an archive holds, read without decoding it: a short summary for people,
//! one JSON document for scripts, the kept safetensors header on request.

use super::text::{count, printable, write_printable};
use super::{hex, json, write_stdout};
use anyhow::{Context, Result};
use clap::Args;
use sc::{ArchiveInfo, CodecUse, Kind, TensorInfo, TransformUse};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Tensors the summary names, largest first.
const LARGEST_SHOWN: usize = 5;

#[derive(Args, Debug)]
pub(super) struct InfoArgs {
    /// Archive to describe, or a folder: one line per archive below it
    input: PathBuf,
    /// Print one JSON document: mode, sizes, blocks, transforms, codecs, dtypes, metadata
    #[arg(long)]
    json: bool,
    /// Also print the kept safetensors header, pretty-printed (with --json: as "header"); of
    /// a GGUF archive, each metadata key and value (with --json: "metadata" has them whole)
    #[arg(long)]
    header: bool,
}

pub(super) fn info(a: &InfoArgs) -> Result<()> {
    if super::folder::is_dir(&a.input) {
        return super::catalog::info(&a.input, a.json, a.header);
    }
    let info = match super::url_of(&a.input) {
        // From the header and index alone: two requests.
        Some(url) => sc::inspect_url(url, &super::remote_options()).map(|(i, _)| i)?,
        None => {
            let mut f = File::open(&a.input)
                .with_context(|| format!("cannot open {}", a.input.display()))?;
            sc::inspect(&mut f).with_context(|| format!("reading {}", a.input.display()))?
        }
    };
    let metadata = info.metadata();
    match a.json {
        true => {
            write_stdout(|w| json::write_document(w, &doc(&a.input, &info, metadata, a.header)))
        }
        false => {
            let summary = summary(&a.input, &info, metadata.as_ref())?;
            write_stdout(|w| {
                w.write_all(summary.as_bytes())?;
                match info.header_json().filter(|_| a.header) {
                    Some(json) => {
                        w.write_all(b"header:\n")?;
                        write_pretty(w, json)
                    }
                    None if a.header && info.kind == Kind::Gguf => {
                        write_values(w, metadata.as_ref())
                    }
                    None => Ok(()),
                }
            })
        }
    }
}

/// Characters of a metadata value `sc info --header` prints (a tokenizer's vocabulary is
/// megabytes).
const VALUE_SHOWN: usize = 200;

/// Each key of a GGUF archive's metadata and its value (cut at [`VALUE_SHOWN`] characters),
/// one a line.
fn write_values(w: &mut dyn Write, metadata: Option<&BTreeMap<String, String>>) -> io::Result<()> {
    writeln!(w, "header metadata:")?;
    for (k, v) in metadata.into_iter().flatten() {
        let shown: String = v.chars().take(VALUE_SHOWN).collect();
        let more = match (v.chars().count(), array_len(v)) {
            (n, Some(items)) if n > VALUE_SHOWN => format!(" ... ({items} values)"),
            (n, None) if n > VALUE_SHOWN => format!(" ... ({n} characters)"),
            _ => String::new(),
        };
        writeln!(w, "  {} = {}{more}", printable(k), printable(&shown))?;
    }
    Ok(())
}

/// The number of elements of `json` when it is a JSON array (a GGUF array value's text),
/// counted in one pass without parsing it: a tokenizer's arrays hold a million values.
fn array_len(json: &str) -> Option<usize> {
    let inner = json.strip_prefix('[')?.strip_suffix(']')?;
    if inner.trim().is_empty() {
        return Some(0);
    }
    let (mut depth, mut in_string, mut escaped, mut items) = (0usize, false, false, 1);
    for c in inner.chars() {
        match (in_string, escaped, c) {
            (true, true, _) => escaped = false,
            (true, false, '\\') => escaped = true,
            (true, false, '"') => in_string = false,
            (true, false, _) => {}
            (false, _, '"') => in_string = true,
            (false, _, '[' | '{') => depth += 1,
            (false, _, ']' | '}') => depth = depth.saturating_sub(1),
            (false, _, ',') if depth == 0 => items += 1,
            _ => {}
        }
    }
    Some(items)
}

fn percent(part: u64, whole: u64) -> f64 {
    100.0 * part as f64 / whole.max(1) as f64
}

/// Tensors and bytes per dtype name, as the header writes it.
fn per_dtype(tensors: &[TensorInfo]) -> BTreeMap<&str, (u64, u64)> {
    let mut m: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for t in tensors {
        let e = m.entry(t.dtype_name.as_str()).or_default();
        e.0 += 1;
        e.1 += t.len();
    }
    m
}

/// The human summary: format, mode, sizes, transforms and codecs, tensors per dtype, the
/// largest tensors and the metadata keys.
fn summary(
    path: &Path,
    info: &ArchiveInfo,
    metadata: Option<&BTreeMap<String, String>>,
) -> Result<String> {
    let orig = info.original_len;
    let kind = info.kind.described();
    let mut t = String::new();
    writeln!(t, "file:        {}", printable(&path.to_string_lossy()))?;
    writeln!(t, "format:      sc version {}", info.format_version)?;
    writeln!(t, "mode:        {}", info.mode.name())?;
    writeln!(t, "block size:  {} bytes", info.block_size)?;
    writeln!(
        t,
        "input:       {kind}, {orig} bytes, md5 {}",
        info.md5.map_or("not recorded".into(), |m| hex(&m))
    )?;
    writeln!(
        t,
        "archive:     {} bytes ({:.2}% of original), {}",
        info.archive_len,
        percent(info.archive_len, orig),
        count(info.blocks, "block")
    )?;
    if info.kind.has_tensors() {
        let (kept, stored) = (info.kept_header_len, info.kept_header_stored);
        let how = if stored < kept {
            format!("stored deflated in {stored} bytes")
        } else {
            "stored as it is".into()
        };
        writeln!(t, "kept:        {kind} header of {kept} bytes, {how}")?;
    }
    if let Some(base) = &info.base_name {
        writeln!(
            t,
            "base:        {} tensors coded against {base:?} (decoding needs it: --base)",
            info.based_tensors
        )?;
    }
    if info.derived_tensors > 0 {
        let (blocks, exact) = info.derived_blocks;
        writeln!(
            t,
            "seed:        {} tensors re-derived from the base with {}: {exact} of {blocks} ggml \
             blocks exact ({:.2}%), the rest coded as residuals",
            info.derived_tensors,
            info.quantizers.join(", "),
            percent(exact, blocks)
        )?;
    }
    if info.repeated_tensors > 0 {
        writeln!(
            t,
            "repeated:    {} tensors stored as references to earlier identical ones",
            info.repeated_tensors
        )?;
    }
    // A remote archive is described from its header and index alone: its block records,
    // which say the transforms and codecs, lie between the blocks and are not fetched.
    if info.blocks > 0 && info.transforms.is_empty() {
        writeln!(
            t,
            "codecs:      not fetched: a remote archive's block records come only with its \
             blocks (sc info on a local copy shows its transforms and codecs)"
        )?;
    } else {
        writeln!(
            t,
            "transforms:  how blocks were split into planes (sc help formats)"
        )?;
        for (name, u) in &info.transforms {
            let blocks = count(u.blocks, "block");
            writeln!(t, "  {name:<9} {blocks}, {} bytes", u.original)?;
        }
        writeln!(t, "codecs:      how planes were coded (sc help formats)")?;
        for (codec, u) in &info.codecs {
            let (planes, raw, coded) = (count(u.planes, "plane"), u.original, u.coded);
            let pct = percent(coded, raw);
            writeln!(
                t,
                "  {codec:<9} {planes}, {raw} -> {coded} bytes ({pct:.2}%)"
            )?;
        }
    }
    let Some(tensors) = &info.tensors else {
        return Ok(t);
    };
    writeln!(t, "tensors:     {}", tensors.len())?;
    for (dtype, (n, bytes)) in per_dtype(tensors) {
        let s = if n == 1 { "" } else { "s" };
        writeln!(t, "  {:<9} {n} tensor{s}, {bytes} bytes", printable(dtype))?;
    }
    let mut largest: Vec<&TensorInfo> = tensors.iter().collect();
    largest.sort_by_key(|t| std::cmp::Reverse(t.len()));
    largest.truncate(LARGEST_SHOWN);
    if !largest.is_empty() {
        writeln!(t, "largest:")?;
    }
    for x in largest {
        let dims: Vec<String> = x.shape.iter().map(u64::to_string).collect();
        writeln!(
            t,
            "  {} {} [{}] {} bytes",
            printable(&x.name),
            printable(&x.dtype_name),
            dims.join(", "),
            x.len()
        )?;
    }
    if let Some(m) = metadata.filter(|m| !m.is_empty()) {
        let keys: Vec<String> = m.keys().map(|k| printable(k).into_owned()).collect();
        writeln!(t, "metadata:    {}", keys.join(", "))?;
    }
    Ok(t)
}

/// `sc info --json`.
#[derive(Serialize)]
struct InfoDoc<'a> {
    file: String,
    format_version: u16,
    mode: &'static str,
    kind: &'static str,
    block_size: u32,
    original_bytes: u64,
    archive_bytes: u64,
    blocks: u64,
    md5: Option<String>,
    kept_header_bytes: u64,
    /// Bytes the kept header takes in the archive (less than `kept_header_bytes` when stored
    /// deflated).
    kept_header_stored_bytes: u64,
    /// The base checkpoint the archive was coded against, as it records it; `None` when it
    /// needs none.
    base: Option<&'a str>,
    /// Tensors coded against the base.
    based_tensors: usize,
    /// Of those, quant tensors re-derived from the base (their seed).
    derived_tensors: usize,
    /// The derived tensors' ggml blocks, and those that re-derived exactly.
    derived_blocks: u64,
    derived_exact_blocks: u64,
    /// The quantizers they are re-derived with.
    quantizers: &'a [String],
    /// Tensors stored as references to earlier identical ones.
    repeated_tensors: usize,
    transforms: BTreeMap<&'static str, TransformDoc>,
    codecs: BTreeMap<&'static str, CodecDoc>,
    /// `None` for a generic archive.
    tensors: Option<usize>,
    dtypes: Option<BTreeMap<&'a str, DtypeDoc>>,
    metadata: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    header: Option<Header<'a>>,
}

#[derive(Serialize)]
struct TransformDoc {
    blocks: u64,
    original_bytes: u64,
}

#[derive(Serialize)]
struct CodecDoc {
    planes: u64,
    original_bytes: u64,
    stored_bytes: u64,
}

impl From<&TransformUse> for TransformDoc {
    fn from(u: &TransformUse) -> TransformDoc {
        TransformDoc {
            blocks: u.blocks,
            original_bytes: u.original,
        }
    }
}

impl From<&CodecUse> for CodecDoc {
    fn from(u: &CodecUse) -> CodecDoc {
        CodecDoc {
            planes: u.planes,
            original_bytes: u.original,
            stored_bytes: u.coded,
        }
    }
}

#[derive(Serialize)]
struct DtypeDoc {
    tensors: u64,
    bytes: u64,
}

/// The kept header in a JSON document: as the JSON value it is, keys in the file's order, or
/// as a string when it does not parse.
#[derive(Serialize)]
#[serde(untagged)]
enum Header<'a> {
    Value(Box<serde_json::value::RawValue>),
    Text(&'a str),
}

fn doc<'a>(
    path: &Path,
    info: &'a ArchiveInfo,
    metadata: Option<BTreeMap<String, String>>,
    header: bool,
) -> InfoDoc<'a> {
    let header = info.header_json().filter(|_| header).map(|json| {
        match serde_json::value::RawValue::from_string(json.trim().to_string()) {
            Ok(raw) => Header::Value(raw),
            Err(_) => Header::Text(json),
        }
    });
    InfoDoc {
        file: path.to_string_lossy().into_owned(),
        format_version: info.format_version,
        mode: info.mode.name(),
        kind: info.kind.name(),
        block_size: info.block_size,
        original_bytes: info.original_len,
        archive_bytes: info.archive_len,
        blocks: info.blocks,
        md5: info.md5.map(|m| hex(&m)),
        kept_header_bytes: info.kept_header_len,
        kept_header_stored_bytes: info.kept_header_stored,
        base: info.base_name.as_deref(),
        based_tensors: info.based_tensors,
        derived_tensors: info.derived_tensors,
        derived_blocks: info.derived_blocks.0,
        derived_exact_blocks: info.derived_blocks.1,
        quantizers: &info.quantizers,
        repeated_tensors: info.repeated_tensors,
        transforms: info
            .transforms
            .iter()
            .map(|(&n, u)| (n, u.into()))
            .collect(),
        codecs: info.codecs.iter().map(|(&n, u)| (n, u.into())).collect(),
        tensors: info.tensors.as_ref().map(Vec::len),
        dtypes: info.tensors.as_deref().map(|t| {
            per_dtype(t)
                .into_iter()
                .map(|(d, (tensors, bytes))| (d, DtypeDoc { tensors, bytes }))
                .collect()
        }),
        metadata,
        header,
    }
}

/// Containers nested deeper than this (a safetensors header has three levels: the header,
/// a tensor, its shape) are printed on one line, so that indentation never makes the output
/// more than 8 times the header, however deep a crafted header nests.
const INDENTED_LEVELS: usize = 3;

/// Writes the JSON text `json` as it goes, indented two spaces a level for the first
/// [`INDENTED_LEVELS`] levels, keys in their order, escaped for the terminal; text that is not
/// JSON comes out much as it is. Each byte of `json` gives at most 8 bytes: a comma or an
/// opening bracket its line break and at most 6 spaces, a control character its 6-byte escape.
fn write_pretty(w: &mut dyn Write, json: &str) -> io::Result<()> {
    const INDENT: &[u8; 2 * INDENTED_LEVELS] = b"      ";
    let newline = |w: &mut dyn Write, depth: usize| {
        w.write_all(b"\n")?;
        w.write_all(&INDENT[..2 * depth.min(INDENTED_LEVELS)])
    };
    let json = json.trim();
    let mut depth = 0usize;
    let mut chars = json.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        match c {
            '"' => {
                let mut end = json.len();
                while let Some((i, s)) = chars.next() {
                    match s {
                        '\\' => {
                            chars.next();
                        }
                        '"' => {
                            end = i + 1;
                            break;
                        }
                        _ => {}
                    }
                }
                write_printable(w, &json[at..end])?;
            }
            '{' | '[' => {
                w.write_all(&[c as u8])?;
                while chars.next_if(|&(_, c)| c.is_whitespace()).is_some() {}
                if let Some((_, n)) = chars.next_if(|&(_, n)| n == '}' || n == ']') {
                    w.write_all(&[n as u8])?;
                    continue;
                }
                depth += 1;
                if depth <= INDENTED_LEVELS {
                    newline(w, depth)?;
                }
            }
            '}' | ']' => {
                if depth <= INDENTED_LEVELS {
                    newline(w, depth.saturating_sub(1))?;
                }
                depth = depth.saturating_sub(1);
                w.write_all(&[c as u8])?;
            }
            ',' if depth <= INDENTED_LEVELS => {
                w.write_all(b",")?;
                newline(w, depth)?;
            }
            ',' => w.write_all(b", ")?,
            ':' => w.write_all(b": ")?,
            c if c.is_whitespace() => {}
            _ => {
                let end = loop {
                    match chars.peek() {
                        Some(&(i, n)) if n.is_whitespace() || "\"{}[],:".contains(n) => break i,
                        Some(_) => {
                            chars.next();
                        }
                        None => break json.len(),
                    }
                };
                write_printable(w, &json[at..end])?;
            }
        }
    }
    w.write_all(b"\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pretty_json_keeps_order_and_strings() {
        let json = r#"{"b":{"dtype":"BF16","shape":[2, 3],"x":"a, {b}: \"c\""},"a":[], "e":{}}  "#;
        let mut out = Vec::new();
        write_pretty(&mut out, json).unwrap();
        let text = String::from_utf8(out).unwrap();
        let want = "{\n  \"b\": {\n    \"dtype\": \"BF16\",\n    \"shape\": [\n      2,\n      3\n    ],\n    \"x\": \"a, {b}: \\\"c\\\"\"\n  },\n  \"a\": [],\n  \"e\": {}\n}\n";
        assert_eq!(text, want);
        let a: serde_json::Value = serde_json::from_str(json).unwrap();
        let b: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn long_arrays_are_counted_not_parsed() {
        assert_eq!(array_len("[]"), Some(0));
        assert_eq!(array_len("[1]"), Some(1));
        assert_eq!(
            array_len(r#"["a,b", "c\"]", [1, 2], {"k": [3, 4]}]"#),
            Some(4)
        );
        assert_eq!(array_len("hello, world"), None);
        let million = format!("[{}]", vec!["true"; 1_000_000].join(","));
        assert_eq!(array_len(&million), Some(1_000_000));
        let mut shown = Vec::new();
        let m = BTreeMap::from([("tokenizer.ggml.scores".to_string(), million)]);
        write_values(&mut shown, Some(&m)).unwrap();
        let shown = String::from_utf8(shown).unwrap();
        assert!(shown.ends_with(" ... (1000000 values)\n"), "{shown}");
        assert!(shown.len() < 400, "{shown}");
    }
}
