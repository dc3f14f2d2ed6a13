//! Bases found, not named ([`relate`]): for each input of a run, the candidate (another input,
//! or a file, archive or folder offered as a base) that codes it smallest, by measurement.
//!
//! A candidate qualifies when tensors of the input's names, dtypes and shapes hold at least
//! half of the input's tensor bytes ([`MIN_MATCHED`]); file names never count. Each qualifying
//! candidate is measured on a sample of the input's blocks, coded with the real coder in the
//! run's mode once alone and once against the candidate's bytes; the candidate whose estimated
//! saving over the whole input is largest wins, if it saves at least [`MIN_SAVING`] of the
//! input. Only the sampled ranges of a candidate are read (no digests, no whole tensors).
//!
//! Inputs may be bases of one another: checkpoint 3 against checkpoint 2 against checkpoint 1.
//! Choices are settled greedily, largest saving first, refusing any that would close a cycle
//! or make a chain deeper than [`RelateOptions::max_depth`]; an input refused its first choice
//! takes its next one, or none.

use crate::base::Base;
use crate::choice::{Scratch, SignModels};
use crate::container::refs::{Reference, References, Source};
use crate::container::{Kind, Mode};
use crate::error::{Error, Result};
use crate::gguf;
use crate::pipeline::block::code_block;
use crate::pipeline::plan::{BlockSpec, Planner};
use crate::pipeline::refs::Spans;
use crate::read::ReadAt;
use crate::safetensors::{read_header_at, Header, TensorInfo};
use rayon::prelude::*;
use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Share of an input's tensor bytes that a candidate's matching tensors (same name, dtype and
/// shape) must hold for it to be measured at all.
pub const MIN_MATCHED: f64 = 0.5;
/// Share of an input's bytes that coding against a candidate must save, by the sample's
/// estimate, for the input to take it rather than be coded alone: an unrelated candidate of
/// the same shapes measures a saving of about zero, since blocks fall back to coding alone.
pub const MIN_SAVING: f64 = 0.005;
/// How much larger a saving counts when the base comes earlier than the input (see
/// [`relate`]): more than the sample's noise between the two directions of a pair.
const EARLIER_BONUS: f64 = 0.02;
/// Size of the blocks sampled: small enough to sample every part of a model cheaply, large
/// enough for the coders' statistics (sizes against and alone are compared, not absolute).
const SAMPLE_BLOCK: u32 = 64 << 10;

/// Settings for [`relate`].
#[derive(Clone, Copy, Debug)]
pub struct RelateOptions {
    /// The mode the inputs will be coded in (the sample is coded in it too).
    pub mode: Mode,
    /// Longest chain of inputs coded against inputs (checkpoint 3 against 2 against 1 is 2
    /// deep); 8 by default. 0 lets no input be coded against another input of the run.
    pub max_depth: usize,
    /// Bytes of each input sampled against each candidate (in blocks of 64 KiB; at least one).
    pub sample_bytes: u64,
}

impl Default for RelateOptions {
    fn default() -> Self {
        RelateOptions {
            mode: Mode::Fast,
            max_depth: 8,
            sample_bytes: 256 << 10,
        }
    }
}

/// A base chosen for an input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chosen {
    /// Another input of the run (by index in the inputs): its archive must be decoded first.
    Input(usize),
    /// A candidate (by index in the candidates).
    Candidate(usize),
}

/// What [`relate`] found for one input.
#[derive(Clone, Debug)]
pub struct Related {
    /// The base the input is coded against; `None`: coded alone.
    pub base: Option<Chosen>,
    /// The estimated bytes coding against the base saves over coding alone (0 alone).
    pub saving: u64,
    /// The input's length in bytes.
    pub len: u64,
}

/// The plan of a run: per input its base, and an order that puts every base before the inputs
/// coded against it (the order in which their archives can be decoded).
#[derive(Clone, Debug)]
pub struct RelatePlan {
    /// By input, in the order given.
    pub inputs: Vec<Related>,
    /// Input indexes, each after the input it is coded against.
    pub order: Vec<usize>,
}

