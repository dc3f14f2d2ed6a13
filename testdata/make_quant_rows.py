#!/usr/bin/env python3
"""Writes the f32 rows the quantizer vectors are made from (testdata/quant-rows.bin): real rows
of all-MiniLM-L6-v2.F32 (consecutive values of a few tensors taken as rows of 512 and 256) and
of the wordllama F16 embedding (rows of 256, widened to f32 exactly), then synthetic edge rows
of 256: zeros, constants, one huge value, subnormals, NaN and infinities, values near F16
overflow, ties, values past nearest_int's range.

    python3 testdata/make_quant_rows.py DATA_DIR > testdata/quant-rows.bin
    python3 testdata/make_quant_rows.py --sample testdata/sample.safetensors > ROWS

With --sample, the rows are instead every float tensor of a safetensors file in data order,
widened to f32 exactly and cut into rows of 256 (a tensor's tail short of 256 dropped):
tests/quantize.rs makes the same rows from the committed sample.safetensors.

Layout: magic `SCQROWS1`, u32 row count, then per row u32 length and that many f32 (all
little-endian). Pure Python; run by make_quant_vectors.sh.
"""
import json
import math
import random
import struct
import sys


def tensor(path, name):
    """The dtype and raw bytes of tensor `name` of a safetensors file."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        info = header[name]
        start, end = info["data_offsets"]
        f.seek(8 + n + start)
        return info["dtype"], f.read(end - start)


def f32_values(dtype, raw):
    if dtype == "F32":
        return list(struct.unpack("<%df" % (len(raw) // 4), raw))
    if dtype == "F16":
        return list(struct.unpack("<%de" % (len(raw) // 2), raw))
    raise ValueError(dtype)


def bits(u):
    return struct.unpack("<f", struct.pack("<I", u))[0]


class Bits(int):
    """An f32 given by its bit pattern (a signalling NaN would not survive a Python float)."""


def sample_rows(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        payload = f.read()
    rows = []
    tensors = [v for k, v in header.items() if k != "__metadata__"]
    for info in sorted(tensors, key=lambda v: v["data_offsets"][0]):
        start, end = info["data_offsets"]
        raw = payload[start:end]
        if info["dtype"] == "BF16":
            values = [bits(h << 16) for h in struct.unpack("<%dH" % (len(raw) // 2), raw)]
        elif info["dtype"] in ("F16", "F32"):
            values = f32_values(info["dtype"], raw)
        else:
            continue
        rows += [values[i:i + 256] for i in range(0, len(values) - 255, 256)]
    return rows


def write(rows):
    out = sys.stdout.buffer
    out.write(b"SCQROWS1" + struct.pack("<I", len(rows)))
    for row in rows:
        out.write(struct.pack("<I", len(row)))
        out.write(b"".join(struct.pack("<I" if isinstance(v, Bits) else "<f", v) for v in row))


def main():
    if sys.argv[1] == "--sample":
        write(sample_rows(sys.argv[2]))
        return
    data = sys.argv[1]
    rows = []
    minilm = data + "/all-MiniLM-L6-v2.F32.safetensors"
    # (tensor, first value, rows of 512, rows of 256): embeddings, attention, MLP, norms.
    for name, at, n512, n256 in [
        ("embeddings.word_embeddings.weight", 384 * 1000, 3, 3),
        ("encoder.layer.0.attention.self.query.weight", 0, 3, 2),
        ("encoder.layer.3.intermediate.dense.weight", 4096, 2, 2),
        ("encoder.layer.5.output.dense.weight", 8192, 2, 2),
        ("encoder.layer.5.output.LayerNorm.weight", 0, 0, 1),
        ("encoder.layer.2.attention.self.key.bias", 0, 0, 1),
    ]:
        values = f32_values(*tensor(minilm, name))[at:]
        for _ in range(n512):
            rows.append(values[:512])
            values = values[512:]
        for _ in range(n256):
            rows.append(values[:256])
            values = values[256:]
    emb = f32_values(*tensor(data + "/wordllama-l2_supercat_256.F16.safetensors", "embedding.weight"))
    for r in (0, 1, 2, 100, 1000, 5000, 10000, 20000, 31999, 12345, 777, 4242):
        rows.append(emb[256 * r:256 * (r + 1)])

    rnd = random.Random(38)
    real = rows[0][:256]
    nan, inf = float("nan"), float("inf")

    def with_(base, changes):
        row = list(base)
        for i, v in changes:
            row[i] = v
        return row

    rows += [
        [0.0] * 256,
        [-0.0] * 256,
        [0.5] * 256,
        [-3.0] * 256,
        with_([0.0] * 256, [(40, 1.0)]),
        with_(real, [(7, 1e30)]),
        with_(real, [(100, -1e30)]),
        [bits(rnd.randrange(1, 1 << 23)) * rnd.choice((1, -1)) for _ in range(256)],
        [v * 1e-38 for v in real],
        [v * 1e-20 for v in real],
        [v * 1e-14 for v in real],
        with_(real, [(3, nan)]),
        with_(real, [(40, nan), (200, nan)]),
        with_(real, [(5, inf)]),
        with_(real, [(77, -inf)]),
        with_(real, [(1, inf), (2, -inf)]),
        [nan] * 256,
        with_([0.0] * 256, [(0, Bits(0x7FC12345)), (33, Bits(0xFF812345)), (99, Bits(0x7F800001))]),
        [rnd.choice((65504.0, -65504.0, 65519.0, 65520.0, -65520.0, 7e4, 1e5)) for _ in range(256)],
        [rnd.uniform(-1, 1) * 1e6 for _ in range(256)],
        [(i % 17 - 8) * 0.5 for i in range(256)],
        [(i % 7 - 3) * 0.25 + 1.0 for i in range(256)],
        [float(i - 128) for i in range(256)],
        with_([1e-3 * (i % 5) for i in range(256)], [(10, 1e10), (90, -1e10), (170, 1e10)]),
        [rnd.gauss(0, 1) * math.exp(rnd.uniform(-20, 20)) for _ in range(256)],
        [rnd.gauss(0.3, 0.01) for _ in range(256)],
    ]
    write(rows)


main()
