"""The framework registry: what a framework module provides (`Framework`), and each one found
by name. `_core` asks it for a framework; `sc.numpy` and `sc.torch` register theirs when they
are imported; neither side imports the other."""

from __future__ import annotations

import importlib
from typing import Any

# The module that provides each framework name, imported on first use (it registers itself).
_PROVIDERS = {"pt": "torch", "torch": "torch", "np": "numpy", "numpy": "numpy"}
_REGISTERED: dict[str, "Framework"] = {}


class Framework:
    """How one framework allocates the memory a tensor is decoded into, and views it."""

    name = ""

    def empty(self, nbytes: int) -> tuple[Any, Any]:
        """A new uninitialised byte array of `nbytes` and a writable buffer over its memory."""
        raise NotImplementedError

    def view(self, raw: Any, dtype: str, shape: tuple[int, ...]) -> Any:
        """`raw` (from `empty`) seen as an array of `dtype` and `shape`, without a copy."""
        raise NotImplementedError

    def to_device(self, t: Any, device: str) -> Any:
        """`t` moved to `device`."""
        if device != "cpu":
            raise ValueError(f"device {device!r}: {self.name} arrays live on the CPU only")
        return t


def register(fw: Framework) -> Framework:
    """Makes `fw` the framework of every name its module provides; returns it."""
    for name, module in _PROVIDERS.items():
        if module == fw.name:
            _REGISTERED[name] = fw
    return fw


def framework(name: str) -> Framework:
    """The framework called `name` ("pt"/"torch" or "np"/"numpy"), its module imported first if
    it was not yet."""
    module = _PROVIDERS.get(name)
    if module is None:
        raise ValueError(f'framework must be "pt" or "np", not {name!r}')
    if name not in _REGISTERED:
        importlib.import_module(f"{__package__}.{module}")
    return _REGISTERED[name]
