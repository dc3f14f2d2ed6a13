#!/usr/bin/env python3
"""Independent check of `sc analyze`: the same entropies computed with numpy, per dtype.

    python3 benches/check_analysis.py FILE.safetensors

Prints, per dtype, the order-0 entropy of each byte plane (high first), of the top two bytes
jointly ("word"), H(second byte | high byte), and for floats of the exponent and of the
sign/mantissa bits of the top word; compare with the rows of `sc analyze FILE`. Needs numpy.
"""
import json, struct, sys
import numpy as np

WIDTH = {'BOOL': 1, 'U8': 1, 'I8': 1, 'F8_E5M2': 1, 'F8_E4M3': 1, 'I16': 2, 'U16': 2, 'F16': 2,
         'BF16': 2, 'I32': 4, 'U32': 4, 'F32': 4, 'I64': 8, 'U64': 8, 'F64': 8}
# Exponent field within the top 16 bits: (lowest bit, bit count).
EXPONENT = {'BF16': (7, 8), 'F32': (7, 8), 'F16': (10, 5), 'F64': (4, 11)}


def entropy(values, size):
    c = np.bincount(values, minlength=size).astype(float)
    p = c[c > 0] / c.sum()
    return float(-(p * np.log2(p)).sum()) + 0.0


data = open(sys.argv[1], 'rb').read()
n = struct.unpack('<Q', data[:8])[0]
header = json.loads(data[8:8 + n])
by_dtype = {}
for name, t in header.items():
    if name != '__metadata__':
        s, e = t['data_offsets']
        by_dtype.setdefault(t['dtype'], []).append(np.frombuffer(data[8 + n + s:8 + n + e], np.uint8))
for dtype, parts in by_dtype.items():
    w = WIDTH[dtype]
    a = np.concatenate(parts).reshape(-1, w)
    planes = [entropy(a[:, w - 1 - k], 256) for k in range(w)]
    out = {'planes': [round(x, 4) for x in planes]}
    if w >= 2:
        top = (a[:, w - 1].astype(np.int64) << 8) | a[:, w - 2]
        word = entropy(top, 1 << 16)
        out.update(word=round(word, 4), second_given_high=round(word - planes[0], 4))
        if dtype in EXPONENT:
            lo, bits = EXPONENT[dtype]
            out['exponent'] = round(entropy((top >> lo) & ((1 << bits) - 1), 1 << bits), 4)
            sm = ((top >> (lo + bits)) << lo) | (top & ((1 << lo) - 1))
            out['sign_mantissa'] = round(entropy(sm, 1 << (16 - bits)), 4)
    print(dtype, out)
