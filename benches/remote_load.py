#!/usr/bin/env python3
"""Cold load of a checkpoint over HTTP: sc against downloading the safetensors file.

    python benches/remote_load.py [FILE.safetensors] [--copies N] [--rates 12,50] [--runs N]
      (default: ../shared/data/all-MiniLM-L6-v2.BF16.safetensors, 4 copies, 12 and 50 MB/s,
      3 runs)

Needs the `sc` package (pip install "./python[torch]"), torch, safetensors and nginx
(/usr/sbin/nginx, or $SC_NGINX). Reads ../shared/data, the real-weights folder beside the
repository, and says so when it is missing.

The checkpoint is FILE's tensors repeated COPIES times under new names (benches/
big_safetensors.py: the copies hold the same values in other bytes, so sc stores each), or FILE
itself with --copies 0; its archive is written in FAST mode. For each rate, nginx serves both
from a temporary folder on 127.0.0.1 with `limit_rate` RATE MB/s per connection and
`limit_conn` 4 per client (a fifth connection gets 503). Each load runs in a child process of
its own (the two loaders alternate, round after round; nothing is cached on the client side):

- reference: the safetensors file downloaded over 4 keep-alive connections, each taking the
  next 8 MiB range in turn, into a temporary file, then `safetensors.torch.load_file` and
  `.clone()` of every tensor (the data made resident, as `load_state_dict` would);
- sc: `sc.torch.load_file(URL)` with `sc.remote_options(connections=4)`: the archive's blocks
  fetched over 4 connections while earlier ones decode.

Prints one markdown table (medians) and whether the targets of issue 28 are met: sc at most
0.72x the reference's wall time at 12 MB/s per connection, at most 0.8x at 50 MB/s.
"""

from __future__ import annotations

import http.client
import json
import mmap
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "python", "tests"))
from big_safetensors import big_file  # noqa: E402
import servers  # noqa: E402

DEFAULT = os.path.join(ROOT, "..", "shared", "data", "all-MiniLM-L6-v2.BF16.safetensors")
CONNECTIONS = 4
# The reference downloader's range requests: as long as sc's longest.
PIECE = 8 << 20
TARGETS = {12: 0.72, 50: 0.8}


def download(port: int, path: str, dst: str, connections: int) -> int:
    """Downloads http://127.0.0.1:port/path into `dst` over `connections` keep-alive
    connections, each taking the next 8 MiB range in turn (sc's pieces; a 503 is tried again);
    returns the number of requests."""
    conn = http.client.HTTPConnection("127.0.0.1", port)
    conn.request("HEAD", path)
    r = conn.getresponse()
    r.read()
    size = int(r.getheader("Content-Length"))
    conn.close()
    with open(dst, "wb") as f:
        f.truncate(size)
    out_file = open(dst, "r+b")
    # Received straight into the file's pages (a map of it), with the GIL released, as a
    # downloader written in C would.
    out = mmap.mmap(out_file.fileno(), size)
    view = memoryview(out)
    pieces = [(s, min(s + PIECE, size)) for s in range(0, size, PIECE)]
    lock = threading.Lock()
    requests = [1]
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            while True:
                with lock:
                    if not pieces or errors:
                        return
                    start, end = pieces.pop(0)
                    requests[0] += 1
                c.request("GET", path, headers={"Range": f"bytes={start}-{end - 1}"})
                resp = c.getresponse()
                if resp.status == 503:
                    resp.read()
                    with lock:
                        pieces.insert(0, (start, end))
                    c.close()
                    time.sleep(0.05)
                    continue
                if resp.status != 206:
                    raise RuntimeError(f"{path}: {resp.status}")
                at = start
                while at < end:
                    n = resp.readinto(view[at:end])
                    if not n:
                        raise RuntimeError(f"{path}: cut short at {at} of {start}..{end}")
                    at += n
                resp.read()
        except BaseException as e:  # noqa: BLE001 (raised in the caller)
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    view.release()
    out.close()
    out_file.close()
    if errors:
        raise errors[0]
    return requests[0]


