"""Makes a small training run of the shared MiniLM for `sc encode --base auto` to code: the
model fine-tuned on CPU, its weights and AdamW state (exp_avg, exp_avg_sq, F32) saved as
safetensors every N steps, plus a second fine-tune from the same base with another seed.

Text: the docstrings of the installed `json`, `argparse`, `pathlib` and `collections` modules
(real English sentences, nothing downloaded). Objective: masked-token prediction through the
tied word embedding (every parameter of the encoder moves). Writes, under OUT (default
~/.cache/sc-data/run):

    run-a/step-0050.safetensors        weights, BF16 like the shared base
    run-a/step-0050.optim.safetensors  exp_avg.NAME and exp_avg_sq.NAME, F32
    ...
    run-b/step-NNNN...                 the second fine-tune (another seed)

Usage: python benches/make-run.py [--out DIR] [--steps 200] [--every 50] [--threads 2]
(the cached CI venv has torch and transformers: ~/.cache/sc-ci/venv-*/bin/python)."""

from __future__ import annotations

import argparse
import inspect
import os
import random
import re

import torch
from safetensors.torch import load_file, save_file
from transformers import BertConfig, BertModel

HERE = os.path.dirname(os.path.abspath(__file__))
BASE = os.path.join(HERE, "..", "..", "shared", "data", "all-MiniLM-L6-v2.BF16.safetensors")


def sentences() -> list[str]:
    """Docstring sentences of a few standard-library modules."""
    import argparse as a, collections as c, json as j, pathlib as p

    out = []
    for mod in (a, c, j, p):
        for _, obj in inspect.getmembers(mod):
            doc = inspect.getdoc(obj) or ""
            out += [s.strip() for s in re.split(r"[.\n]\s*\n|\.\s", doc) if len(s.split()) >= 5]
    return sorted(set(out))


def tokenize(text: str, vocab: int) -> list[int]:
    """Words hashed into the vocabulary (ids 1000 and up: clear of BERT's special tokens)."""
    return [1000 + (hash_word(w) % (vocab - 1000)) for w in re.findall(r"\w+", text.lower())]


def hash_word(w: str) -> int:
    h = 2166136261
    for ch in w.encode():
        h = ((h ^ ch) * 16777619) & 0xFFFFFFFF
    return h


def config() -> BertConfig:
    return BertConfig(
        vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
        intermediate_size=1536, max_position_embeddings=512,
    )


def train(out: str, seed: int, steps: int, every: int, texts: list[str]) -> None:
    torch.manual_seed(seed)
    rnd = random.Random(seed)
    model = BertModel(config(), add_pooling_layer=False)
    state = load_file(BASE)
    keys = {k: k for k in model.state_dict()}
    model.load_state_dict({k: state[k].float() for k in keys if k in state}, strict=False)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=5e-5, weight_decay=0.01)
    emb = model.embeddings.word_embeddings.weight
    ids = [tokenize(t, 30522)[:32] for t in texts]
    ids = [t for t in ids if len(t) >= 6]
    os.makedirs(out, exist_ok=True)
    names = {p: n for n, p in model.named_parameters()}
    for step in range(1, steps + 1):
        batch = [rnd.choice(ids) for _ in range(8)]
        n = max(len(b) for b in batch)
        x = torch.tensor([[101] + b + [0] * (n - len(b)) for b in batch])
        mask = torch.rand(x.shape) < 0.15
        mask[:, 0] = False
        target = x.clone()
        x = x.masked_fill(mask, 103)
        h = model(input_ids=x, attention_mask=(x != 0).long()).last_hidden_state
        logits = h[mask] @ emb.t()
        loss = torch.nn.functional.cross_entropy(logits, target[mask]) if mask.any() else h.sum() * 0
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % every == 0:
            tag = os.path.join(out, f"step-{step:04d}")
            sd = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()
                  if v.is_floating_point()}
            save_file(sd, tag + ".safetensors")
            moments = {}
            for p, s in opt.state.items():
                moments["exp_avg." + names[p]] = s["exp_avg"].contiguous()
                moments["exp_avg_sq." + names[p]] = s["exp_avg_sq"].contiguous()
            save_file(moments, tag + ".optim.safetensors")
            print(f"{tag}: loss {loss.item():.3f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.expanduser("~/.cache/sc-data/run"))
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--every", type=int, default=50)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    texts = sentences()
    train(os.path.join(a.out, "run-a"), 1, a.steps, a.every, texts)
    train(os.path.join(a.out, "run-b"), 2, a.steps // 2, a.every, texts)


if __name__ == "__main__":
    main()
