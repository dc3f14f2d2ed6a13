//! Help topics, shell completions and man pages, all made from the one clap definition of the
//! command line, so they cannot drift from it.

use super::output::Settings;
use super::{lab, write_stdout, write_with, Cli};
use anyhow::{Context, Result};
use clap::builder::{PossibleValue, PossibleValuesParser};
use clap::{Args, Command, CommandFactory};
use clap_mangen::roff::{roman, Roff};
use clap_mangen::Man;
use std::io::Write;
use std::path::PathBuf;

/// The help topic that is not a command.
const FORMATS: &str = "formats";

/// What `sc help formats` prints: which split each dtype gets, and what each mode then codes.
pub const FORMATS_TEXT: &str = "\
How sc splits the data before coding it

A safetensors file's header is kept verbatim; its tensor data is cut into blocks (1 MiB by
default, -b) that never mix dtypes. Each block is split into byte planes by a transform chosen
from its dtype, and each plane is coded on its own:

  dtype                           transform  planes
  BF16, F16                       exp16      2: bits 14..7 (BF16: the exponent; F16: the
                                             exponent and 3 mantissa bits), then the sign
                                             above bits 6..0; FAST measures each block and
                                             may take split16 (high byte, low byte) instead
  F32                             exp32      4: the exponent, the sign above mantissa bits
                                             22..16, then bytes 1 and 0
  F64                             exp64      8: exponent bits 59..52, then the sign,
                                             exponent bits 62..60 and mantissa bits 51..48,
                                             then bytes 5 to 0
  I16, U16                        split16    2 byte planes, most significant first
  I32, U32                        split32    4 byte planes, or delta32 (planes of the
                                             differences between values, for sequences such
                                             as position ids) when that measures smaller
  I64, U64                        split64    8 byte planes, or delta64 likewise
  BOOL, U8, I8, F8_E5M2, F8_E4M3  bytes      1: the bytes as they are
  other dtypes                    bytes      1: the bytes as they are

A GGUF file (llama.cpp's format) goes the same way: its header (metadata, tokenizer, tensor
infos) is kept verbatim, and each tensor's transform comes from its ggml type:

  ggml type                       transform  planes
  F32, F16, BF16, F64, I8 to I64  as the safetensors dtype of that name, above
  Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,   q4_0 to    one per field of the ggml block, each gathered
  Q8_1, Q2_K, Q3_K, Q4_K, Q5_K,   q8_k, the  across the blocks of the archive's block: an
  Q6_K, Q8_K                      type's     F16 scale (or min) as its high byte then its
                                  name       low byte, 4-bit quants as the bytes that pack
                                             them, 5- and 6-bit quants joined with their
                                             high bits (one byte per value), packed 6-bit
                                             scales and other fields as bytes
  other types (IQ*, TQ*, MXFP4)   bytes      1: the bytes as they are

Bytes between tensors, and files that are neither safetensors nor GGUF, are split as bytes.

FAST (-m fast, -1 to -5): Huffman codes for the predictable planes, near-random planes stored
as they are. On exp16 blocks, plane 0 and the two top bits of plane 1 (for BF16: the exponent
and the two top mantissa bits) are coded as one symbol (huffjoint) and the other six bits
stored raw (raw6) where that is smaller.

BEST (-m best, -6 to -9): adaptive range coding; on exp16, exp32 and exp64 blocks, plane 0 and
the two top bits of plane 1 are coded as one symbol and the other six bits stored raw (raw6),
unless coding the planes apart measures clearly smaller. In blocks of tensors the symbol is
coded with one of 16 adaptive models, picked by the mean magnitude of its row so far and its
column's magnitude in the rows above (ctxjoint, format version 2; the row length comes from the
tensor's shape). A BEST block of BF16 or F16 tensors holds as many consecutive tensors as fit,
each of 1024 values or more coded in its own rows while the models run on across them
(ctxtensors, format version 4). Elsewhere the symbol is coded with one adaptive model (joint). A plane that does not shrink is
stored as it is.

