"""README.md's Python examples run as written, on files made here: a tiny BERT model's weights
for the first, a tiny causal language model folder with a tokenizer, encoded with
`sc encode DIR -o OUT`, for the transformers one."""

from __future__ import annotations

import re

import safetensors.torch
import tokenizers
import torch
import transformers

from conftest import ROOT, run_sc


def readme_examples() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Python\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 2, "README's Python section: the loading and transformers examples"
    return blocks


def test_loading_example(tmp_path, monkeypatch, capsys):
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=300, hidden_size=32, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=48)
    model = transformers.BertModel(config).to(torch.bfloat16)
    original = {k: v.clone() for k, v in model.state_dict().items()}
    safetensors.torch.save_file(original, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
    monkeypatch.chdir(tmp_path)
    scope = {"model": model}
    exec(readme_examples()[0], scope)
    assert (scope["missing"], scope["unexpected"]) == ([], [])
    for k, v in original.items():
        assert torch.equal(model.state_dict()[k], v), k
        assert torch.equal(scope["state"][k], v), k
    assert torch.equal(scope["rows"], original["embeddings.word_embeddings.weight"][0:128])
    assert (tmp_path / "restored.safetensors").read_bytes() == (tmp_path / "model.safetensors").read_bytes()
    assert "blocks_decoded" in capsys.readouterr().out


def test_transformers_example(tmp_path, monkeypatch):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2,
                                      num_attention_heads=2, num_key_value_heads=2,
                                      intermediate_size=64, max_position_embeddings=64)
    model = transformers.LlamaForCausalLM(config).to(torch.bfloat16)
    folder = tmp_path / "DIR"
    model.save_pretrained(folder, max_shard_size="40KB")
    words = ["[UNK]", "hello", "world"] + [f"w{k}" for k in range(61)]
    backend = tokenizers.Tokenizer(
        tokenizers.models.WordLevel({w: k for k, w in enumerate(words)}, unk_token="[UNK]"))
    backend.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    transformers.PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]").save_pretrained(folder)
    run_sc("encode", "-q", folder, "-o", tmp_path / "OUT")
    assert (tmp_path / "OUT" / "model.safetensors.index.json").exists()
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(readme_examples()[1], scope)
    loaded, tokenizer = scope["model"], scope["tokenizer"]
    assert type(loaded) is transformers.LlamaForCausalLM
    expected, got = model.state_dict(), loaded.state_dict()
    assert sorted(got) == sorted(expected)
    for k, v in expected.items():
        assert got[k].dtype == torch.bfloat16 and torch.equal(got[k], v), k
    ids = tokenizer("hello world w7", return_tensors="pt")["input_ids"]
    assert ids.tolist() == [[1, 2, 10]]
    with torch.no_grad():
        assert torch.equal(loaded(ids).logits, model(ids).logits)
