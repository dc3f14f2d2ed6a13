//! Writing an output file without losing data: a filesystem helper, apart from the codec, that
//! the `sc` command line and the Python package both write their outputs with.
//!
//! [`OutputFile::create`] decides how a destination is written:
//!
//! - a regular file (or none yet) through a temporary file beside it, renamed over the
//!   destination by [`OutputFile::commit`] only once everything was written, so that a failed
//!   or interrupted run leaves the destination as it was. The temporary file gets the mode a
//!   new file gets (0666 less the umask) unless [`OutputFile::set_permissions`] says otherwise;
//! - an existing FIFO or character device, and a block device when replacing is allowed, in
//!   place: renaming over one would replace the node, not feed it;
//! - a symbolic link through its target: the file the link names is replaced, the link kept.
//!   A link to nothing is refused rather than followed.
//!
//! Temporary files are named `.NAME.PID.START.TAG.INODE.RANDOM.sc-tmp`: `NAME` cut to 160
//! bytes, `PID` and `START` the writing process and its start time (clock ticks after boot,
//! field 22 of `/proc/PID/stat`), `TAG` 8 hex digits of this boot and PID namespace (a hash
//! of the kernel's boot id and the namespace's identity), `INODE` the file's own inode number,
//! `RANDOM` 16 letters and digits. A process killed before it could remove its own (SIGKILL,
//! SIGBUS, an allocation failure) leaves it behind; the first [`OutputFile::create`] of a
//! later process in that folder removes a file only when it can tell it is such a leftover:
//!
//! - its name parses exactly as above, and its tag is this process's (same boot, same PID
//!   namespace: another machine's or container's files are left alone);
//! - `/proc` is this PID namespace's own (`/proc/self/stat` gives this process's pid), and
//!   `/proc/PID` is gone or belongs to a process started at another time (the pid reused);
//! - it is a regular file with one link, owned by this user, whose inode is the one its name
//!   records: a copy of a leftover, or a user's file given such a name, has another inode.
//!
//! Anything else is left as it is.

use std::collections::HashSet;
use std::fmt;
use std::fs::{self, File, FileTimes, Metadata, OpenOptions, Permissions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};

/// Suffix of every temporary file.
const SUFFIX: &str = ".sc-tmp";

/// The longest destination name kept in a temporary file's name: the rest (pid, start time,
/// tag, inode, random part, suffix: 88 bytes at most) must fit the 255 bytes file systems
/// allow for a name.
const NAME_KEPT: usize = 160;

/// Letters and digits in the random part of a temporary file's name.
const RANDOM_LEN: usize = 16;

/// Temporary files not yet renamed or removed, for [`remove_unfinished`].
static PENDING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn pending() -> MutexGuard<'static, Vec<PathBuf>> {
    PENDING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Deletes the temporary file of every [`OutputFile`] not yet committed or dropped, for a
/// process about to exit on a signal. Commits wait forever afterwards, so that no output is
/// renamed into place once this ran.
pub fn remove_unfinished() {
    let paths = pending();
    for p in paths.iter() {
        let _ = fs::remove_file(p);
    }
    std::mem::forget(paths);
}

/// An output file being written; see the [module documentation](self). Dropped without
/// [`OutputFile::commit`], its temporary file is deleted and the destination left as it was.
///
/// Write errors name the destination (not the temporary file).
pub struct OutputFile {
    /// The destination as given.
    dest: PathBuf,
    target: Target,
}

enum Target {
    /// An existing FIFO or device, written in place.
    InPlace(File),
    /// A temporary file that replaces `path` (the destination, or the file its symbolic link
    /// names) on commit. It is `None` only inside [`OutputFile::commit`], which takes it and
    /// consumes the `OutputFile`: the `expect("uncommitted")` on it elsewhere cannot fail.
    Temp {
        tmp: Option<tempfile::NamedTempFile>,
        path: PathBuf,
        overwrite: bool,
    },
}

