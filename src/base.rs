//! A base checkpoint: the tensors a fine-tune is coded against ([`Base`]).
//!
//! A base is read tensor by tensor, range by range, never loaded whole: from a safetensors or
//! GGUF file by positioned reads, from an `.sc` archive through its index (decoding only the
//! blocks a range needs), from a folder of shards by tensor name, whatever the shard layout.
//!
//! This is where the library's one import cycle lives, and why (docs/ARCHITECTURE.md): a base
//! may itself be an `.sc` archive, so `base` opens an [`Archive`], and reading an archive with
//! references (`archive`, `pipeline::decode`, `pipeline::refs`) reaches `base` again.

use crate::archive::Archive;
use crate::container::Kind;
use crate::error::{Error, HeaderError, Result};
use crate::gguf;
use crate::read::{At, ReadAt};
use crate::safetensors::{read_header_at, TensorInfo};
use rayon::prelude::*;
use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Bytes hashed at a time when a base tensor's digest is computed.
const DIGEST_CHUNK: usize = 4 << 20;

/// A base checkpoint that fine-tunes are coded against: a safetensors or GGUF file, an `.sc`
/// archive of one, or a folder of them (a sharded checkpoint, tensors found by name in any shard).
///
/// Give it to [`crate::EncodeOptions::base`] to code a fine-tune against it, and to
/// [`crate::DecodeOptions::base`] or [`crate::Archive::open_with_base`] to restore one. Each base
/// tensor an archive uses is identified by its name, its length and the XXH3-128 of its bytes,
/// so any file holding the same tensors serves (re-sharded, converted to an archive); a base
/// whose tensor differs is refused with [`Error::BaseMismatch`]. Cloning is cheap (a shared
/// handle); digests, once computed, are kept for the clones too.
///
/// ```no_run
/// let base = sc::Base::open("base.safetensors")?;
/// let opts = sc::EncodeOptions { base: Some(&base), ..Default::default() };
/// let tune = std::fs::read("tune.safetensors")?;
/// let archive = sc::encode_to_vec(&tune, &opts)?;
/// let opts = sc::DecodeOptions { base: Some(&base), ..Default::default() };
/// assert_eq!(sc::decode_to_vec(&archive, &opts)?, tune);
/// # Ok::<(), sc::Error>(())
/// ```
#[derive(Clone)]
pub struct Base {
    inner: Arc<Inner>,
}

struct Inner {
    name: String,
    shards: Vec<Shard>,
    /// The file each shard was opened from (none for a base in memory).
    paths: Vec<PathBuf>,
    /// Every tensor by name: its shard, its header entry (a GGUF tensor's as
    /// [`gguf::GgufHeader::tensor_infos`] gives it), and where its bytes start (the file offset
    /// for a file, the original file's offset for an archive).
    tensors: HashMap<String, (usize, TensorInfo, u64)>,
    digests: Mutex<HashMap<String, u128>>,
}

/// One file of a base.
enum Shard {
    /// A safetensors or GGUF file.
    File(File),
    /// A safetensors or GGUF file's bytes, held in memory.
    Memory(Vec<u8>),
    Archive {
        file: Arc<File>,
        /// Opened archives not in use: one per thread reading at once.
        idle: Mutex<Vec<Archive<At<Arc<File>>>>>,
    },
}

impl std::fmt::Debug for Base {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Base")
            .field("name", &self.inner.name)
            .field("shards", &self.inner.shards.len())
            .field("tensors", &self.inner.tensors.len())
            .finish()
    }
}

fn bad(path: &Path, reason: impl Into<String>) -> Error {
    Error::BadBase {
        path: path.display().to_string(),
        reason: reason.into(),
    }
}