def child(loader: str, port: int, path: str) -> None:
    """One cold load in this process; prints its seconds and traffic as JSON."""
    import torch  # noqa: F401  (imported before the measurement starts)
    import safetensors.torch
    import sc
    import sc.torch

    sc.remote_options(connections=CONNECTIONS)
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        if loader == "sc":
            tensors = sc.torch.load_file(f"http://127.0.0.1:{port}{path}")
            s = sc.stats()
            traffic = {"requests": s["requests"], "network_wait_s": s["network_wait_s"],
                       "decode_s": s["decode_s"], "bytes": s["bytes_fetched"]}
        else:
            local = os.path.join(tmp, "model.safetensors")
            requests = download(port, path, local, CONNECTIONS)
            downloaded = time.perf_counter() - t
            tensors = {k: v.clone() for k, v in safetensors.torch.load_file(local).items()}
            traffic = {"requests": requests, "bytes": os.path.getsize(local), "download_s": downloaded}
        seconds = time.perf_counter() - t
    digest = sum(int(v.view(-1).view(torch.uint8)[:4096].sum()) for v in tensors.values())
    print(json.dumps({"seconds": seconds, "tensors": len(tensors), "digest": digest, **traffic}))


def run_child(*args: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"child {args} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def option(args: list[str], name: str, default: str) -> str:
    if name in args:
        k = args.index(name)
        value = args[k + 1]
        del args[k : k + 2]
        return value
    return default


def main() -> None:
    args = sys.argv[1:]
    if args and args[0] == "--child":
        child(args[1], int(args[2]), args[3])
        return
    runs = int(option(args, "--runs", "3"))
    copies = int(option(args, "--copies", "4"))
    rates = [int(r) for r in option(args, "--rates", "12,50").split(",")]
    src = os.path.abspath(args[0] if args else DEFAULT)
    if not os.path.exists(src):
        print(f"benches/remote_load.py: {src} is missing (the real-weights folder ../shared/data "
              "beside the repository, or give a FILE.safetensors): nothing measured", file=sys.stderr)
        sys.exit(1)
    why = servers.missing()
    if servers.nginx_path() is None:
        print(f"benches/remote_load.py: {why}: nothing measured", file=sys.stderr)
        sys.exit(1)
    import sc

    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "www")
        os.mkdir(root)
        plain = os.path.join(root, "model.safetensors")
        if copies:
            big_file(src, copies, plain)
        else:
            os.symlink(src, plain)
        archive = os.path.join(root, "model.safetensors.sc")
        sc.compress_file(plain, archive, mode="fast")
        plain_len, archive_len = os.path.getsize(plain), os.path.getsize(archive)
        print(f"{os.path.basename(src)}"
              f"{f' x {copies} copies' if copies else ''}: {plain_len / 1e6:.1f} MB, FAST archive "
              f"{archive_len / 1e6:.1f} MB ({archive_len / plain_len:.3f}); {CONNECTIONS} connections "
              f"per client, {runs} alternating runs per rate, {os.cpu_count()} cores, medians")
        print()
        print("| per-connection rate | safetensors download + load_file + clone, s (download) | "
              "sc.torch.load_file(url), s | sc / reference | sc requests | sc network wait s | "
              "target |")
        print("|---:|---:|---:|---:|---:|---:|---|")
        verdicts = []
        for rate in rates:
            server = servers.Nginx(root, os.path.join(tmp, f"nginx-{rate}"),
                                   limit_rate=rate * 1_000_000, limit_conn=CONNECTIONS).start()
            try:
                loaders = [("reference", "/model.safetensors"), ("sc", "/model.safetensors.sc")]
                results: dict[str, list[dict]] = {"reference": [], "sc": []}
                for r in range(runs):
                    for name, path in loaders[r % 2:] + loaders[: r % 2]:
                        results[name].append(run_child(name, str(server.port), path))
            finally:
                server.stop()
            if {x["digest"] for x in results["reference"] + results["sc"]} != {results["sc"][0]["digest"]}:
                raise SystemExit("sc and safetensors loaded different tensors")
            ref = statistics.median(x["seconds"] for x in results["reference"])
            got = statistics.median(x["seconds"] for x in results["sc"])
            ratio = got / ref
            target = TARGETS.get(rate)
            verdict = "-" if target is None else f"<= {target}: {'met' if ratio <= target else 'NOT MET'}"
            verdicts.append(verdict)
            req = statistics.median(x["requests"] for x in results["sc"])
            wait = statistics.median(x["network_wait_s"] for x in results["sc"])
            dl = statistics.median(x["download_s"] for x in results["reference"])
            print(f"| {rate} MB/s | {ref:.2f} ({dl:.2f}) | {got:.2f} | {ratio:.2f}x | {req:.0f} | {wait:.2f} | {verdict} |")


if __name__ == "__main__":
    main()
