"""GGUF archives from Python: files written with the `gguf` package (every metadata value type,
an odd alignment, a zero-element tensor, float and quantized tensors) compressed and restored,
their tensors read through `sc.safe_open` (floats as arrays, quantized ones as their blocks),
and `sc extract` outputs read back with `gguf.GGUFReader`."""

from __future__ import annotations

import json

import gguf
import numpy as np
import pytest
import torch

import sc
from conftest import ROOT, run_sc

Q = gguf.GGMLQuantizationType


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A GGUF file of F32, F16, BF16, Q8_0, Q4_0 and Q6_K tensors, one with no elements, with
    metadata of every value type and alignment 64, and its archives (FAST and BEST)."""
    d = tmp_path_factory.mktemp("gguf")
    rng = np.random.default_rng(5)
    w = gguf.GGUFWriter(d / "m.gguf", "llama")
    w.add_custom_alignment(64)
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -3)
    w.add_uint16("t.u16", 513)
    w.add_int16("t.i16", -2)
    w.add_uint32("t.u32", 7)
    w.add_int32("t.i32", -7)
    w.add_float32("t.f32", 1.5)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "tëxt")
    w.add_uint64("t.u64", 2**64 - 1)
    w.add_int64("t.i64", -(2**63))
    w.add_float64("t.f64", 0.25)
    w.add_array("t.ints", [1, 2, 3])
    w.add_array("t.strs", ["<s>", "", "ü"])
    w.add_array("t.floats", [0.5, -1.0])
    floats = {
        "f32": rng.standard_normal((4, 10), dtype=np.float32),
        "f16": rng.standard_normal((3, 2, 5)).astype(np.float16),
        "empty": np.zeros((0,), dtype=np.float32),
    }
    for name, a in floats.items():
        w.add_tensor(name, a)
    bf16 = rng.standard_normal((2, 8), dtype=np.float32)
    bf16_bits = (bf16.view(np.uint32) >> 16).astype(np.uint16)
    w.add_tensor("bf16", bf16_bits.view(np.uint8).reshape(2, 16), raw_dtype=Q.BF16)
    quants = {}
    for name, qtype, shape in [("q8", Q.Q8_0, (3, 64)), ("q4", Q.Q4_0, (2, 32))]:
        quants[name] = (qtype, gguf.quants.quantize(rng.standard_normal(shape, dtype=np.float32), qtype))
    # The gguf package does not quantize K-quants: blocks of random bytes, two rows of one.
    quants["q6k"] = (Q.Q6_K, rng.integers(0, 256, (2, 210), dtype=np.uint8))
    for name, (qtype, blocks) in quants.items():
        w.add_tensor(name, blocks, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    archives = {}
    for mode in ["fast", "best"]:
        archives[mode] = d / f"m.{mode}.sc"
        report = sc.compress_file(d / "m.gguf", archives[mode], mode=mode)
        assert report["kind"] == "gguf" and not report["safetensors"]
    return {"dir": d, "file": d / "m.gguf", "archives": archives, "floats": floats,
            "bf16": bf16_bits, "quants": quants}


@pytest.mark.parametrize("mode", ["fast", "best"])
def test_gguf_archives_restore_byte_for_byte(model, mode, tmp_path):
    out = tmp_path / "back.gguf"
    sc.decompress_file(model["archives"][mode], out, check_md5=True)
    assert out.read_bytes() == model["file"].read_bytes()
    assert sc.verify(model["archives"][mode])["original_len"] == model["file"].stat().st_size


@pytest.mark.parametrize("mode", ["fast", "best"])
def test_safe_open_reads_gguf_tensors(model, mode):
    reader = gguf.GGUFReader(model["file"])
    with sc.safe_open(model["archives"][mode], framework="np") as f:
        assert f.keys() == sorted(t.name for t in reader.tensors)
        assert f.offset_keys() == [t.name for t in reader.tensors]
        assert f.info()["kind"] == "gguf"
        for name, a in model["floats"].items():
            got = f.get_tensor(name)
            assert got.dtype == a.dtype and got.shape == a.shape
            assert np.array_equal(got, a)
            assert f.get_ggml_type(name) == ("F32" if a.dtype == np.float32 else "F16")
        bf16 = f.get_tensor("bf16")
        assert str(bf16.dtype) == "bfloat16" and bf16.shape == (2, 8)
        assert np.array_equal(bf16.view(np.uint16), model["bf16"])
        for name, (qtype, blocks) in model["quants"].items():
            got = f.get_tensor(name)
            assert got.dtype == np.uint8 and got.shape == blocks.shape
            assert np.array_equal(got, blocks)
            assert f.get_ggml_type(name) == qtype.name
            s = f.get_slice(name)
            assert s.get_dtype() == qtype.name
            assert np.array_equal(s[1:], blocks[1:])
        meta = f.metadata()
        assert meta["t.str"] == "tëxt" and meta["t.u64"] == str(2**64 - 1)
        assert json.loads(meta["t.strs"]) == ["<s>", "", "ü"]
        assert meta["general.alignment"] == "64"
    with sc.safe_open(model["archives"][mode], framework="pt") as f:
        t = f.get_tensor("f16")
        assert t.dtype == torch.float16 and tuple(t.shape) == (3, 2, 5)
        assert torch.equal(t, torch.from_numpy(model["floats"]["f16"]))
        assert f.get_tensor("q8").dtype == torch.uint8


def test_safetensors_archives_have_no_ggml_types(sample_archive):
    with sc.safe_open(sample_archive, framework="np") as f:
        assert f.get_ggml_type(f.keys()[0]) is None
        assert f.info()["kind"] == "safetensors"


def test_sc_extract_output_reads_back_with_the_gguf_package(model, tmp_path):
    out = tmp_path / "x.gguf"
    run_sc("extract", "-q", model["archives"]["best"], "-t", "q6k", "-t", "f16", "-t", "bf16", "-o", out)
    orig, got = gguf.GGUFReader(model["file"]), gguf.GGUFReader(out)
    assert [t.name for t in got.tensors] == ["f16", "bf16", "q6k"]
    for t in got.tensors:
        o = next(x for x in orig.tensors if x.name == t.name)
        assert t.tensor_type == o.tensor_type and list(t.shape) == list(o.shape)
        assert np.array_equal(t.data, o.data)
    assert np.array_equal(got.tensors[0].data, model["floats"]["f16"])
    skip = {"GGUF.tensor_count"}
    for name, field in orig.fields.items():
        if name not in skip:
            assert got.fields[name].types == field.types, name
            assert got.fields[name].contents() == field.contents(), name
    assert got.fields["GGUF.tensor_count"].contents() == 3
    assert got.alignment == 64


def test_metadata_of_a_metadata_bomb_stays_a_small_multiple_of_the_header(tmp_path):
    """A GGUF array of two million booleans (2 MB of header) read as metadata() costs a small
    multiple of the header, not ~62 times it; its text is the JSON array, whole."""
    import subprocess
    import sys

    n = 2_000_000
    w = gguf.GGUFWriter(tmp_path / "bomb.gguf", "llama")
    w.add_array("t.bools", np.ones(n, dtype=np.bool_).tolist())
    w.add_tensor("x", np.zeros((4, 8), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    archive = tmp_path / "bomb.gguf.sc"
    sc.compress_file(tmp_path / "bomb.gguf", archive)
    probe = (
        "import resource, sys, sc\n"
        "f = sc.safe_open(sys.argv[1], framework='np')\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "m = f.metadata()\n"
        "after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "assert m['t.bools'].count('true') == int(sys.argv[2]), len(m['t.bools'])\n"
        "print((after - before) * 1024)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe, str(archive), str(n)],
                         capture_output=True, text=True, check=True)
    grown = int(out.stdout.strip())
    # The text is five bytes a value ("true,"): kept once in Rust and once as Python's str.
    assert grown < 24 * n, f"metadata() grew the peak by {grown} bytes for a {n}-byte array"


LADDER_SEED = ROOT / "testdata" / "ladder-seed.gguf"
LADDER_QUANT = ROOT / "testdata" / "ladder-q4_k.gguf"


def test_a_quant_coded_against_its_seed_restores_and_reads_one_tensor(tmp_path):
    """A Q4_K quant coded against its F16 seed (derived tensors): restored with the seed given
    as a file or as its archive, one tensor read alone, and a clear error without the seed."""
    archive = tmp_path / "q.sc"
    report = sc.compress_file(LADDER_QUANT, archive, base=LADDER_SEED)
    assert report["archive_len"] * 5 < LADDER_QUANT.stat().st_size
    seed_archive = tmp_path / "seed.gguf.sc"
    sc.compress_file(LADDER_SEED, seed_archive)
    for seed in [LADDER_SEED, seed_archive]:
        out = tmp_path / "q.gguf"
        sc.decompress_file(archive, out, base=seed, overwrite=True)
        assert out.read_bytes() == LADDER_QUANT.read_bytes()
    reader = gguf.GGUFReader(LADDER_QUANT)
    want = {t.name: np.asarray(t.data).tobytes() for t in reader.tensors}
    with sc.safe_open(archive, framework="np", base=LADDER_SEED) as f:
        got = f.get_tensor("blk.0.attn.weight")
        assert got.tobytes() == want["blk.0.attn.weight"]
    with pytest.raises(sc.ScError, match="base=") as e:
        sc.decompress_file(archive, tmp_path / "none.gguf")
    assert "\n" not in str(e.value)
    assert not (tmp_path / "none.gguf").exists()


def test_verify_derives_says_tensor_by_tensor():
    report = sc.verify_derives(LADDER_SEED, LADDER_QUANT)
    by_name = {t["name"]: t for t in report}
    assert by_name["token_embd.weight"]["derives"]
    assert by_name["blk.0.norm.weight"]["derives"]
    attn = by_name["blk.0.attn.weight"]
    assert attn["dtype"] == "Q4_K" and not attn["derives"]
    assert 0 < attn["exact"] < attn["blocks"] == 48
    with pytest.raises(sc.ScError):
        sc.verify_derives(LADDER_SEED, LADDER_SEED.parent / "tiny.safetensors")
