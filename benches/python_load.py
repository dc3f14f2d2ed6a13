#!/usr/bin/env python3
"""Loading weights into PyTorch from Python: sc against safetensors (and ZipNN where installed).

    python benches/python_load.py [FILE.safetensors] [--runs N]
      (default: ../shared/data/all-MiniLM-L6-v2.BF16.safetensors, 7 runs)

Needs the `sc` package (pip install ./python), torch and safetensors; ZipNN (`zipnn`) is
measured when it imports and round-trips the file exactly. Reads ../shared/data, the real-weights
folder beside the repository, and says so when it is missing.

Prints one markdown table. Each load runs in a child process of its own (the loaders alternate,
round after round, with the page cache warm) and the table gives the median over the rounds of:

- load s: wall time of the load call, everything made resident: `sc.torch.load_file` on the
  FAST and BEST archives; `safetensors.torch.load_file` on the uncompressed file followed by
  `.clone()` of every tensor (safetensors maps the file lazily; the clone makes the data
  resident, as `load_state_dict` would); ZipNN's loader (its Hugging Face plugin's way: decompress
  the file, then `safetensors.torch.load` on the bytes).
- peak MB: the child's peak resident memory during the load, over its resident memory just
  before (imports excluded): /proc/self/clear_refs resets the peak first. Mapped file pages that
  the load touches count, as they do for the kernel.

Then one `safe_open(...).get_tensor` of a 1.5 MiB tensor from a 200+ MB FAST archive (7 renamed
copies of FILE's tensors, each followed by a 1.5 MiB tensor, as benches/access.sh builds):
time and the blocks and bytes it decoded.
"""

from __future__ import annotations

import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from big_safetensors import big_file  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT = os.path.join(ROOT, "..", "shared", "data", "all-MiniLM-L6-v2.BF16.safetensors")


def rss_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def child(loader: str, path: str) -> None:
    """Runs one load in this process and prints seconds, peak kB over the start, tensor bytes."""
    import torch  # noqa: F401  (imported before the measurement starts)
    import safetensors.torch
    import sc.torch

    if loader == "zipnn":
        import zipnn
    if loader == "safetensors-1t":
        # torch's parallel copy slows down badly when its threads have to share busy cores.
        torch.set_num_threads(1)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets the peak resident size to the current one
    before = rss_kb("VmRSS")
    t = time.perf_counter()
    if loader in ("sc-fast", "sc-best"):
        tensors = sc.torch.load_file(path)
    elif loader in ("safetensors", "safetensors-1t"):
        tensors = {k: v.clone() for k, v in safetensors.torch.load_file(path).items()}
    elif loader == "zipnn":
        with open(path, "rb") as f:
            data = zipnn.ZipNN(threads=os.cpu_count()).decompress(f.read())
        tensors = safetensors.torch.load(bytes(data))
        del data
    else:
        raise SystemExit(f"unknown loader {loader}")
    seconds = time.perf_counter() - t
    peak = rss_kb("VmHWM") - before
    nbytes = sum(v.numel() * v.element_size() for v in tensors.values())
    print(json.dumps({"seconds": seconds, "peak_kb": peak, "bytes": nbytes}))


def get_tensor_child(path: str, name: str) -> None:
    import sc

    with sc.safe_open(path, framework="pt") as f:
        t = time.perf_counter()
        x = f.get_tensor(name)
        seconds = time.perf_counter() - t
        s = f.stats()
    print(json.dumps({"seconds": seconds, "bytes": x.numel() * x.element_size(), **s}))


def run_child(*args: str) -> dict:
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"child {args} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def zipnn_archive(src: str, dst: str) -> str | None:
    """Compresses `src` with ZipNN; None (and why) if it is missing or does not round-trip."""
    try:
        import zipnn
    except ImportError:
        return "zipnn is not installed"
    data = open(src, "rb").read()
    packed = zipnn.ZipNN(bytearray_dtype="bfloat16", threads=os.cpu_count()).compress(data)
    if bytes(zipnn.ZipNN(threads=os.cpu_count()).decompress(packed)) != data:
        return f"zipnn {getattr(zipnn, '__version__', '')} does not restore the file exactly here"
    with open(dst, "wb") as f:
        f.write(packed)
    return None


def warm(*paths: str) -> None:
    for p in paths:
        with open(p, "rb") as f:
            while f.read(8 << 20):
                pass


