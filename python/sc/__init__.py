"""sc: lossless compression for model weights, loaded straight into the frameworks.

`.sc` archives (written by the `sc` command line or by `sc.torch.save_file` /
`sc.numpy.save_file`) open like safetensors files:

    import sc
    with sc.safe_open("model.safetensors.sc", framework="pt") as f:
        w = f.get_tensor("embeddings.word_embeddings.weight")

    import sc.torch
    state = sc.torch.load_file("model.safetensors.sc")

Archives at `http://`, `https://` and `s3://` locations load the same way, fetching only the
blocks they need (`sc.stats()` tells requests, bytes and time waiting on the network);
`sc.compress_file(src, "s3://bucket/key.sc")` uploads.

`sc.compress_folder(DIR, OUT)` writes what `sc encode DIR -o OUT` writes; the `sc-weights`
command (and `python -m sc`) is the `sc` command line itself.

`sc.numpy`, `sc.torch` and `sc.transformers` are imported on first use, so `import sc` needs
neither torch nor transformers. Errors about archives raise `sc.ScError`, a `ValueError`.
"""

from __future__ import annotations

import importlib
from typing import Any

from ._cli import compress_folder, decompress_folder
from ._core import (
    compress_file, decompress_file, list_objects, remote_options, safe_open, stats, verify,
    verify_derives,
)
from ._sc import ScError, __version__

__all__ = [
    "ScError", "safe_open", "compress_file", "decompress_file", "compress_folder",
    "decompress_folder", "verify", "verify_derives", "stats", "remote_options", "list_objects", "__version__",
]


def __getattr__(name: str) -> Any:
    """Imports sc.numpy, sc.torch and sc.transformers on first use."""
    if name in ("numpy", "torch", "transformers"):
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
