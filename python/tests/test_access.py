"""Random access: get_tensor and get_slice decode only the blocks that hold what they return."""

from __future__ import annotations

import pytest
import torch

import sc
import sc.torch

BLOCK = 64 << 10


@pytest.fixture(scope="module")
def many_blocks(tmp_path_factory):
    """A 6 MB archive of 64 KiB blocks: 12 tensors, one of them 1.5 MiB."""
    g = torch.Generator().manual_seed(5)
    tensors = {f"layer{k:02d}.weight": torch.randn(256, 700, generator=g).to(torch.bfloat16) for k in range(11)}
    tensors["target"] = torch.randn(1024, 768, generator=g).to(torch.bfloat16)  # 1.5 MiB
    path = tmp_path_factory.mktemp("access") / "many.sc"
    sc.torch.save_file(tensors, path, block_size=BLOCK)
    return path, tensors


def test_get_tensor_decodes_only_its_blocks(many_blocks):
    path, tensors = many_blocks
    with sc.safe_open(path) as f:
        assert f.stats()["blocks"] > 80
        assert f.stats()["blocks_decoded"] == 0
        t = f.get_tensor("target")
        assert torch.equal(t, tensors["target"])
        s = f.stats()
        # 1.5 MiB spans 24 blocks of 64 KiB, 25 where it does not start on a block boundary.
        assert s["blocks_decoded"] <= 25
        assert s["bytes_decoded"] <= 25 * BLOCK
        assert s["block_bytes_read"] < 1.5 * 2**20


def test_get_slice_decodes_only_the_rows_blocks(many_blocks):
    path, tensors = many_blocks
    with sc.safe_open(path) as f:
        rows = f.get_slice("target")[100:140]  # 40 rows of 1536 bytes: one or two blocks
        assert torch.equal(rows, tensors["target"][100:140])
        assert 1 <= f.stats()["blocks_decoded"] <= 2
        before = f.stats()["blocks_decoded"]
        f.get_slice("target")[0]
        assert f.stats()["blocks_decoded"] - before <= 1


def test_load_file_decodes_every_block_once(many_blocks):
    path, tensors = many_blocks
    with sc.safe_open(path) as f:
        for name in f.keys():
            f.get_tensor(name)
        one_by_one = f.stats()
    assert one_by_one["blocks_decoded"] <= one_by_one["blocks"] + len(tensors)
    # load_file's way: every tensor in one pass, each block decoded once.
    archive = sc._core.Archive(path)
    got = archive.load_all(sc.torch.TORCH)
    s = archive.stats()
    archive.close()
    assert s["blocks_decoded"] == s["blocks"], s
    assert s["bytes_decoded"] == sum(t.nbytes for t in tensors.values()), s
    for k, t in tensors.items():
        assert torch.equal(got[k], t)
    assert sc.torch.load_file(path).keys() == got.keys()