impl RelatePlan {
    /// The path of input `i`'s base, if it has one: `inputs` and `candidates` as given to
    /// [`relate`].
    pub fn base_path<'a>(
        &self,
        i: usize,
        inputs: &'a [PathBuf],
        candidates: &'a [PathBuf],
    ) -> Option<&'a Path> {
        match self.inputs.get(i)?.base? {
            Chosen::Input(k) => inputs.get(k).map(PathBuf::as_path),
            Chosen::Candidate(k) => candidates.get(k).map(PathBuf::as_path),
        }
    }

    /// How many inputs the chain under input `i` holds (0: it is coded alone or against a
    /// candidate).
    pub fn depth(&self, i: usize) -> usize {
        let mut d = 0;
        let mut at = i;
        while let Some(Chosen::Input(b)) = self.inputs[at].base {
            d += 1;
            at = b;
            if d > self.inputs.len() {
                break;
            }
        }
        d
    }
}

/// An input's tensors as the encoder plans them.
struct Layout {
    kind: Kind,
    header: Header,
    prefix_len: u64,
    file: File,
    len: u64,
}

/// The layout of the safetensors or GGUF file at `path`; `None` for any other file (coded as
/// plain bytes, against nothing).
fn layout(path: &Path) -> Result<Option<Layout>> {
    let file = File::open(path)?;
    let len = file.metadata()?.len();
    let mut magic = [0u8; 4];
    if len >= 4 {
        file.read_exact_at(&mut magic, 0)?;
    }
    let read = |buf: &mut [u8], at: u64| file.read_exact_at(buf, at);
    let (kind, header, prefix_len) = match magic == gguf::MAGIC {
        true => match gguf::read_header_at(len, read)? {
            Ok((h, _)) => {
                let prefix_len = h.data_start;
                let tensors = h.into_tensor_infos();
                let header = Header {
                    json_len: 0,
                    tensors,
                };
                (Kind::Gguf, header, prefix_len)
            }
            Err(_) => return Ok(None),
        },
        false => match read_header_at(len, read)? {
            Ok((h, n)) => (Kind::Safetensors, h, 8 + n),
            Err(_) => return Ok(None),
        },
    };
    Ok(Some(Layout {
        kind,
        header,
        prefix_len,
        file,
        len,
    }))
}

/// One node a base may come from: an input (opened as a base) or a candidate.
struct Node {
    base: Base,
    chosen: Chosen,
}

/// Picks a base for each of `inputs` (safetensors or GGUF files) among the other inputs and
/// `candidates` (files, `.sc` archives that need no base, folders of shards), as the module
/// documentation says. A candidate that is one of the inputs (the same file) counts once, as
/// the input; an input that is not a safetensors or GGUF file is coded alone.
///
/// The plan is a measurement of the files as they are now: a file that changes before the
/// inputs are coded is caught then, by the digests an archive records of its base's tensors
/// ([`Error::Changed`] while coding, [`Error::BaseMismatch`] on decoding), never by wrong
/// output.
pub fn relate(
    inputs: &[PathBuf],
    candidates: &[PathBuf],
    opts: &RelateOptions,
) -> Result<RelatePlan> {
    if opts.sample_bytes == 0 {
        return Err(Error::InvalidArgument(
            "the sample must be at least one byte".into(),
        ));
    }
    let ids: Vec<Option<(u64, u64)>> = inputs.iter().map(|p| file_id(p)).collect();
    let layouts: Vec<Option<Layout>> = inputs.iter().map(|p| layout(p)).collect::<Result<_>>()?;
    let mut nodes: Vec<Node> = Vec::new();
    for (i, (p, l)) in inputs.iter().zip(&layouts).enumerate() {
        if l.is_some() {
            let base = Base::open(p)?;
            nodes.push(Node {
                base,
                chosen: Chosen::Input(i),
            });
        }
    }
    for (k, p) in candidates.iter().enumerate() {
        let id = file_id(p);
        if id.is_some() && ids.contains(&id) {
            continue;
        }
        nodes.push(Node {
            base: Base::open(p)?,
            chosen: Chosen::Candidate(k),
        });
    }
    // Every (input, node) pair worth measuring, measured in parallel.
    let pairs: Vec<(usize, usize)> = layouts
        .iter()
        .enumerate()
        .filter_map(|(i, l)| l.as_ref().map(|_| i))
        .flat_map(|i| (0..nodes.len()).map(move |n| (i, n)))
        .filter(|&(i, n)| nodes[n].chosen != Chosen::Input(i))
        .collect();
    let alone = Mutex::new(HashMap::new());
    let savings: Vec<Option<u64>> = pairs
        .par_iter()
        .map(|&(i, n)| match &layouts[i] {
            Some(l) => measure(
                l,
                &nodes[n].base,
                opts,
                &|b, code: &mut dyn FnMut() -> u64| {
                    let key = (i, b.offset, b.len);
                    if let Some(&n) = alone
                        .lock()
                        .ok()
                        .and_then(|m| m.get(&key).copied())
                        .as_ref()
                    {
                        return n;
                    }
                    let n = code();
                    if let Ok(mut m) = alone.lock() {
                        m.insert(key, n);
                    }
                    n
                },
            ),
            None => Ok(None),
        })
        .collect::<Result<_>>()?;
    let mut edges: Vec<(u64, usize, Chosen)> = pairs
        .iter()
        .zip(savings)
        .filter_map(|(&(i, n), s)| {
            let s = s?;
            let len = layouts[i].as_ref().map_or(0, |l| l.len);
            (s as f64 >= MIN_SAVING * len as f64).then_some((s, i, nodes[n].chosen))
        })
        .collect();
    // Largest saving first, a base earlier in the inputs (or a candidate) counted
    // [`EARLIER_BONUS`] larger: two files that save about the same against each other
    // (checkpoints of a run, a base and its fine-tune) chain from the first named (a folder's
    // files in name order). Ties by input, then by base, so that the plan is deterministic.
    let rank = |&(s, i, c): &(u64, usize, Chosen)| {
        let earlier = !matches!(c, Chosen::Input(b) if b > i);
        let s = s as f64 * if earlier { 1.0 + EARLIER_BONUS } else { 1.0 };
        (std::cmp::Reverse(s as u64), i, c_key(c))
    };
    edges.sort_by_key(rank);
    let mut plan = RelatePlan {
        inputs: layouts
            .iter()
            .zip(inputs)
            .map(|(l, p)| Related {
                base: None,
                saving: 0,
                len: match l {
                    Some(l) => l.len,
                    None => std::fs::metadata(p).map_or(0, |m| m.len()),
                },
            })
            .collect(),
        order: Vec::new(),
    };
    for (saving, i, c) in edges {
        if plan.inputs[i].base.is_some() || !fits(&plan, i, c, opts.max_depth) {
            continue;
        }
        plan.inputs[i].base = Some(c);
        plan.inputs[i].saving = saving;
    }
    plan.order = order(&plan);
    Ok(plan)
}

