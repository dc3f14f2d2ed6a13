"""Saving: an archive of exactly the file safetensors writes for the same tensors."""

from __future__ import annotations

import json
import struct

import ml_dtypes
import numpy as np
import pytest
import safetensors.numpy
import safetensors.torch
import torch

import sc
import sc.numpy
import sc.torch

from conftest import run_sc

ALL_TORCH = [torch.bool, torch.uint8, torch.int8, torch.float8_e5m2, torch.float8_e4m3fn,
             torch.int16, torch.uint16, torch.float16, torch.bfloat16, torch.int32, torch.uint32,
             torch.float32, torch.complex64, torch.float64, torch.int64, torch.uint64]


def decoded(archive, tmp_path) -> bytes:
    out = tmp_path / "decoded.safetensors"
    run_sc("decode", "-q", "-f", archive, "-o", out)
    return out.read_bytes()


def every_dtype() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    out = {}
    for k, dt in enumerate(ALL_TORCH):
        x = torch.randn(7, 5, generator=g) * 50
        # Names in the opposite order to the dtypes, so the layout's sort is exercised.
        out[f"{len(ALL_TORCH) - k:02d}.{str(dt)[6:]}"] = x.to(dt)
        out[f"a{k:02d}.scalar"] = x[0, 0].to(dt).clone()
    out["empty"] = torch.zeros(0, 3)
    return out


@pytest.mark.parametrize("mode", ["fast", "best"])
@pytest.mark.parametrize("metadata", [None, {"format": "pt"}])
def test_torch_save_file_decodes_to_the_safetensors_bytes(sample, tmp_path, mode, metadata):
    tensors = safetensors.torch.load_file(sample)
    archive = tmp_path / "out.sc"
    sc.torch.save_file(tensors, archive, metadata=metadata, mode=mode)
    assert decoded(archive, tmp_path) == safetensors.torch.save(tensors, metadata=metadata)
    assert sc.torch.save(tensors, metadata=metadata, mode=mode) == archive.read_bytes()


def test_every_dtype_lays_out_as_safetensors(tmp_path):
    tensors = every_dtype()
    archive = tmp_path / "all.sc"
    sc.torch.save_file(tensors, archive)
    assert decoded(archive, tmp_path) == safetensors.torch.save(tensors)
    back = sc.torch.load_file(archive)
    for k, t in tensors.items():
        assert back[k].dtype == t.dtype and back[k].shape == t.shape
        # Compared as bytes: NaN payloads and -0.0 included.
        assert torch.equal(back[k].reshape(-1).view(torch.uint8), t.reshape(-1).view(torch.uint8)), k


def test_metadata_keeps_its_order_and_values(tmp_path):
    # safetensors writes several metadata keys in a random order; sc keeps the dict's order.
    meta = {"zz": "1", "aa": "2", "m": "ü\"\n"}
    tensors = {"w": torch.ones(3)}
    data = sc.torch.save(tensors, metadata=meta)
    with sc.safe_open(_write(tmp_path, data)) as f:
        assert f.metadata() == meta
    raw = decoded(_write(tmp_path, data), tmp_path)
    n = struct.unpack("<Q", raw[:8])[0]
    assert list(json.loads(raw[8 : 8 + n])["__metadata__"]) == list(meta)
    assert safetensors.torch.load(raw)["w"].equal(tensors["w"])
    reference = safetensors.torch.save(tensors, metadata=meta)
    m = struct.unpack("<Q", reference[:8])[0]
    assert json.loads(raw[8 : 8 + n]) == json.loads(reference[8 : 8 + m])
    assert raw[8 + n :] == reference[8 + m :]


def _write(tmp_path, data: bytes):
    p = tmp_path / "bytes.sc"
    p.write_bytes(data)
    return p


def test_numpy_save_file_decodes_to_the_safetensors_bytes(tmp_path):
    rng = np.random.default_rng(3)
    arrays = {
        "f64": rng.standard_normal((4, 3)), "f32": rng.standard_normal(9).astype(np.float32),
        "f16": rng.standard_normal((2, 2, 2)).astype(np.float16), "i64": np.arange(5),
        "u8": np.arange(7, dtype=np.uint8), "b": np.array([True, False]),
        "big_endian": np.arange(4, dtype=">i4"),
    }
    archive = tmp_path / "np.sc"
    sc.numpy.save_file(arrays, archive, metadata={"format": "np"})
    assert decoded(archive, tmp_path) == safetensors.numpy.save(arrays, metadata={"format": "np"})
    back = sc.numpy.load_file(archive)
    for k, a in arrays.items():
        assert back[k].dtype == a.dtype.newbyteorder("=") and np.array_equal(back[k], a), k


def test_numpy_strided_arrays_are_saved_by_value():
    # safetensors.numpy 0.8 writes a strided array's underlying buffer; sc writes its values.
    a = np.arange(36, dtype=np.float32).reshape(6, 6)[::2, 1:]
    back = sc.numpy.load(sc.numpy.save({"a": a}))["a"]
    assert np.array_equal(back, a)


def test_numpy_bfloat16_saves_as_torch_does(tmp_path):
    t = torch.randn(33, 8).to(torch.bfloat16)
    a = t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    data = sc.numpy.save({"w": a})
    assert data == sc.torch.save({"w": t})
    assert decoded(_write(tmp_path, data), tmp_path) == safetensors.torch.save({"w": t})
    back = sc.numpy.load(data)["w"]
    assert back.dtype == ml_dtypes.bfloat16 and np.array_equal(back.view(np.int16), a.view(np.int16))


def test_save_rejects_what_safetensors_cannot_hold(tmp_path):
    with pytest.raises(ValueError):
        sc.torch.save({"w": [1, 2]})
    with pytest.raises(ValueError):
        sc.numpy.save({"s": np.array(["text"])})
    with pytest.raises(ValueError):
        sc.torch.save({"w": torch.ones(2)}, metadata={"k": 1})
    with pytest.raises(sc.ScError, match="mode"):
        sc.torch.save({"w": torch.ones(2)}, mode="fastest")
    with pytest.raises(sc.ScError, match="block size"):
        sc.torch.save({"w": torch.ones(2)}, block_size=3)


def test_save_file_replaces_atomically(tmp_path):
    path = tmp_path / "w.sc"
    sc.torch.save_file({"w": torch.ones(2)}, path)
    sc.torch.save_file({"w": torch.zeros(4)}, path)
    assert torch.equal(sc.torch.load_file(path)["w"], torch.zeros(4))
    assert [p.name for p in tmp_path.iterdir()] == ["w.sc"]
    with pytest.raises(FileNotFoundError):
        sc.torch.save_file({"w": torch.ones(2)}, tmp_path / "no" / "such" / "dir.sc")


def test_load_model_with_tied_weights(tmp_path):
    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(10, 4)
            self.out = torch.nn.Linear(4, 10, bias=False)
            self.out.weight = self.emb.weight

    m = Tied()
    path = tmp_path / "m.sc"
    sc.torch.save_file({"emb.weight": m.emb.weight.detach()}, path)
    fresh = Tied()
    assert sc.torch.load_model(fresh, path) == ([], [])
    assert torch.equal(fresh.out.weight, m.emb.weight)
    sc.torch.save_file({"emb.weight": m.emb.weight.detach(), "extra": torch.ones(1)}, path)
    with pytest.raises(RuntimeError, match="extra"):
        sc.torch.load_model(Tied(), path)
    assert sc.torch.load_model(Tied(), path, strict=False) == ([], ["extra"])