impl OutputFile {
    /// Opens `dest` for writing. Fails (before anything is written) where `dest` is a
    /// directory (`IsADirectory`), a symbolic link to nothing (`NotFound`), or an existing
    /// file or block device while `overwrite` is off (`AlreadyExists`). FIFOs and character
    /// devices are written in place whatever `overwrite` says.
    pub fn create(dest: impl AsRef<Path>, overwrite: bool) -> io::Result<OutputFile> {
        let dest = dest.as_ref();
        let path = match fs::metadata(dest) {
            Ok(m) if m.is_dir() => return Err(io::ErrorKind::IsADirectory.into()),
            Ok(m) if !m.is_file() => return OutputFile::open_in_place(dest, &m, overwrite),
            Ok(_) if !overwrite => return Err(io::ErrorKind::AlreadyExists.into()),
            Ok(_) => link_target(dest)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if fs::symlink_metadata(dest).is_ok() {
                    return Err(io::Error::new(
                        io::ErrorKind::NotFound,
                        "a symbolic link to a missing file (not written through)",
                    ));
                }
                dest.to_path_buf()
            }
            Err(e) => return Err(e),
        };
        let dir = parent(&path);
        sweep(dir);
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut cut = name.len().min(NAME_KEPT);
        while !name.is_char_boundary(cut) {
            cut -= 1;
        }
        let tmp = create_temporary(dir, &name[..cut])?;
        pending().push(tmp.path().to_path_buf());
        Ok(OutputFile {
            dest: dest.to_path_buf(),
            target: Target::Temp {
                tmp: Some(tmp),
                path,
                overwrite,
            },
        })
    }

    /// Opens the existing FIFO or device `dest` (`m`) to write into it.
    fn open_in_place(dest: &Path, m: &Metadata, overwrite: bool) -> io::Result<OutputFile> {
        #[cfg(unix)]
        if !overwrite && std::os::unix::fs::FileTypeExt::is_block_device(&m.file_type()) {
            return Err(io::ErrorKind::AlreadyExists.into());
        }
        #[cfg(not(unix))]
        let _ = (m, overwrite);
        let f = OpenOptions::new().write(true).open(dest)?;
        Ok(OutputFile {
            dest: dest.to_path_buf(),
            target: Target::InPlace(f),
        })
    }

    /// The destination, as given to [`OutputFile::create`].
    pub fn path(&self) -> &Path {
        &self.dest
    }

    /// Whether the destination is written in place (a FIFO or a device) rather than replaced.
    pub fn in_place(&self) -> bool {
        matches!(self.target, Target::InPlace(_))
    }

    /// The file written to: the destination itself when [in place](OutputFile::in_place),
    /// else the temporary file.
    pub fn file(&self) -> &File {
        match &self.target {
            Target::InPlace(f) => f,
            // Only `commit` empties it, and it consumes the file (see `Target::Temp`).
            Target::Temp { tmp, .. } => tmp.as_ref().expect("uncommitted").as_file(),
        }
    }

    /// Gives the file these permission bits instead of the umask's (a temporary file only: a
    /// FIFO or device keeps its own).
    pub fn set_permissions(&self, permissions: Permissions) -> io::Result<()> {
        match self.in_place() {
            true => Ok(()),
            false => self.file().set_permissions(permissions),
        }
    }

    /// Gives the file these access and modification times (a temporary file only).
    pub fn set_times(&self, times: FileTimes) -> io::Result<()> {
        match self.in_place() {
            true => Ok(()),
            false => self.file().set_times(times),
        }
    }

    /// Renames the temporary file over the destination (without `overwrite`, only if nothing
    /// has appeared there meanwhile); with `durable`, the file is synced to disk before and
    /// its directory after. Returns the metadata of the file renamed into place (`None` for a
    /// destination written in place). Flush any buffer around the file first.
    pub fn commit(mut self, durable: bool) -> io::Result<Option<Metadata>> {
        let Target::Temp {
            tmp,
            path,
            overwrite,
        } = &mut self.target
        else {
            return Ok(None);
        };
        // Full until this call, which consumes the file: it runs once.
        let tmp = tmp.take().expect("uncommitted");
        if durable {
            tmp.as_file().sync_all()?;
        }
        let meta = tmp.as_file().metadata()?;
        let mut pending = pending();
        let name = tmp.path().to_path_buf();
        let result = match overwrite {
            true => tmp.persist(&*path).map(drop),
            false => tmp.persist_noclobber(&*path).map(drop),
        };
        pending.retain(|p| p != &name);
        drop(pending);
        result.map_err(|e| e.error)?;
        if durable {
            File::open(parent(path))?.sync_all()?;
        }
        Ok(Some(meta))
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        if let Target::Temp { tmp, .. } = &mut self.target {
            if let Some(t) = tmp.take() {
                let name = t.path().to_path_buf();
                drop(t);
                pending().retain(|p| p != &name);
            }
        }
    }
}

