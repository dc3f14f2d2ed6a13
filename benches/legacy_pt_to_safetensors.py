#!/usr/bin/env python3
"""Convert a legacy (pre-1.6, non-zip) PyTorch .pt file to safetensors without torch.

Usage: legacy_pt_to_safetensors.py IN.pt STEM [PREFIX]
Writes STEM.F32.safetensors and STEM.BF16.safetensors (F32 rounded to nearest even).
Only tensors whose dotted name starts with PREFIX are kept (e.g. 'model_state.'; stripped).
"""
import pickle, struct, json, collections, sys
import numpy as np
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
def walk(o, pre=''):
    if isinstance(o, T): yield pre, o
    elif isinstance(o, dict):
        for k, v in o.items(): yield from walk(v, f'{pre}.{k}' if pre else str(k))
prefix = sys.argv[3] if len(sys.argv) > 3 else ''
out = {}
for name, t in walk(obj):
    if not name.startswith(prefix): continue
    raw = data[t.st]
    if t.size:
        arr = np.lib.stride_tricks.as_strided(raw[t.off:], shape=t.size, strides=[s*raw.itemsize for s in t.stride])
    else:
        arr = raw[t.off:t.off+1].reshape(())
    out[name[len(prefix):]] = np.ascontiguousarray(arr)
def write(path, conv):
    hdr, payload = {}, bytearray()
    for name, a in out.items():
        dt, b = conv(a)
        hdr[name] = {'dtype': dt, 'shape': list(a.shape), 'data_offsets': [len(payload), len(payload) + len(b)]}
        payload += b
    js = json.dumps(hdr).encode(); js += b' ' * (-len(js) % 8)
    open(path, 'wb').write(struct.pack('<Q', len(js)) + js + payload)
def f32(a): return ('F32', a.astype('<f4').tobytes()) if a.dtype == np.float32 else ({np.int64: 'I64', np.int32: 'I32'}[a.dtype.type], a.tobytes())
def bf16(a):
    if a.dtype != np.float32: return f32(a)
    u = a.astype('<f4').view('<u4').astype(np.uint64)
    return 'BF16', ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype('<u2').tobytes()
stem = sys.argv[2]
write(stem + '.F32.safetensors', f32); write(stem + '.BF16.safetensors', bf16)
print(len(out), 'tensors', collections.Counter(str(a.dtype) for a in out.values()), sum(a.size for a in out.values()), 'elements')