/// The files of a base folder: every `*.safetensors`, `*.gguf` and `*.sc` below it, sorted,
/// following links to files (not to folders); an archive beside its original is left out.
fn shard_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<std::io::Result<_>>()?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let path = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if e.file_type()?.is_dir() {
            shard_files(&path, out)?;
        } else if (name.ends_with(".safetensors") || name.ends_with(".gguf")) && path.is_file() {
            out.push(path);
        } else if let Some(original) = name.strip_suffix(".sc") {
            if path.is_file() && !name.starts_with('.') && !dir.join(original).is_file() {
                out.push(path);
            }
        }
    }
    Ok(())
}

/// Refuses anything but a regular file as a shard: opening a FIFO would wait for a writer,
/// and a device has no fixed bytes to code against.
fn regular(path: &Path, meta: &std::fs::Metadata) -> Result<()> {
    match meta.is_file() {
        true => Ok(()),
        false => Err(bad(path, "not a regular file or a folder")),
    }
}

/// Opens one file of a base: an archive (by its magic bytes), a GGUF file (by its magic too)
/// or a safetensors file. Returns the shard and its tensors with where their bytes start.
fn open_shard(path: &Path) -> Result<(Shard, Vec<(TensorInfo, u64)>)> {
    // Checked before opening, which blocks on a FIFO, and again on the file opened.
    regular(
        path,
        &std::fs::metadata(path).map_err(|e| bad(path, e.to_string()))?,
    )?;
    let file = File::open(path).map_err(|e| bad(path, e.to_string()))?;
    let meta = file.metadata().map_err(|e| bad(path, e.to_string()))?;
    regular(path, &meta)?;
    let len = meta.len();
    let mut first = [0u8; 8];
    let got = len.min(8) as usize;
    file.read_exact_at(&mut first[..got], 0)?;
    if first[..4] == crate::MAGIC {
        let file = Arc::new(file);
        let archive =
            Archive::open(At::new(Arc::clone(&file))?).map_err(|e| bad(path, e.to_string()))?;
        if let Some(needed) = archive.base_name() {
            return Err(bad(
                path,
                format!("it is itself coded against the base {needed:?}; decode it first"),
            ));
        }
        if !archive.kind().has_tensors() {
            return Err(bad(path, "the archive holds no safetensors or GGUF file"));
        }
        let tensors = archive
            .tensors()
            .iter()
            .map(|t| (t.clone(), archive.tensor_range(t).start))
            .collect();
        let shard = Shard::Archive {
            file,
            idle: Mutex::new(vec![archive]),
        };
        return Ok((shard, tensors));
    }
    let tensors = file_tensors(path, &file, len)?;
    Ok((Shard::File(file), tensors))
}

/// The tensors of the safetensors or GGUF file `file` of `len` bytes (at `path`, for
/// errors), with where their bytes start.
fn file_tensors(path: &Path, file: &dyn ReadAt, len: u64) -> Result<Vec<(TensorInfo, u64)>> {
    let mut magic = [0u8; 4];
    if len >= 4 {
        file.read_exact_at(&mut magic, 0)?;
    }
    if Kind::by_magic(&magic) == Some(Kind::Gguf) {
        let (header, _) = gguf::read_header_at(len, |buf, at| file.read_exact_at(buf, at))?
            .map_err(|e| bad(path, format!("not a valid GGUF file: {e}")))?;
        let start = header.data_start;
        return Ok(header
            .tensor_infos()
            .into_iter()
            .map(|t| {
                let at = start + t.begin;
                (t, at)
            })
            .collect());
    }
    let (header, n) = match read_header_at(len, |buf, at| file.read_exact_at(buf, at))? {
        Ok(found) => found,
        Err(HeaderError::TooShort | HeaderError::ImplausibleLength(_)) => {
            return Err(bad(path, "not a safetensors or GGUF file or an sc archive"))
        }
        Err(e) => return Err(bad(path, format!("not a valid safetensors file: {e}"))),
    };
    Ok(header
        .tensors
        .into_iter()
        .map(|t| {
            let start = 8 + n + t.begin;
            (t, start)
        })
        .collect())
}

