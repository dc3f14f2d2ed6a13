"""Hugging Face transformers models from folders of `.sc` archives.

`sc encode DIR -o OUT` (or `sc.compress_folder(DIR, OUT)`) turns a checkpoint folder into one
whose weights are `*.safetensors.sc` archives beside the untouched config, tokenizer files and
`model.safetensors.index.json`; `save_pretrained(model, OUT)` writes such a folder from a model.
`from_pretrained(model_class, OUT)` loads it as `model_class.from_pretrained(DIR)` loads the
original. Tokenizers and other files load from OUT as usual
(`AutoTokenizer.from_pretrained(OUT)`).
"""

from __future__ import annotations

import importlib.util
import json
import os
import tempfile
from typing import Any

from . import _sc
from . import torch as sc_torch
from ._cli import compress_folder

if importlib.util.find_spec("transformers") is None:
    raise ModuleNotFoundError(
        "sc.transformers needs transformers: install the package with its transformers extra, "
        'pip install "./python[transformers]" from the repository (or pip install transformers)',
        name="transformers",
    )

_INDEX = "model.safetensors.index.json"
# The files of a remote folder that `from_pretrained` reads besides the weights.
_CONFIGS = ("config.json", "generation_config.json")


def _remote(folder: str | os.PathLike) -> str | None:
    """`folder` as a remote prefix ending in "/", or None for a local folder."""
    folder = os.fspath(folder)
    return folder.rstrip("/") + "/" if _sc.is_url(folder) else None


def _remote_shards(prefix: str) -> list[str]:
    """The archives of the remote folder `prefix`: those its index names, or its single one."""
    try:
        weight_map = json.loads(_sc.fetch(prefix + _INDEX)).get("weight_map", {})
    except FileNotFoundError:
        return [prefix + "model.safetensors.sc"]
    return [prefix + s + ".sc" for s in sorted(set(weight_map.values()))]


def shard_archives(folder: str | os.PathLike) -> list[str]:
    """The archives holding the weights of `folder` (a local folder, or a remote one such as
    `s3://bucket/model/`): the shards its safetensors index names (each as `NAME.sc`), or its
    single `model.safetensors.sc`."""
    prefix = _remote(folder)
    if prefix is not None:
        return _remote_shards(prefix)
    folder = os.fspath(folder)
    if not os.path.isdir(folder):
        raise FileNotFoundError(2, "No such directory", folder)
    index = os.path.join(folder, _INDEX)
    if os.path.exists(index):
        with open(index, encoding="utf-8") as f:
            weight_map = json.load(f).get("weight_map", {})
        shards = sorted(set(weight_map.values()))
    else:
        shards = ["model.safetensors"]
    paths = [os.path.join(folder, s + ".sc") for s in shards]
    for p in paths:
        if not os.path.exists(p):
            raise FileNotFoundError(2, "No such archive (encode the folder with `sc encode DIR -o OUT`)", p)
    return paths


def load_state_dict(folder: str | os.PathLike, device: str = "cpu", threads: int | None = None, base: str | os.PathLike | None = None) -> dict[str, Any]:
    """Every tensor of every weight archive of `folder`, by name; `base`, the base checkpoint
    (file or folder) of a fine-tune's archives."""
    state: dict[str, Any] = {}
    for path in shard_archives(folder):
        state.update(sc_torch.load_file(path, device=device, threads=threads, base=base))
    return state


def from_pretrained(model_class: Any, folder: str | os.PathLike, **kwargs: Any) -> Any:
    """`model_class.from_pretrained(folder, **kwargs)` for a folder whose weights are `.sc`
    archives (single-file or sharded), local or remote (`s3://bucket/model/`,
    `https://host/model/`: the folder `sc encode DIR -o` wrote there): the config is read from
    `folder` (unless `config=` is given), the weights are decoded from the archives, and both are handed to
    `model_class.from_pretrained` (any transformers model class or `Auto*` class). `threads=`
    sets the decoding threads; `base=` gives the base checkpoint (file or folder) of a
    fine-tune encoded with `sc encode --base`; other keyword arguments go to
    `from_pretrained`."""
    from transformers import AutoConfig

    threads = kwargs.pop("threads", None)
    base = kwargs.pop("base", None)
    config = kwargs.pop("config", None)
    archives = shard_archives(folder)
    if config is None:
        config_class = getattr(model_class, "config_class", None) or AutoConfig
        prefix = _remote(folder)
        if prefix is None:
            config = config_class.from_pretrained(os.fspath(folder))
        else:
            with tempfile.TemporaryDirectory(prefix="sc-config-") as local:
                _fetch_configs(prefix, local)
                config = config_class.from_pretrained(local)
    # An Auto* class picks the model class from the config, as its from_pretrained does.
    mapping = getattr(model_class, "_model_mapping", None)
    if mapping is not None:
        if type(config) not in mapping:
            raise ValueError(f"{model_class.__name__} has no model for {type(config).__name__}")
        model_class = mapping[type(config)]
    state: dict[str, Any] = {}
    for path in archives:
        state.update(sc_torch.load_file(path, threads=threads, base=base))
    model = model_class.from_pretrained(None, config=config, state_dict=state, **kwargs)
    model.config.name_or_path = os.fspath(folder)
    return model


