"""Archives at http:// and s3:// locations, through real servers on 127.0.0.1: nginx serving a
folder and SeaweedFS's S3 gateway (conftest.py starts them; they are skipped where missing
unless SC_REQUIRE_SERVERS=1)."""

from __future__ import annotations

import os
import shutil
import threading
import time

import numpy as np
import pytest
import safetensors.numpy
import safetensors.torch
import torch

import sc
import sc.numpy
import sc.torch
import servers
from conftest import SAMPLE

BUCKET = "sc-remote"


@pytest.fixture(scope="module")
def sample_sc(tmp_path_factory):
    """The sample encoded, with 64 KiB blocks so that it has many."""
    out = tmp_path_factory.mktemp("remote") / "sample.sc"
    sc.compress_file(SAMPLE, out, block_size=64 << 10)
    return out


@pytest.fixture(scope="module")
def bucket(weed):
    weed.make_bucket(BUCKET)
    return BUCKET


@pytest.fixture(params=["nginx", "s3"])
def location(request, sample_sc, web_root, s3_env, bucket):
    """The sample's archive at a URL of each server."""
    if request.param == "nginx":
        nginx = request.getfixturevalue("nginx")
        shutil.copy(sample_sc, web_root / "sample.sc")
        return f"{nginx.url}/sample.sc"
    s3_env.put(bucket, "models/sample.sc", sample_sc.read_bytes())
    return f"s3://{bucket}/models/sample.sc"


@pytest.mark.parametrize("ours, theirs, equal", [
    (sc.torch, safetensors.torch, torch.equal),
    (sc.numpy, safetensors.numpy, np.array_equal),
], ids=["torch", "numpy"])
def test_load_file_is_exact(location, ours, theirs, equal):
    expected = theirs.load_file(SAMPLE)
    got = ours.load_file(location)
    assert sorted(got) == sorted(expected)
    for k in expected:
        assert got[k].dtype == expected[k].dtype and equal(got[k], expected[k]), k


def test_safe_open_reads_tensors_and_reports_its_requests(location):
    expected = safetensors.torch.load_file(SAMPLE)
    with sc.safe_open(location, framework="pt") as f:
        assert f.keys() == sorted(expected)
        opened = f.stats()
        assert opened["requests"] >= 1 and opened["bytes_fetched"] > 0
        name = max(expected, key=lambda k: expected[k].numel())
        assert torch.equal(f.get_tensor(name), expected[name])
        s = f.stats()
        assert s["requests"] > opened["requests"]
        assert s["bytes_fetched"] > opened["bytes_fetched"]
        assert s["network_wait_s"] >= 0 and s["decode_s"] >= 0


def test_decompress_file_restores_the_file(location, tmp_path):
    out = tmp_path / "sample.safetensors"
    report = sc.decompress_file(location, out)
    assert out.read_bytes() == SAMPLE.read_bytes()
    assert report["original_len"] == SAMPLE.stat().st_size
    assert sc.verify(location)["original_len"] == SAMPLE.stat().st_size


def test_stats_count_every_remote_read(location):
    sc.stats(reset=True)
    sc.torch.load_file(location)
    s = sc.stats(reset=True)
    assert s["requests"] >= 2
    assert s["bytes_fetched"] >= os.path.getsize(SAMPLE) // 2
    assert sc.stats()["requests"] == 0


def test_compress_file_uploads_the_archive_a_local_one_would_be(s3_env, bucket, sample_sc, tmp_path):
    url = f"s3://{bucket}/uploads/sample.sc"
    report = sc.compress_file(SAMPLE, url, block_size=64 << 10)
    assert s3_env.get(bucket, "uploads/sample.sc") == sample_sc.read_bytes()
    assert report["archive_len"] == sample_sc.stat().st_size
    with pytest.raises(FileExistsError, match="uploads/sample.sc"):
        sc.compress_file(SAMPLE, url)
    sc.compress_file(SAMPLE, url, level=6, overwrite=True)
    out = tmp_path / "back.safetensors"
    sc.decompress_file(url, out)
    assert out.read_bytes() == SAMPLE.read_bytes()


