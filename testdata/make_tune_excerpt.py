#!/usr/bin/env python3
"""Cut the same few tensors from a base checkpoint and a fine-tune of it, for the fine-tune tests.

Both excerpts keep the real bytes of the same tensors (row prefixes of the large embeddings), so
the fine-tune's differences from its base are the real ones. Run from the repository root:
    python3 testdata/make_tune_excerpt.py ../shared/data testdata
which writes testdata/tune-base.safetensors and testdata/tune.safetensors.
"""
import json
import struct
import sys

WIDTH = {"BF16": 2, "F16": 2, "F32": 4, "I64": 8}

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


def read_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return 8 + n, json.loads(f.read(n))


def excerpt(path, out_path):
    start, h = read_header(path)
    header = {"__metadata__": h.get("__metadata__", {})}
    payload = bytearray()
    for name, rows in PICK:
        t = h[name]
        shape = list(t["shape"])
        begin, end = t["data_offsets"]
        if rows is not None:
            shape[0] = rows
            n = WIDTH[t["dtype"]]
            for d in shape:
                n *= d
            end = begin + n
        with open(path, "rb") as f:
            f.seek(start + begin)
            data = f.read(end - begin)
        header[name] = {
            "dtype": t["dtype"],
            "shape": shape,
            "data_offsets": [len(payload), len(payload) + len(data)],
        }
        payload += data
    js = json.dumps(header, separators=(",", ":")).encode()
    js += b" " * (-len(js) % 8)
    with open(out_path, "wb") as f:
        f.write(struct.pack("<Q", len(js)) + js + payload)


def main(src_dir, out_dir):
    excerpt(f"{src_dir}/{BASE}", f"{out_dir}/tune-base.safetensors")
    excerpt(f"{src_dir}/{TUNE}", f"{out_dir}/tune.safetensors")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
