#!/usr/bin/env python3
"""Writes testdata/excerpt.gguf: a small GGUF file of real quantized weights, for the tests and
the fuzz seeds. It takes the leading rows of a few tensors of each ggml type from the two GGUF
checkpoints that ../shared/data/fetch-gguf.sh downloads (SmolLM2-135M-Instruct Q4_1: Q8_0, Q4_1,
F32; Gemma 3 270M Q4_K_M: Q5_0, Q4_K, Q6_K), with each file's scalar metadata and the first
tokens of its vocabulary, and lays them out as llama.cpp does (alignment 32).

    python3 testdata/make_gguf_excerpt.py [~/.cache/sc-data] > testdata/excerpt.gguf

Pure Python (no gguf package): the reader below follows the GGUF v3 layout.
"""
import os
import struct
import sys

FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
# ggml type id: (values per block, bytes per block)
BLOCKS = {0: (1, 4), 2: (32, 18), 3: (32, 20), 6: (32, 22), 8: (32, 34), 12: (256, 144), 14: (256, 210)}


class Reader:
    def __init__(self, data):
        self.data, self.at = data, 0

    def take(self, n):
        s = self.data[self.at:self.at + n]
        self.at += n
        return s

    def u32(self):
        return struct.unpack("<I", self.take(4))[0]

    def u64(self):
        return struct.unpack("<Q", self.take(8))[0]

    def string(self):
        return self.take(self.u64())

    def value(self, t):
        """The value's bytes as stored, for writing back; arrays of strings cut to 64 entries."""
        if t in FIXED:
            return self.take(FIXED[t])
        if t == 8:
            s = self.string()
            return struct.pack("<Q", len(s)) + s
        assert t == 9
        et, n = self.u32(), self.u64()
        items = [self.value(et) for _ in range(n)]
        items = items[:64]
        return struct.pack("<IQ", et, len(items)) + b"".join(items)


def read(path, want):
    """The metadata and the leading rows of the tensors named in want (name: rows)."""
    data = open(path, "rb").read()
    r = Reader(data)
    assert r.take(4) == b"GGUF" and r.u32() == 3
    n_tensors, n_kv = r.u64(), r.u64()
    kvs = []
    for _ in range(n_kv):
        key, t = r.string(), r.u32()
        kvs.append((key, t, r.value(t)))
    infos = []
    for _ in range(n_tensors):
        name = r.string().decode()
        dims = [r.u64() for _ in range(r.u32())]
        infos.append((name, dims, r.u32(), r.u64()))
    start = (r.at + 31) // 32 * 32
    tensors = []
    for name, dims, t, off in infos:
        if name not in want:
            continue
        per_block, block_bytes = BLOCKS[t]
        rows = min(want[name], dims[1]) if len(dims) > 1 else 1
        row_bytes = dims[0] // per_block * block_bytes
        body = data[start + off:start + off + rows * row_bytes]
        tensors.append((name, [dims[0], rows] if len(dims) > 1 else dims, t, body))
    return kvs, tensors


def write(kvs, tensors, out):
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    for key, t, v in kvs:
        head += struct.pack("<Q", len(key)) + key + struct.pack("<I", t) + v
    offset = 0
    for name, dims, t, body in tensors:
        n = name.encode()
        head += struct.pack("<Q", len(n)) + n + struct.pack("<I", len(dims))
        head += b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", t, offset)
        offset = (offset + len(body) + 31) // 32 * 32
    out.write(head)
    at = len(head)
    for _, _, _, body in tensors:
        pad = -at % 32
        out.write(b"\0" * pad + body)
        at += pad + len(body)


def main():
    root = os.path.expanduser(sys.argv[1] if len(sys.argv) > 1 else "~/.cache/sc-data")
    smol = read(os.path.join(root, "SmolLM2-135M-Instruct.Q4_1.gguf"),
                {"token_embd.weight": 24, "blk.0.attn_q.weight": 64, "blk.0.attn_norm.weight": 1})
    gemma = read(os.path.join(root, "gemma-3-270m-q4_k_m.gguf"),
                 {"blk.0.attn_q.weight": 16, "blk.0.ffn_down.weight": 24, "blk.0.ffn_gate.weight": 24, "blk.0.attn_output.weight": 24,
                  "blk.0.attn_v.weight": 16, "blk.0.ffn_norm.weight": 1})
    kvs = smol[0] + [(b"gemma." + k, t, v) for k, t, v in gemma[0]]
    tensors = smol[1] + [("gemma." + n, d, t, b) for n, d, t, b in gemma[1]]
    write(kvs, tensors, sys.stdout.buffer)


if __name__ == "__main__":
    main()