def test_compress_file_from_a_remote_file(s3_env, bucket, sample_sc, tmp_path):
    s3_env.put(bucket, "plain/sample.safetensors", SAMPLE.read_bytes())
    out = tmp_path / "sample.sc"
    sc.compress_file(f"s3://{bucket}/plain/sample.safetensors", out, block_size=64 << 10)
    assert out.read_bytes() == sample_sc.read_bytes()


def test_save_file_to_s3(s3_env, bucket):
    tensors = {"a": torch.arange(1000, dtype=torch.float32), "b": torch.ones(3, 5, dtype=torch.bfloat16)}
    url = f"s3://{bucket}/saved/t.sc"
    sc.torch.save_file(tensors, url)
    got = sc.torch.load_file(url)
    assert all(torch.equal(got[k], tensors[k]) for k in tensors)


def test_list_objects(s3_env, bucket):
    s3_env.put(bucket, "listed/a.sc", b"1")
    s3_env.put(bucket, "listed/sub/b.sc", b"22")
    assert sc.list_objects(f"s3://{bucket}/listed/") == [
        (f"s3://{bucket}/listed/a.sc", 1), (f"s3://{bucket}/listed/sub/b.sc", 2)]


@pytest.mark.parametrize("shard", [None, "30KB"])
def test_transformers_from_pretrained_of_a_remote_folder(shard, nginx, web_root, s3_env, bucket, tmp_path):
    import transformers

    import sc.transformers
    from conftest import run_sc
    from test_transformers import assert_same_state, tiny_bert

    model = tiny_bert()
    original = tmp_path / "original"
    model.save_pretrained(original, **({"max_shard_size": shard} if shard else {}))
    encoded = tmp_path / "encoded"
    run_sc("encode", "-q", original, "-o", encoded)
    folder = f"model-{shard or 'single'}"
    shutil.copytree(encoded, web_root / folder)
    for f in sorted(encoded.iterdir()):
        s3_env.put(bucket, f"{folder}/{f.name}", f.read_bytes())
    for url in (f"{nginx.url}/{folder}/", f"s3://{bucket}/{folder}"):
        loaded = sc.transformers.from_pretrained(transformers.BertForMaskedLM, url)
        assert_same_state(model, loaded)
        assert loaded.config.name_or_path == url


def test_compress_folder_to_s3_and_back(s3_env, bucket, tmp_path):
    import transformers

    import sc.transformers
    from test_transformers import assert_same_state, tiny_bert

    model = tiny_bert()
    original = tmp_path / "original"
    model.save_pretrained(original, max_shard_size="30KB")
    prefix = f"s3://{bucket}/folder-upload/"
    sc.compress_folder(original, prefix)
    assert_same_state(model, sc.transformers.from_pretrained(transformers.BertForMaskedLM, prefix))
    back = tmp_path / "back"
    sc.decompress_folder(prefix, back)
    for f in sorted(original.iterdir()):
        assert (back / f.name).read_bytes() == f.read_bytes(), f.name


def test_transformers_from_pretrained_of_a_missing_folder(nginx):
    import transformers

    import sc.transformers

    url = f"{nginx.url}/no-such-model/"
    with pytest.raises(FileNotFoundError, match=r"\(404\).*no-such-model"):
        sc.transformers.from_pretrained(transformers.BertForMaskedLM, url)


# Errors


def one_line(e: BaseException) -> str:
    text = str(e)
    assert "\n" not in text
    return text


def test_missing_object_raises_file_not_found_naming_it(nginx, s3_env, bucket):
    for url in (f"{nginx.url}/no/such.sc", f"s3://{bucket}/no/such.sc"):
        with pytest.raises(FileNotFoundError) as e:
            sc.torch.load_file(url)
        assert url in one_line(e.value) and "(404)" in str(e.value)
        with pytest.raises(FileNotFoundError, match=r"\(404\)"):
            sc.safe_open(url)


def test_forbidden_raises_permission_error_naming_it(nginx):
    url = f"{nginx.url}/forbidden/m.sc"
    with pytest.raises(PermissionError) as e:
        sc.torch.load_file(url)
    assert url in one_line(e.value) and "(403)" in str(e.value)


