"""Type stubs of the native module `sc._sc` (Rust, PyO3)."""

import os
from typing import Any

from collections.abc import Buffer

__version__: str

class ScError(ValueError):
    """A corrupt, truncated or unreadable archive, or an invalid argument: the message is the
    one-line message the sc command line prints."""

class Reader:
    """An archive opened for reading tensors."""

    def __init__(
        self,
        source: str | os.PathLike[str] | bytes,
        threads: int | None = None,
        base: str | os.PathLike[str] | None = None,
    ) -> None:
        """Opens `source`, a path, a remote location (http://, https://, s3://) or the bytes of
        an archive, reading its header, index and trailer; `threads` decoding threads (default: all cores); `base`, the path of the base
        an archive of a fine-tune is coded against."""
    def tensors(self) -> list[tuple[str, str, list[int], int, int]]:
        """(name, dtype, shape, start, end) per tensor, ordered by start: offsets in the
        original file."""
    def header_json(self) -> str | None:
        """The kept safetensors header's JSON text, or None for a generic archive."""
    def metadata(self) -> dict[str, str] | None:
        """The kept header's metadata: a safetensors header's `__metadata__`, a GGUF header's
        key-values (values that are not strings as their JSON text), or None."""
    def info(self) -> dict[str, Any]:
        """kind ("safetensors", "gguf" or "generic"), mode, block_size, blocks, archive_len,
        original_len, base (the name of the base the archive is coded against, or None)."""
    def stats(self) -> dict[str, Any]:
        """blocks_decoded, bytes_decoded, block_bytes_read, archive_bytes_read so far; for a
        remote archive also requests, bytes_fetched, network_wait_s and decode_s."""
    def read_into(self, ranges: list[tuple[int, int]], buffers: list[Buffer]) -> None:
        """Decodes bytes `ranges[k]` of the original file into the writable, contiguous
        `buffers[k]`, decoding only the blocks that hold them, with the GIL released."""
    def close(self) -> None:
        """Releases the archive; later calls raise ScError."""

def encode_parts(
    parts: list[Buffer],
    dst: str | os.PathLike[str] | None = None,
    mode: str | None = None,
    block_size: int | None = None,
    md5: bool | None = None,
    threads: int | None = None,
    overwrite: bool = True,
    level: int | None = None,
) -> bytes | None:
    """Encodes the concatenated `parts` into an archive written to `dst` (through a temporary
    file renamed into place), or returned when `dst` is None."""

def compress_file(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    mode: str | None = None,
    block_size: int | None = None,
    md5: bool | None = None,
    threads: int | None = None,
    overwrite: bool = False,
    base: str | os.PathLike[str] | None = None,
    level: int | None = None,
    base_from: list[str] | None = None,
) -> dict[str, Any]:
    """Compresses the file `src` into the archive `dst`, coded against `base` when given (or
    the one of `base_from` that codes it smallest, if any does);
    tensors that repeat an earlier one are stored once. `mode` "fast" (default) or "best", or
    `level` 1 to 9 as the command line's `-1` to `-9`."""

def decompress_file(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    threads: int | None = None,
    check_md5: bool = False,
    overwrite: bool = False,
    base: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Restores the original file of the archive `src` as `dst`; `base`, the path of the base
    it is coded against."""

def verify(
    path: str | os.PathLike[str],
    threads: int | None = None,
    base: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Decodes the archive `path` without writing, checking every block and the recorded MD5;
    `base`, the path of the base it is coded against."""

def stats(reset: bool = False) -> dict[str, Any]:
    """The process's totals of remote reads and writes: requests, bytes_fetched,
    network_wait_s, decode_s; zeroed afterwards with `reset`."""

def remote_options(connections: int | None = None, retries: int | None = None,
                   retry_timeout: float | None = None, timeout: float | None = None) -> dict[str, Any]:
    """Sets the given options of later remote reads and writes; returns them all."""

def is_url(s: str) -> bool:
    """Whether `s` is a remote location (http://, https://, s3://)."""

def list_prefix(prefix: str) -> list[tuple[str, int]]:
    """The objects under the prefix `prefix` (s3://bucket/folder/), as (location, size)."""

def fetch(url: str) -> bytes:
    """The whole object at `url`."""

def compress_folder(
    src: str, dst: str, mode: str | None = None, block_size: int | None = None,
    md5: bool | None = None, threads: int | None = None, overwrite: bool = False,
    base: str | None = None, level: int | None = None, base_from: list[str] | None = None,
) -> None:
    """The library's folder encode of `src` into `dst` (see `sc.compress_folder`)."""

def decompress_folder(
    src: str, dst: str, threads: int | None = None, check_md5: bool = False,
    overwrite: bool = False, base: str | None = None,
) -> None:
    """The library's folder decode of `src` into `dst` (see `sc.decompress_folder`)."""
