"""Plain safetensors files read like archives, so that code switching its import from
`safetensors` to `sc` still loads the safetensors files it loaded before. A file is told apart
by its first bytes (an archive starts with sc's magic), not by its name."""

from __future__ import annotations

import json
import os
import struct
from typing import Any

from . import _sc
from ._sc import ScError

# The first bytes of every `.sc` archive (docs/FORMAT.md).
MAGIC = b"\x89SCW"


def _looks_plain(head: bytes, size: int) -> bool:
    """Whether a file of `size` bytes starting with `head` is laid out as safetensors: an 8-byte
    header length that fits the file, then a JSON object."""
    if len(head) < 9 or head[:4] == MAGIC:
        return False
    (n,) = struct.unpack("<Q", head[:8])
    return 2 <= n <= size - 8 and head[8:9] == b"{"


def reader(source: str | bytes, threads: int | None, base: str | None) -> Any:
    """A reader of `source` (a path or the bytes of a file): an archive's, or a plain
    safetensors file's when that is what it holds. Anything else goes to the archive reader,
    whose errors name the problem. A remote location (`http://`, `https://`, `s3://`) is read
    as an archive."""
    if isinstance(source, str) and _sc.is_url(source):
        return _sc.Reader(source, threads, base)
    try:
        if isinstance(source, bytes):
            plain = _looks_plain(source[:9], len(source))
        else:
            with open(source, "rb") as f:
                plain = _looks_plain(f.read(9), os.fstat(f.fileno()).st_size)
    except OSError:
        plain = False
    if plain:
        return PlainReader(source)
    return _sc.Reader(source, threads, base)


class PlainReader:
    """A plain safetensors file with the methods of `_sc.Reader`: its tensors are read from the
    file where they lie (no blocks, nothing decoded)."""

    def __init__(self, source: str | bytes):
        self._where = source if isinstance(source, str) else "the file in memory"
        if isinstance(source, bytes):
            self._data: bytes | None = source
            self._file = None
            size = len(source)
            head = source[:8]
        else:
            self._data = None
            self._file = open(source, "rb")
            size = os.fstat(self._file.fileno()).st_size
            head = self._file.read(8)
        self._size = size
        self._read = 0
        (n,) = struct.unpack("<Q", head)
        text = self._bytes(8, 8 + n)
        try:
            header = json.loads(text)
        except (UnicodeDecodeError, ValueError) as e:
            self.close()
            raise ScError(f"{self._where}: invalid safetensors header: {e}") from None
        if not isinstance(header, dict):
            self.close()
            raise ScError(f"{self._where}: invalid safetensors header: not a JSON object")
        self._json = text.decode()
        meta = header.pop("__metadata__", None)
        self._metadata = None if meta is None else {
            k: v if isinstance(v, str) else json.dumps(v) for k, v in dict(meta).items()
        }
        data = 8 + n
        rows = []
        for name, t in header.items():
            try:
                dtype, shape, (b, e) = t["dtype"], [int(d) for d in t["shape"]], t["data_offsets"]
                b, e = int(b), int(e)
            except (KeyError, TypeError, ValueError):
                self.close()
                raise ScError(f"{self._where}: invalid safetensors header: tensor {name!r}") from None
            if not 0 <= b <= e <= size - data or any(d < 0 for d in shape):
                self.close()
                raise ScError(
                    f"{self._where}: tensor {name!r}: bytes {b}..{e} lie outside the file's "
                    f"{size - data} bytes of data"
                )
            rows.append((name, str(dtype), shape, data + b, data + e))
        self._tensors = sorted(rows, key=lambda r: (r[3], r[0]))

    def _bytes(self, start: int, end: int) -> bytes:
        buf = bytearray(end - start)
        self._fill(start, memoryview(buf))
        return bytes(buf)

    def _fill(self, start: int, out: memoryview) -> None:
        """Reads the file's bytes from `start` into `out`, all of them."""
        if self._data is not None:
            out[:] = self._data[start:start + len(out)]
            n = len(out)
        else:
            if self._file is None:
                raise ScError(f"{self._where}: the file is closed")
            self._file.seek(start)
            n = 0
            while n < len(out):
                k = self._file.readinto(out[n:])
                if not k:
                    raise ScError(f"{self._where}: truncated safetensors file")
                n += k
        self._read += n

    def header_json(self) -> str:
        return self._json

    def metadata(self) -> dict[str, str] | None:
        return self._metadata

    def tensors(self) -> list[tuple[str, str, list[int], int, int]]:
        return list(self._tensors)

    def read_into(self, ranges: list[tuple[int, int]], buffers: list[Any]) -> None:
        for (start, end), buf in zip(ranges, buffers):
            out = memoryview(buf).cast("B")
            if len(out) != end - start:
                raise ScError(f"invalid argument: a buffer of {len(out)} bytes for {end - start}")
            self._fill(start, out)

    def info(self) -> dict[str, Any]:
        """What an archive's info says, for a file that is none: mode None, no blocks."""
        return {"kind": "safetensors", "mode": None, "block_size": None, "blocks": 0,
                "archive_len": self._size, "original_len": self._size, "base": None}

    def stats(self) -> dict[str, int]:
        return {"blocks_decoded": 0, "bytes_decoded": 0, "block_bytes_read": 0,
                "archive_bytes_read": self._read}

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        self._data = None
