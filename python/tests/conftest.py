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


def _servers_or_skip() -> None:
    """Skips a test that needs nginx and SeaweedFS where they are missing, unless
    SC_REQUIRE_SERVERS=1 (CI), where their absence fails it."""
    import servers

    why = servers.missing()
    if why is not None:
        if os.environ.get("SC_REQUIRE_SERVERS") == "1":
            pytest.fail(f"SC_REQUIRE_SERVERS=1 but {why}")
        pytest.skip(why)


@pytest.fixture(scope="session")
def web_root(tmp_path_factory) -> pathlib.Path:
    """The folder nginx serves."""
    return tmp_path_factory.mktemp("www")


@pytest.fixture(scope="session")
def nginx(web_root, tmp_path_factory):
    """nginx serving `web_root` on 127.0.0.1, for the session."""
    _servers_or_skip()
    import servers

    server = servers.Nginx(web_root, tmp_path_factory.mktemp("nginx")).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def weed(tmp_path_factory):
    """SeaweedFS's S3 gateway on 127.0.0.1, for the session."""
    _servers_or_skip()
    import servers

    server = servers.Weed(tmp_path_factory.mktemp("weed")).start()
    yield server
    server.stop()


@pytest.fixture
def s3_env(weed, monkeypatch):
    """The AWS_* environment pointing S3 locations at `weed`."""
    for k, v in weed.env().items():
        monkeypatch.setenv(k, v)
    return weed