def test_not_an_archive_names_the_location(nginx, web_root):
    (web_root / "junk.sc").write_bytes(b"not an archive" * 100)
    url = f"{nginx.url}/junk.sc"
    with pytest.raises(sc.ScError) as e:
        sc.torch.load_file(url)
    assert one_line(e.value).startswith(url)


# Laziness: one tensor of a 200+ MB archive


@pytest.fixture(scope="module")
def big_archive(nginx, web_root):
    """A 200+ MB FAST archive of random BF16 tensors (which hardly compress), one of them a
    1.5 MiB tensor in the middle; 1 MiB blocks."""
    g = torch.Generator().manual_seed(3)
    tensors = {}
    for k in range(24):
        tensors[f"layer{k:02d}.weight"] = torch.randn(4096, 1700, generator=g).to(torch.bfloat16)
        if k == 12:
            tensors["target"] = torch.randn(1024, 768, generator=g).to(torch.bfloat16)
    path = web_root / "big.sc"
    sc.torch.save_file(tensors, path, mode="fast")
    assert path.stat().st_size > 200e6
    return f"{nginx.url}/big.sc", tensors["target"], path.stat().st_size


def test_get_tensor_fetches_only_its_blocks(nginx, big_archive):
    url, target, archive_len = big_archive
    nginx.clear_log()
    with sc.safe_open(url) as f:
        t = f.get_tensor("target")
        s = f.stats()
        block = f.info()["block_size"]
    assert torch.equal(t, target)
    # 1.5 MiB spans 2 blocks of 1 MiB, 3 where it does not start on a block boundary.
    assert s["blocks_decoded"] <= 3
    # The archive's first and last 256 KiB (header, index, trailer) and those blocks, in at
    # most 4 requests.
    assert s["requests"] <= 4
    fetched = s["bytes_fetched"]
    assert fetched <= 3 * block + (512 << 10), (fetched, archive_len)
    log = nginx.requests()
    assert all(r[1] == "/big.sc" and r[2] == "206" for r in log), log
    assert len(log) == s["requests"]
    assert sum(int(r[4]) for r in log) == fetched


# Faults


def test_server_errors_are_retried(nginx, web_root, sample_sc):
    shutil.copy(sample_sc, web_root / "sample.sc")
    proxy = servers.FailingProxy(nginx.port, failures=3).start()
    try:
        got = sc.torch.load_file(f"{proxy.url}/sample.sc")
    finally:
        proxy.stop()
    assert proxy.seen > 3
    expected = safetensors.torch.load_file(SAMPLE)
    assert all(torch.equal(got[k], expected[k]) for k in expected)


@pytest.fixture
def slow_nginx(tmp_path, big_archive, web_root):
    """A second nginx serving the same folder at 2 MB/s per connection."""
    server = servers.Nginx(web_root, tmp_path / "slow", limit_rate=2_000_000).start()
    yield server
    server.stop()


@pytest.fixture
def quick_failure():
    """Remote options that give up within seconds."""
    before = sc.remote_options()
    sc.remote_options(retries=2, retry_timeout=2.0, timeout=5.0)
    yield
    sc.remote_options(**before)


def _in_thread(f):
    """Runs `f` in a thread; returns the thread and a dict that gets its result or error."""
    out: dict = {}

    def go():
        try:
            out["result"] = f()
        except BaseException as e:  # noqa: BLE001 (handed to the test)
            out["error"] = e

    t = threading.Thread(target=go)
    t.start()
    return t, out


def test_server_killed_mid_transfer_leaves_no_output(slow_nginx, quick_failure, tmp_path):
    dst = tmp_path / "out" / "big.safetensors"
    dst.parent.mkdir()
    t, out = _in_thread(lambda: sc.decompress_file(f"{slow_nginx.url}/big.sc", dst))
    time.sleep(1.0)
    slow_nginx.kill()
    t.join(timeout=120)
    assert not t.is_alive()
    assert isinstance(out.get("error"), (sc.ScError, OSError)), out
    assert slow_nginx.url.split("//")[1] in one_line(out["error"])
    assert os.listdir(dst.parent) == []


