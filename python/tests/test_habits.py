"""safetensors habits: plain safetensors files load through sc's functions as safetensors loads
them, `level=` picks the command line's levels, `sc.torch.save_model` writes what
`safetensors.torch.save_model` writes, and a missing extra is named."""

from __future__ import annotations

import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
import safetensors
import safetensors.numpy
import safetensors.torch
import torch

import sc
import sc.numpy
import sc.torch

from conftest import SAMPLE, run_sc
from test_save import decoded, every_dtype


def archive_info(path) -> dict:
    import json

    return json.loads(run_sc("info", "--json", path).stdout)


@pytest.fixture
def plain(tmp_path):
    """A safetensors file of every dtype, with metadata, under a name that is not .safetensors."""
    path = tmp_path / "weights.bin"
    safetensors.torch.save_file(every_dtype(), path, metadata={"format": "pt"})
    return path


def test_torch_loads_plain_safetensors(plain):
    want = safetensors.torch.load_file(plain)
    got = sc.torch.load_file(plain)
    assert list(got) == list(want) or sorted(got) == sorted(want)
    for k, v in want.items():
        assert got[k].dtype == v.dtype and got[k].shape == v.shape and torch.equal(got[k], v), k
    with open(plain, "rb") as f:
        from_bytes = sc.torch.load(f.read())
    assert all(torch.equal(from_bytes[k], v) for k, v in want.items())
    sample = safetensors.torch.load_file(SAMPLE)
    got = sc.torch.load_file(SAMPLE)
    assert sorted(got) == sorted(sample) and all(torch.equal(got[k], v) for k, v in sample.items())


def test_numpy_and_safe_open_read_plain_safetensors(plain, tmp_path):
    # safetensors.numpy loads the dtypes NumPy has (not bfloat16 or float8).
    numpy_dtypes = tmp_path / "numpy.safetensors"
    safetensors.torch.save_file(
        {k: v for k, v in every_dtype().items()
         if v.dtype not in (torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2)},
        numpy_dtypes)
    want = safetensors.numpy.load_file(numpy_dtypes)
    got = sc.numpy.load_file(numpy_dtypes)
    assert sorted(got) == sorted(want)
    for k, v in want.items():
        assert got[k].dtype == v.dtype and np.array_equal(got[k], v, equal_nan=v.dtype.kind in "fc"), k
    got = sc.numpy.load_file(plain)
    bf16 = safetensors.torch.load_file(plain)["08.bfloat16"]
    assert got["08.bfloat16"].dtype == ml_dtypes.bfloat16
    assert got["08.bfloat16"].tobytes() == bf16.view(torch.int16).numpy().tobytes()
    with safetensors.safe_open(plain, framework="pt") as ref, sc.safe_open(plain, framework="pt") as f:
        assert f.keys() == sorted(ref.keys()) and f.metadata() == ref.metadata()
        name = "08.bfloat16"
        assert torch.equal(f.get_tensor(name), ref.get_tensor(name))
        assert torch.equal(f.get_slice(name)[2:5], ref.get_slice(name)[2:5])
        assert f.info()["mode"] is None


def test_plain_files_that_are_broken_say_so(tmp_path, plain):
    data = plain.read_bytes()
    short = tmp_path / "short.safetensors"
    short.write_bytes(data[:-10])
    with pytest.raises(sc.ScError, match="outside"):
        sc.torch.load_file(short)
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"not a safetensors file at all")
    with pytest.raises(sc.ScError):
        sc.torch.load_file(junk)


