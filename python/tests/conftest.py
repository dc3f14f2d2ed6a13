"""Shared fixtures: the sc command line, the bundled sample, archives made from it."""

from __future__ import annotations

import os
import pathlib
import subprocess

import pytest

import sc

ROOT = pathlib.Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "testdata" / "sample.safetensors"

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def sc_bin() -> str:
    path = os.environ.get("SC_BIN", str(ROOT / "target" / "release" / "sc"))
    if not os.path.exists(path):
        raise RuntimeError(f"{path} is missing: run `cargo build --release` (python/test.sh does)")
    return path


def run_sc(*args: str | os.PathLike, check: bool = True) -> subprocess.CompletedProcess:
    """Runs the sc command line."""
    return subprocess.run([sc_bin(), *map(str, args)], capture_output=True, text=True, check=check)


def cli_message(*args: str | os.PathLike) -> str:
    """The one-line error of a command line run that fails."""
    r = run_sc(*args, check=False)
    assert r.returncode == 1
    line = r.stderr.strip()
    assert line.startswith("sc: error: ") and "\n" not in line, r.stderr
    return line


@pytest.fixture(scope="session")
def sample() -> pathlib.Path:
    return SAMPLE


@pytest.fixture(scope="session", params=["fast", "best"])
def sample_archive(request, tmp_path_factory) -> pathlib.Path:
    """The sample encoded by `sc encode` in each mode, with 64 KiB blocks so that it has many."""
    out = tmp_path_factory.mktemp("archives") / f"sample.{request.param}.sc"
    run_sc("encode", "-q", "-m", request.param, "-b", "64K", SAMPLE, "-o", out)
    return out
