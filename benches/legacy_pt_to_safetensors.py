#!/usr/bin/env python3
"""Convert a legacy (pre-1.6, non-zip) PyTorch .pt file to safetensors without torch.

Usage: legacy_pt_to_safetensors.py IN.pt STEM [PREFIX]
Writes STEM.F32.safetensors and STEM.BF16.safetensors (F32 rounded to nearest even).
Only tensors whose dotted name starts with PREFIX are kept (e.g. 'model_state.'; stripped).
"""
import pickle, struct, collections, sys, os
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from st_write import walk, strided, save
DT = {'FloatStorage': np.float32, 'LongStorage': np.int64, 'HalfStorage': np.float16, 'IntStorage': np.int32,
      'DoubleStorage': np.float64, 'ByteStorage': np.uint8}
class T:
    def __init__(self, st, off, size, stride): self.st, self.off, self.size, self.stride = st, off, size, stride
def rebuild(st, off, size, stride, *a): return T(st, off, tuple(size), tuple(stride))
storages = {}
class U(pickle.Unpickler):
    def find_class(self, mod, name):
        if name == '_rebuild_tensor_v2': return rebuild
        if name in DT: return name
        if name == 'OrderedDict': return collections.OrderedDict
        if mod.startswith('torch'): return lambda *a, **k: None
        return super().find_class(mod, name)
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
       for name, t in walk(obj, lambda o: isinstance(o, T)) if name.startswith(prefix)}
save(sys.argv[2], out)
