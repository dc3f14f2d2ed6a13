"""Shared by the checkpoint converters beside it: walking a state dict, rebuilding strided
tensors, and writing safetensors files in F32, BF16 (rounded to nearest even, as frameworks cast)
or F16. Needs numpy."""
import json, struct, collections, pickle
import numpy as np


def walk(o, leaf, pre=''):
    """(dotted name, leaf) for every leaf (`leaf(o)` true) of nested dicts."""
    if leaf(o):
        yield pre, o
    elif isinstance(o, dict):
        for k, v in o.items():
            yield from walk(v, leaf, f'{pre}.{k}' if pre else str(k))


def strided(raw, off, size, stride):
    """The tensor of shape `size` and element strides `stride` at element `off` of `raw`."""
    if size:
        arr = np.lib.stride_tricks.as_strided(raw[off:], shape=size, strides=[s * raw.itemsize for s in stride])
    else:
        arr = raw[off:off + 1].reshape(())
    return np.ascontiguousarray(arr)


def write(path, tensors, conv):
    """Writes `tensors` (name -> array) to `path`, each converted by `conv` to (dtype, bytes)."""
    hdr, payload = {}, bytearray()
    for name, a in tensors.items():
        dt, b = conv(a)
        hdr[name] = {'dtype': dt, 'shape': list(a.shape), 'data_offsets': [len(payload), len(payload) + len(b)]}
        payload += b
    js = json.dumps(hdr).encode(); js += b' ' * (-len(js) % 8)
    open(path, 'wb').write(struct.pack('<Q', len(js)) + js + payload)


def f32(a):
    if a.dtype == np.float32:
        return 'F32', a.astype('<f4').tobytes()
    return {np.int64: 'I64', np.int32: 'I32'}[a.dtype.type], a.tobytes()


def bf16(a):
    if a.dtype != np.float32:
        return f32(a)
    u = a.astype('<f4').view('<u4').astype(np.uint64)
    return 'BF16', ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype('<u2').tobytes()


def f16(a):
    return ('F16', a.astype('<f2').tobytes()) if a.dtype == np.float32 else f32(a)


def save(stem, tensors, formats=(('F32', f32), ('BF16', bf16))):
    """Writes STEM.<format>.safetensors for each format and prints a summary."""
    for name, conv in formats:
        write(f'{stem}.{name}.safetensors', tensors, conv)
    print(len(tensors), 'tensors', collections.Counter(str(a.dtype) for a in tensors.values()),
          sum(a.size for a in tensors.values()), 'elements')


# Storage types of torch pickles, as numpy dtypes.
DT = {'FloatStorage': np.float32, 'LongStorage': np.int64, 'HalfStorage': np.float16, 'IntStorage': np.int32,
      'DoubleStorage': np.float64, 'ByteStorage': np.uint8}


class T:
    """A tensor as a torch pickle describes it: storage, element offset, shape, strides."""
    def __init__(self, st, off, size, stride): self.st, self.off, self.size, self.stride = st, off, size, stride


def rebuild(st, off, size, stride, *a): return T(st, off, tuple(size), tuple(stride))


class TorchUnpickler(pickle.Unpickler):
    """Reads a torch pickle without torch: tensors become `T`, storage types their names;
    subclasses say how persistent ids name storages."""
    def find_class(self, mod, name):
        if name == '_rebuild_tensor_v2': return rebuild
        if name in DT: return name
        if name == 'OrderedDict': return collections.OrderedDict
        if mod.startswith('torch'): return lambda *a, **k: None
        return super().find_class(mod, name)


def tensors(obj):
    """(dotted name, T) for every tensor of a loaded state dict."""
    return walk(obj, lambda o: isinstance(o, T))