Each plane of a ggml transform is coded by the mode's order-0 coder (FAST: Huffman; BEST:
adaptive range coding), or stored, whichever is smaller; BEST also codes each plane after the
first given the block's scale high byte (byctx) where that is smaller. Archives of GGUF files
are format version 6.

Sign models (BEST): in blocks of tensors each value's sign, which raw6 stores as it is, is
range coded with an adaptive model per column of its tensor's rows, and the other five bits are
packed raw (ctxsigns and signs). --best, -7 and -8 use them on the blocks where they save at
least 1 bit in 64 values, -9 on every block they make smaller (smallest, decodes slowest), -6
nowhere (decodes fastest). Archives of safetensors files coded with sign models allowed are
format version 5; -6 writes version 4 at most.

Fine-tunes (--base BASE): a tensor with a namesake of the same dtype and shape in the base is
coded block by block as its difference from it where that measures smaller: BF16 and F16 sub16
(the difference of the values in sign-magnitude order, zigzagged, high byte then low byte) or
xor16, F32 sub32 or xor32, other dtypes xor8. The high plane, zero but for rare exceptions, is
stored as its exceptions (sparse); the low plane is Huffman-coded (FAST) or range-coded with
the base value's exponent as context (BEST, basectx). Tensors the base lacks, and blocks where
the difference does not pay, are split as above. A tensor that repeats an earlier one byte for
byte is stored once (xor8 against it: one constant plane). Decoding needs the same base: the
archive records its name and a digest of each base tensor used (format version 2).

`sc info ARCHIVE` shows the transforms and codecs an archive uses; docs/FORMAT.md specifies
the container.
";

#[derive(Args, Debug)]
pub(super) struct HelpArgs {
    /// A command, or `formats` (which split each dtype gets)
    topic: Option<String>,
}

#[derive(Args, Debug)]
pub(super) struct CompletionsArgs {
    /// The shell to complete for
    shell: clap_complete::Shell,
    /// The command to complete (default: the name sc runs as, so a copy installed as `scw`
    /// completes `scw`)
    #[arg(long, value_name = "NAME", value_parser = command_name)]
    name: Option<String>,
}

/// Checks a command name for a completion script, which writes it into shell code.
fn command_name(s: &str) -> std::result::Result<String, String> {
    let plain = |c: char| c.is_ascii_alphanumeric() || "._-+".contains(c);
    match !s.is_empty() && s.chars().all(plain) {
        true => Ok(s.to_string()),
        false => Err(format!(
            "'{s}' is not a plain command name (letters, digits, '.', '_', '-', '+')"
        )),
    }
}

impl CompletionsArgs {
    /// Completes `invoked`, the name sc runs as, when no `--name` is given and it is a plain
    /// command name.
    pub(super) fn invoked(&mut self, invoked: Option<&str>) {
        let plain = invoked.and_then(|n| command_name(n).ok());
        if self.name.is_none() {
            self.name = plain;
        }
    }
}

#[derive(Args, Debug)]
pub(super) struct ManpageArgs {
    /// Write sc.1 and a page for every command (sc-encode.1, ...) into this folder, instead of
    /// sc.1 to stdout
    #[arg(short, long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Overwrite existing pages
    #[arg(short, long)]
    force: bool,
}

/// The whole command line, its help listing the experiment commands under a heading of their
/// own, and `sc help` offering every command and topic.
pub fn command() -> Command {
    let cmd = Cli::command();
    let mut topics: Vec<PossibleValue> = cmd
        .get_subcommands()
        .map(|c| {
            let about = c.get_about().map(|a| a.to_string()).unwrap_or_default();
            let first = about.lines().next().unwrap_or_default().to_string();
            PossibleValue::new(c.get_name().to_string()).help(first)
        })
        .collect();
    topics.push(PossibleValue::new(FORMATS).help("Which split each dtype gets"));
    let cmd = cmd.mut_subcommand("help", |h| {
        h.mut_arg("topic", |a| {
            a.value_parser(PossibleValuesParser::new(topics))
        })
    });
    lab::with_heading(worded(cmd))
}

