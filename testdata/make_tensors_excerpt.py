#!/usr/bin/env python3
"""Cut a few small BF16 matrices from testdata/sample.safetensors into one small file.

Each matrix is the top-left corner of a real weight matrix (real bytes), so one BEST block
holds several tensors of trained weights. Run from the repository root:
    python3 testdata/make_tensors_excerpt.py testdata/sample.safetensors testdata/tensors.safetensors
"""
import sys

from make_excerpt import read_header, write_tensors

# (tensor name in the sample, rows, columns) of each corner kept; a 1-D tensor keeps its first
# `columns` elements (rows is None).
PICK = [
    ("encoder.layer.0.attention.self.query.weight", 16, 64),
    ("embeddings.LayerNorm.weight", None, 64),
    ("embeddings.word_embeddings.weight", 16, 64),
    ("embeddings.position_embeddings.weight", 16, 64),
]


def corner(data, t, rows, cols):
    """The shape and bytes of the corner (`rows` None: the prefix) of BF16 tensor `t`."""
    assert t["dtype"] == "BF16"
    begin = t["data_offsets"][0]
    if rows is None:
        return [cols], data[begin : begin + 2 * cols]
    width = t["shape"][1]
    lines = (data[begin + 2 * r * width : begin + 2 * (r * width + cols)] for r in range(rows))
    return [rows, cols], b"".join(lines)


def main(src, out_path):
    start, header = read_header(src)
    with open(src, "rb") as f:
        f.seek(start)
        data = f.read()
    tensors = []
    for name, rows, cols in PICK:
        shape, part = corner(data, header[name], rows, cols)
        tensors.append((name, "BF16", shape, part))
    metadata = {"format": "pt", "source": "corners of testdata/sample.safetensors"}
    write_tensors(out_path, metadata, tensors)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
