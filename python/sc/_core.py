"""What sc.numpy, sc.torch and sc.safe_open share: archives, dtypes, the safetensors layout."""

from __future__ import annotations

import json
import math
import os
import struct
from typing import Any, Callable, Iterable, NamedTuple

from . import _plain, _sc
from ._frameworks import Framework, framework
from ._sc import ScError

# Element width of each safetensors dtype, in the order safetensors lays tensors out: a file
# holds its tensors by this rank, highest first, then by name, so each starts aligned.
_DTYPES = [
    ("BOOL", 1), ("U8", 1), ("I8", 1), ("F8_E5M2", 1), ("F8_E4M3", 1), ("I16", 2), ("U16", 2),
    ("F16", 2), ("BF16", 2), ("I32", 4), ("U32", 4), ("F32", 4), ("C64", 8), ("F64", 8),
    ("I64", 8), ("U64", 8),
]
WIDTH = dict(_DTYPES)
_RANK = {name: k for k, (name, _) in enumerate(_DTYPES)}


class TensorEntry(NamedTuple):
    """One tensor of an archive: its dtype (a GGUF tensor's ggml type), shape (outermost
    first) and bytes [start, end) in the original file."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    start: int
    end: int

    def layout(self) -> tuple[str, tuple[int, ...]]:
        """The dtype and shape the tensor is read as: its own, or for a quantized GGUF tensor
        (a ggml type safetensors lacks) "U8" and its shape with the last (innermost) dimension
        replaced by the bytes of the blocks of one row."""
        if self.dtype in WIDTH:
            return self.dtype, self.shape
        rows = math.prod(self.shape[:-1])
        return "U8", self.shape[:-1] + ((self.end - self.start) // rows if rows else 0,)


def _missing(name: str, names: Iterable[str], where: str) -> KeyError:
    """The KeyError for an unknown tensor name, naming the closest ones (the command line's
    rule, from the library)."""
    close = _sc.closest_names(name, list(names))
    hint = f"; closest: {', '.join(repr(c) for c in close)}" if close else ""
    return KeyError(f"no tensor named {name!r} in {where}{hint}")


def _path(p: str | os.PathLike | None) -> str | None:
    """`p` as a path string, or None."""
    return None if p is None else os.fspath(p)


class Archive:
    """An open archive: its tensors by name, its metadata, and decoding into new arrays.

    `base` is the path of the base checkpoint (safetensors file, `.sc` archive or folder of
    shards) that an archive of a fine-tune is coded against; without it such an archive opens,
    but reading a tensor coded against the base raises ScError naming the base needed. A plain
    safetensors file (told apart by its first bytes, whatever its name) opens too, and reads
    as `safetensors` reads it."""

    def __init__(self, source: str | os.PathLike | bytes, threads: int | None = None, base: str | os.PathLike | None = None):
        if not isinstance(source, (bytes, bytearray, memoryview)):
            source = os.fspath(source)
            self.where = source
        else:
            source = bytes(source)
            self.where = "the archive in memory"
        self._reader = _plain.reader(source, threads, _path(base))
        self.kind: str = self._reader.info()["kind"]
        if self.kind == "generic":
            raise ScError(
                f"{self.where}: a generic archive (its original file is not safetensors or "
                "GGUF): restore it with sc.decompress_file"
            )
        self.metadata: dict[str, str] | None = self._reader.metadata()
        self.tensors = {
            name: TensorEntry(name, dtype, tuple(shape), start, end)
            for name, dtype, shape, start, end in self._reader.tensors()
        }

    def entry(self, name: str) -> TensorEntry:
        """The tensor called `name`; a KeyError naming the closest names otherwise."""
        try:
            return self.tensors[name]
        except KeyError:
            raise _missing(name, self.tensors, self.where) from None

    def keys(self) -> list[str]:
        """Tensor names, sorted (as safetensors' `keys()`)."""
        return sorted(self.tensors)

    def load(self, fw: Framework, entries: list[TensorEntry], rows: range | None = None) -> list:
        """Decodes `entries` (or rows `rows` of the first dimension of the single entry) into
        new arrays of `fw`, all in one pass over their blocks."""
        raws, buffers, ranges, shapes = [], [], [], []
        dtypes = []
        for e in entries:
            dtype, shape = e.layout() if self.kind == "gguf" else (e.dtype, e.shape)
            width = WIDTH.get(dtype)
            if width is None:
                raise ScError(f"{self.where}: tensor {e.name!r} has dtype {e.dtype}, which sc cannot load")
            count = math.prod(shape)
            if count * width != e.end - e.start:
                raise ScError(
                    f"{self.where}: tensor {e.name!r}: shape {list(e.shape)} of {e.dtype} needs "
                    f"{count * width} bytes, the header gives {e.end - e.start}"
                )
            start, end = e.start, e.end
            if rows is not None:
                row = (e.end - e.start) // shape[0] if shape and shape[0] else 0
                start, end = e.start + rows.start * row, e.start + rows.stop * row
                shape = (len(rows),) + shape[1:]
            dtypes.append(dtype)
            raw, buf = fw.empty(end - start)
            raws.append(raw)
            buffers.append(buf)
            ranges.append((start, end))
            shapes.append(shape)
        self._reader.read_into(ranges, buffers)
        return [fw.view(r, d, s) for r, d, s in zip(raws, dtypes, shapes)]

    def load_all(self, fw: Framework, device: str = "cpu") -> dict[str, Any]:
        """Every tensor, by name, in the order their bytes lie in the file (as safetensors'
        `load_file`)."""
        names = list(self.tensors)
        arrays = self.load(fw, [self.tensors[n] for n in names])
        out = {}
        for n, a in zip(names, arrays):
            out[n] = fw.to_device(a, device)
        return out

    def stats(self) -> dict[str, int]:
        """Blocks and bytes read and decoded since the archive was opened, and the archive's
        total number of blocks."""
        s = dict(self._reader.stats())
        s["blocks"] = self._reader.info()["blocks"]
        return s

    def info(self) -> dict[str, Any]:
        """The original's kind ("safetensors" or "gguf"), mode, block size, number of blocks,
        archive and original lengths, and `base`: the name of the base the archive is coded
        against, or None."""
        return dict(self._reader.info())

    def close(self) -> None:
        """Releases the archive file."""
        self._reader.close()


def _is_bool(key: Any) -> bool:
    """Whether `key` is a boolean scalar (Python's, NumPy's or a 0-d tensor's), which indexes
    as a new axis, not as the row its int value would name."""
    if isinstance(key, bool):
        return True
    return getattr(key, "shape", None) == () and "bool" in str(getattr(key, "dtype", ""))


class _Slice:
    """A tensor that is decoded only where it is indexed: `f.get_slice(name)[a:b]` decodes the
    blocks that hold rows a..b of its first dimension."""

    def __init__(self, archive: Archive, fw: Framework, entry: TensorEntry, device: str):
        self._archive, self._fw, self._entry, self._device = archive, fw, entry, device

    def get_shape(self) -> list[int]:
        """The tensor's shape."""
        return list(self._entry.shape)

    def get_dtype(self) -> str:
        """The tensor's safetensors dtype, such as "BF16" (a GGUF tensor's ggml type, such as
        "Q4_K")."""
        return self._entry.dtype

    def _shape(self) -> tuple[int, ...]:
        """The shape the tensor is read as (a quantized GGUF tensor's rows of blocks)."""
        return self._entry.layout()[1] if self._archive.kind == "gguf" else self._entry.shape

    def __len__(self) -> int:
        if not self._shape():
            raise TypeError("len() of a 0-d tensor")
        return self._shape()[0]

    def __getitem__(self, key: Any) -> Any:
        e = self._entry
        rest: tuple = ()
        if isinstance(key, tuple):
            key, rest = (key[0], key[1:]) if key else (slice(None), ())
        if key is Ellipsis:
            key, rest = slice(None), (Ellipsis,) + rest
        if _is_bool(key):
            # As in NumPy: a new axis of length 1 (True) or 0 (False), not row 1 or 0.
            (t,) = self._archive.load(self._fw, [e])
            return self._fw.to_device(t[(bool(key),) + rest], self._device)
        if not self._shape():
            if key != slice(None):
                raise IndexError("a 0-d tensor takes no index but [:] or [...]")
            (t,) = self._archive.load(self._fw, [e])
            return self._fw.to_device(t[rest] if rest else t, self._device)
        n = self._shape()[0]
        if isinstance(key, slice):
            first = range(n)[key]
            lo = min(first) if len(first) else 0
            rows = range(lo, max(first) + 1) if len(first) else range(0, 0)
            # Rows in between are decoded anyway (they share blocks); a step picks among them.
            pick: Any = slice(None) if first.step == 1 else [i - lo for i in first]
        elif isinstance(key, int) or hasattr(key, "__index__"):
            k = int(key)
            if not -n <= k < n:
                raise IndexError(f"index {k} is out of bounds for dimension 0 of size {n}")
            k %= n
            rows, pick = range(k, k + 1), 0
        else:
            raise TypeError("get_slice indexes the first dimension with an int or a slice")
        (t,) = self._archive.load(self._fw, [e], rows)
        t = t[(pick,) + rest]
        return self._fw.to_device(t, self._device)


class safe_open:
    """Opens an archive like `safetensors.safe_open`: `keys()`, `metadata()`, `get_tensor(name)`
    and `get_slice(name)`, each decoding only the blocks that hold what is asked for.

    `filename` may be a remote location, `http://`, `https://` or `s3://bucket/key` (S3 set up
    from the AWS_* environment variables, AWS_ENDPOINT_URL for an S3-compatible store):
    opening fetches the archive's header and index, and each read fetches only the blocks it
    decodes, in parallel range requests.

    `framework` is "pt" (torch tensors) or "np" (NumPy arrays; BF16 and FP8 as `ml_dtypes`
    types); `device` other than "cpu" (torch only) decodes on the CPU and moves the tensor.
    `threads` decoding threads (default: all cores). `base` is the base checkpoint an archive
    of a fine-tune is coded against (`sc.compress_file(..., base=)`, `sc encode --base`): a
    safetensors file, `.sc` archive or folder of shards, checked tensor by tensor against the
    digests the archive records. Use it as a context manager, or call `close()`.
    """

    def __init__(self, filename: str | os.PathLike, framework: str = "pt", device: str = "cpu", threads: int | None = None, base: str | os.PathLike | None = None):
        self._fw = _framework(framework)
        self._device = str(device)
        self._archive = Archive(filename, threads, base)

    def __enter__(self) -> "safe_open":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Releases the archive file."""
        self._archive.close()

    def keys(self) -> list[str]:
        """Tensor names, sorted."""
        return self._archive.keys()

    def offset_keys(self) -> list[str]:
        """Tensor names in the order their bytes lie in the file."""
        return sorted(self._archive.tensors, key=lambda n: self._archive.tensors[n].start)

    def metadata(self) -> dict[str, str] | None:
        """The header's `__metadata__`, or None; of a GGUF archive, its metadata key-values
        (values that are not strings as their JSON text)."""
        return None if self._archive.metadata is None else dict(self._archive.metadata)

    def get_ggml_type(self, name: str) -> str | None:
        """The ggml type (such as "Q4_K" or "F16") of the tensor `name` of a GGUF archive;
        None in a safetensors one."""
        e = self._archive.entry(name)
        return e.dtype if self._archive.kind == "gguf" else None

    def get_tensor(self, name: str) -> Any:
        """The tensor `name`, decoded from its blocks only; KeyError (with the closest names) if
        there is none."""
        (t,) = self._archive.load(self._fw, [self._archive.entry(name)])
        return self._fw.to_device(t, self._device)

    def get_slice(self, name: str) -> _Slice:
        """The tensor `name`, to be indexed on its first dimension: `get_slice(name)[0:128]`."""
        return _Slice(self._archive, self._fw, self._archive.entry(name), self._device)

    def stats(self) -> dict[str, Any]:
        """`blocks_decoded`, `bytes_decoded`, `block_bytes_read` and `archive_bytes_read` so far,
        and `blocks`, the archive's total. A remote archive adds `requests` (range requests
        made, retries included), `bytes_fetched`, `network_wait_s` (seconds spent waiting for
        bytes not yet arrived) and `decode_s` (seconds spent decoding besides), its opening
        included."""
        return self._archive.stats()

    def info(self) -> dict[str, Any]:
        """Mode, block size, number of blocks, archive and original lengths, and the name of
        the base the archive is coded against (or None)."""
        return self._archive.info()


_framework = framework


def safetensors_parts(
    tensors: list[tuple[str, str, list[int], Any]], metadata: dict[str, str] | None
) -> list[Any]:
    """The pieces of the safetensors file holding `tensors` (name, dtype, shape, buffer of its
    bytes), laid out as the safetensors package writes it: JSON header, then the data ordered by
    dtype (widest first) and name. `metadata` keeps its order."""
    if metadata is not None:
        if not isinstance(metadata, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
        ):
            raise ValueError("metadata must be a dict of str to str")
    names = [t[0] for t in tensors]
    if len(set(names)) != len(names):
        raise ValueError("tensor names must be unique")
    order = sorted(tensors, key=lambda t: (-_RANK[t[1]], t[0]))
    header: dict[str, Any] = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    pos = 0
    for name, dtype, shape, buf in order:
        n = memoryview(buf).nbytes
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [pos, pos + n]}
        pos += n
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    text += b" " * (-len(text) % 8)
    return [struct.pack("<Q", len(text)) + text] + [t[3] for t in order]


def encode(
    parts: list[Any],
    path: str | os.PathLike | None,
    mode: str | None,
    block_size: int | None = None,
    threads: int | None = None,
    level: int | None = None,
) -> bytes | None:
    """Encodes the concatenated `parts` to `path` (replacing it), or returns the archive."""
    return _sc.encode_parts(
        parts,
        None if path is None else os.fspath(path),
        mode=mode,
        block_size=block_size,
        threads=threads,
        overwrite=True,
        level=level,
    )


def compress_file(
    src: str | os.PathLike,
    dst: str | os.PathLike,
    mode: str | None = None,
    block_size: int | None = None,
    threads: int | None = None,
    *,
    md5: bool | None = None,
    overwrite: bool = False,
    base: str | os.PathLike | None = None,
    level: int | None = None,
    base_from: list[str | os.PathLike] | None = None,
) -> dict[str, Any]:
    """Compresses the file `src` (safetensors or any other) into the archive `dst`, as
    `sc encode` does. `mode` "fast" (the default) or "best"; `level` 1 to 9 as `sc -1` to
    `sc -9` (1 to 5 FAST; 6 to 9 BEST: 6 without sign models, decoding fastest, 9 with them on
    every block they make smaller, smallest); `block_size` in bytes (even, 4 KiB to 64 MiB,
    default 1 MiB); `threads` (default: all cores); `md5` records the whole file's MD5 (default:
    BEST only). `base`, a fine-tune's base checkpoint (safetensors file, `.sc` archive or folder
    of shards), codes each tensor against the base's tensor of the same name, dtype and shape
    where that is smaller; reading the archive then needs the same base. `base_from` (instead of
    `base`): files, archives or folders offered as bases, of which the one that codes `src`
    smallest on a sample of its blocks is taken (`based_tensors` 0: none did). Tensors that repeat an
    earlier one are stored once. The archive is written to a temporary file beside `dst` and
    renamed into place; an existing `dst` raises FileExistsError unless `overwrite`. Returns
    `original_len`, `archive_len`, `blocks`, `safetensors` (whether the header was recognised),
    `md5`, `based_tensors` (coded against the base) and `repeated_tensors` (stored once).

    `dst` may be a remote location (`s3://bucket/key.sc`; `http(s)://` where the server takes
    uploads): the archive is uploaded as it is written and becomes visible only once complete
    (a failure aborts the upload); an existing object counts as an existing file. `src` may be
    remote too: it is copied to a temporary file first."""
    return dict(
        _sc.compress_file(
            os.fspath(src), os.fspath(dst), mode=mode, block_size=block_size, md5=md5,
            threads=threads, overwrite=overwrite, base=_path(base), level=level,
            base_from=None if base_from is None else [os.fspath(p) for p in base_from],
        )
    )


def decompress_file(
    src: str | os.PathLike,
    dst: str | os.PathLike,
    threads: int | None = None,
    *,
    check_md5: bool = False,
    overwrite: bool = False,
    base: str | os.PathLike | None = None,
) -> dict[str, Any]:
    """Restores the original file of the archive `src` as `dst`, byte for byte, as `sc decode`
    does: every block's checksum is checked, and with `check_md5` the recorded MD5 of the whole
    file. An archive of a fine-tune needs the `base` it was coded against; without it, or with
    another, it raises ScError naming the base needed, and writes nothing. Written to a
    temporary file and renamed into place; an existing `dst` raises FileExistsError unless
    `overwrite`. `src` may be a remote location (`http://`, `https://`, `s3://`): its blocks
    are fetched in parallel range requests while earlier ones decode. Returns `original_len`,
    `archive_len`, `blocks`, `md5` (when computed) and `recorded_md5`."""
    return dict(
        _sc.decompress_file(
            os.fspath(src), os.fspath(dst), threads=threads, check_md5=check_md5,
            overwrite=overwrite, base=_path(base),
        )
    )


def stats(reset: bool = False) -> dict[str, Any]:
    """What this process's remote reads and writes cost so far (every archive, `load_file`,
    `compress_file` and `decompress_file` on an `http://`, `https://` or `s3://` location):
    `requests` (retries included), `bytes_fetched` (sent, for uploads), `network_wait_s`
    (seconds waiting for bytes not yet arrived) and `decode_s` (seconds decoding or encoding
    besides). `reset` zeroes the totals after reading them."""
    return dict(_sc.stats(reset))


def remote_options(
    connections: int | None = None,
    retries: int | None = None,
    retry_timeout: float | None = None,
    timeout: float | None = None,
) -> dict[str, Any]:
    """Sets how later reads and writes of remote locations work (the options given; the
    others stay) and returns them all: `connections`, parallel range requests per archive
    (default 4); `retries`, per request on 5xx answers and dropped connections, each resuming
    where the transfer stopped (default 10); `retry_timeout`, seconds after which a failing
    request is no longer retried (default 180); `timeout`, seconds for one request (default
    60)."""
    return dict(_sc.remote_options(connections, retries, retry_timeout, timeout))


def list_objects(prefix: str) -> list[tuple[str, int]]:
    """The objects under the remote prefix `prefix` (`s3://bucket/folder/`), recursively, as
    (location, size) sorted by key. Plain HTTP has no listing: an `http(s)://` prefix raises
    ScError."""
    return [(url, size) for url, size in _sc.list_prefix(prefix)]


def verify(path: str | os.PathLike, threads: int | None = None, *, base: str | os.PathLike | None = None) -> dict[str, Any]:
    """Decodes the archive `path` without writing anything, as `sc verify` does: checks every
    block and the recorded MD5 when there is one, and raises ScError on any failure (an archive
    of a fine-tune without its `base`, or with another, included). Returns `original_len`,
    `archive_len`, `blocks`, `md5` (of the restored file) and `recorded_md5`."""
    return dict(_sc.verify(os.fspath(path), threads=threads, base=_path(base)))


def verify_derives(seed: str | os.PathLike, quant: str | os.PathLike) -> list[dict[str, Any]]:
    """Tensor by tensor, whether the GGUF quant `quant` derives bit for bit from the seed `seed`
    (a GGUF file or its `.sc` archive), as `sc verify --derives SEED QUANT` says: each tensor's
    `name`, `dtype`, ggml `blocks`, `exact` (blocks equal to the seed's re-derived ones),
    `derives` (all of them) and `reason` (why it cannot be re-derived, or None)."""
    return [dict(t) for t in _sc.verify_derives(os.fspath(seed), os.fspath(quant))]


def load_file(path: str | os.PathLike, fw: Framework, device: str, threads: int | None, base: str | os.PathLike | None = None) -> dict[str, Any]:
    """Every tensor of the archive at `path` (coded against `base`, if given)."""
    a = Archive(path, threads, base)
    try:
        return a.load_all(fw, device)
    finally:
        a.close()


def load_bytes(data: bytes, fw: Framework, threads: int | None, base: str | os.PathLike | None = None) -> dict[str, Any]:
    """Every tensor of the archive `data` (coded against `base`, if given)."""
    a = Archive(data, threads, base)
    try:
        return a.load_all(fw)
    finally:
        a.close()


def checked(tensors: dict[str, Any], kind: type, what: str) -> Iterable[tuple[str, Any]]:
    """The (name, tensor) pairs of `tensors`, each checked to be a `kind` (`what` names it)."""
    for name, t in tensors.items():
        if not isinstance(t, kind):
            raise ValueError(f"{name!r} is not {what}")
        yield name, t


def savers(items: Callable[[dict[str, Any]], list[tuple[str, str, list[int], Any]]], like: str) -> tuple[Callable[..., None], Callable[..., bytes]]:
    """`save_file` and `save` for a framework whose tensors `items` turns into (name, dtype,
    shape, bytes); `like` names the safetensors module they mirror."""

    def save_file(tensors: dict[str, Any], filename: str | os.PathLike, metadata: dict[str, str] | None = None, mode: str | None = None, block_size: int | None = None, threads: int | None = None, *, level: int | None = None) -> None:
        encode(safetensors_parts(items(tensors), metadata), filename, mode, block_size, threads, level)

    def save(tensors: dict[str, Any], metadata: dict[str, str] | None = None, mode: str | None = None, block_size: int | None = None, threads: int | None = None, *, level: int | None = None) -> bytes:
        out = encode(safetensors_parts(items(tensors), metadata), None, mode, block_size, threads, level)
        assert out is not None
        return out

    save_file.__doc__ = (
        f"Writes `tensors` as an archive of the safetensors file `{like}.save_file` would write (so "
        "`sc decode` gives that file back byte for byte). `mode` \"fast\" (the default) or \"best\", "
        "or `level` 1 to 9 as in `sc.compress_file`; `block_size` "
        "in bytes (default 1 MiB); `threads` (default: all cores). Replaces `filename` through a "
        "temporary file renamed into place."
    )
    save.__doc__ = "The archive `save_file` would write, as bytes."
    return save_file, save