/// A sort key for a base: inputs before candidates, each by index.
fn c_key(c: Chosen) -> (u8, usize) {
    match c {
        Chosen::Input(k) => (0, k),
        Chosen::Candidate(k) => (1, k),
    }
}

/// The identity of the file at `path` (device and inode), for telling a candidate that is an
/// input apart whatever path names it.
fn file_id(path: &Path) -> Option<(u64, u64)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path)
            .ok()
            .filter(|m| m.is_file())
            .map(|m| (m.dev(), m.ino()))
    }
    #[cfg(not(unix))]
    {
        std::fs::canonicalize(path).ok().map(|p| {
            (
                0,
                twox_hash::XxHash3_64::oneshot(p.to_string_lossy().as_bytes()),
            )
        })
    }
}

/// Whether input `i` may take `c` as its base in `plan`: no cycle, and no chain deeper than
/// `max_depth` (the chain above the base, one more, and the deepest chain below `i`).
fn fits(plan: &RelatePlan, i: usize, c: Chosen, max_depth: usize) -> bool {
    let Chosen::Input(b) = c else {
        return true;
    };
    // A cycle: `i` is on the chain above `b`.
    let mut at = b;
    loop {
        if at == i {
            return false;
        }
        match plan.inputs[at].base {
            Some(Chosen::Input(up)) => at = up,
            _ => break,
        }
    }
    let above = plan.depth(b) + 1;
    let below = (0..plan.inputs.len())
        .filter_map(|k| {
            // How far `k` lies below `i`, if it does.
            let mut d = 0;
            let mut at = k;
            loop {
                if at == i {
                    return Some(d);
                }
                match plan.inputs[at].base {
                    Some(Chosen::Input(up)) if d < plan.inputs.len() => {
                        at = up;
                        d += 1;
                    }
                    _ => return None,
                }
            }
        })
        .max()
        .unwrap_or(0);
    above + below <= max_depth
}

/// The inputs of `plan`, each after its base among them.
fn order(plan: &RelatePlan) -> Vec<usize> {
    let mut by_depth: Vec<(usize, usize)> =
        (0..plan.inputs.len()).map(|i| (plan.depth(i), i)).collect();
    by_depth.sort();
    by_depth.into_iter().map(|(_, i)| i).collect()
}