impl Base {
    /// A base held in memory: the bytes of a safetensors or GGUF file, called `name` in
    /// archives coded against it and in errors.
    pub fn from_bytes(name: &str, bytes: Vec<u8>) -> Result<Base> {
        let tensors = file_tensors(Path::new(name), &&bytes[..], bytes.len() as u64)?;
        Ok(Base::from_shards(
            name.to_string(),
            vec![Shard::Memory(bytes)],
            Vec::new(),
            vec![tensors],
        ))
    }

    /// A base of `shards` (opened from `paths`), whose tensors are `tensors` (by shard); names
    /// are unique.
    fn from_shards(
        name: String,
        shards: Vec<Shard>,
        paths: Vec<PathBuf>,
        tensors: Vec<Vec<(TensorInfo, u64)>>,
    ) -> Base {
        let tensors = tensors
            .into_iter()
            .enumerate()
            .flat_map(|(k, ts)| {
                ts.into_iter()
                    .map(move |(t, start)| (t.name.clone(), (k, t, start)))
            })
            .collect();
        Base {
            inner: Arc::new(Inner {
                name,
                shards,
                paths,
                tensors,
                digests: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Opens a base: a safetensors or GGUF file, an `.sc` archive of one (which must not
    /// itself need a base), or a folder, whose `*.safetensors`, `*.gguf` and `*.sc` files below
    /// it are its shards
    /// (a tensor name in two shards is an error). Reads the headers (and archives' indexes)
    /// only.
    pub fn open(path: impl AsRef<Path>) -> Result<Base> {
        let path = path.as_ref();
        let meta = std::fs::metadata(path).map_err(|e| bad(path, e.to_string()))?;
        let files = match meta.is_dir() {
            true => {
                let mut files = Vec::new();
                shard_files(path, &mut files).map_err(|e| bad(path, e.to_string()))?;
                if files.is_empty() {
                    return Err(bad(
                        path,
                        "the folder holds no safetensors or GGUF files or archives",
                    ));
                }
                files
            }
            false => {
                regular(path, &meta)?;
                vec![path.to_path_buf()]
            }
        };
        let mut shards = Vec::with_capacity(files.len());
        let mut tensors = Vec::with_capacity(files.len());
        let mut seen: HashMap<String, usize> = HashMap::new();
        for (k, f) in files.iter().enumerate() {
            let (shard, found) = open_shard(f)?;
            for (t, _) in &found {
                if let Some(&other) = seen.get(&t.name) {
                    return Err(bad(
                        path,
                        format!(
                            "tensor {:?} is in both {} and {}",
                            t.name,
                            files[other].display(),
                            f.display()
                        ),
                    ));
                }
                seen.insert(t.name.clone(), k);
            }
            shards.push(shard);
            tensors.push(found);
        }
        let name = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into(),
        );
        Ok(Base::from_shards(name, shards, files, tensors))
    }

    /// The files the base was opened from: the file given, or the shards found in the folder
    /// (none for a base in memory). Writing over one of them while an archive needs the base
    /// loses the base.
    pub fn files(&self) -> &[PathBuf] {
        &self.inner.paths
    }

    /// The base's file or folder name: what an archive coded against it records, and what
    /// errors show.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The tensor called `name`, if the base has one.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.inner.tensors.get(name).map(|(_, t, _)| t)
    }

    /// Number of tensors.
    pub fn len(&self) -> usize {
        self.inner.tensors.len()
    }

    /// Whether the base has no tensors.
    pub fn is_empty(&self) -> bool {
        self.inner.tensors.is_empty()
    }

    /// Reads bytes `offset..offset + out.len()` of the tensor `name` into `out`.
    pub(crate) fn read(&self, name: &str, offset: u64, out: &mut [u8]) -> Result<()> {
        let Some((shard, t, start)) = self.inner.tensors.get(name) else {
            return Err(Error::NoSuchTensor(name.to_string()));
        };
        let end = offset.checked_add(out.len() as u64);
        if end.is_none_or(|e| e > t.len()) {
            return Err(Error::InvalidArgument(format!(
                "bytes past the end of base tensor {name:?}"
            )));
        }
        let at = start + offset;
        match &self.inner.shards[*shard] {
            Shard::File(file) => file
                .read_exact_at(out, at)
                .map_err(|e| bad(&self.inner.paths[*shard], e.to_string())),
            Shard::Memory(bytes) => Ok((&bytes[..]).read_exact_at(out, at)?),
            Shard::Archive { file, idle } => {
                let free = idle.lock().ok().and_then(|mut v| v.pop());
                let mut archive = match free {
                    Some(a) => a,
                    None => Archive::open(At::new(Arc::clone(file))?)?,
                };
                let read = archive.read_range_into(at..at + out.len() as u64, out);
                if let Ok(mut v) = idle.lock() {
                    v.push(archive);
                }
                read
            }
        }
    }

    /// The XXH3-128 of the tensor `name`'s bytes, computed once and kept.
    pub(crate) fn digest(&self, name: &str) -> Result<u128> {
        if let Some(d) = self
            .inner
            .digests
            .lock()
            .ok()
            .and_then(|m| m.get(name).copied())
        {
            return Ok(d);
        }
        self.digest_again(name)
    }

    /// The XXH3-128 of the tensor `name`'s bytes as they are now, computed afresh (and kept).
    pub(crate) fn digest_again(&self, name: &str) -> Result<u128> {
        let Some((shard, t, start)) = self.inner.tensors.get(name) else {
            return Err(Error::NoSuchTensor(name.to_string()));
        };
        // Positioned reads, never a map: another process may truncate the file meanwhile,
        // which is then an error rather than SIGBUS.
        let d = match &self.inner.shards[*shard] {
            Shard::Memory(bytes) => {
                let t = &bytes[*start as usize..(start + t.len()) as usize];
                twox_hash::XxHash3_128::oneshot(t)
            }
            Shard::File(_) | Shard::Archive { .. } => {
                let len = t.len();
                let mut h = twox_hash::XxHash3_128::new();
                let mut buf = vec![0u8; (len as usize).min(DIGEST_CHUNK)];
                let mut at = 0u64;
                while at < len {
                    let n = ((len - at) as usize).min(buf.len());
                    self.read(name, at, &mut buf[..n])?;
                    h.write(&buf[..n]);
                    at += n as u64;
                }
                h.finish_128()
            }
        };
        if let Ok(mut m) = self.inner.digests.lock() {
            m.insert(name.to_string(), d);
        }
        Ok(d)
    }

    /// The error for the base tensor `name`, whose bytes changed while an encode read them.
    pub(crate) fn changed(&self, name: &str) -> Error {
        let file = self
            .inner
            .tensors
            .get(name)
            .and_then(|(k, _, _)| self.inner.paths.get(*k));
        let base = match file {
            Some(f) => f.display().to_string(),
            None => format!("{:?}", self.name()),
        };
        Error::Changed(format!("the base {base} (its tensor {name:?})"))
    }

    /// Computes the digests of the tensors `names`, several at a time.
    pub(crate) fn digests(&self, names: &[&str]) -> Result<Vec<u128>> {
        names.par_iter().map(|n| self.digest(n)).collect()
    }

    /// Checks that the base holds the tensor `name` with `len` bytes of XXH3-128 `digest`, as
    /// the archive coded against the base `needed` records.
    pub(crate) fn verify(&self, needed: &str, name: &str, len: u64, digest: u128) -> Result<()> {
        let mismatch = |reason: String| Error::BaseMismatch {
            given: self.name().to_string(),
            needed: needed.to_string(),
            reason,
        };
        let t = self
            .tensor(name)
            .ok_or_else(|| mismatch(format!("it has no tensor {name:?}")))?;
        if t.len() != len {
            return Err(mismatch(format!(
                "its tensor {name:?} has {} bytes, not {len}",
                t.len()
            )));
        }
        if self.digest(name)? != digest {
            return Err(mismatch(format!("its tensor {name:?} holds other bytes")));
        }
        Ok(())
    }
}
