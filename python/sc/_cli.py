"""The `sc` command line from Python: the `sc-weights` command and `python -m sc`, which run the
`sc` program, and the folder functions, which run the library's folder runs so that they write
exactly what `sc encode DIR -o OUT` and `sc decode DIR -o OUT` write."""

from __future__ import annotations

import os
import shutil
import sys
from typing import NoReturn

from . import _sc


def program() -> str | None:
    """The `sc` program the command runs: `$SC_BIN`, else one installed beside the package
    (`sc/bin/sc`), else `sc` on the PATH; None when there is none."""
    if os.environ.get("SC_BIN"):
        return os.environ["SC_BIN"]
    beside = os.path.join(os.path.dirname(__file__), "bin", "sc")
    if os.access(beside, os.X_OK):
        return beside
    return shutil.which("sc")


def main(prog: str = "sc-weights") -> NoReturn:
    """Runs the `sc` command line on this process's arguments, in place of this process (the
    `sc-weights` command; `python -m sc`): its exit status, signals and messages are sc's own,
    and it names itself `prog`."""
    found = program()
    if found is None:
        sys.stderr.write(
            f"{prog}: error: the sc program was not found: install it (cargo install --path cli "
            "in the sc repository) on the PATH, or name it in SC_BIN\n"
        )
        sys.exit(1)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(found, [prog, *sys.argv[1:]])


def _folder(src: str | os.PathLike) -> str:
    """`src`, checked to be a folder (a remote prefix is taken as it is)."""
    p = os.fspath(src)
    if _sc.is_url(p):
        return p
    if not os.path.exists(p):
        raise FileNotFoundError(2, "No such directory", p)
    if not os.path.isdir(p):
        raise NotADirectoryError(20, "Not a directory", p)
    return p


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
    """Compresses the checkpoint folder `src` into the folder `dst` as `sc encode SRC -o DST`
    does: every `*.safetensors` and `*.gguf` below `src` becomes `NAME.sc` at the same place
    below `dst`, and every other file (config, tokenizer, `model.safetensors.index.json`) is
    copied, so that `sc.transformers.from_pretrained` loads `dst` and `sc.decompress_folder`
    gives `src` back. `dst` may be a remote prefix, `s3://bucket/folder/`, which every file is
    uploaded to. `mode`, `level`, `block_size`, `threads`, `md5` and `base` as in
    `sc.compress_file`; `base="auto"` codes each file against the other file of the folder (or
    of `base_from`) that makes it smallest, if any does, and `decompress_folder` restores each
    base before the archives that need it. An existing output file fails unless `overwrite`.
    Files are coded two at a time; one that fails does not stop the others, and then
    `sc.ScError` names every file that failed and why."""
    if level is not None and (isinstance(level, bool) or not isinstance(level, int)):
        raise _sc.ScError(f"invalid argument: level must be 1 to 9, not {level!r}")
    _sc.compress_folder(
        _folder(src), os.fspath(dst), mode, block_size, md5, threads, overwrite,
        None if base is None else os.fspath(base), level,
        None if base_from is None else [os.fspath(p) for p in base_from],
    )


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
    a remote prefix (`s3://bucket/folder/`), into the folder `dst` as `sc decode SRC -o DST`
    does: every `*.sc` below `src` is decoded (its block checksums checked, and with
    `check_md5` the recorded MD5), every other file copied. `base`: the base checkpoint of a
    fine-tune's archives. An existing output file fails unless `overwrite`; failures as in
    `compress_folder`."""
    _sc.decompress_folder(
        _folder(src), os.fspath(dst), threads, check_md5, overwrite,
        None if base is None else os.fspath(base),
    )
