"""The `sc` command line from Python: the `sc-weights` command, `python -m sc`, and the folder
functions, which run the command line itself so that they write exactly what `sc` writes."""

from __future__ import annotations

import os
import sys
from typing import NoReturn

from . import _sc


def main(prog: str = "sc-weights") -> NoReturn:
    """Runs the `sc` command line on this process's arguments and exits with its status (the
    `sc-weights` command; `python -m sc`). An interrupted run removes its unfinished outputs,
    as `sc` does."""
    sys.stdout.flush()
    sys.exit(_sc.main([prog, *sys.argv[1:]]))


def _arg(path: str | os.PathLike) -> str:
    """`path` as an argument that the command line cannot take for a flag or for stdout."""
    p = os.fspath(path)
    return os.path.join(".", p) if p.startswith("-") else p


def _folder(src: str | os.PathLike) -> str:
    """`src`, checked to be a folder (a remote prefix goes to the command line as it is)."""
    p = os.fspath(src)
    if _sc.is_url(p):
        return p
    if not os.path.exists(p):
        raise FileNotFoundError(2, "No such directory", p)
    if not os.path.isdir(p):
        raise NotADirectoryError(20, "Not a directory", p)
    return _arg(p)


def _common(threads: int | None, overwrite: bool, base: str | os.PathLike | None) -> list[str]:
    args = ["-f"] if overwrite else []
    if threads is not None:
        args += ["-T", str(int(threads))]
    if base is not None:
        args.append("--base=" + _arg(base))
    return args


def compress_folder(
    src: str | os.PathLike,
    dst: str | os.PathLike,
    mode: str | None = None,
    block_size: int | None = None,
    threads: int | None = None,
    *,
    level: int | None = None,
    md5: bool | None = None,
    overwrite: bool = False,
    base: str | os.PathLike | None = None,
    base_from: list[str | os.PathLike] | None = None,
) -> None:
    """Compresses the checkpoint folder `src` into the folder `dst` exactly as
    `sc encode SRC -o DST` does (it runs that command line): every `*.safetensors` below `src`
    becomes `NAME.safetensors.sc` at the same place below `dst`, and every other file (config,
    tokenizer, `model.safetensors.index.json`) is copied, so that `sc.transformers.from_pretrained`
    loads `dst` and `sc.decompress_folder` gives `src` back. `dst` may be a remote prefix,
    `s3://bucket/folder/`, which every file is uploaded to. `mode`, `level`, `block_size`,
    `threads`, `md5` and `base` as in `sc.compress_file`; `base="auto"` codes each file against
    the other file of the folder (or of `base_from`) that makes it smallest, if any does, and
    `decompress_folder` restores each base before the archives that need it. An existing output file fails unless
    `overwrite`. Files are coded two at a time; one that fails does not stop the others: a table
    on stderr lists the failures, then `sc.ScError` is raised."""
    args = ["sc", "encode", "-q", *_common(threads, overwrite, base)]
    if mode is not None:
        args += ["-m", str(mode)]
    if level is not None:
        if isinstance(level, bool) or not isinstance(level, int) or not 1 <= level <= 9:
            raise _sc.ScError(f"invalid argument: level must be 1 to 9, not {level!r}")
        args.append(f"-{level}")
    if block_size is not None:
        args += ["-b", str(int(block_size))]
    if md5 is not None:
        args.append("--md5" if md5 else "--no-md5")
    if base_from:
        args += ["--base-from", *[_arg(p) for p in base_from]]
    _sc.run_command([*args, "--output=" + _arg(dst), "--", _folder(src)])


def decompress_folder(
    src: str | os.PathLike,
    dst: str | os.PathLike,
    threads: int | None = None,
    *,
    check_md5: bool = False,
    overwrite: bool = False,
    base: str | os.PathLike | None = None,
) -> None:
    """Restores the folder `src` made by `compress_folder` (or `sc encode DIR -o OUT`), local or
    a remote prefix (`s3://bucket/folder/`), into the folder `dst` exactly as
    `sc decode SRC -o DST` does: every `*.sc` below `src` is decoded (its
    block checksums checked, and with `check_md5` the recorded MD5), every other file copied.
    `base`: the base checkpoint of a fine-tune's archives. An existing output file fails unless
    `overwrite`; failures as in `compress_folder`."""
    args = ["sc", "decode", "-q", *_common(threads, overwrite, base)]
    if check_md5:
        args.append("--md5")
    _sc.run_command([*args, "--output=" + _arg(dst), "--", _folder(src)])
