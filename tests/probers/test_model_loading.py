"""How the probed model is loaded: ``--revision`` loads (and records) the Hub revision asked for, from a fake
offline Hub cache with two revisions; ``--peft`` applies a LoRA adapter to its base model, predicting as the
merged model does; ``trust_remote_code`` reaches ``from_pretrained`` only when asked; bad options are refused
before anything loads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from medlama.core.errors import MedlamaInputError
from medlama.core.models import LoadOptions

from probe_outputs import predictions  # tests/helpers: per-query rows of predictions.jsonl
from tiny_causal import save_causal  # tests/helpers: tiny causal LMs with locally trained tokenizers

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread (tests/conftest.py)

COMMITS = ("a" * 40, "b" * 40)


def hub_cache(root: Path) -> Path:
    """A Hub cache holding ``tiny/gpt2`` at two commits (different weights); ``main`` is the second."""
    repo = root / "models--tiny--gpt2"
    for seed, commit in enumerate(COMMITS):
        save_causal(repo / "snapshots" / commit, "gpt2", seed=seed)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMITS[1])
    return root


def run_cli(tmp_path, env, *flags) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "medlama", "probe", *flags], env=env, capture_output=True,
                          text=True, cwd=tmp_path)


def test_revision_loads_and_records_the_commit_asked_for(medlama_tiny, tmp_path):
    cache = hub_cache(tmp_path / "cache")
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "OMP_NUM_THREADS": "1"}
    data = ["--data", str(medlama_tiny), "--config", "full", "--method", "causal-likelihood", "--quiet"]
    done = run_cli(tmp_path, env, *data, "--model", "tiny/gpt2", "--revision", COMMITS[0], "--out", "hub")
    assert done.returncode == 0, done.stderr
    direct = run_cli(tmp_path, env, *data, "--model", str(cache / "models--tiny--gpt2" / "snapshots" / COMMITS[0]),
                     "--out", "folder")
    assert direct.returncode == 0, direct.stderr
    (result,) = json.loads((tmp_path / "hub" / "results.json").read_text())
    assert result["settings"]["revision"] == COMMITS[0]  # not main's, the newest in the cache
    assert result["provenance"]["model"] == {"id": "tiny/gpt2", "revision": COMMITS[0]}
    assert result["settings"]["trust_remote_code"] is False and result["settings"]["peft"] is None
    hub_rows, folder_rows = predictions(tmp_path / "hub"), predictions(tmp_path / "folder")
    assert [(r["predictions"], r["scores"]) for r in hub_rows] == [(r["predictions"], r["scores"]) for r in folder_rows]
    main = run_cli(tmp_path, env, *data, "--model", "tiny/gpt2", "--out", "main")
    assert main.returncode == 0, main.stderr
    (latest,) = json.loads((tmp_path / "main" / "results.json").read_text())
    assert latest["settings"]["revision"] == COMMITS[1]
    assert [r["scores"] for r in predictions(tmp_path / "main")] != [r["scores"] for r in hub_rows]


def test_revision_of_a_local_folder_is_refused(tiny_gpt2, tmp_path, capsys):
    from medlama.cli import main

    assert main(["probe", "--model", str(tiny_gpt2), "--revision", "main", "--method", "causal-likelihood",
                 "--out", str(tmp_path / "out")]) == 2
    assert "--revision applies to a Hub model id" in capsys.readouterr().err


def lora_adapter(base: Path, root: Path) -> tuple[Path, Path]:
    """A LoRA adapter of ``base`` with non-zero weights, and the merged model (adapter folded in) saved beside."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(1)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(base),
                           LoraConfig(r=4, lora_alpha=8, target_modules=["c_attn"], fan_in_fan_out=True,
                                      init_lora_weights=False))
    with torch.no_grad():
        for name, weight in model.named_parameters():
            if "lora_" in name:
                weight.normal_(0, 0.5)
    model.save_pretrained(root / "adapter")
    model.merge_and_unload().save_pretrained(root / "merged")
    AutoTokenizer.from_pretrained(base).save_pretrained(root / "merged")
    return root / "adapter", root / "merged"


def test_peft_adapter_predicts_as_the_merged_model(tiny_gpt2, medlama_tiny, tmp_path):
    import medlama

    adapter, merged = lora_adapter(tiny_gpt2, tmp_path)
    common = {"data": str(medlama_tiny), "config": "full", "method": "causal-likelihood"}
    with_adapter = medlama.probe(str(tiny_gpt2), peft=str(adapter), **common)
    reference = medlama.probe(str(merged), **common)
    base = medlama.probe(str(tiny_gpt2), **common)
    rows = list(with_adapter.prediction_rows())
    assert [(r["predictions"], r["gold_rank"]) for r in rows] == \
        [(r["predictions"], r["gold_rank"]) for r in reference.prediction_rows()]
    for mine, theirs in zip(rows, reference.prediction_rows()):
        assert mine["scores"] == pytest.approx(theirs["scores"], rel=1e-5)
    assert [r["scores"] for r in rows] != [r["scores"] for r in base.prediction_rows()]  # the adapter changed them
    record = with_adapter.settings["peft"]
    assert record["base_model"] == tiny_gpt2.name and record["name"] == "adapter" and len(record["sha256"]) == 64
    assert record["base_match"] == "same folder"


