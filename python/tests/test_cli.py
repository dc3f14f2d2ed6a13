"""The command line from the Python package: the `sc-weights` command, `python -m sc`, and
`sc.compress_folder`/`sc.decompress_folder`, which write exactly what `sc encode DIR -o OUT` and
`sc decode DIR -o OUT` write."""

from __future__ import annotations

import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import pytest

import sc

from conftest import SAMPLE, run_sc

BIN = pathlib.Path(sys.executable).parent


def files(folder: pathlib.Path) -> dict[str, bytes]:
    """Every file below `folder`, by its path below it."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def checkpoint(tmp_path) -> pathlib.Path:
    """A checkpoint folder: two shards (one in a subfolder), an index and a config."""
    d = tmp_path / "DIR"
    (d / "sub").mkdir(parents=True)
    shutil.copy(SAMPLE, d / "model-00001-of-00002.safetensors")
    shutil.copy(SAMPLE.parent / "tiny.safetensors", d / "sub" / "model-00002-of-00002.safetensors")
    (d / "config.json").write_text('{"model_type": "bert"}\n')
    (d / "model.safetensors.index.json").write_text('{"weight_map": {}}\n')
    return d


@pytest.mark.parametrize("command", [[str(BIN / "sc-weights")], [sys.executable, "-m", "sc"]])
def test_the_command_line_runs(command, tmp_path):
    help = subprocess.run([*command, "--help"], capture_output=True, text=True)
    assert help.returncode == 0 and "encode" in help.stdout and "decode" in help.stdout, help
    version = subprocess.run([*command, "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and sc.__version__ in version.stdout
    # A file encoded by the command is the one the sc binary writes, and decodes back.
    src = tmp_path / "tiny.safetensors"
    shutil.copy(SAMPLE.parent / "tiny.safetensors", src)
    run = subprocess.run([*command, "encode", "-q", "-9", str(src), "-o", str(tmp_path / "a.sc")],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    run_sc("encode", "-q", "-9", src, "-o", tmp_path / "b.sc")
    assert (tmp_path / "a.sc").read_bytes() == (tmp_path / "b.sc").read_bytes()
    run = subprocess.run([*command, "-d", "-q", str(tmp_path / "a.sc"), "-o", str(tmp_path / "back")],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "back").read_bytes() == src.read_bytes()
    # Errors: sc's one-line message and exit status; usage errors exit 2.
    run = subprocess.run([*command, "decode", str(src), "-o", str(tmp_path / "x")], capture_output=True, text=True)
    assert run.returncode == 1 and run.stderr.startswith("sc: error: ") and run.stderr.count("\n") == 1, run.stderr
    run = subprocess.run([*command, "encode", "--no-such-flag", str(src)], capture_output=True, text=True)
    assert run.returncode == 2 and "--no-such-flag" in run.stderr


def test_completions_name_the_command_run():
    run = subprocess.run([str(BIN / "sc-weights"), "completions", "bash"], capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.rstrip().endswith(" sc-weights\nfi"), run.stdout[-300:]


@pytest.mark.parametrize("options,flags", [
    ({}, []),
    ({"level": 9, "block_size": 65536}, ["-9", "-b", "64K"]),
    ({"mode": "best", "md5": False, "threads": 1}, ["-m", "best", "--no-md5", "-T", "1"]),
])
def test_compress_folder_writes_what_sc_encode_writes(checkpoint, tmp_path, options, flags):
    sc.compress_folder(checkpoint, tmp_path / "OUT", **options)
    run_sc("encode", "-q", *flags, checkpoint, "-o", tmp_path / "CLI")
    written = files(tmp_path / "OUT")
    assert "model-00001-of-00002.safetensors.sc" in written
    assert "sub/model-00002-of-00002.safetensors.sc" in written and "config.json" in written
    assert written == files(tmp_path / "CLI")

    sc.decompress_folder(tmp_path / "OUT", tmp_path / "BACK", check_md5=True)
    assert files(tmp_path / "BACK") == files(checkpoint)
    run_sc("decode", "-q", tmp_path / "OUT", "-o", tmp_path / "CLI-BACK")
    assert files(tmp_path / "CLI-BACK") == files(checkpoint)


def test_folder_functions_refuse_what_sc_refuses(checkpoint, tmp_path):
    out = tmp_path / "OUT"
    sc.compress_folder(checkpoint, out)
    before = files(out)
    with pytest.raises(sc.ScError, match="failed"):
        sc.compress_folder(checkpoint, out, level=6)
    assert files(out) == before
    sc.compress_folder(checkpoint, out, level=6, overwrite=True)
    assert files(out) != before
    with pytest.raises(sc.ScError, match="contradicts"):
        sc.compress_folder(checkpoint, tmp_path / "X", mode="fast", level=9)
    with pytest.raises(sc.ScError, match="level must be 1 to 9"):
        sc.compress_folder(checkpoint, tmp_path / "X", level=19)
    with pytest.raises(FileNotFoundError):
        sc.compress_folder(tmp_path / "missing", tmp_path / "X")
    with pytest.raises(NotADirectoryError):
        sc.decompress_folder(SAMPLE, tmp_path / "X")
    assert not (tmp_path / "X").exists()


def test_paths_that_look_like_flags(checkpoint, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.rename(checkpoint, tmp_path / "-in")
    sc.compress_folder("-in", "-")
    assert (tmp_path / "-" / "model-00001-of-00002.safetensors.sc").is_file()


def test_an_interrupted_command_leaves_no_output(tmp_path):
    run = subprocess.Popen([str(BIN / "sc-weights"), "encode", "-q", "-", "-o", str(tmp_path / "out.sc")],
                           stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    assert run.stdin is not None and run.stderr is not None
    run.stdin.write(SAMPLE.read_bytes()[:100_000])
    run.stdin.flush()
    deadline = time.monotonic() + 20
    while not any(p.name.endswith(".sc-tmp") for p in tmp_path.iterdir()):
        assert time.monotonic() < deadline, "no temporary output appeared"
        time.sleep(0.02)
    run.send_signal(signal.SIGINT)
    assert run.wait(20) == 130 and run.stderr.read() == b"sc: interrupted\n"
    assert list(tmp_path.iterdir()) == []
