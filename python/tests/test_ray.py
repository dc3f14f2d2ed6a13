"""examples/ray_compress_bucket.py on a local Ray cluster of two worker nodes, against
SeaweedFS: every checkpoint under one bucket prefix compressed into another, one task per file."""

from __future__ import annotations

import importlib.util
import sys

import pytest
import torch

import sc
from conftest import ROOT

ray = pytest.importorskip("ray")


def load_example(monkeypatch):
    spec = importlib.util.spec_from_file_location(
        "ray_compress_bucket", ROOT / "examples" / "ray_compress_bucket.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    # The workers cannot import the example by name: its task goes to them by value.
    ray.cloudpickle.register_pickle_by_value(module)
    return module


@pytest.fixture
def cluster():
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    workers = [c.add_node(num_cpus=1) for _ in range(2)]
    ray.init(address=c.address, log_to_driver=False, include_dashboard=False)
    yield {w.node_id for w in workers}
    ray.shutdown()
    c.shutdown()


def test_ray_example_compresses_every_checkpoint_of_a_prefix(s3_env, cluster, tmp_path, monkeypatch):
    weed = s3_env
    weed.make_bucket("ray-src")
    weed.make_bucket("ray-dst")
    import safetensors.torch

    originals = {}
    for k, name in enumerate(["a.safetensors", "b.safetensors", "deep/c.safetensors", "d.safetensors"]):
        g = torch.Generator().manual_seed(k)
        data = safetensors.torch.save({"w": torch.randn(300, 200, generator=g).to(torch.bfloat16),
                                       "b": torch.randn(200, generator=g)})
        originals[name] = data
        weed.put("ray-src", f"ckpts/{name}", data)
    weed.put("ray-src", "ckpts/config.json", b"{}")

    example = load_example(monkeypatch)
    results = example.compress_bucket("s3://ray-src/ckpts/", "s3://ray-dst/out/")

    assert [r.get("error") for r in results] == [None] * 4
    assert {r["node"] for r in results} <= cluster
    assert weed.keys("ray-dst", "out/") == sorted(f"out/{n}.sc" for n in originals)
    for name, data in originals.items():
        out = tmp_path / name.replace("/", "_")
        sc.decompress_file(f"s3://ray-dst/out/{name}.sc", out)
        assert out.read_bytes() == data