def test_upload_cut_short_leaves_nothing(big_archive, web_root, tmp_path, monkeypatch, quick_failure):
    weed = servers.Weed(tmp_path / "weed").start()
    try:
        for k, v in weed.env().items():
            monkeypatch.setenv(k, v)
        weed.make_bucket("cut")
        # Encoding 200+ MB takes seconds: the upload is under way when the store dies.
        t, out = _in_thread(lambda: sc.compress_file(web_root / "big.sc", "s3://cut/big.sc.sc"))
        time.sleep(1.0)
        weed.kill()
        t.join(timeout=300)
        assert isinstance(out.get("error"), (sc.ScError, OSError)), out
        assert "s3://cut/big.sc.sc" in one_line(out["error"])
        weed.start()
        assert weed.keys("cut") == []
    finally:
        weed.stop()


def _get_tensor(url: str, name: str) -> torch.Tensor:
    with sc.safe_open(url) as f:
        return f.get_tensor(name)


def test_server_restarted_mid_transfer_resumes(slow_nginx, big_archive):
    # A 14 MB tensor at 2 MB/s per connection: still arriving when the server dies.
    name = "layer03.weight"
    expected = _get_tensor(big_archive[0], name)
    t, out = _in_thread(lambda: _get_tensor(f"{slow_nginx.url}/big.sc", name))
    time.sleep(0.5)
    slow_nginx.kill()
    time.sleep(0.5)
    slow_nginx.start()
    t.join(timeout=300)
    assert "error" not in out, out.get("error")
    assert torch.equal(out["result"], expected)


def test_the_gil_is_released_while_fetching(slow_nginx):
    t, out = _in_thread(lambda: _get_tensor(f"{slow_nginx.url}/big.sc", "layer05.weight"))
    # This thread runs Python while the other waits on the network (14 MB at 4 x 2 MB/s, near
    # two seconds): the GIL is free. Held, this loop would not turn until the load returned.
    ticks = 0
    while t.is_alive():
        time.sleep(0.01)
        ticks += 1
    assert ticks >= 10
    t.join()
    assert "error" not in out, out.get("error")


# An object replaced while it is read, timeouts, credentials in locations


def _twins(tmp_path):
    """Two archives of one layout and length whose blocks differ: random bytes, which every
    block stores as they are."""
    paths = []
    for seed in (1, 2):
        rng = np.random.default_rng(seed)
        tensors = {f"layer{k}": rng.integers(0, 256, size=3 << 20, dtype=np.uint8) for k in range(4)}
        path = tmp_path / f"twin{seed}.sc"
        sc.numpy.save_file(tensors, path, mode="fast")
        paths.append(path)
    assert paths[0].stat().st_size == paths[1].stat().st_size
    return paths


def test_safe_open_of_an_object_replaced_meanwhile_raises_naming_it(nginx, web_root, tmp_path):
    first, second = _twins(tmp_path)
    served = web_root / "twin.sc"
    shutil.copy(first, served)
    url = f"{nginx.url}/twin.sc"
    with sc.safe_open(url, framework="np") as f:
        f.get_tensor("layer0")
        # nginx's ETag is the file's length and date (in seconds): the copy is dated later.
        was = served.stat().st_mtime
        shutil.copy(second, served)
        os.utime(served, (was + 60, was + 60))
        with pytest.raises(sc.ScError) as e:
            f.get_tensor("layer3")
    text = one_line(e.value)
    assert text.startswith(f"{url}: ") and "changed while it was read" in text, text
    assert text.count(url) == 1, text


def test_a_silent_server_times_out_saying_which(quick_failure):
    import socket

    # Connections are taken in by the kernel and never answered.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/m.sc"
        sc.remote_options(timeout=1.0, retry_timeout=1.5)
        start = time.monotonic()
        with pytest.raises(sc.ScError) as e:
            sc.safe_open(url)
        assert time.monotonic() - start < 30
    text = one_line(e.value)
    assert text.startswith(f"{url}: timed out") and "request timeout (1 s" in text, text


def test_a_password_in_a_location_is_refused_and_never_shown():
    with pytest.raises(sc.ScError) as e:
        sc.safe_open("http://me:s3cret@127.0.0.1:9/m.sc")
    text = one_line(e.value)
    assert "s3cret" not in text and text.startswith("http://me:***@127.0.0.1:9/m.sc: "), text
