"""Where the writers write: FIFOs and devices in place, symbolic links through to their target,
new files with the umask's mode, errors naming the destination; archives read without maps;
threads= and get_slice's indices checked."""

from __future__ import annotations

import os
import resource
import select
import stat
import subprocess
import sys
import threading

import numpy as np
import pytest
import torch

import sc
import sc.numpy
import sc.torch

TENSORS = {"w": np.arange(4096, dtype=np.float32).reshape(64, 64)}


def save_numpy(dst, sample, tmp_path):
    sc.numpy.save_file(TENSORS, dst)


def save_torch(dst, sample, tmp_path):
    sc.torch.save_file({"w": torch.from_numpy(TENSORS["w"])}, dst)


def compress(dst, sample, tmp_path, overwrite=True):
    sc.compress_file(sample, dst, overwrite=overwrite)


def decompress(dst, sample, tmp_path, overwrite=True):
    archive = tmp_path / "source.sc"
    if not archive.exists():
        sc.compress_file(sample, archive)
    sc.decompress_file(archive, dst, overwrite=overwrite)


WRITERS = {
    "numpy.save_file": save_numpy,
    "torch.save_file": save_torch,
    "compress_file": compress,
    "compress_file(overwrite=False)": lambda d, s, t: compress(d, s, t, overwrite=False),
    "decompress_file": decompress,
    "decompress_file(overwrite=False)": lambda d, s, t: decompress(d, s, t, overwrite=False),
}


def expected(name, sample, tmp_path) -> bytes:
    """What the writer `name` writes, as a regular file."""
    out = tmp_path / f"expected-{len(list(tmp_path.iterdir()))}"
    WRITERS[name](out, sample, tmp_path)
    return out.read_bytes()


def drain(path) -> tuple[threading.Thread, list[bytes]]:
    """A thread that opens the FIFO `path` (waiting for a writer) and reads it to its end."""
    got: list[bytes] = []

    def read():
        with open(path, "rb") as f:
            got.append(f.read())

    t = threading.Thread(target=read, daemon=True)
    t.start()
    return t, got


@pytest.mark.parametrize("name", WRITERS)
def test_fifos_are_written_in_place(name, sample, tmp_path):
    want = expected(name, sample, tmp_path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader, got = drain(fifo)
    WRITERS[name](fifo, sample, tmp_path)
    # Replaced, the FIFO would leave the reader waiting: check first, then join.
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    reader.join()
    assert got == [want]
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".sc-tmp")]


def device_node(tmp_path, minor: int):
    """A character device with the numbers of /dev/null (minor 3) or /dev/full (7), made in
    `tmp_path` (never the machine's own nodes: a wrong writer would replace them)."""
    if os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    node = tmp_path / f"dev{minor}"
    try:
        os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
        os.close(os.open(node, os.O_WRONLY))
    except OSError as e:
        pytest.skip(f"no usable device node here ({e})")
    return node


@pytest.mark.parametrize("name", ["numpy.save_file", "compress_file", "decompress_file(overwrite=False)"])
def test_devices_are_written_in_place(name, sample, tmp_path):
    node = device_node(tmp_path, 3)
    WRITERS[name](node, sample, tmp_path)
    assert stat.S_ISCHR(os.lstat(node).st_mode)
    assert os.lstat(node).st_rdev == os.makedev(1, 3)


@pytest.mark.parametrize("name", ["numpy.save_file", "compress_file", "decompress_file"])
def test_a_full_device_gives_an_error_naming_it(name, sample, tmp_path):
    node = device_node(tmp_path, 7)
    with pytest.raises(sc.ScError, match="No space left on device") as e:
        WRITERS[name](node, sample, tmp_path)
    assert f"writing {node}:" in str(e.value) and "sc-tmp" not in str(e.value)
    assert stat.S_ISCHR(os.lstat(node).st_mode)


