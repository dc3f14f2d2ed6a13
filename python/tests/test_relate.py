"""Bases found by measurement: `compress_file(..., base_from=[...])` takes the candidate that
codes the file smallest, and `compress_folder(..., base="auto")` codes each file of a folder
against its nearest relative there; `decompress_folder` restores each base before the
archives that need it."""

from __future__ import annotations

import numpy as np
import safetensors.numpy

import sc


def checkpoints(folder, seed=7):
    """A base, a fine-tune of it (low mantissa bits changed) and an unrelated checkpoint,
    written in `folder` as safetensors files; their paths."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    base = {f"layer.{i}.weight": rng.standard_normal((128, 256), dtype=np.float32) for i in range(3)}
    tune = {}
    for name, t in base.items():
        bits = t.view(np.uint32) ^ rng.integers(0, 256, t.shape, dtype=np.uint32)
        tune[name] = bits.view(np.float32)
    other = {n: rng.standard_normal(t.shape, dtype=np.float32) for n, t in base.items()}
    paths = {}
    for name, tensors in (("base", base), ("tune", tune), ("other", other)):
        paths[name] = folder / f"{name}.safetensors"
        safetensors.numpy.save_file(tensors, paths[name])
    return paths


def recorded_base(archive):
    with sc.safe_open(archive) as f:
        return f.info()["base"]


def test_compress_file_base_from_takes_the_nearest(tmp_path):
    p = checkpoints(tmp_path / "in")
    out = tmp_path / "tune.sc"
    report = sc.compress_file(p["tune"], out, base_from=[p["other"], p["base"]])
    assert report["based_tensors"] == 3
    assert recorded_base(out) == "base.safetensors"
    back = tmp_path / "tune.safetensors"
    sc.decompress_file(out, back, base=p["base"])
    assert back.read_bytes() == p["tune"].read_bytes()
    # No candidate related: coded alone.
    alone = tmp_path / "alone.sc"
    assert sc.compress_file(p["tune"], alone, base_from=[p["other"]])["based_tensors"] == 0
    assert recorded_base(alone) is None
    assert out.stat().st_size < alone.stat().st_size * 0.8


def test_compress_folder_base_auto_round_trips(tmp_path):
    p = checkpoints(tmp_path / "model")
    (tmp_path / "model" / "config.json").write_text("{}")
    out = tmp_path / "packed"
    sc.compress_folder(tmp_path / "model", out, base="auto")
    tune, base = out / "tune.safetensors.sc", out / "base.safetensors.sc"
    # One of the pair is coded against the other; the unrelated file alone.
    assert sorted(filter(None, [recorded_base(tune), recorded_base(base)])) in (
        ["base.safetensors"],
        ["tune.safetensors"],
    )
    assert recorded_base(out / "other.safetensors.sc") is None
    # Decoded without a base: each base is restored first and serves the archives after it.
    back = tmp_path / "back"
    sc.decompress_folder(out, back)
    for name in ("base", "tune", "other"):
        assert (back / f"{name}.safetensors").read_bytes() == p[name].read_bytes()
    assert (back / "config.json").read_text() == "{}"