/// The help of options shared between commands, said as it applies to each.
fn worded(cmd: Command) -> Command {
    cmd.mut_subcommand("encode", |c| {
        c.mut_arg("force", |a| {
            a.help("Overwrite existing outputs; write binary data to a terminal; compress inputs that already end in .sc")
        })
    })
    .mut_subcommand("extract", |c| {
        c.mut_arg("output", |a| {
            a.help("Output file ('-' for stdout), or a folder to write it in under its default name: when OUT ends in '/' (created if missing) or is a folder")
        })
    })
}

/// The command line as completions and man pages describe it: the experiment commands, hidden
/// from clap's own list of commands for the heading of their own, offered like the others.
fn described() -> Command {
    let mut cmd = command();
    let hidden: Vec<String> = cmd
        .get_subcommands()
        .filter(|c| c.is_hide_set())
        .map(|c| c.get_name().to_string())
        .collect();
    for name in hidden {
        cmd = cmd.mut_subcommand(name, |c| c.hide(false));
    }
    cmd
}

/// `sc help [TOPIC]`: sc's help, a command's (as `sc COMMAND --help`), or a topic's.
pub(super) fn help(a: &HelpArgs) -> Result<()> {
    match a.topic.as_deref() {
        Some(FORMATS) => write_stdout(|w| w.write_all(FORMATS_TEXT.as_bytes())),
        topic => {
            let args = ["sc"].into_iter().chain(topic).chain(["--help"]);
            // Prints the help and exits, as clap does for `--help`.
            command().get_matches_from(args);
            Ok(())
        }
    }
}

/// `sc completions SHELL`: the completion script on stdout.
pub(super) fn completions(a: &CompletionsArgs) -> Result<()> {
    let mut script = Vec::new();
    let name = a.name.clone().unwrap_or_else(|| "sc".into());
    clap_complete::generate(a.shell, &mut described(), name, &mut script);
    write_stdout(|w| w.write_all(&script))
}

/// `sc manpage`: sc.1 on stdout, or with `--dir` every page written into that folder.
pub(super) fn manpage(a: &ManpageArgs) -> Result<()> {
    let mut cmd = described();
    cmd.build();
    let main = main_page(&cmd)?;
    let Some(dir) = &a.dir else {
        return write_stdout(|w| w.write_all(&main));
    };
    let mut pages = vec![("sc.1".to_string(), main)];
    for sub in cmd.get_subcommands() {
        let mut page = Vec::new();
        let man = Man::new(sub.clone());
        man.render(&mut page).context("rendering a man page")?;
        pages.push((man.get_filename(), page));
    }
    let settings = Settings {
        force: a.force,
        ..Settings::default()
    };
    for (name, page) in pages {
        let path = dir.join(name);
        write_with(Some(&path), &settings, |w| {
            w.write_all(&page)
                .with_context(|| format!("writing {}", path.display()))
        })?;
    }
    Ok(())
}

/// sc.1: clap's sections for the top-level command, the experiment commands among the others,
/// and the formats topic as a section of its own.
fn main_page(cmd: &Command) -> Result<Vec<u8>> {
    let man = Man::new(cmd.clone());
    let mut page = Vec::new();
    man.render_title(&mut page)?;
    man.render_name_section(&mut page)?;
    man.render_synopsis_section(&mut page)?;
    man.render_description_section(&mut page)?;
    man.render_options_section(&mut page)?;
    man.render_subcommands_section(&mut page)?;
    let mut formats = Roff::new();
    formats.control("SH", ["FORMATS"]);
    for paragraph in FORMATS_TEXT.split("\n\n").skip(1) {
        match paragraph.starts_with("  ") {
            true => formats
                .control("nf", [] as [&str; 0])
                .text([roman(paragraph)])
                .control("fi", [] as [&str; 0]),
            false => formats
                .control("PP", [] as [&str; 0])
                .text([roman(paragraph.replace('\n', " "))]),
        };
    }
    formats.to_writer(&mut page)?;
    man.render_version_section(&mut page)?;
    Ok(page)
}
