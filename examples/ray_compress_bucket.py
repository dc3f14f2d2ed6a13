#!/usr/bin/env python3
"""Compresses every checkpoint under one bucket prefix into another, one Ray task per file.

    python examples/ray_compress_bucket.py s3://SRC/prefix/ s3://DST/prefix/ \\
        [--level N] [--overwrite] [--address ADDRESS]

Each `*.safetensors` object under the source prefix becomes `NAME.safetensors.sc` at the same
relative key under the destination prefix, written by `sc.compress_file` inside a Ray task: the
task reads the source, encodes with the GIL released, and uploads the archive as it is written
(visible only once complete). Ray schedules the tasks over its cluster (`--address`, default: a
cluster started here); sc adds no scheduler of its own. S3 is configured from the usual AWS_*
environment variables (AWS_ENDPOINT_URL for an S3-compatible store), handed to every task.

Prints one line per file and a total; exits 1 if any file failed (the others are done).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import ray

import sc


@ray.remote(num_cpus=1)
def compress_one(src: str, dst: str, level: int | None, overwrite: bool) -> dict:
    """Compresses the object `src` into the archive `dst`; returns the report, the remote
    traffic and the node it ran on, or the error."""
    sc.stats(reset=True)
    start = time.monotonic()
    try:
        # One thread per CPU Ray gave the task.
        cpus = int(ray.get_runtime_context().get_assigned_resources().get("CPU", 1)) or 1
        report = sc.compress_file(src, dst, level=level, overwrite=overwrite, threads=cpus)
    except (OSError, ValueError) as e:
        return {"src": src, "error": str(e)}
    return {
        "src": src, "dst": dst, "report": report, "stats": sc.stats(),
        "seconds": time.monotonic() - start, "node": ray.get_runtime_context().get_node_id(),
    }


def plan(src_prefix: str, dst_prefix: str) -> list[tuple[str, str]]:
    """(source, destination) for every safetensors object under `src_prefix`."""
    src_prefix = src_prefix.rstrip("/") + "/"
    dst_prefix = dst_prefix.rstrip("/") + "/"
    return [
        (url, dst_prefix + url[len(src_prefix):] + ".sc")
        for url, _size in sc.list_objects(src_prefix)
        if url.endswith(".safetensors")
    ]


def compress_bucket(src_prefix: str, dst_prefix: str, level: int | None = None,
                    overwrite: bool = False) -> list[dict]:
    """Runs one task per checkpoint on the connected Ray cluster; returns their results."""
    env = {k: v for k, v in os.environ.items() if k.startswith("AWS_")}
    task = compress_one.options(runtime_env={"env_vars": env})
    jobs = [task.remote(s, d, level, overwrite) for s, d in plan(src_prefix, dst_prefix)]
    return ray.get(jobs)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("src", help="source prefix, s3://bucket/folder/")
    p.add_argument("dst", help="destination prefix, s3://bucket/folder/")
    p.add_argument("--level", type=int, help="sc level 1 to 9 (default: FAST)")
    p.add_argument("--overwrite", action="store_true", help="replace existing archives")
    p.add_argument("--address", help="Ray cluster to connect to (default: start one here)")
    args = p.parse_args()
    ray.init(address=args.address, log_to_driver=False)
    results = compress_bucket(args.src, args.dst, args.level, args.overwrite)
    failed = 0
    moved = stored = 0
    for r in results:
        if "error" in r:
            failed += 1
            print(f"{r['src']}: error: {r['error']}", file=sys.stderr)
            continue
        rep = r["report"]
        moved += rep["original_len"]
        stored += rep["archive_len"]
        print(f"{r['src']} -> {r['dst']}: {rep['original_len']} -> {rep['archive_len']} bytes "
              f"({rep['archive_len'] / max(rep['original_len'], 1):.3f}) in {r['seconds']:.1f} s")
    print(f"{len(results) - failed} of {len(results)} files, {moved} -> {stored} bytes")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
