"""PyTorch tensors from and to `.sc` archives, as `safetensors.torch` does with safetensors files.

Each tensor is decoded straight into its own memory on the CPU, with the GIL released; a
`device` other than "cpu" (such as "cuda") decodes on the CPU and then moves each tensor.
"""

from __future__ import annotations

import os
from typing import Any

try:
    import torch
except ImportError as e:
    raise ModuleNotFoundError(
        "sc.torch needs PyTorch: install the package with its torch extra, "
        'pip install "./python[torch]" from the repository (or pip install torch)',
        name=e.name,
    ) from e

from . import _core, _frameworks

_TORCH = {
    "BOOL": torch.bool, "U8": torch.uint8, "I8": torch.int8, "I16": torch.int16,
    "F16": torch.float16, "BF16": torch.bfloat16, "I32": torch.int32, "F32": torch.float32,
    "C64": torch.complex64, "F64": torch.float64, "I64": torch.int64,
}
for _name, _attr in [("F8_E5M2", "float8_e5m2"), ("F8_E4M3", "float8_e4m3fn"), ("U16", "uint16"),
                     ("U32", "uint32"), ("U64", "uint64")]:
    if hasattr(torch, _attr):
        _TORCH[_name] = getattr(torch, _attr)
_NAMES = {dt: name for name, dt in _TORCH.items()}


class _Torch(_frameworks.Framework):
    """torch tensors on the CPU, decoded into `torch.empty` storage."""

    name = "torch"

    def empty(self, nbytes: int) -> tuple[Any, Any]:
        raw = torch.empty(nbytes, dtype=torch.uint8)
        return raw, raw.numpy()

    def view(self, raw: Any, dtype: str, shape: tuple[int, ...]) -> Any:
        if dtype not in _TORCH:
            raise _core.ScError(f"dtype {dtype} has no torch equivalent in torch {torch.__version__}")
        return raw.view(_TORCH[dtype]).reshape(shape)

    def to_device(self, t: Any, device: str) -> Any:
        return t if device == "cpu" else t.to(device)


TORCH = _frameworks.register(_Torch())


def load_file(filename: str | os.PathLike, device: str = "cpu", threads: int | None = None, base: str | os.PathLike | None = None) -> dict[str, torch.Tensor]:
    """Every tensor of the archive `filename`, by name (as `safetensors.torch.load_file`); a
    plain safetensors file (told apart by its first bytes) loads as that function loads it.

    Decodes the whole archive in one parallel pass, each tensor into its own memory. An archive
    of a fine-tune needs the `base` it was coded against (safetensors file, `.sc` archive or
    folder of shards). Raises FileNotFoundError for a missing file and `sc.ScError` for a
    corrupt, truncated or non-sc one, or a missing or wrong base."""
    return _core.load_file(filename, TORCH, str(device), threads, base)


def load(data: bytes, threads: int | None = None, base: str | os.PathLike | None = None) -> dict[str, torch.Tensor]:
    """Every tensor of the archive `data` (the bytes of a `.sc` file), coded against `base`
    if it is a fine-tune's."""
    return _core.load_bytes(data, TORCH, threads, base)


def _items(tensors: dict[str, torch.Tensor]) -> list[tuple[str, str, list[int], Any]]:
    """(name, dtype, shape, bytes) of each tensor, made contiguous on the CPU."""
    items = []
    for name, t in _core.checked(tensors, torch.Tensor, "a torch.Tensor"):
        if t.layout != torch.strided:
            raise ValueError(f"{name!r}: only dense tensors can be saved, not {t.layout}")
        if t.dtype not in _NAMES:
            raise ValueError(f"{name!r}: dtype {t.dtype} has no safetensors equivalent")
        flat = t.detach().to("cpu").contiguous().reshape(-1)
        items.append((name, _NAMES[t.dtype], list(t.shape), flat.view(torch.uint8).numpy()))
    return items


save_file, save = _core.savers(_items, "safetensors.torch")


