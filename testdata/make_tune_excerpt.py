#!/usr/bin/env python3
"""Cut the same few tensors from a base checkpoint and a fine-tune of it, for the fine-tune tests.

Both excerpts keep the real bytes of the same tensors (row prefixes of the large embeddings), so
the fine-tune's differences from its base are the real ones. Run from the repository root:
    python3 testdata/make_tune_excerpt.py ../shared/data testdata
which writes testdata/tune-base.safetensors and testdata/tune.safetensors.
"""
import sys

from make_excerpt import read_header, write_excerpt

BASE = "all-MiniLM-L6-v2.BF16.safetensors"
TUNE = "all-MiniLM-L6-v2.simcse.BF16.safetensors"

# (tensor name, rows to keep or None for all)
PICK = [
    ("embeddings.position_ids", None),
    ("embeddings.LayerNorm.bias", None),
    ("embeddings.LayerNorm.weight", None),
    ("embeddings.position_embeddings.weight", 256),
    ("embeddings.word_embeddings.weight", 512),
    ("encoder.layer.0.attention.self.query.weight", None),
    ("encoder.layer.0.attention.self.query.bias", None),
]


def excerpt(src_dir, src, out_path):
    """The tensors of PICK from `src`, with its metadata."""
    _, h = read_header(f"{src_dir}/{src}")
    picks = [(src, name, rows, None) for name, rows in PICK]
    write_excerpt(src_dir, picks, out_path, h.get("__metadata__", {}))


def main(src_dir, out_dir):
    excerpt(src_dir, BASE, f"{out_dir}/tune-base.safetensors")
    excerpt(src_dir, TUNE, f"{out_dir}/tune.safetensors")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