def test_an_adapter_trained_on_another_base_is_refused_before_loading(tiny_gpt2, medlama_tiny, tmp_path):
    """An adapter of another model of the same shapes would load without a word and results.json would name two
    base models: it is refused, naming both, before any model loads (the API as the CLI)."""
    import medlama

    adapter, _ = lora_adapter(tiny_gpt2, tmp_path)
    other = save_causal(tmp_path / "other-gpt2", "gpt2", seed=3)  # same shapes, other weights
    with pytest.raises(MedlamaInputError, match=r"the adapter was trained on .*cli-tiny-gpt2.*not on the model it is "
                                                r"applied to .*other-gpt2"):
        medlama.probe(str(other), peft=str(adapter), data=str(tmp_path / "not-read"), method="causal-likelihood")
    result = run_cli(tmp_path, {**os.environ, "HF_HUB_OFFLINE": "1"}, "--model", str(other), "--peft", str(adapter),
                     "--method", "causal-likelihood", "--data", str(medlama_tiny), "--config", "full",
                     "--out", str(tmp_path / "out"))
    assert result.returncode != 0 and "the adapter was trained on" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "out").exists()
    copy = tmp_path / "copy-of-base"  # the same files elsewhere: the same model
    import shutil

    shutil.copytree(tiny_gpt2, copy)
    LoadOptions(peft=str(adapter)).check(str(copy))


def test_how_an_adapter_base_is_matched(tmp_path, capsys):
    from medlama.core.models import adapter_base_match

    assert adapter_base_match(None, "gpt2", "a") == "unrecorded"
    assert adapter_base_match("org/gpt2", "org/gpt2", "a") == "same Hub id"
    with pytest.raises(MedlamaInputError, match="trained on 'org/gpt2'.*'org/other'"):
        adapter_base_match("org/gpt2", "org/other", "a")
    (tmp_path / "gpt2").mkdir()
    assert adapter_base_match("org/gpt2", str(tmp_path / "gpt2"), "a") == "same name"  # a local copy, named so
    snapshot = tmp_path / "models--org--base" / "snapshots" / ("c" * 40)
    snapshot.mkdir(parents=True)
    assert adapter_base_match("org/base", str(snapshot), "a") == "same name"  # the Hub cache's copy of it
    (tmp_path / "mine").mkdir()
    assert capsys.readouterr().err == ""
    assert adapter_base_match("org/gpt2", str(tmp_path / "mine"), "a") == "unverified"
    assert "cannot be checked against it" in capsys.readouterr().err


def test_trust_remote_code_reaches_from_pretrained_only_when_asked(tiny_gpt2, monkeypatch):
    from transformers import AutoModelForCausalLM

    from medlama.core.models import LoadOptions, loading_with
    from medlama.probers.causal.scoring import load_causal_lm

    seen = []
    original = AutoModelForCausalLM.from_pretrained.__func__

    def spy(cls, *args, **kwargs):
        seen.append(kwargs.get("trust_remote_code"))
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", classmethod(spy))
    load_causal_lm(tiny_gpt2, "causal-likelihood")
    with loading_with(LoadOptions(trust_remote_code=True)) as record:
        load_causal_lm(tiny_gpt2, "causal-likelihood")
    assert seen == [False, True] and record["trust_remote_code"] is True


def test_peft_options_are_checked_before_loading(tiny_gpt2, tmp_path, monkeypatch):
    import importlib.util

    import medlama

    with pytest.raises(MedlamaInputError, match="no adapter_config.json"):
        medlama.probe(str(tiny_gpt2), method="causal-likelihood", peft=str(tiny_gpt2), data=str(tmp_path / "none"))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "peft" else real(name, *a))
    with pytest.raises(MedlamaInputError, match=r"medlama\[peft\]"):
        medlama.probe(str(tiny_gpt2), method="causal-likelihood", peft="some/adapter", data=str(tmp_path / "none"))


def test_an_adapter_folder_under_home_is_read_where_it_is(tmp_path, monkeypatch):
    """``--peft ~/adapter``: the folder is checked where ``~`` points (its adapter_config.json found there)."""
    from medlama.core.models import LoadOptions

    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "adapter").mkdir()
    with pytest.raises(MedlamaInputError, match="no adapter_config.json"):
        LoadOptions(peft="~/adapter").check("base/model")
    (tmp_path / "adapter" / "adapter_config.json").write_text("{}")
    LoadOptions(peft="~/adapter").check("base/model")


def test_an_adapter_base_is_matched_by_name_when_neither_is_here(capsys):
    from medlama.core.models import adapter_base_match

    # the Hub's renamed id, and a folder elsewhere named as the Hub model
    assert adapter_base_match("bert-base-uncased", "google-bert/bert-base-uncased", "a") == "same name"
    assert adapter_base_match("/home/alice/models/bert-base-uncased", "bert-base-uncased", "a") == "same name"
    # a folder elsewhere of another name: nothing to compare with, said and recorded, not refused
    assert adapter_base_match("/home/alice/models/mine", "bert-base-uncased", "a") == "unverified"
    assert "cannot be checked against it" in capsys.readouterr().err