@pytest.mark.parametrize("level", [1, 5, 6, 7, 9])
def test_level_is_the_command_lines(tmp_path, level):
    src = SAMPLE
    mine = tmp_path / "py.sc"
    sc.compress_file(src, mine, level=level, block_size=65536)
    run_sc("encode", "-q", f"-{level}", "-b", "64K", src, "-o", tmp_path / "cli.sc")
    assert mine.read_bytes() == (tmp_path / "cli.sc").read_bytes()
    info = archive_info(mine)
    assert info["mode"] == ("fast" if level <= 5 else "best")
    if level == 6:
        assert info["format_version"] <= 4
    if level >= 7:
        assert info["format_version"] == 5
    # save_file takes the level as well: the archive of the file safetensors writes.
    tensors = safetensors.torch.load_file(SAMPLE)
    sc.torch.save_file(tensors, tmp_path / "saved.sc", level=level)
    assert sc.safe_open(tmp_path / "saved.sc").info()["mode"] == info["mode"]
    assert archive_info(tmp_path / "saved.sc")["format_version"] == info["format_version"]


def test_levels_six_and_nine_differ(tmp_path):
    for level in (6, 9):
        sc.compress_file(SAMPLE, tmp_path / f"{level}.sc", level=level, block_size=65536)
    assert (tmp_path / "6.sc").read_bytes() != (tmp_path / "9.sc").read_bytes()


def test_bad_levels(tmp_path):
    for level in (0, 10, 19, -1):
        with pytest.raises(sc.ScError, match="level must be 1 to 9"):
            sc.compress_file(SAMPLE, tmp_path / "x.sc", level=level)
    with pytest.raises(sc.ScError, match="contradicts"):
        sc.compress_file(SAMPLE, tmp_path / "x.sc", mode="fast", level=9)
    assert not (tmp_path / "x.sc").exists()
    sc.compress_file(SAMPLE, tmp_path / "x.sc", mode="best", level=8)
    assert sc.safe_open(tmp_path / "x.sc").info()["mode"] == "best"


class Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embed = torch.nn.Embedding(10, 4)
        self.head = torch.nn.Linear(4, 10, bias=False)
        self.head.weight = self.embed.weight
        self.norm = torch.nn.LayerNorm(4)


def test_save_model_writes_what_safetensors_writes(tmp_path):
    model = Tied()
    safetensors.torch.save_model(model, tmp_path / "ref.safetensors")
    sc.torch.save_model(model, tmp_path / "model.sc")
    assert decoded(tmp_path / "model.sc", tmp_path) == (tmp_path / "ref.safetensors").read_bytes()
    with sc.safe_open(tmp_path / "model.sc") as f:
        assert f.keys() == ["embed.weight", "norm.bias", "norm.weight"]
        assert f.metadata() == {"head.weight": "embed.weight"}
    # Given metadata is kept, not changed in place, and a name it already has is left alone.
    meta = {"format": "pt", "head.weight": "mine"}
    sc.torch.save_model(model, tmp_path / "meta.sc", metadata=meta, level=9)
    assert meta == {"format": "pt", "head.weight": "mine"}
    assert sc.safe_open(tmp_path / "meta.sc").metadata() == meta
    fresh = Tied()
    with torch.no_grad():
        for p in fresh.parameters():
            p.zero_()
    assert sc.torch.load_model(fresh, tmp_path / "model.sc") == ([], [])
    assert fresh.head.weight.data_ptr() == fresh.embed.weight.data_ptr()
    for k, v in model.state_dict().items():
        assert torch.equal(fresh.state_dict()[k], v), k


def test_save_model_refuses_partial_views(tmp_path):
    class Views(torch.nn.Module):
        def __init__(self):
            super().__init__()
            whole = torch.zeros(4, 4)
            self.register_buffer("a", whole[:2])
            self.register_buffer("b", whole[1:3])

    with pytest.raises(RuntimeError, match="whole storage"):
        sc.torch.save_model(Views(), tmp_path / "v.sc")
    with pytest.raises(RuntimeError):
        safetensors.torch.save_model(Views(), tmp_path / "v.safetensors")


@pytest.mark.parametrize("module,extra", [("torch", "torch"), ("transformers", "transformers")])
def test_a_missing_extra_is_named(module, extra):
    code = f"import sys; sys.modules[{module!r}] = None\nimport sc.{module}"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 1
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("ModuleNotFoundError: ") and f"[{extra}]" in last, run.stderr
