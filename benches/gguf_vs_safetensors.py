#!/usr/bin/env python3
"""The same tensors as safetensors and as GGUF, coded by sc: issue #27 asks that an F16 or BF16
GGUF code within 0.1 points of its safetensors twin.

Converts each safetensors file given (default: ../shared/data/*.safetensors, BF16, F16 and F32
files) to a GGUF file holding the same tensors in the same order and dtype (the `gguf` Python
package's writer, alignment 32), encodes both with sc in FAST and BEST, and prints each
archive's size as a percentage of its original, and the difference.

    python3 benches/gguf_vs_safetensors.py [--sc target/release/sc] [FILE.safetensors ...]

Needs numpy and gguf (python/ci/requirements.txt pins them; the CI venv has them).
"""
import argparse
import glob
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
from gguf import GGMLQuantizationType, GGUFWriter

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.join(HERE, "..", "..", "shared", "data")
TYPES = {"F32": (np.float32, GGMLQuantizationType.F32), "F16": (np.float16, GGMLQuantizationType.F16),
         "BF16": (np.uint16, GGMLQuantizationType.BF16), "F64": (np.float64, GGMLQuantizationType.F64),
         "I8": (np.int8, GGMLQuantizationType.I8), "I16": (np.int16, GGMLQuantizationType.I16),
         "I32": (np.int32, GGMLQuantizationType.I32), "I64": (np.int64, GGMLQuantizationType.I64)}


def to_gguf(src, dst):
    """Writes the tensors of safetensors file `src` to GGUF file `dst`; False if it has a dtype
    GGUF cannot hold as it is."""
    with open(src, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    w = GGUFWriter(dst, "sc-bench")
    for name, t in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        if t["dtype"] not in TYPES:
            return False
        np_type, ggml = TYPES[t["dtype"]]
        a, b = t["data_offsets"]
        arr = np.frombuffer(data[a:b], dtype=np_type).reshape(t["shape"] or [1])
        w.add_tensor(name, arr, raw_dtype=ggml)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return True


def coded(sc, path, mode, out):
    subprocess.run([sc, "encode", "-q", "-f", f"--mode={mode}", path, "-o", out], check=True)
    return 100.0 * os.path.getsize(out) / os.path.getsize(path)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sc", default=os.path.join(HERE, "..", "target", "release", "sc"))
    p.add_argument("files", nargs="*")
    a = p.parse_args()
    files = a.files or sorted(glob.glob(os.path.join(SHARED, "*.safetensors")))
    if not files:
        print(f"no safetensors files given and none in {SHARED}: nothing to measure")
        return 0
    print("| file | mode | safetensors % | GGUF % | difference (points) |")
    print("|---|---|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for src in files:
            gg = os.path.join(tmp, os.path.basename(src) + ".gguf")
            if not to_gguf(src, gg):
                print(f"| {os.path.basename(src)} | - | dtype GGUF does not hold | | |")
                continue
            for mode in ["fast", "best"]:
                st = coded(a.sc, src, mode, os.path.join(tmp, "st.sc"))
                gp = coded(a.sc, gg, mode, os.path.join(tmp, "gg.sc"))
                print(f"| {os.path.basename(src)} | {mode} | {st:.2f} | {gp:.2f} | {gp - st:+.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
