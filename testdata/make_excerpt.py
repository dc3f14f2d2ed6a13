#!/usr/bin/env python3
"""Cut a small, valid safetensors excerpt of real weights from ../shared/data.

The tensors keep their real bytes (row prefixes of the large embeddings), so the excerpt has the
statistics of trained weights while staying a few MB. Run from the repository root:
    python3 testdata/make_excerpt.py ../shared/data testdata/sample.safetensors
"""
import json
import struct
import sys

WIDTH = {"BF16": 2, "F16": 2, "F32": 4, "I64": 8}

# (source file, tensor name, rows to keep or None for all, new name)
PICK = [
    ("all-MiniLM-L6-v2.BF16.safetensors", "embeddings.position_ids", None, None),
    ("all-MiniLM-L6-v2.BF16.safetensors", "embeddings.LayerNorm.bias", None, None),
    ("all-MiniLM-L6-v2.BF16.safetensors", "embeddings.LayerNorm.weight", None, None),
    ("all-MiniLM-L6-v2.BF16.safetensors", "embeddings.position_embeddings.weight", None, None),
    ("all-MiniLM-L6-v2.BF16.safetensors", "embeddings.word_embeddings.weight", 2048, None),
    ("all-MiniLM-L6-v2.BF16.safetensors", "encoder.layer.0.attention.self.query.weight", None, None),
    ("all-MiniLM-L6-v2.BF16.safetensors", "encoder.layer.0.attention.self.query.bias", None, None),
    ("all-MiniLM-L6-v2.F32.safetensors", "encoder.layer.5.output.LayerNorm.weight", None, "f32.layer5.output.LayerNorm.weight"),
    ("all-MiniLM-L6-v2.F32.safetensors", "pooler.dense.weight", None, "f32.pooler.dense.weight"),
    ("wordllama-l2_supercat_256.F16.safetensors", "embedding.weight", 2048, "f16.embedding.weight"),
]


def read_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return 8 + n, json.loads(f.read(n))


def write_tensors(out_path, metadata, tensors):
    """Writes `tensors`, (name, dtype, shape, bytes) in file order, as a safetensors file."""
    header = {"__metadata__": metadata}
    payload = bytearray()
    for name, dtype, shape, data in tensors:
        header[name] = {
            "dtype": dtype,
            "shape": shape,
            "data_offsets": [len(payload), len(payload) + len(data)],
        }
        payload += data
    js = json.dumps(header, separators=(",", ":")).encode()
    js += b" " * (-len(js) % 8)
    with open(out_path, "wb") as f:
        f.write(struct.pack("<Q", len(js)) + js + payload)


def write_excerpt(src_dir, picks, out_path, metadata):
    """Writes the tensors `picks` (as PICK) of the files in `src_dir` to `out_path`."""
    tensors = []
    for src, name, rows, new_name in picks:
        path = f"{src_dir}/{src}"
        start, h = read_header(path)
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
        tensors.append((new_name or name, t["dtype"], shape, data))
    write_tensors(out_path, metadata, tensors)


def main(src_dir, out_path):
    metadata = {"format": "pt", "source": "excerpt of ../shared/data, see testdata/README.md"}
    write_excerpt(src_dir, PICK, out_path, metadata)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