@pytest.mark.parametrize("name", ["numpy.save_file", "compress_file", "decompress_file"])
def test_symbolic_links_are_written_through(name, sample, tmp_path):
    want = expected(name, sample, tmp_path)
    target = tmp_path / "real" / "target.bin"
    target.parent.mkdir()
    target.write_bytes(b"old")
    link = tmp_path / "link"
    link.symlink_to(os.path.join("real", "target.bin"))
    WRITERS[name](link, sample, tmp_path)
    assert link.is_symlink() and os.readlink(link) == os.path.join("real", "target.bin")
    assert target.read_bytes() == want
    # A link to nothing is not followed, nor replaced.
    dangling = tmp_path / "dangling"
    dangling.symlink_to("missing")
    with pytest.raises(FileNotFoundError):
        WRITERS[name](dangling, sample, tmp_path)
    assert dangling.is_symlink() and not (tmp_path / "missing").exists()


@pytest.mark.parametrize("name", ["numpy.save_file", "compress_file", "decompress_file"])
def test_outputs_take_the_umask_mode(name, sample, tmp_path):
    old = os.umask(0o027)
    try:
        WRITERS[name](tmp_path / "out", sample, tmp_path)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "out").st_mode) == 0o640


def test_a_file_size_limit_names_the_destination(sample, tmp_path):
    dst = tmp_path / "out.sc"
    script = "import sc, sys\ntry:\n    sc.compress_file(sys.argv[1], sys.argv[2])\nexcept sc.ScError as e:\n    print(e)\n"

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (256 << 10, resource.RLIM_INFINITY))

    r = subprocess.run([sys.executable, "-c", script, str(sample), str(dst)], capture_output=True,
                       text=True, preexec_fn=limit)
    assert r.returncode == 0, r.stderr
    assert "File too large" in r.stdout and f"writing {dst}:" in r.stdout, r.stdout
    assert "sc-tmp" not in r.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_an_archive_truncated_while_decoding_is_an_error(tmp_path):
    """decompress_file reads the archive with positioned reads, not maps: truncated by another
    process meanwhile, it raises ScError instead of the interpreter dying of SIGBUS."""
    original = tmp_path / "random.bin"
    original.write_bytes(np.random.default_rng(3).bytes(64 << 20))
    archive = tmp_path / "random.sc"
    sc.compress_file(original, archive)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    # Open for reading and writing, so that neither side waits to open: the child writes into
    # the FIFO and stops while it is full, long before it has read its archive.
    fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
    script = ("import sc, sys\ntry:\n    sc.decompress_file(sys.argv[1], sys.argv[2], threads=1)\n"
              "except sc.ScError as e:\n    print(e)\n    sys.exit(3)\n")
    child = subprocess.Popen([sys.executable, "-c", script, str(archive), str(fifo)],
                             stdout=subprocess.PIPE, text=True)
    truncated = False
    try:
        while child.poll() is None:
            if select.select([fd], [], [], 0.1)[0]:
                os.read(fd, 1 << 20)
                if not truncated:
                    os.truncate(archive, 32 << 20)
                    truncated = True
    finally:
        os.close(fd)
    out = child.communicate()[0]
    assert child.returncode == 3, f"exit {child.returncode}: {out}"
    assert truncated and "truncated" in out, out


def test_threads_are_checked_and_capped(sample_archive):
    for bad in [-1, 2.5, "2", True, -(10**30)]:
        with pytest.raises(ValueError, match="threads"):
            sc.verify(sample_archive, threads=bad)
        with pytest.raises(ValueError, match="threads"):
            sc.torch.load_file(sample_archive, threads=bad)
    # As `-T`: 0 is all cores, and more threads than cores are capped to the cores.
    for many in [0, np.int64(2), 10**30, 10**6]:
        assert sc.verify(sample_archive, threads=many)["blocks"] > 0
        assert len(sc.numpy.load_file(sample_archive, threads=many)) > 0


def test_a_boolean_index_is_a_new_axis_as_in_numpy(sample_archive):
    with sc.safe_open(sample_archive, framework="np") as f:
        name = next(k for k in f.keys() if len(f.get_slice(k).get_shape()) == 2)
        full = f.get_tensor(name)
        s = f.get_slice(name)
        for key in [True, False, np.True_, (True, 1), (False, slice(None), 0), (True, Ellipsis, 0)]:
            want = full[key]
            got = s[key]
            assert got.shape == want.shape, key
            assert got.tobytes() == want.tobytes(), key
    with sc.safe_open(sample_archive, framework="pt") as f:
        full = f.get_tensor(name)
        assert torch.equal(f.get_slice(name)[torch.tensor(True)], full[None])
        assert f.get_slice(name)[False].shape == (0, *full.shape)