impl Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let r = match &mut self.target {
            Target::InPlace(f) => f.write(buf),
            // Only `commit` empties it, and it consumes the file (see `Target::Temp`).
            Target::Temp { tmp, .. } => tmp.as_mut().expect("uncommitted").as_file_mut().write(buf),
        };
        r.map_err(|e| writing(&self.dest, e))
    }

    fn flush(&mut self) -> io::Result<()> {
        let r = match &mut self.target {
            Target::InPlace(f) => f.flush(),
            // Only `commit` empties it, and it consumes the file (see `Target::Temp`).
            Target::Temp { tmp, .. } => tmp.as_mut().expect("uncommitted").as_file_mut().flush(),
        };
        r.map_err(|e| writing(&self.dest, e))
    }
}

/// A write error, naming the destination.
#[derive(Debug)]
struct Writing {
    dest: PathBuf,
    error: io::Error,
}

impl fmt::Display for Writing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "writing {}: {}", self.dest.display(), self.error)
    }
}

// The cause is part of the message: a `source` would print it twice in error chains.
impl std::error::Error for Writing {}

/// `e`, of the same kind, saying it happened writing `dest`.
fn writing(dest: &Path, e: io::Error) -> io::Error {
    if e.kind() == io::ErrorKind::Interrupted {
        return e;
    }
    io::Error::new(
        e.kind(),
        Writing {
            dest: dest.to_path_buf(),
            error: e,
        },
    )
}

/// The file `dest` names: itself, or the file its symbolic links lead to. The link is opened
/// for writing first, so that the kernel's rules for following links (`protected_symlinks`
/// in shared folders) decide as they would for any program writing through it.
fn link_target(dest: &Path) -> io::Result<PathBuf> {
    if !fs::symlink_metadata(dest)?.is_symlink() {
        return Ok(dest.to_path_buf());
    }
    drop(OpenOptions::new().write(true).open(dest)?);
    fs::canonicalize(dest)
}

/// The directory `path` lies in.
fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// An I/O error without the temporary path the `tempfile` crate adds to it: callers name the
/// destination instead.
fn without_path(e: io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(code) => io::Error::from_raw_os_error(code),
        None => io::Error::new(e.kind(), e.kind().to_string()),
    }
}

/// Creates the temporary file for the destination named `name` in `dir`, named as the
/// [module documentation](self) says. It is made with inode 0 in its name (no file has it,
/// so a process killed at once leaves an empty file no sweep takes) and renamed at once to
/// its own inode's name.
fn create_temporary(dir: &Path, name: &str) -> io::Result<tempfile::NamedTempFile> {
    let me = writer();
    let (start, tag) = me.map_or((0, "0"), |w| (w.start, w.tag.as_str()));
    let prefix = format!(".{name}.{}.{start}.{tag}.0.", std::process::id());
    let mut builder = tempfile::Builder::new();
    builder
        .prefix(&prefix)
        .suffix(SUFFIX)
        .rand_bytes(RANDOM_LEN);
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
    let tmp = builder.tempfile_in(dir).map_err(without_path)?;
    #[cfg(unix)]
    if me.is_some() {
        let ino = std::os::unix::fs::MetadataExt::ino(&tmp.as_file().metadata()?);
        let made = tmp
            .path()
            .file_name()
            .map(|n| n.to_string_lossy().into_owned());
        let random = made.as_deref().and_then(|n| n.strip_suffix(SUFFIX));
        let random = random
            .and_then(|n| n.rsplit('.').next())
            .unwrap_or_default();
        let named = dir.join(format!(
            ".{name}.{}.{start}.{tag}.{ino}.{random}{SUFFIX}",
            std::process::id()
        ));
        let (file, old) = tmp.into_parts();
        // The random part is this file's own: no other file has the new name.
        if let Err(e) = fs::rename(&old, &named) {
            drop(old);
            return Err(e);
        }
        let _ = old.keep();
        let path = match tempfile::TempPath::try_from_path(&named) {
            Ok(path) => path,
            Err(e) => {
                let _ = fs::remove_file(&named);
                return Err(e);
            }
        };
        return Ok(tempfile::NamedTempFile::from_parts(file, path));
    }
    Ok(tmp)
}