def main() -> None:
    args = sys.argv[1:]
    runs = 7
    if "--runs" in args:
        k = args.index("--runs")
        runs = int(args[k + 1])
        del args[k : k + 2]
    src = os.path.abspath(args[0] if args else DEFAULT)
    if not os.path.exists(src):
        print(f"benches/python_load.py: {src} is missing (the real-weights folder ../shared/data "
              "beside the repository, or give a FILE.safetensors): nothing measured", file=sys.stderr)
        sys.exit(1)
    import sc

    with tempfile.TemporaryDirectory() as tmp:
        fast, best = os.path.join(tmp, "fast.sc"), os.path.join(tmp, "best.sc")
        sc.compress_file(src, fast, mode="fast")
        sc.compress_file(src, best, mode="best")
        loaders = [("sc-fast", fast), ("sc-best", best), ("safetensors", src), ("safetensors-1t", src)]
        znn = os.path.join(tmp, "model.safetensors.znn")
        why = zipnn_archive(src, znn)
        if why is None:
            loaders.append(("zipnn", znn))
        warm(src, fast, best, *([znn] if why is None else []))
        results: dict[str, list[dict]] = {name: [] for name, _ in loaders}
        for r in range(runs):
            for name, path in loaders[r % len(loaders):] + loaders[: r % len(loaders)]:
                results[name].append(run_child("--child", name, path))

        big = os.path.join(tmp, "big.safetensors")
        big_file(src, 7, big)
        name = "copy3.extra.weight"
        big_sc = os.path.join(tmp, "big.sc")
        sc.compress_file(big, big_sc, mode="fast")
        big_len, big_sc_len = os.path.getsize(big), os.path.getsize(big_sc)
        os.remove(big)
        warm(big_sc)
        access = [run_child("--get-tensor", big_sc, name) for _ in range(runs)]

        print(f"{os.path.basename(src)}: {os.path.getsize(src) / 1e6:.1f} MB, "
              f"{runs} alternating runs, {os.cpu_count()} cores, medians")
        print()
        print("| loader | file MB | load s | x fastest safetensors+clone | peak MB over start | tensors MB |")
        print("|---|---:|---:|---:|---:|---:|")
        # The faster of the two safetensors runs is the reference.
        ref = min(statistics.median(x["seconds"] for x in results[n]) for n in ("safetensors", "safetensors-1t"))
        labels = {"sc-fast": "sc.torch.load_file (FAST)", "sc-best": "sc.torch.load_file (BEST)",
                  "safetensors": "safetensors.torch.load_file + clone",
                  "safetensors-1t": "safetensors.torch.load_file + clone, torch.set_num_threads(1)", "zipnn": "ZipNN decompress + safetensors.torch.load"}
        row = {}
        for loader, path in loaders:
            sec = statistics.median(x["seconds"] for x in results[loader])
            peak = statistics.median(x["peak_kb"] for x in results[loader]) / 1e3
            tensors = results[loader][0]["bytes"] / 1e6
            row[loader] = (sec / ref, peak, tensors)
            print(f"| {labels[loader]} | {os.path.getsize(path) / 1e6:.1f} | {sec:.4f} | {sec / ref:.2f} | {peak:.1f} | {tensors:.1f} |")
        if why is not None:
            print(f"\nZipNN not measured: {why}.")
        a = access[0]
        sec = statistics.median(x["seconds"] for x in access)
        with sc.safe_open(big_sc) as f:
            blocks, block_size = f.stats()["blocks"], f.info()["block_size"]
        print(f"\nget_tensor({name!r}) from a {big_sc_len / 1e6:.0f} MB FAST archive of a "
              f"{big_len / 1e6:.0f} MB file: {sec * 1e3:.2f} ms, {a['blocks_decoded']} of "
              f"{blocks} blocks decoded ({a['bytes_decoded']} bytes "
              f"for a {a['bytes']}-byte tensor), {a['block_bytes_read']} archive bytes of blocks read")
        # The targets of issue 15. A tensor spans ceil(len / block size) blocks, one more where
        # it does not start on a block boundary.
        own = -(-a["bytes"] // block_size) + 1
        fast, peak, tensors = row["sc-fast"]
        verdict = lambda ok: "met" if ok else "NOT MET"  # noqa: E731
        print(f"\nTargets: FAST load {fast:.2f}x <= 2x: {verdict(fast <= 2)}; FAST peak "
              f"{peak:.1f} MB <= tensors + 64 = {tensors + 64:.1f} MB: {verdict(peak <= tensors + 64)}; "
              f"BEST load {row['sc-best'][0]:.2f}x <= 6x: {verdict(row['sc-best'][0] <= 6)}; "
              f"get_tensor decoded {a['blocks_decoded']} <= {own} blocks (the tensor's own): "
              f"{verdict(a['blocks_decoded'] <= own)}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], sys.argv[3])
    elif sys.argv[1:2] == ["--get-tensor"]:
        get_tensor_child(sys.argv[2], sys.argv[3])
    else:
        main()
