#!/usr/bin/env python3
"""Writes testdata/tiny.gguf: the first rows of a tensor of each ggml type in excerpt.gguf
(Q8_0, Q4_1, F32, Q5_0, Q4_K, Q6_K), with its scalar metadata and the first tokens of its
vocabulary, and one synthetic Q4_0 tensor of 800 blocks whose scales take few low bytes for
each high byte (as scales computed from BF16 weights do), so that BEST codes them with the
byctx codec: the original of the format version 6 golden archives, small enough for their
every-byte mutation test.

    python3 testdata/make_tiny_gguf.py > testdata/tiny.gguf
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_gguf_excerpt as excerpt  # noqa: E402

ROWS = {"token_embd.weight": 2, "blk.0.attn_q.weight": 3, "blk.0.attn_norm.weight": 1,
        "gemma.blk.0.attn_q.weight": 2, "gemma.blk.0.attn_output.weight": 1,
        "gemma.blk.0.ffn_down.weight": 1}


def scales_q4_0(blocks):
    """Q4_0 blocks (an F16 scale, 16 bytes of quants) whose scale's high byte is 0x2C or 0x2D
    and whose low byte is 0x10 after 0x2C, one of 0x20, 0x30, 0x40 after 0x2D."""
    out, x = b"", 1
    for _ in range(blocks):
        x = (x * 1103515245 + 12345) % 2**31
        hi = 0x2C + (x >> 16) % 2
        lo = 0x10 if hi == 0x2C else 0x20 + 0x10 * ((x >> 8) % 3)
        out += bytes([lo, hi]) + b"\x88" * 16
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    kvs, tensors = excerpt.read(os.path.join(here, "excerpt.gguf"), ROWS)
    kvs = [(k, t, v) for k, t, v in kvs if t != 9 or b"token" in k][:24]
    tensors.append(("synthetic.scales", [256, 100], 2, scales_q4_0(800)))
    excerpt.write(kvs, tensors, sys.stdout.buffer)


if __name__ == "__main__":
    main()