/// This process as its temporary files name it.
struct Writer {
    /// Start time, in clock ticks after boot.
    start: u64,
    /// 8 hex digits of this boot and PID namespace.
    tag: String,
    /// The effective user id.
    uid: u32,
}

/// This process's [`Writer`]; `None` where `/proc` is missing or is not this PID namespace's
/// own (its `self` names another pid): no temporary file is then ever taken for a leftover.
fn writer() -> Option<&'static Writer> {
    static WRITER: OnceLock<Option<Writer>> = OnceLock::new();
    WRITER
        .get_or_init(|| {
            let (pid, start) = pid_and_start(&fs::read_to_string("/proc/self/stat").ok()?)?;
            if pid != std::process::id() {
                return None;
            }
            let boot = fs::read("/proc/sys/kernel/random/boot_id").ok()?;
            let ns = fs::read_link("/proc/self/ns/pid").ok()?;
            let mut key = boot;
            key.push(0);
            key.extend_from_slice(ns.as_os_str().as_encoded_bytes());
            let h = twox_hash::XxHash3_64::oneshot(&key);
            // "Uid:" then the real, effective, saved and file-system ids.
            let status = fs::read_to_string("/proc/self/status").ok()?;
            let uids = status.lines().find_map(|l| l.strip_prefix("Uid:"))?;
            let uid = uids.split_whitespace().nth(1)?.parse().ok()?;
            Some(Writer {
                start,
                tag: format!("{:08x}", h as u32),
                uid,
            })
        })
        .as_ref()
}

/// The pid and start time (field 22) in the text of a `/proc/PID/stat` file. The command
/// name (field 2, in parentheses) may hold spaces and parentheses: fields are counted after
/// its last `)`.
fn pid_and_start(stat: &str) -> Option<(u32, u64)> {
    let pid = stat.split(' ').next()?.parse().ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let start = rest.split_whitespace().nth(19)?.parse().ok()?;
    Some((pid, start))
}

/// What the name of a temporary file says of its writer and itself.
#[derive(Debug, PartialEq)]
struct Leftover<'a> {
    pid: u32,
    start: u64,
    tag: &'a str,
    ino: u64,
}

/// `s` as a number written the way this module writes one (digits, no sign, no leading zero).
fn number<T: std::str::FromStr + ToString>(s: &str) -> Option<T> {
    let n: T = s.parse().ok()?;
    (s.bytes().all(|b| b.is_ascii_digit()) && n.to_string() == s).then_some(n)
}

/// The fields of the temporary file name `name`, if it parses exactly as this module names
/// its temporary files (see the [module documentation](self)).
fn parse_name(name: &str) -> Option<Leftover<'_>> {
    let inner = name.strip_prefix('.')?.strip_suffix(SUFFIX)?;
    let mut parts = inner.rsplitn(7, '.');
    let random = parts.next()?;
    let (ino, tag, start, pid) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    parts.next()?;
    let random_ok = random.len() == RANDOM_LEN && random.bytes().all(|b| b.is_ascii_alphanumeric());
    let tag_ok = tag.len() == 8 && tag.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if !random_ok || !tag_ok {
        return None;
    }
    Some(Leftover {
        pid: number(pid)?,
        start: number(start)?,
        tag,
        ino: number(ino)?,
    })
}

/// Whether the process `pid` that started at `start` is gone: `/proc/PID` missing, or
/// belonging to a process started at another time.
fn gone(pid: u32, start: u64) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => pid_and_start(&stat).is_some_and(|(_, now)| now != start),
        Err(e) => e.kind() == io::ErrorKind::NotFound,
    }
}

/// Whether the file `m` describes is the temporary file `left` names: a regular file with
/// one link, owned by this user, of the inode its name records.
#[cfg(unix)]
fn is_the_file(m: &Metadata, left: &Leftover) -> bool {
    use std::os::unix::fs::MetadataExt;
    let me = writer().map(|w| w.uid);
    m.is_file() && m.nlink() == 1 && Some(m.uid()) == me && m.ino() == left.ino
}

