#!/usr/bin/env python3
"""Writes the importance weights the weighted quantizer vectors are made with
(testdata/quant-weights.bin), derived from the rows of testdata/quant-rows.bin as imatrix values
look: per column, the mean square of the finite real rows of that length, with a few outlier
columns 50 times larger (activation outlier channels), then edge vectors of 256: all zeros,
all ones, every third column zero, and values from 1e-16 to 1e16.

    python3 testdata/make_quant_weights.py testdata/quant-rows.bin > testdata/quant-weights.bin

Then the jobs: each row with the realistic vector of its length, then each row of 256 with one
edge vector after another. The harness (quant_vectors.c, `weighted`) quantizes each job's row
with its weights; tests/quantize.rs reads the same jobs.

Layout (little-endian): magic `SCQWGT01`, u32 vector count, per vector u32 length and that many
f32; u32 job count, per job u32 row index and u32 vector index. Pure Python; run by
make_quant_vectors.sh.
"""
import math
import struct
import sys


def read_rows(path):
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"SCQROWS1"
    (n,) = struct.unpack_from("<I", data, 8)
    at, rows = 12, []
    for _ in range(n):
        (length,) = struct.unpack_from("<I", data, at)
        rows.append(list(struct.unpack_from("<%df" % length, data, at + 4)))
        at += 4 + 4 * length
    return rows


def realistic(rows, length):
    real = [r for r in rows if len(r) == length and all(math.isfinite(v) and abs(v) < 1e3 for v in r)]
    out = []
    for j in range(length):
        w = sum(r[j] * r[j] for r in real) / len(real)
        out.append(w * 50 if j % 37 == 5 else w)
    return out


def main():
    rows = read_rows(sys.argv[1])
    lengths = sorted({len(r) for r in rows})
    vectors = [realistic(rows, n) for n in lengths]
    edges = [
        [0.0] * 256,
        [1.0] * 256,
        [0.0 if j % 3 == 0 else v for j, v in enumerate(vectors[lengths.index(256)])],
        [10.0 ** ((j * 7) % 33 - 16) for j in range(256)],
    ]
    first_edge = len(vectors)
    vectors += edges
    jobs = [(r, lengths.index(len(row))) for r, row in enumerate(rows)]
    short = [r for r, row in enumerate(rows) if len(row) == 256]
    jobs += [(r, first_edge + k % len(edges)) for k, r in enumerate(short)]
    out = sys.stdout.buffer
    out.write(b"SCQWGT01" + struct.pack("<I", len(vectors)))
    for v in vectors:
        out.write(struct.pack("<I%df" % len(v), len(v), *v))
    out.write(struct.pack("<I", len(jobs)))
    for r, v in jobs:
        out.write(struct.pack("<II", r, v))


main()
