"""A tiny transformers model, built from a config here (no network), saved with
save_pretrained, encoded with `sc encode DIR -o OUT` and loaded back."""

from __future__ import annotations

import os

import pytest
import torch
import transformers

import sc
import sc.transformers

from conftest import run_sc


def tiny_bert():
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=120, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=48,
                                     max_position_embeddings=64)
    return transformers.BertForMaskedLM(config).to(torch.bfloat16)


def assert_same_state(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    assert sorted(sa) == sorted(sb)
    for k in sa:
        assert sa[k].dtype == sb[k].dtype and torch.equal(sa[k], sb[k]), k


@pytest.mark.parametrize("shard", [None, "30KB"])
def test_from_pretrained_equals_the_original(tmp_path, shard):
    model = tiny_bert()
    original = tmp_path / "original"
    kwargs = {"max_shard_size": shard} if shard else {}
    model.save_pretrained(original, **kwargs)
    names = os.listdir(original)
    if shard:
        assert "model.safetensors.index.json" in names
        assert sum(n.endswith(".safetensors") for n in names) >= 2
    else:
        assert "model.safetensors" in names
    encoded = tmp_path / "encoded"
    run_sc("encode", "-q", original, "-o", encoded)
    assert not any(n.endswith(".safetensors") for n in os.listdir(encoded))

    loaded = sc.transformers.from_pretrained(transformers.BertForMaskedLM, encoded)
    assert_same_state(model, loaded)
    reference = transformers.BertForMaskedLM.from_pretrained(original)
    assert_same_state(reference, loaded)
    config = loaded.config.to_dict()
    assert config.pop("_name_or_path") == str(encoded)
    assert config == {k: v for k, v in reference.config.to_dict().items() if k != "_name_or_path"}

    auto = sc.transformers.from_pretrained(transformers.AutoModelForMaskedLM, encoded, threads=1)
    assert type(auto) is transformers.BertForMaskedLM
    assert_same_state(model, auto)
    ids = torch.tensor([[1, 5, 7, 9]])
    with torch.no_grad():
        assert torch.equal(loaded(ids).logits, reference(ids).logits)


def test_missing_shard_is_named(tmp_path):
    tiny_bert().save_pretrained(tmp_path / "o", max_shard_size="30KB")
    run_sc("encode", "-q", tmp_path / "o", "-o", tmp_path / "e")
    victim = sorted(p for p in (tmp_path / "e").iterdir() if p.name.endswith(".sc"))[1]
    victim.unlink()
    with pytest.raises(FileNotFoundError) as err:
        sc.transformers.from_pretrained(transformers.BertForMaskedLM, tmp_path / "e")
    assert err.value.filename == str(victim)
    with pytest.raises(FileNotFoundError):
        sc.transformers.from_pretrained(transformers.BertForMaskedLM, tmp_path / "nowhere")


def test_from_pretrained_with_base(tmp_path):
    # A fine-tune saved in shards, coded against its base saved whole.
    base = tiny_bert()
    base.save_pretrained(tmp_path / "base")
    tune = tiny_bert()
    with torch.no_grad():
        for p in tune.parameters():
            p.add_(torch.randn_like(p) * 1e-3)
    tune.save_pretrained(tmp_path / "tune", max_shard_size="30KB")
    run_sc("encode", "-q", "--base", tmp_path / "base", tmp_path / "tune", "-o", tmp_path / "e")
    loaded = sc.transformers.from_pretrained(transformers.BertForMaskedLM, tmp_path / "e",
                                             base=tmp_path / "base")
    assert_same_state(tune, loaded)
    state = sc.transformers.load_state_dict(tmp_path / "e", base=tmp_path / "base")
    own = tune.state_dict()
    assert state and all(torch.equal(t, own[k]) for k, t in state.items())
    with pytest.raises(sc.ScError, match='coded against the base "base", which was not given'):
        sc.transformers.from_pretrained(transformers.BertForMaskedLM, tmp_path / "e")


@pytest.mark.parametrize("shard", [None, "30KB"])
def test_save_pretrained_writes_what_sc_encode_makes(tmp_path, shard):
    model = tiny_bert()
    kwargs = {"max_shard_size": shard} if shard else {}
    sc.transformers.save_pretrained(model, tmp_path / "OUT", level=9, **kwargs)
    model.save_pretrained(tmp_path / "plain", **kwargs)
    run_sc("encode", "-q", "-9", tmp_path / "plain", "-o", tmp_path / "CLI")
    names = sorted(os.listdir(tmp_path / "OUT"))
    assert names == sorted(os.listdir(tmp_path / "CLI")) and "config.json" in names
    assert not any(n.endswith(".safetensors") for n in names)
    for n in names:
        assert (tmp_path / "OUT" / n).read_bytes() == (tmp_path / "CLI" / n).read_bytes(), n
    assert sorted(os.listdir(tmp_path)) == ["CLI", "OUT", "plain"]
    loaded = sc.transformers.from_pretrained(transformers.BertForMaskedLM, tmp_path / "OUT")
    assert_same_state(model, loaded)
    with pytest.raises(FileExistsError):
        sc.transformers.save_pretrained(model, tmp_path / "OUT")
    sc.transformers.save_pretrained(model, tmp_path / "OUT", overwrite=True)
    assert_same_state(model, sc.transformers.from_pretrained(transformers.BertForMaskedLM, tmp_path / "OUT"))


def test_save_pretrained_refuses_an_existing_file_before_writing(tmp_path):
    out = tmp_path / "OUT"
    out.mkdir()
    (out / "config.json").write_text("the user's own")
    with pytest.raises(FileExistsError) as e:
        sc.transformers.save_pretrained(tiny_bert(), out)
    assert e.value.filename == os.path.join(out, "config.json")
    assert os.listdir(out) == ["config.json"] and (out / "config.json").read_text() == "the user's own"
    assert sorted(os.listdir(tmp_path)) == ["OUT"]


def test_save_pretrained_failures_name_no_deleted_folder(tmp_path):
    out = tmp_path / "OUT"
    (out / "model.safetensors.sc").mkdir(parents=True)
    with pytest.raises(sc.ScError) as e:
        sc.transformers.save_pretrained(tiny_bert(), out, overwrite=True)
    assert ".sc-save-" not in str(e.value) and "model.save_pretrained" in str(e.value), str(e.value)
    assert sorted(os.listdir(tmp_path)) == ["OUT"]


def test_save_pretrained_into_a_dangling_link_fails_once(tmp_path):
    link = tmp_path / "OUT"
    link.symlink_to(tmp_path / "missing")
    with pytest.raises(FileNotFoundError) as e:
        sc.transformers.save_pretrained(tiny_bert(), link)
    assert e.value.filename == str(link) and str(e.value).count(str(link)) == 1
    assert sorted(os.listdir(tmp_path)) == ["OUT"]


def test_save_pretrained_to_s3_leaves_no_local_folder(tmp_path, s3_env, weed, monkeypatch):
    weed.make_bucket("sc-save")
    monkeypatch.chdir(tmp_path)
    model = tiny_bert()
    sc.transformers.save_pretrained(model, "s3://sc-save/bert/")
    assert os.listdir(tmp_path) == []
    loaded = sc.transformers.from_pretrained(transformers.BertForMaskedLM, "s3://sc-save/bert/")
    assert_same_state(model, loaded)
    with pytest.raises(FileExistsError):
        sc.transformers.save_pretrained(model, "s3://sc-save/bert/")
    assert os.listdir(tmp_path) == []
