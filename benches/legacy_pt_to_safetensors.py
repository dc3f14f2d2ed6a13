#!/usr/bin/env python3
"""Convert a legacy (pre-1.6, non-zip) PyTorch .pt file to safetensors without torch.

Usage: legacy_pt_to_safetensors.py IN.pt STEM [PREFIX]
Writes STEM.F32.safetensors and STEM.BF16.safetensors (F32 rounded to nearest even).
Only tensors whose dotted name starts with PREFIX are kept (e.g. 'model_state.'; stripped).
"""
import pickle, struct, sys, os
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from st_write import DT, TorchUnpickler, tensors, strided, save
storages = {}
class U(TorchUnpickler):
    def persistent_load(self, pid):
        assert pid[0] == 'storage', pid
        kind, key, loc, numel, view = pid[1:]
        assert view is None, 'storage views not supported'
        storages[key] = kind
        return key
f = open(sys.argv[1], 'rb')
assert pickle.load(f) == 0x1950a86a20f9469cfc6c, 'not a legacy torch file'
assert pickle.load(f) == 1001
pickle.load(f)  # sys_info
obj = U(f).load()
keys = pickle.load(f)
data = {}
for k in keys:
    dt = np.dtype(DT[storages[k]])
    n = struct.unpack('<q', f.read(8))[0]
    data[k] = np.frombuffer(f.read(n * dt.itemsize), dtype=dt)
assert f.read() == b'', 'trailing bytes'
prefix = sys.argv[3] if len(sys.argv) > 3 else ''
out = {name[len(prefix):]: strided(data[t.st], t.off, t.size, t.stride)
       for name, t in tensors(obj) if name.startswith(prefix)}
save(sys.argv[2], out)
