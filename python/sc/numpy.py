"""NumPy arrays from and to `.sc` archives, as `safetensors.numpy` does with safetensors files.

BF16 and FP8 tensors come back as `ml_dtypes.bfloat16`, `float8_e4m3fn` and `float8_e5m2`
arrays. Each array is decoded straight into its own memory; the GIL is released meanwhile.
"""

from __future__ import annotations

import os
from typing import Any

import ml_dtypes
import numpy as np

from . import _core, _frameworks

_NP = {
    "BOOL": np.dtype(np.bool_), "U8": np.dtype(np.uint8), "I8": np.dtype(np.int8),
    "F8_E5M2": np.dtype(ml_dtypes.float8_e5m2), "F8_E4M3": np.dtype(ml_dtypes.float8_e4m3fn),
    "I16": np.dtype(np.int16), "U16": np.dtype(np.uint16), "F16": np.dtype(np.float16),
    "BF16": np.dtype(ml_dtypes.bfloat16), "I32": np.dtype(np.int32), "U32": np.dtype(np.uint32),
    "F32": np.dtype(np.float32), "C64": np.dtype(np.complex64), "F64": np.dtype(np.float64),
    "I64": np.dtype(np.int64), "U64": np.dtype(np.uint64),
}
_NAMES = {dt: name for name, dt in _NP.items()}


class _Numpy(_frameworks.Framework):
    """NumPy arrays, decoded into `numpy.empty` memory."""

    name = "numpy"

    def empty(self, nbytes: int) -> tuple[Any, Any]:
        raw = np.empty(nbytes, dtype=np.uint8)
        return raw, raw

    def view(self, raw: Any, dtype: str, shape: tuple[int, ...]) -> Any:
        return raw.view(_NP[dtype]).reshape(shape)


NUMPY = _frameworks.register(_Numpy())


def load_file(filename: str | os.PathLike, device: str = "cpu", threads: int | None = None, base: str | os.PathLike | None = None) -> dict[str, np.ndarray]:
    """Every tensor of the archive `filename` as a NumPy array, by name; a plain safetensors
    file (told apart by its first bytes) loads as `safetensors.numpy.load_file` loads it.

    Decodes the whole archive in one parallel pass, each tensor into its array's own memory.
    An archive of a fine-tune needs the `base` it was coded against (safetensors file, `.sc`
    archive or folder of shards). Raises FileNotFoundError for a missing file and `sc.ScError`
    for a corrupt, truncated or non-sc one, or a missing or wrong base."""
    return _core.load_file(filename, NUMPY, device, threads, base)


def load(data: bytes, threads: int | None = None, base: str | os.PathLike | None = None) -> dict[str, np.ndarray]:
    """Every tensor of the archive `data` (the bytes of a `.sc` file) as a NumPy array, coded
    against `base` if it is a fine-tune's."""
    return _core.load_bytes(data, NUMPY, threads, base)


def _items(tensors: dict[str, np.ndarray]) -> list[tuple[str, str, list[int], Any]]:
    """(name, dtype, shape, bytes) of each array, made contiguous and little-endian."""
    items = []
    for name, a in _core.checked(tensors, np.ndarray, "a numpy array"):
        dt = a.dtype.newbyteorder("<") if a.dtype.byteorder == ">" else a.dtype
        if dt not in _NAMES:
            raise ValueError(f"{name!r}: dtype {a.dtype} has no safetensors equivalent")
        a = np.ascontiguousarray(a, dtype=dt)
        items.append((name, _NAMES[dt], list(a.shape), a.reshape(-1).view(np.uint8)))
    return items


save_file, save = _core.savers(_items, "safetensors.numpy")
