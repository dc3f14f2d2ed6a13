"""compress_file, decompress_file and verify: the command line's encode, decode and verify."""

from __future__ import annotations

import hashlib

import pytest

import sc

from conftest import run_sc


@pytest.mark.parametrize("mode", ["fast", "best"])
def test_round_trip_matches_the_command_line(sample, tmp_path, mode):
    archive = tmp_path / "s.sc"
    report = sc.compress_file(sample, archive, mode=mode, block_size=256 << 10, threads=2)
    assert report["original_len"] == sample.stat().st_size and report["safetensors"]
    assert report["archive_len"] == archive.stat().st_size < 0.9 * sample.stat().st_size
    cli = tmp_path / "cli.sc"
    run_sc("encode", "-q", "-m", mode, "-b", "256K", sample, "-o", cli)
    assert cli.read_bytes() == archive.read_bytes()
    restored = tmp_path / "s.safetensors"
    sc.decompress_file(archive, restored, threads=1, check_md5=True)
    assert restored.read_bytes() == sample.read_bytes()
    v = sc.verify(archive)
    assert v["md5"] == hashlib.md5(sample.read_bytes()).hexdigest()
    assert v["recorded_md5"] == (v["md5"] if mode == "best" else None)
    run_sc("verify", "-q", archive, sample)


def test_existing_outputs_are_kept(sample, tmp_path):
    archive = tmp_path / "s.sc"
    archive.write_bytes(b"precious")
    with pytest.raises(FileExistsError):
        sc.compress_file(sample, archive)
    assert archive.read_bytes() == b"precious"
    sc.compress_file(sample, archive, overwrite=True)
    out = tmp_path / "out"
    out.write_bytes(b"precious")
    with pytest.raises(FileExistsError):
        sc.decompress_file(archive, out)
    assert out.read_bytes() == b"precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "s.sc"]


def test_failed_decode_leaves_no_output(sample, tmp_path):
    archive = tmp_path / "s.sc"
    sc.compress_file(sample, archive)
    data = bytearray(archive.read_bytes())
    data[len(data) // 2] ^= 0xFF
    archive.write_bytes(bytes(data))
    with pytest.raises(sc.ScError):
        sc.decompress_file(archive, tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.sc"]


def test_md5_is_checked(sample, tmp_path):
    archive = tmp_path / "s.sc"
    sc.compress_file(sample, archive, md5=True)
    assert sc.verify(archive)["recorded_md5"] == hashlib.md5(sample.read_bytes()).hexdigest()


def test_invalid_arguments(sample, tmp_path):
    with pytest.raises(sc.ScError, match="mode"):
        sc.compress_file(sample, tmp_path / "a.sc", mode="medium")
    with pytest.raises(sc.ScError, match="block"):
        sc.compress_file(sample, tmp_path / "a.sc", block_size=1000)
    assert list(tmp_path.iterdir()) == []
