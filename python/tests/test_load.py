"""Loading archives: the same tensors, dtypes, shapes and metadata as safetensors gives for the
original, for every dtype of the sample, in both modes and for any number of threads."""

from __future__ import annotations

import json
import re
import struct
import sys
import threading
import time

import ml_dtypes
import numpy as np
import pytest
import safetensors
import safetensors.numpy
import safetensors.torch
import torch
from conftest import cli_message

import sc
import sc.numpy
import sc.torch

from conftest import run_sc


def test_the_installed_package_is_tested():
    # The tests must exercise the built wheel, not a source tree without the native module.
    assert "site-packages" in sc.__file__, sc.__file__


def sample_dtypes(sample) -> set[str]:
    n = struct.unpack("<Q", sample.read_bytes()[:8])[0]
    header = json.loads(sample.read_bytes()[8 : 8 + n])
    return {v["dtype"] for k, v in header.items() if k != "__metadata__"}


def test_sample_covers_the_common_dtypes(sample):
    assert sample_dtypes(sample) == {"BF16", "F32", "F16", "I64"}


def assert_same_torch(expected: dict, got: dict):
    assert list(got) == list(expected)
    for k, e in expected.items():
        g = got[k]
        assert g.dtype == e.dtype and g.shape == e.shape, k
        assert torch.equal(g, e), k


def test_torch_load_file_equals_safetensors(sample, sample_archive):
    assert_same_torch(safetensors.torch.load_file(sample), sc.torch.load_file(sample_archive))


def test_torch_load_bytes_equals_safetensors(sample, sample_archive):
    assert_same_torch(safetensors.torch.load_file(sample), sc.torch.load(sample_archive.read_bytes()))


def test_numpy_load_file_equals_safetensors(sample, sample_archive):
    got = sc.numpy.load_file(sample_archive)
    reference = safetensors.torch.load_file(sample)
    assert list(got) == list(reference)
    with safetensors.safe_open(sample, framework="np") as f:
        for name, g in got.items():
            assert list(g.shape) == list(reference[name].shape)
            assert g.flags.c_contiguous and g.flags.writeable
            if reference[name].dtype == torch.bfloat16:
                # safetensors.numpy has no bfloat16: compare the bits with torch's tensor.
                assert g.dtype == ml_dtypes.bfloat16
                bits = reference[name].view(torch.int16).numpy()
                assert np.array_equal(g.view(np.int16), bits), name
            else:
                e = f.get_tensor(name)
                assert g.dtype == e.dtype, name
                assert np.array_equal(g, e), name


def test_metadata_equals_safetensors(sample, sample_archive):
    with safetensors.safe_open(sample, framework="pt") as ref, sc.safe_open(sample_archive, framework="pt") as f:
        assert f.metadata() == ref.metadata()
        assert f.keys() == ref.keys()
        assert f.offset_keys() == ref.offset_keys()
        for name in ref.keys():
            assert torch.equal(f.get_tensor(name), ref.get_tensor(name))
            assert f.get_slice(name).get_shape() == ref.get_slice(name).get_shape()
            assert f.get_slice(name).get_dtype() == ref.get_slice(name).get_dtype()


def test_numpy_safe_open(sample, sample_archive):
    with safetensors.safe_open(sample, framework="np") as ref, sc.safe_open(sample_archive, framework="np") as f:
        e = ref.get_tensor("f32.pooler.dense.weight")
        g = f.get_tensor("f32.pooler.dense.weight")
        assert g.dtype == e.dtype and np.array_equal(g, e)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_results_identical_for_any_thread_count(sample_archive, threads):
    base = sc.torch.load_file(sample_archive, threads=1)
    assert_same_torch(base, sc.torch.load_file(sample_archive, threads=threads))
    with sc.safe_open(sample_archive, threads=threads) as f:
        for name in f.keys():
            assert torch.equal(f.get_tensor(name), base[name])


