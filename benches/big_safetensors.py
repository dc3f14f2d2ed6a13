#!/usr/bin/env python3
"""Builds a large safetensors file for the random-access benchmarks (benches/access.sh,
benches/python_load.py).

    python3 benches/big_safetensors.py SOURCE.safetensors COPIES OUT.safetensors

OUT holds COPIES copies of SOURCE's tensors under new names (`copyK.NAME`), each copy followed
by a 1.5 MiB BF16 tensor `copyK.extra.weight` ([768, 1024], real bytes taken from the copy's
largest tensor). Copy K's tensors are rotated by 8K bytes (a whole number of elements of any
dtype), so that the copies hold the same values but not the same bytes: sc stores a repeated
tensor once, and an archive of exact copies would be a fraction of the file's size.
"""

import json
import struct
import sys


def big_file(src: str, copies: int, dst: str) -> None:
    """Writes the file described above."""
    data = open(src, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", None)
    base = 8 + n
    tensors = sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0])
    largest = max(tensors, key=lambda kv: kv[1]["data_offsets"][1] - kv[1]["data_offsets"][0])
    extra_len = 768 * 1024 * 2
    out_header, chunks, pos = {}, [], 0
    if meta is not None:
        out_header["__metadata__"] = meta
    for k in range(copies):
        for name, t in tensors:
            b, e = t["data_offsets"]
            out_header[f"copy{k}.{name}"] = dict(t, data_offsets=[pos, pos + e - b])
            chunks.append((base + b, e - b, 8 * k))
            pos += e - b
        b = largest[1]["data_offsets"][0]
        out_header[f"copy{k}.extra.weight"] = {
            "dtype": "BF16", "shape": [768, 1024], "data_offsets": [pos, pos + extra_len]}
        chunks.append((base + b + k * 4096, extra_len, 0))
        pos += extra_len
    text = json.dumps(out_header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(dst, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for start, length, shift in chunks:
            shift = shift % length if length else 0
            f.write(data[start + shift:start + length])
            f.write(data[start:start + shift])


if __name__ == "__main__":
    big_file(sys.argv[1], int(sys.argv[2]), sys.argv[3])
