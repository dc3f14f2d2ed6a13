"""Fine-tunes coded against their base (`base=`), and repeated tensors stored once: every way
the package reads such an archive gives safetensors' tensors; a missing or wrong base raises
with the command line's message."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import safetensors.torch
import torch

import sc
import sc.numpy
import sc.torch

from conftest import ROOT, cli_message, run_sc

BASE = ROOT / "testdata" / "tune-base.safetensors"
TUNE = ROOT / "testdata" / "tune.safetensors"
BLOCK = 64 << 10
# The tune's tensors that hold more than one block (the small ones share blocks).
WORD = "embeddings.word_embeddings.weight"
QUERY = "encoder.layer.0.attention.self.query.weight"


def raw(t) -> tuple:
    """A tensor's or array's shape and bytes."""
    if isinstance(t, torch.Tensor):
        return tuple(t.shape), t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
    return t.shape, t.tobytes()


def same(a: dict, b: dict) -> None:
    """`a` (torch tensors or NumPy arrays) holds the tensors `b` holds, bit for bit."""
    assert sorted(a) == sorted(b)
    for k in b:
        assert raw(a[k]) == raw(b[k]), k
        if isinstance(a[k], torch.Tensor):
            assert a[k].dtype == b[k].dtype, k


@pytest.fixture(scope="module", params=["fast", "best"])
def tune_archive(request, tmp_path_factory):
    """The tune coded against its base by compress_file, with 64 KiB blocks."""
    out = tmp_path_factory.mktemp("tune") / f"tune.{request.param}.sc"
    report = sc.compress_file(TUNE, out, mode=request.param, block_size=BLOCK, base=BASE)
    assert report["based_tensors"] == 7
    return out


@pytest.fixture(scope="module")
def tied(tmp_path_factory):
    """The tune with a tied output layer (word embeddings saved twice, as a second tensor)."""
    state = safetensors.torch.load_file(TUNE)
    state["lm_head.weight"] = state[WORD].clone()
    path = tmp_path_factory.mktemp("tied") / "tied.safetensors"
    safetensors.torch.save_file(state, path, metadata={"format": "pt"})
    return path, state


def test_load_with_base_equals_safetensors(tune_archive):
    expected = safetensors.torch.load_file(TUNE)
    same(sc.torch.load_file(tune_archive, base=BASE), expected)
    same(sc.numpy.load_file(tune_archive, base=BASE), expected)
    data = tune_archive.read_bytes()
    same(sc.torch.load(data, base=BASE), expected)
    same(sc.numpy.load(data, base=BASE), expected)


def test_coding_against_the_base_pays(tune_archive, tmp_path):
    mode = "best" if ".best." in tune_archive.name else "fast"
    alone = tmp_path / "alone.sc"
    sc.compress_file(TUNE, alone, mode=mode, block_size=BLOCK)
    assert tune_archive.stat().st_size < alone.stat().st_size * 0.6
    with sc.safe_open(tune_archive) as f:
        assert f.info()["base"] == BASE.name
    with sc.safe_open(alone) as f:
        assert f.info()["base"] is None


def test_any_form_of_the_base_serves(tune_archive, tmp_path):
    # The base as an archive, and as a folder whose shards split its tensors differently.
    base_archive = tmp_path / "base.safetensors.sc"
    sc.compress_file(BASE, base_archive, mode="best")
    folder = tmp_path / "base-shards"
    folder.mkdir()
    base_state = safetensors.torch.load_file(BASE)
    names = sorted(base_state)
    safetensors.torch.save_file({n: base_state[n] for n in names[:3]}, folder / "a.safetensors")
    safetensors.torch.save_file({n: base_state[n] for n in names[3:]}, folder / "b.safetensors")
    expected = safetensors.torch.load_file(TUNE)
    for base in (base_archive, folder, str(BASE)):
        same(sc.torch.load_file(tune_archive, base=base), expected)


def test_safe_open_with_base(tune_archive):
    expected = safetensors.torch.load_file(TUNE)
    with sc.safe_open(tune_archive, framework="pt", base=BASE) as f:
        assert f.keys() == sorted(expected)
        assert torch.equal(f.get_tensor(QUERY), expected[QUERY])
        before = f.stats()["blocks_decoded"]
        rows = f.get_slice(WORD)[100:300]
        assert torch.equal(rows, expected[WORD][100:300])
        # 200 rows of 768 bytes: 150 KiB, three or four blocks, not the tensor's seven.
        assert f.stats()["blocks_decoded"] - before <= 4
        assert torch.equal(f.get_slice(WORD)[-1], expected[WORD][-1])
        assert torch.equal(f.get_slice(QUERY)[::7], expected[QUERY][::7])
    with sc.safe_open(tune_archive, framework="np", base=BASE) as f:
        got = f.get_tensor("embeddings.position_ids")
        assert np.array_equal(got, expected["embeddings.position_ids"].numpy())


def test_decompress_and_verify_with_base(tune_archive, tmp_path):
    out = tmp_path / "restored.safetensors"
    sc.decompress_file(tune_archive, out, base=BASE, check_md5=True)
    assert out.read_bytes() == TUNE.read_bytes()
    assert sc.verify(tune_archive, base=BASE)["original_len"] == TUNE.stat().st_size


def test_without_the_base_the_message_names_it(tune_archive, tmp_path):
    needed = f'coded against the base "{BASE.name}", which was not given'
    cli = cli_message("decode", "-q", tune_archive, "-o", tmp_path / "cli.out")
    assert needed in cli and cli.endswith("(give it with --base)")
    out = tmp_path / "out.safetensors"
    calls = [
        lambda: sc.torch.load_file(tune_archive),
        lambda: sc.numpy.load_file(tune_archive),
        lambda: sc.torch.load(tune_archive.read_bytes()),
        lambda: sc.verify(tune_archive),
        lambda: sc.decompress_file(tune_archive, out),
    ]
    for call in calls:
        with pytest.raises(sc.ScError) as err:
            call()
        assert str(err.value).endswith(f"{needed} (give it with base=)"), str(err.value)
    assert not out.exists()
    # The archive opens without its base: its tensors are listed, and those it holds whole
    # read; the others raise.
    with sc.safe_open(tune_archive) as f:
        assert f.info()["base"] == BASE.name
        assert len(f.keys()) == 7
        with pytest.raises(sc.ScError, match=needed):
            f.get_tensor(WORD)
        with pytest.raises(sc.ScError, match=needed):
            f.get_slice(QUERY)[0:2]


def changed_base(tmp_path, name: str) -> os.PathLike:
    """The base with one bit of tensor `name` flipped."""
    data = bytearray(BASE.read_bytes())
    (n,) = struct.unpack("<Q", data[:8])
    start = 8 + n + json.loads(data[8 : 8 + n])[name]["data_offsets"][0]
    data[start + 5] ^= 1
    path = tmp_path / "changed.safetensors"
    path.write_bytes(bytes(data))
    return path


def test_a_wrong_base_raises_and_writes_nothing(tune_archive, tmp_path):
    out = tmp_path / "out.safetensors"
    changed = changed_base(tmp_path, QUERY)
    other = ROOT / "testdata" / "tiny.safetensors"
    for base, why in [(changed, "holds other bytes"), (other, "has no tensor")]:
        cli = cli_message("decode", "-q", "--base", base, tune_archive, "-o", tmp_path / "cli.out")
        for call in [
            lambda: sc.torch.load_file(tune_archive, base=base),
            lambda: sc.verify(tune_archive, base=base),
            lambda: sc.decompress_file(tune_archive, out, base=base),
        ]:
            with pytest.raises(sc.ScError) as err:
                call()
            message = str(err.value)
            assert message.startswith(f"{tune_archive}: ")
            library_part = message[len(f"{tune_archive}: "):]
            assert f'is not the base "{BASE.name}"' in library_part and why in library_part
            assert cli.endswith(library_part), (cli, message)
        assert not out.exists()
    # Tensors the changed one does not touch still read.
    with sc.safe_open(tune_archive, base=changed) as f:
        f.get_tensor("embeddings.LayerNorm.bias")
        with pytest.raises(sc.ScError, match="holds other bytes"):
            f.get_tensor(QUERY)


def test_a_missing_or_unusable_base(tune_archive, tmp_path):
    missing = tmp_path / "missing.safetensors"
    with pytest.raises(FileNotFoundError) as err:
        sc.torch.load_file(tune_archive, base=missing)
    assert err.value.filename == str(missing)
    for call in [lambda: sc.verify(tune_archive, base=missing),
                 lambda: sc.safe_open(tune_archive, base=missing),
                 lambda: sc.compress_file(TUNE, tmp_path / "x.sc", base=missing)]:
        with pytest.raises(FileNotFoundError):
            call()
    assert not (tmp_path / "x.sc").exists()
    # Not a safetensors file, and a truncated base: the base cannot be read, and the message
    # says which base the archive needs.
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"not a checkpoint" * 10)
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(BASE.read_bytes()[: BASE.stat().st_size // 2])
    for base in (junk, cut):
        cli = cli_message("decode", "-q", "--base", base, tune_archive, "-o", tmp_path / "cli.out")
        with pytest.raises(sc.ScError) as err:
            sc.numpy.load_file(tune_archive, base=base)
        message = str(err.value)
        assert f"cannot use {base} as a base" in message
        assert message.endswith(f'(the archive needs the base "{BASE.name}")')
        assert cli.endswith(message[len(f"{tune_archive}: "):]), (cli, message)
        with pytest.raises(sc.ScError, match="cannot use"):
            sc.compress_file(TUNE, tmp_path / "x.sc", base=base)
    assert not (tmp_path / "x.sc").exists()


def test_a_base_given_for_a_plain_archive_is_ignored(tmp_path):
    plain = tmp_path / "plain.sc"
    sc.compress_file(TUNE, plain)
    same(sc.torch.load_file(plain, base=BASE), safetensors.torch.load_file(TUNE))


@pytest.mark.parametrize("mode", ["fast", "best"])
def test_repeated_tensors_stored_once(tied, tmp_path, mode):
    path, state = tied
    archive = tmp_path / "tied.sc"
    report = sc.compress_file(path, archive, mode=mode, block_size=BLOCK)
    assert report["repeated_tensors"] == 1
    plain = tmp_path / "plain.sc"
    sc.compress_file(TUNE, plain, mode=mode, block_size=BLOCK)
    # The repeat (393 KB) costs its entry in the header and a reference, not its bytes.
    assert archive.stat().st_size < plain.stat().st_size + 2048
    same(sc.torch.load_file(archive), state)
    same(sc.numpy.load(archive.read_bytes()), state)
    with sc.safe_open(archive) as f:
        assert torch.equal(f.get_tensor("lm_head.weight"), state[WORD])
    with sc.safe_open(archive) as f:
        assert torch.equal(f.get_slice("lm_head.weight")[200:260], state[WORD][200:260])
    out = tmp_path / "restored.safetensors"
    sc.decompress_file(archive, out)
    assert out.read_bytes() == path.read_bytes()


def test_repeated_tensors_and_a_base(tied, tmp_path):
    path, state = tied
    archive = tmp_path / "tied.sc"
    report = sc.compress_file(path, archive, block_size=BLOCK, base=BASE)
    assert report["repeated_tensors"] == 1 and report["based_tensors"] == 7
    same(sc.torch.load_file(archive, base=BASE), state)
    with sc.safe_open(archive, base=BASE) as f:
        for name in ("lm_head.weight", QUERY, "embeddings.position_ids"):
            assert torch.equal(f.get_tensor(name), state[name])
    run_sc("decode", "-q", "--base", BASE, archive, "-o", tmp_path / "cli.safetensors")
    assert (tmp_path / "cli.safetensors").read_bytes() == path.read_bytes()


def in_child(script: str) -> subprocess.CompletedProcess:
    """Runs `script` in an interpreter of its own, so that a crash or a hang there fails the
    test instead of pytest."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True,
                          text=True, timeout=120)