def test_get_slice_indexing(sample, sample_archive):
    ref = safetensors.torch.load_file(sample)
    w = ref["embeddings.word_embeddings.weight"]
    with sc.safe_open(sample_archive, framework="pt") as f:
        s = f.get_slice("embeddings.word_embeddings.weight")
        assert len(s) == w.shape[0]
        for key in [slice(0, 128), slice(5, 6), slice(None), slice(-10, None), slice(100, 50),
                    slice(3, 400, 7), slice(None, None, -1), 7, -1, (slice(10, 20), slice(0, 5)),
                    (3, 4), Ellipsis, (slice(2, 9), Ellipsis)]:
            # Through numpy, whose indexing takes negative steps (torch's does not).
            expected = w.view(torch.int16).numpy()[key]
            assert np.array_equal(s[key].view(torch.int16).numpy(), expected), key
        with pytest.raises(IndexError):
            s[w.shape[0]]
        scalar = f.get_slice("embeddings.LayerNorm.bias")
        assert torch.equal(scalar[10:20], ref["embeddings.LayerNorm.bias"][10:20])


def test_unknown_name_raises_key_error_with_the_closest(sample_archive):
    with sc.safe_open(sample_archive) as f:
        with pytest.raises(KeyError) as err:
            f.get_tensor("embeddings.word_embedding.weight")
        assert "embeddings.word_embeddings.weight" in str(err.value)
        with pytest.raises(KeyError):
            f.get_slice("nothing like it")


def test_closest_names_are_the_command_lines(sample_archive):
    """Python and `sc extract` suggest the same names for the same typo: the library's rule."""
    for typo in ["LayerNorm", "embeddings.LayerNorm.wieght", "query.weight", "nothing like it"]:
        with sc.safe_open(sample_archive) as f:
            with pytest.raises(KeyError) as err:
                f.get_tensor(typo)
        said = str(err.value)
        python = re.findall(r"'([^']*)'", said.split("closest: ")[1]) if "closest: " in said else []
        line = cli_message("extract", sample_archive, "-t", typo, "-o", "-")
        cli = re.findall(r'"([^"]*)"', line.split("did you mean ")[1]) if "did you mean " in line else []
        assert python == cli, (typo, said, line)
        assert bool(cli) == (typo != "nothing like it"), (typo, line)


def test_closed_archive_raises(sample_archive):
    f = sc.safe_open(sample_archive)
    f.close()
    with pytest.raises(sc.ScError, match="closed"):
        f.get_tensor("embeddings.LayerNorm.bias")


def test_framework_and_device_checked(sample_archive):
    with pytest.raises(ValueError):
        sc.safe_open(sample_archive, framework="tf")
    with pytest.raises(ValueError):
        sc.numpy.load_file(sample_archive, device="cuda")
    with pytest.raises(sc.ScError, match="threads"):
        sc.torch.load_file(sample_archive, threads=-1)


def test_loaded_tensors_own_writable_memory(sample_archive):
    t = sc.torch.load_file(sample_archive)
    x = t["f32.pooler.dense.weight"]
    x.add_(1)  # in place: the memory is the tensor's own, writable
    assert x.is_contiguous()


def test_generic_archive_is_refused_with_a_clear_error(tmp_path):
    plain = tmp_path / "notes.txt"
    plain.write_bytes(b"not a safetensors file\n" * 1000)
    archive = tmp_path / "notes.txt.sc"
    run_sc("encode", "-q", plain, "-o", archive)
    with pytest.raises(sc.ScError, match="generic archive"):
        sc.torch.load_file(archive)
    out = tmp_path / "back.txt"
    sc.decompress_file(archive, out)
    assert out.read_bytes() == plain.read_bytes()


def test_the_gil_is_released_while_decoding(tmp_path):
    # A thread that counts while the main thread decodes: with the GIL held throughout the call
    # it could not run until the call returned (the switch interval is far longer than it).
    big = {"w": torch.randn(4096, 4096).to(torch.bfloat16)}
    path = tmp_path / "big.sc"
    sc.torch.save_file(big, path)
    f = sc.safe_open(path)
    count, stop = [0], threading.Event()

    def counter():
        while not stop.is_set():
            count[0] += 1
            time.sleep(0)

    old = sys.getswitchinterval()
    sys.setswitchinterval(30)
    t = threading.Thread(target=counter)
    try:
        t.start()
        time.sleep(0.05)
        before = count[0]
        got = f.get_tensor("w")
        during = count[0] - before
    finally:
        stop.set()
        t.join()
        sys.setswitchinterval(old)
    f.close()
    assert torch.equal(got, big["w"])
    assert during > 0
