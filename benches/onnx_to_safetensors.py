#!/usr/bin/env python3
"""Convert the float initializers of an ONNX model to safetensors (needs numpy + onnx).

Usage: onnx_to_safetensors.py IN.onnx STEM
Writes STEM.F32.safetensors and STEM.BF16.safetensors (F32 rounded to nearest even).
Tensors are named NODE.ROLE after the first node that consumes them (Conv_0.weight, LSTM_79.W, ...),
in graph order; non-float initializers (INT64 shape constants) are dropped.
"""
import sys, os
import numpy as np, onnx
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from st_write import save
from onnx import numpy_helper
m = onnx.load(sys.argv[1])
init = {t.name: t for t in m.graph.initializer}
ROLE = {'Conv': {1: 'weight', 2: 'bias'}, 'Gemm': {1: 'weight', 2: 'bias'}, 'LSTM': {1: 'W', 2: 'R', 3: 'B'},
        'GRU': {1: 'W', 2: 'R', 3: 'B'}, 'BatchNormalization': {1: 'scale', 2: 'bias', 3: 'mean', 4: 'var'}}
out, seen = {}, set()
for k, n in enumerate(m.graph.node):
    for i, x in enumerate(n.input):
        if x not in init or x in seen: continue
        seen.add(x)
        a = numpy_helper.to_array(init[x])
        if a.dtype != np.float32: continue
        name = f"{n.name or n.op_type + '_' + str(k)}.{ROLE.get(n.op_type, {}).get(i, 'in' + str(i))}"
        assert name not in out, name
        out[name] = np.ascontiguousarray(a)
save(sys.argv[2], out)
