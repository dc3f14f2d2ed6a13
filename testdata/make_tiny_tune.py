#!/usr/bin/env python3
"""Make a small stand-in fine-tune of tiny.safetensors for the fuzz seeds and quick tests: every
third BF16 value and every fifth F32 value moved by a unit or two in the last place, as a few
optimizer steps would; the I64 tensor kept. Run from the repository root:
    python3 testdata/make_tiny_tune.py testdata/tiny.safetensors testdata/tiny-tune.safetensors
"""
import json
import struct
import sys


def main(src, dst):
    data = bytearray(open(src, "rb").read())
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8 : 8 + n])
    start = 8 + n
    for name, t in header.items():
        if name == "__metadata__":
            continue
        begin, end = (start + o for o in t["data_offsets"])
        if t["dtype"] == "BF16":
            for k, i in enumerate(range(begin, end, 6)):
                w = struct.unpack_from("<H", data, i)[0]
                w = (w + (1 if k % 2 else -1)) & 0xFFFF
                struct.pack_into("<H", data, i, w)
        elif t["dtype"] == "F32":
            for k, i in enumerate(range(begin, end, 20)):
                w = struct.unpack_from("<I", data, i)[0]
                struct.pack_into("<I", data, i, (w + 2 * (k % 3) - 2) & 0xFFFFFFFF)
    open(dst, "wb").write(data)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
