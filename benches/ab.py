#!/usr/bin/env python3
"""Alternating A/B timing of two sc binaries on one file: encode and decode, FAST and BEST.

    python3 benches/ab.py OLD_SC NEW_SC FILE [ROUNDS [OPERATIONS]]

for example, against the build of another commit:

    git worktree add /tmp/base REV && (cd /tmp/base && cargo build --release)
    cargo build --release
    python3 benches/ab.py /tmp/base/target/release/sc target/release/sc \
        ../shared/data/all-MiniLM-L6-v2.BF16.safetensors 31

Each round runs every (operation, binary) pair once, the binaries' order alternating between
rounds. Reports, per operation, the median wall time of each binary as MB/s of the original, the
new/old speed ratio of those medians and the median of each round's own ratio ("paired"), and
the same for CPU time (user + system of the process, from wait4),
which a loaded machine disturbs less than wall time. OPERATIONS picks some of "encode fast",
"encode best", "decode fast", "decode best" (comma-separated); SC_EXTRA adds arguments to every
command (SC_EXTRA="-T 1"). Archives and outputs go to a temporary directory."""
import os, shutil, statistics, subprocess, sys, tempfile, time

old, new, src = sys.argv[1], sys.argv[2], sys.argv[3]
runs = int(sys.argv[4]) if len(sys.argv) > 4 else 21
tmp = tempfile.mkdtemp(prefix="sc-ab-")
size = os.path.getsize(src)
bins = {"old": old, "new": new}
for m in ("fast", "best"):
    subprocess.run([old, "encode", "-q", "-f", "-m", m, src, "-o", f"{tmp}/{m}.sc"], check=True)
ops = {
    "encode fast": lambda b: [b, "encode", "-q", "-f", "-m", "fast", src, "-o", f"{tmp}/e.sc"],
    "encode best": lambda b: [b, "encode", "-q", "-f", "-m", "best", src, "-o", f"{tmp}/e.sc"],
    "decode fast": lambda b: [b, "decode", "-q", "-f", f"{tmp}/fast.sc", "-o", f"{tmp}/d.st"],
    "decode best": lambda b: [b, "decode", "-q", "-f", f"{tmp}/best.sc", "-o", f"{tmp}/d.st"],
}
if len(sys.argv) > 5:
    ops = {o: c for o, c in ops.items() if o in sys.argv[5].split(",")}
wall = {(o, k): [] for o in ops for k in bins}
cpu = {(o, k): [] for o in ops for k in bins}
loads = []
for r in range(runs):
    order = ["old", "new"] if r % 2 == 0 else ["new", "old"]
    for o, cmd in ops.items():
        for k in order:
            t = time.perf_counter()
            p = subprocess.Popen(cmd(bins[k]) + os.environ.get("SC_EXTRA", "").split())
            _, status, ru = os.wait4(p.pid, 0)
            wall[(o, k)].append(time.perf_counter() - t)
            cpu[(o, k)].append(ru.ru_utime + ru.ru_stime)
            assert status == 0, (cmd(bins[k]), status)
    loads.append(os.getloadavg()[0])
print(f"{src}: {size} bytes, {runs} alternating rounds; 1-minute load average during the run "
      f"{min(loads):.1f}..{max(loads):.1f} (median {statistics.median(loads):.1f}) on {os.cpu_count()} cores")
print("| operation | old MB/s (wall) | new MB/s (wall) | new/old speed | paired | old CPU s | new CPU s | old/new CPU |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for o in ops:
    wo, wn = statistics.median(wall[(o, "old")]), statistics.median(wall[(o, "new")])
    co, cn = statistics.median(cpu[(o, "old")]), statistics.median(cpu[(o, "new")])
    # The median of each round's own ratio: the two runs of a round saw the same load.
    paired = statistics.median(a / b for a, b in zip(wall[(o, "old")], wall[(o, "new")]))
    print(f"| {o} | {size/1e6/wo:.0f} | {size/1e6/wn:.0f} | {wo/wn:.3f} | {paired:.3f} "
          f"| {co:.3f} | {cn:.3f} | {co/cn:.3f} |")
shutil.rmtree(tmp)