def _shared(state: dict[str, torch.Tensor]) -> list[list[str]]:
    """The names of `state` whose tensors overlap in memory (tied weights), in groups, as
    `safetensors.torch.save_model` finds them."""
    by_storage: dict[tuple, list[str]] = {}
    for name, t in state.items():
        if t.device.type == "meta":
            continue
        s = t.untyped_storage()
        if s.data_ptr() and s.nbytes():
            by_storage.setdefault((t.device, s.data_ptr(), s.nbytes()), []).append(name)
    groups = []
    for names in by_storage.values():
        spans = []
        for name in names:
            t = state[name]
            last = sum((n - 1) * st for n, st in zip(t.shape, t.stride())) + 1 if t.numel() else 0
            spans.append((t.data_ptr(), t.data_ptr() + last * t.element_size(), name))
        spans.sort()
        group, stop = [spans[0][2]], spans[0][1]
        for start, end, name in spans[1:]:
            if start >= stop:
                groups.append(group)
                group = []
            group.append(name)
            stop = end
        groups.append(group)
    return [g for g in groups if len(g) > 1]


def save_model(
    model: torch.nn.Module,
    filename: str | os.PathLike,
    metadata: dict[str, str] | None = None,
    force_contiguous: bool = True,
    mode: str | None = None,
    block_size: int | None = None,
    threads: int | None = None,
    *,
    level: int | None = None,
) -> None:
    """Writes `model`'s state dict as an archive (as `safetensors.torch.save_model` writes it
    as a file): of tensors sharing memory (tied weights) only one is written, the one whose
    name sorts first among those covering their whole storage, and the metadata maps each name
    left out to it (unless `metadata` already has that name). `load_model` loads the archive
    back into such a model. `force_contiguous` is taken for safetensors' signature: tensors are
    always written contiguous. `mode`, `level`, `block_size` and `threads` as in `save_file`."""
    state = model.state_dict()
    metadata = None if metadata is None else dict(metadata)
    for group in _shared(state):
        whole = sorted(n for n in group if _whole(state[n]))
        if not whole:
            raise RuntimeError(
                f"cannot save the tensors sharing memory {sorted(group)}: none of them covers "
                "the whole storage (save copies of them with save_file)"
            )
        for name in sorted(group):
            if name != whole[0]:
                metadata = {} if metadata is None else metadata
                metadata.setdefault(name, whole[0])
                del state[name]
    save_file(state, filename, metadata, mode, block_size, threads, level=level)


def _whole(t: torch.Tensor) -> bool:
    """Whether `t` covers its whole storage."""
    s = t.untyped_storage()
    return t.data_ptr() == s.data_ptr() and t.numel() * t.element_size() == s.nbytes()


def load_model(
    model: torch.nn.Module,
    filename: str | os.PathLike,
    strict: bool = True,
    device: str = "cpu",
    threads: int | None = None,
    base: str | os.PathLike | None = None,
) -> tuple[list[str], list[str]]:
    """Loads the archive `filename` into `model` (as `safetensors.torch.load_model`) and returns
    the missing and unexpected names.

    Parameters tied to one that the archive holds (saved once, as `safetensors.torch.save_model`
    does) are not missing. With `strict`, any missing or unexpected name raises RuntimeError.
    `base`: the base checkpoint of an archive of a fine-tune."""
    state = load_file(filename, device=device, threads=threads, base=base)
    missing, unexpected = model.load_state_dict(state, strict=False)
    own = model.state_dict()
    loaded = {own[n].data_ptr() for n in state if n in own and own[n].numel()}
    missing = [n for n in missing if not (own[n].numel() and own[n].data_ptr() in loaded)]
    if strict and (missing or unexpected):
        raise RuntimeError(
            f"Error(s) in loading state_dict for {type(model).__name__}: "
            f"missing keys: {missing}; unexpected keys: {list(unexpected)}"
        )
    return missing, list(unexpected)
