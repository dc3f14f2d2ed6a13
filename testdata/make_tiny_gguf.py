#!/usr/bin/env python3
"""Writes testdata/tiny.gguf: the first rows of a tensor of each ggml type in excerpt.gguf
(Q8_0, Q4_1, F32, Q5_0, Q4_K, Q6_K), with its scalar metadata and the first tokens of its
vocabulary: the original of the format version 6 golden archives, small enough for their
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


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    kvs, tensors = excerpt.read(os.path.join(here, "excerpt.gguf"), ROWS)
    kvs = [(k, t, v) for k, t, v in kvs if t != 9 or b"token" in k][:24]
    excerpt.write(kvs, tensors, sys.stdout.buffer)


if __name__ == "__main__":
    main()