def _fetch_configs(prefix: str, local: str) -> None:
    """Copies the config files of the remote folder `prefix` into `local` (config.json must be
    there; the others may not)."""
    for name in _CONFIGS:
        try:
            data = _sc.fetch(prefix + name)
        except FileNotFoundError:
            if name == "config.json":
                raise
            continue
        with open(os.path.join(local, name), "wb") as f:
            f.write(data)


def save_pretrained(
    model: Any,
    folder: str | os.PathLike,
    *,
    mode: str | None = None,
    level: int | None = None,
    block_size: int | None = None,
    threads: int | None = None,
    overwrite: bool = False,
    **kwargs: Any,
) -> None:
    """Writes `model` into `folder` as `model.save_pretrained(folder, **kwargs)` would, its
    weights as `.sc` archives: exactly the folder that `sc encode DIR -o folder` makes of the
    folder `save_pretrained` writes (config, generation config and safetensors index as they
    are, each `*.safetensors` shard as `*.safetensors.sc`), which `from_pretrained` loads.
    `mode`, `level`, `block_size` and `threads` as in `sc.compress_file`. `folder` may be a
    remote prefix (`s3://bucket/model/`). An existing file that would be written fails with
    `FileExistsError` before anything is written, unless `overwrite`. The checkpoint is first
    written to a temporary folder beside `folder` (the system's temporary folder for a remote
    one; it needs room for the uncompressed weights for a while), then removed."""
    if kwargs.get("safe_serialization") is False:
        raise ValueError("save_pretrained writes safetensors shards as archives: safe_serialization=False has none")
    if kwargs.get("push_to_hub"):
        raise ValueError("save_pretrained does not push to the Hub: push the folder it writes")
    prefix = _remote(folder)
    folder = os.fspath(folder)
    if prefix is None:
        _check_folder(folder)
        # The checkpoint goes beside the folder, on its file system.
        scratch = os.path.dirname(os.path.abspath(folder))
        os.makedirs(scratch, exist_ok=True)
    else:
        scratch = None
    with tempfile.TemporaryDirectory(prefix=".sc-save-", dir=scratch) as plain:
        model.save_pretrained(plain, **kwargs)
        if not overwrite:
            _check_outputs(plain, folder, prefix)
        try:
            compress_folder(plain, prefix or folder, mode=mode, level=level,
                            block_size=block_size, threads=threads, overwrite=overwrite)
        except _sc.ScError as e:
            # The checkpoint's folder is gone when this is seen: name what it held instead.
            raise _sc.ScError(str(e).replace(plain, "<checkpoint from model.save_pretrained>")) from None


# What `sc encode DIR` codes; every other file is copied as it is.
_CODED = (".safetensors", ".gguf")


def _check_folder(folder: str) -> None:
    """Fails unless `folder` is a folder or nothing yet (a dangling link, a file)."""
    if os.path.islink(folder) and not os.path.exists(folder):
        raise FileNotFoundError(2, "A symbolic link to a missing folder", folder)
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise NotADirectoryError(20, "Not a directory", folder)


def _check_outputs(plain: str, folder: str, prefix: str | None) -> None:
    """Fails, before anything is written, if a file that compressing the checkpoint folder
    `plain` into `folder` (or the remote `prefix`) writes exists already."""
    outputs = []
    for root, _, files in os.walk(plain):
        for name in sorted(files):
            rel = os.path.relpath(os.path.join(root, name), plain)
            outputs.append(rel + ".sc" if rel.endswith(_CODED) else rel)
    if prefix is not None:
        listed = {url for url, _ in _sc.list_prefix(prefix)}
        taken = [prefix + rel.replace(os.sep, "/") for rel in outputs]
        taken = [url for url in taken if url in listed]
    else:
        taken = [p for p in (os.path.join(folder, rel) for rel in outputs) if os.path.lexists(p)]
    if taken:
        raise FileExistsError(17, "File exists (overwrite=True replaces it)", taken[0])