/// The estimated bytes that coding the input `l` against `base` saves over coding it alone,
/// measured on a sample of its blocks; `None` when too few of its tensors match. `alone` gives
/// a sampled block's size coded alone, from `code` unless it is known: the other candidates
/// of the input sample the same blocks where they match the same tensors.
fn measure(
    l: &Layout,
    base: &Base,
    opts: &RelateOptions,
    alone_of: &(dyn Fn(&BlockSpec, &mut dyn FnMut() -> u64) -> u64 + Sync),
) -> Result<Option<u64>> {
    let tensors = &l.header.tensors;
    let total: u64 = tensors.iter().map(TensorInfo::len).sum();
    let same = |t: &TensorInfo| {
        let like = |b: &TensorInfo| b.dtype_name == t.dtype_name && b.shape == t.shape;
        !t.is_empty() && base.tensor(&t.name).is_some_and(like)
    };
    let paired: Vec<&TensorInfo> = tensors.iter().filter(|t| same(t)).collect();
    let matched: u64 = paired.iter().map(|t| t.len()).sum();
    if total == 0 || (matched as f64) < MIN_MATCHED * total as f64 {
        return Ok(None);
    }
    let entries = paired.iter().map(|t| Reference {
        tensor: t.name.clone(),
        source: Source::Base {
            len: t.len(),
            digest: 0,
        },
    });
    let refs = References {
        base_name: base.name().to_string(),
        entries: entries.collect(),
    };
    let spans = Spans::new(Some(&refs), tensors, l.prefix_len);
    let planner = Planner::with_refs(
        Some(&l.header),
        l.prefix_len,
        SAMPLE_BLOCK,
        &spans,
        opts.mode,
        l.kind,
    );
    // The plan runs on past the file's end (the encoder stops at the end of its input).
    let within = planner.take_while(|b| b.offset < l.len);
    let based: Vec<BlockSpec> = within.filter(|b| b.based).collect();
    let sampled = sample(&based, opts.sample_bytes);
    let signs = match opts.mode {
        Mode::Best => SignModels::default(),
        Mode::Fast => SignModels::Off,
    };
    let mut scratch = Scratch::default();
    let (mut alone, mut against, mut bytes) = (0u64, 0u64, 0u64);
    for b in sampled {
        let mut raw = vec![0u8; b.len as usize];
        l.file.read_exact_at(&mut raw, b.offset)?;
        let bytes_of_base = base_bytes(l, base, b)?;
        let rows = &b.rows;
        let code = |base: Option<&[u8]>, s: &mut Scratch| {
            code_block(&raw, base, b.transform, rows, opts.mode, signs, s).stored_len()
        };
        alone += alone_of(b, &mut || code(None, &mut Scratch::default()));
        against += code(Some(&bytes_of_base), &mut scratch);
        bytes += b.len;
    }
    if bytes == 0 {
        return Ok(None);
    }
    let saved = alone.saturating_sub(against) as f64 / bytes as f64;
    Ok(Some((saved * matched as f64) as u64))
}

/// Up to `bytes` of `blocks` (at least one block), spread evenly over them.
fn sample(blocks: &[BlockSpec], bytes: u64) -> Vec<&BlockSpec> {
    let n = bytes.div_ceil(u64::from(SAMPLE_BLOCK)).max(1) as usize;
    if blocks.len() <= n {
        return blocks.iter().collect();
    }
    (0..n).map(|k| &blocks[k * blocks.len() / n]).collect()
}

/// The base bytes of the planned block `b` of the input `l`: each byte of a tensor from its
/// namesake in `base`, zero between tensors.
fn base_bytes(l: &Layout, base: &Base, b: &BlockSpec) -> Result<Vec<u8>> {
    let mut out = vec![0u8; b.len as usize];
    let (start, end) = (b.offset, b.offset + b.len);
    for t in &l.header.tensors {
        let (ts, te) = (l.prefix_len + t.begin, l.prefix_len + t.end);
        if te <= start || ts >= end {
            continue;
        }
        let (a, z) = (ts.max(start), te.min(end));
        let slot = &mut out[(a - start) as usize..(z - start) as usize];
        base.read(&t.name, a - ts, slot)?;
    }
    Ok(out)
}