#[cfg(not(unix))]
fn is_the_file(_: &Metadata, _: &Leftover) -> bool {
    false
}

/// Removes, once per folder and process, the temporary files in `dir` that processes of this
/// boot and PID namespace left when they died (see the [module documentation](self)).
fn sweep(dir: &Path) {
    static SWEPT: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);
    let Some(me) = writer() else { return };
    {
        let mut swept = SWEPT.lock().unwrap_or_else(|e| e.into_inner());
        if !swept
            .get_or_insert_with(HashSet::new)
            .insert(dir.to_path_buf())
        {
            return;
        }
    }
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let my_pid = std::process::id();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(left) = name.to_str().and_then(parse_name) else {
            continue;
        };
        let dead = left.tag == me.tag && left.pid != my_pid && gone(left.pid, left.start);
        let path = entry.path();
        if dead && fs::symlink_metadata(&path).is_ok_and(|m| is_the_file(&m, &left)) {
            let _ = fs::remove_file(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_names_are_parsed_back_exactly() {
        let left = |pid, start, tag, ino| {
            Some(Leftover {
                pid,
                start,
                tag,
                ino,
            })
        };
        let r = "Xy9AbCdEfGh01234";
        assert_eq!(
            parse_name(&format!(".a.b.sc.1234.56789.0abc12ef.42.{r}.sc-tmp")),
            left(1234, 56789, "0abc12ef", 42)
        );
        assert_eq!(
            parse_name(&format!("..1.0.0abc12ef.7.{r}.sc-tmp")),
            left(1, 0, "0abc12ef", 7)
        );
        for bad in [
            format!(".a.1234.56789.0abc12ef.{r}.sc-tmp"),
            format!(".a.1234.56789.0ABC12EF.42.{r}.sc-tmp"),
            format!(".a.1234.56789.0abc12e.42.{r}.sc-tmp"),
            format!(".a.01234.56789.0abc12ef.42.{r}.sc-tmp"),
            format!(".a.+1234.56789.0abc12ef.42.{r}.sc-tmp"),
            format!(".a.99999999999.56789.0abc12ef.42.{r}.sc-tmp"),
            format!(".a.1234.5x.0abc12ef.42.{r}.sc-tmp"),
            ".a.1234.56789.0abc12ef.42.Xy9AbC.sc-tmp".into(),
            ".a.1234.56789.0abc12ef.42.Xy9AbCdEfGh0123-.sc-tmp".into(),
            format!("a.1234.56789.0abc12ef.42.{r}.sc-tmp"),
            format!(".a.1234.56789.0abc12ef.42.{r}.tmp"),
        ] {
            assert_eq!(parse_name(&bad), None, "{bad}");
        }
    }

    #[test]
    fn proc_stat_gives_pid_and_start_time() {
        let fields: Vec<String> = (3..=52).map(|f| f.to_string()).collect();
        let stat = format!("4321 (a (b) c) {}", fields.join(" "));
        assert_eq!(pid_and_start(&stat), Some((4321, 22)));
        assert_eq!(pid_and_start("4321 (a) 3 4"), None);
        #[cfg(target_os = "linux")]
        {
            let me = pid_and_start(&fs::read_to_string("/proc/self/stat").unwrap());
            assert_eq!(me.map(|m| m.0), Some(std::process::id()));
        }
    }

    /// The name of a temporary file made here is parsed back to this process and the file.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_temporary_file_names_its_writer_and_inode() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let out = OutputFile::create(dir.path().join("m.sc"), false).unwrap();
        let tmp = fs::read_dir(dir.path()).unwrap().next().unwrap().unwrap();
        let name = tmp.file_name().into_string().unwrap();
        let left = parse_name(&name).unwrap();
        let me = writer().unwrap();
        assert_eq!((left.pid, left.start), (std::process::id(), me.start));
        assert_eq!(left.tag, me.tag);
        assert_eq!(left.ino, tmp.metadata().unwrap().ino());
        assert!(!gone(left.pid, left.start));
        drop(out);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