def test_a_base_truncated_while_in_use_raises_naming_it(tune_archive, tmp_path):
    # Opened with the archive, cut short before the tensor coded against it is read: an
    # error naming the base, never SIGBUS killing the interpreter.
    base = tmp_path / "base.safetensors"
    shutil.copy(BASE, base)
    r = in_child(f"""
        import os, sc
        with sc.safe_open({str(tune_archive)!r}, framework="np", base={str(base)!r}) as f:
            os.truncate({str(base)!r}, {BASE.stat().st_size // 2})
            try:
                f.get_tensor({QUERY!r})
            except sc.ScError as e:
                print("raised:", e)
    """)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"cannot use {base} as a base: the file shrank while it was being read" in r.stdout


def test_a_fifo_as_base_raises_without_waiting(tune_archive, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    r = in_child(f"""
        import sc
        for call in (lambda: sc.compress_file({str(TUNE)!r}, {str(tmp_path / "x.sc")!r},
                                              base={str(fifo)!r}),
                     lambda: sc.verify({str(tune_archive)!r}, base={str(fifo)!r}),
                     lambda: sc.safe_open({str(tune_archive)!r}, base={str(fifo)!r})):
            try:
                call()
            except sc.ScError as e:
                print("raised:", e)
    """)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.count(f"cannot use {fifo} as a base: not a regular file or a folder") == 3
    assert not (tmp_path / "x.sc").exists()
