"""Bad archives raise sc.ScError with the command line's message; nothing aborts the
interpreter, whatever the bytes."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap

import pytest
import torch

import sc
import sc.numpy
import sc.torch

from conftest import cli_message


def every_way_to_read(path):
    """Each way the package reads an archive, as (label, call)."""
    def safe_open_all():
        with sc.safe_open(path) as f:
            for k in f.keys():
                f.get_tensor(k)

    return [
        ("torch.load_file", lambda: sc.torch.load_file(path)),
        ("numpy.load_file", lambda: sc.numpy.load_file(path)),
        ("torch.load", lambda: sc.torch.load(open(path, "rb").read())),
        ("safe_open", safe_open_all),
        ("verify", lambda: sc.verify(path)),
        ("decompress_file", lambda: sc.decompress_file(path, str(path) + ".out", overwrite=True)),
    ]


def test_missing_file_raises_file_not_found(tmp_path):
    missing = tmp_path / "missing.sc"
    for label, call in every_way_to_read(missing):
        if label == "torch.load":
            continue
        with pytest.raises(FileNotFoundError) as err:
            call()
        assert err.value.filename == str(missing), label
    with pytest.raises(FileNotFoundError):
        sc.compress_file(missing, tmp_path / "x.sc")


def test_a_directory_raises_an_os_error(tmp_path):
    with pytest.raises(IsADirectoryError):
        sc.torch.load_file(tmp_path)


@pytest.mark.parametrize("content", [b"", b"x", b"not an archive at all" * 100])
def test_not_an_archive(tmp_path, content):
    path = tmp_path / "junk.sc"
    path.write_bytes(content)
    for label, call in every_way_to_read(path):
        with pytest.raises(sc.ScError):
            call()
    with pytest.raises(ValueError):  # ScError is a ValueError
        sc.torch.load_file(path)


def test_the_message_is_the_command_lines(sample_archive, tmp_path):
    data = bytearray(sample_archive.read_bytes())
    # A byte in the middle of the blocks: a corrupt block, named by its number.
    data[len(data) // 2] ^= 0x40
    bad = tmp_path / "bad.sc"
    bad.write_bytes(bytes(data))
    cli = cli_message("verify", "-q", bad)
    with pytest.raises(sc.ScError) as err:
        sc.verify(bad)
    message = str(err.value)
    assert message.startswith(f"{bad}: ")
    library_part = message[len(f"{bad}: "):]
    assert "block" in library_part
    assert cli.endswith(library_part), (cli, message)

    # Loading reads through the index, as `sc list` and `sc extract` do; verify decodes the
    # archive from its start, as `sc verify` does. A truncated archive fails in each its way.
    truncated = tmp_path / "truncated.sc"
    truncated.write_bytes(sample_archive.read_bytes()[:-5])
    for cli_args, call in [(("verify", "-q"), lambda: sc.verify(truncated)),
                           (("list",), lambda: sc.torch.load_file(truncated))]:
        cli = cli_message(*cli_args, truncated)
        with pytest.raises(sc.ScError) as err:
            call()
        library_part = str(err.value)[len(f"{truncated}: "):]
        assert str(err.value).startswith(f"{truncated}: ") and "truncated" in library_part
        assert cli.endswith(library_part), (cli, str(err.value))


def test_truncated_archives_raise(sample_archive, tmp_path):
    data = sample_archive.read_bytes()
    path = tmp_path / "cut.sc"
    cuts = sorted({0, 1, 7, 8, 20, 100, 1000, len(data) // 3, len(data) // 2, len(data) - 100,
                   len(data) - 17, len(data) - 1})
    for n in cuts:
        path.write_bytes(data[:n])
        for label, call in every_way_to_read(path):
            with pytest.raises(sc.ScError):
                call()


def test_corrupt_archives_raise_or_load_checked_data(sample_archive, sample, tmp_path):
    # Flipped bytes anywhere: header, block records, payloads, index, trailer. Every read
    # either raises ScError or (a flip in JSON whitespace, say) returns checked data.
    data = sample_archive.read_bytes()
    rng = random.Random(7)
    path = tmp_path / "flip.sc"
    positions = [rng.randrange(len(data)) for _ in range(40)] + list(range(0, 64, 3))
    positions += [len(data) - k for k in range(1, 80, 4)]
    raised = 0
    for pos in positions:
        bad = bytearray(data)
        bad[pos] ^= 1 << rng.randrange(8)
        path.write_bytes(bytes(bad))
        try:
            sc.verify(path)
        except sc.ScError:
            raised += 1
            for label, call in every_way_to_read(path):
                if label in ("safe_open",):
                    continue
                with pytest.raises(sc.ScError):
                    call()
    assert raised >= len(positions) * 3 // 4


def test_random_bytes_never_abort_the_interpreter(sample_archive, tmp_path):
    # In a child process, so that an abort would show as its exit status rather than kill the
    # test run: many corruptions, each through every reader.
    script = textwrap.dedent(
        f"""
        import random, sc, sc.torch, sc.numpy
        data = open({str(sample_archive)!r}, "rb").read()
        rng = random.Random(11)
        path = {str(tmp_path / "fuzz.sc")!r}
        outcomes = {{"raised": 0, "loaded": 0}}
        for k in range(300):
            bad = bytearray(data)
            kind = k % 3
            if kind == 0:
                for _ in range(rng.randrange(1, 20)):
                    bad[rng.randrange(len(bad))] = rng.randrange(256)
            elif kind == 1:
                bad = bad[: rng.randrange(len(bad))]
            else:
                start = rng.randrange(len(bad))
                bad[start : start + 64] = bytes(rng.randrange(256) for _ in range(64))
            open(path, "wb").write(bytes(bad))
            for call in (lambda: sc.torch.load_file(path), lambda: sc.numpy.load(bytes(bad)),
                         lambda: sc.verify(path)):
                try:
                    call()
                    outcomes["loaded"] += 1
                except sc.ScError:
                    outcomes["raised"] += 1
        print(outcomes)
        """
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "raised" in r.stdout
    assert "internal error" not in r.stderr


def test_interpreter_goes_on_after_errors(sample_archive, tmp_path):
    bad = tmp_path / "bad.sc"
    bad.write_bytes(sample_archive.read_bytes()[:500])
    for _ in range(3):
        with pytest.raises(sc.ScError):
            sc.torch.load_file(bad)
    assert len(sc.torch.load_file(sample_archive)) == 10
    assert torch.ones(2).sum().item() == 2


def test_read_into_checks_its_buffers(sample_archive):
    r = sc._sc.Reader(os.fspath(sample_archive))
    name, dtype, shape, start, end = r.tensors()[0]
    import numpy as np

    with pytest.raises(sc.ScError, match="buffer"):
        r.read_into([(start, end)], [np.empty(end - start + 1, np.uint8)])
    with pytest.raises(sc.ScError, match="writable"):
        ro = np.empty(end - start, np.uint8)
        ro.flags.writeable = False
        r.read_into([(start, end)], [ro])
    buf = np.empty(end - start, np.uint8)
    with pytest.raises(sc.ScError, match="overlap|share"):
        r.read_into([(start, end), (start, end)], [buf, np.empty(end - start, np.uint8)])
    with pytest.raises(sc.ScError, match="share"):
        r.read_into([(start, start + 2), (start + 2, start + 4)], [buf[:2], buf[1:3]])
    with pytest.raises(sc.ScError, match="not inside"):
        r.read_into([(10**12, 10**12 + 2)], [np.empty(2, np.uint8)])


# Long calls stop between blocks: small ones stop them soon.
BLOCK = 1 << 20


@pytest.fixture(scope="module")
def slow_input(tmp_path_factory):
    """A safetensors file of 64 MB of BF16 weights, and its BEST archive in blocks of 1 MiB:
    coded on one thread with BEST, each takes several seconds, a block well under one."""
    import ml_dtypes
    import numpy as np
    import safetensors.numpy

    d = tmp_path_factory.mktemp("slow")
    rng = np.random.default_rng(5)
    w = rng.standard_normal(32 << 20, dtype=np.float32).astype(ml_dtypes.bfloat16)
    src = d / "m.safetensors"
    safetensors.numpy.save_file({"w": w.reshape(-1, 4096)}, src)
    archive = tmp_path_factory.mktemp("slow-archive") / "m.safetensors.sc"
    sc.compress_file(src, archive, mode="best", block_size=BLOCK)
    return src, archive


def interrupted(call, after=0.4):
    """Runs `call` with SIGINT sent to this process `after` seconds in: the seconds from the
    signal to `KeyboardInterrupt`, which it must raise."""
    import signal
    import threading
    import time

    sent = []

    def send():
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(after, send)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            call()
    finally:
        timer.cancel()
    assert sent, "the call ended before the signal"
    return time.monotonic() - sent[0]


@pytest.mark.parametrize("what", ["compress_file", "compress_folder", "decompress_file", "verify"])
def test_ctrl_c_stops_long_calls_and_leaves_no_temporary(slow_input, tmp_path, what):
    src, archive = slow_input
    out = tmp_path / "out"
    calls = {
        "compress_file": lambda: sc.compress_file(src, out, mode="best", block_size=BLOCK, threads=1),
        "compress_folder": lambda: sc.compress_folder(src.parent, out, mode="best", block_size=BLOCK, threads=1),
        "decompress_file": lambda: sc.decompress_file(archive, out, threads=1),
        "verify": lambda: sc.verify(archive, threads=1),
    }
    import shutil
    import time

    begun = time.monotonic()
    calls[what]()
    whole = time.monotonic() - begun
    shutil.rmtree(out, ignore_errors=True)
    if out.exists():
        out.unlink()
    took = interrupted(calls[what], after=whole / 10)
    # The block being coded finishes and the others in flight are dropped uncoded: within a
    # second, or three blocks' time on a machine too loaded for that (the job is 64 blocks;
    # waiting for all the blocks in flight took four to six).
    block = whole / 64
    assert took < min(whole / 2, max(1.0, 3 * block)), (
        f"{what}: KeyboardInterrupt {took:.2f} s after the signal, the job {whole:.2f} s"
    )
    left = [p for p in tmp_path.rglob("*")] + [p for p in src.parent.iterdir() if p.name.endswith(".sc-tmp")]
    assert left == [] or (what == "compress_folder" and all(p.is_dir() for p in left)), left
