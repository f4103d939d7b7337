"""``medlama recipe`` (the main job) end to end on a tiny encoder: probe, rewire on two corpora, probe again,
mean and std over the corpora, and the held-out cloze self-retrieval check against a hand computation."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import numpy as np
import pytest
import torch

from medlama.cli import main
from medlama.runs.workflow import probe
from medlama.probers.retrieval import PRESETS, RetrievalProber
from medlama.runs.queries import load_medlama_queries
from medlama.recipe.heldout import MAX_LENGTH, heldout_queries

RELATIONS = ["associated_morphology_of"]


@pytest.fixture(scope="module")
def tiny_encoder(make_tiny_bert) -> Path:
    return make_tiny_bert("recipe-tiny-bert")


@pytest.fixture(scope="module")
def sentence_files(corpus_head) -> list[Path]:
    """150 real PubMed lines from each of three released files: two to rewire on, one held out."""
    return [corpus_head(index, 150) for index in (0, 1, 9)]


def cls_vectors(model_path: Path, texts: list[str], max_length: int) -> np.ndarray:
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_path))
    model = AutoModel.from_pretrained(str(model_path)).eval()
    with torch.no_grad():  # one text at a time: no padding at all
        return np.stack([model(**tokenizer(text, truncation=True, max_length=max_length, return_tensors="pt"))
                         .last_hidden_state[0, 0].numpy() for text in texts])


def test_recipe_end_to_end(medlama_dir, tiny_encoder, sentence_files, tmp_path, capsys):
    *corpora, held_out = sentence_files
    out = tmp_path / "recipe"
    status = main(["recipe", "--model", str(tiny_encoder), "--corpus", *map(str, corpora), "--heldout", str(held_out),
                   "--steps", "2", "--rewire-batch-size", "8", "--data", str(medlama_dir), "--relations", *RELATIONS,
                   "--out", str(out)])
    assert status == 0
    printed = capsys.readouterr().out
    assert "before and after rewiring" in printed and "Held-out cloze self-retrieval" in printed
    assert (out / "heldout.png").is_file() and "heldout.png" in printed  # the held-out check drawn too
    results = json.loads((out / "results.json").read_text())
    summary = results["summary"]

    # the un-rewired row is the plain probe of the same model
    queries = load_medlama_queries(medlama_dir, "hard", relations=RELATIONS)
    base = probe(RetrievalProber(tiny_encoder, PRESETS["reference"]), queries)
    for k in (1, 5, 10):
        assert summary["base"][f"acc@{k}"] == pytest.approx(base.acc(k))
    # one rewired model per corpus, each a loadable folder, and mean / sample std over them
    assert summary["runs"] == 2 and len(results["rewired_models"]) == 2
    for model in results["rewired_models"]:
        assert (Path(model) / "config.json").is_file() and (Path(model) / "rewire_config.json").is_file()
    runs = results["runs"][1:]
    for k in (1, 10):
        values = [run["metrics"][f"acc@{k}"] for run in runs]
        assert summary["rewired_mean"][f"acc@{k}"] == pytest.approx(statistics.fmean(values))
        assert summary["rewired_std"][f"acc@{k}"] == pytest.approx(statistics.stdev(values))

    # held-out cloze self-retrieval of the un-rewired model, by hand: [CLS], L2, own span in the top k
    cloze = summary["heldout_cloze"]
    pairs = heldout_queries(held_out)
    assert cloze["pairs"] == len(pairs) > 100
    names = cls_vectors(tiny_encoder, pairs.candidates, MAX_LENGTH)
    texts = cls_vectors(tiny_encoder, pairs.with_mask("[MASK]"), MAX_LENGTH)
    distances = ((texts[:, None, :] - names[None]) ** 2).sum(-1)
    ranked = np.argsort(distances, axis=1, kind="stable")
    own = np.array([pairs.candidates.index(gold[0]) for gold in pairs.gold])
    for k in (1, 10):
        expected = np.mean([own[i] in ranked[i, :k] for i in range(len(own))])
        assert cloze["base"][f"acc@{k}"] == pytest.approx(expected, abs=1.5 / len(own))  # a near-tie at most
    assert 0 <= cloze["rewired_mean"]["acc@10"] <= 1 and cloze["rewired_std"]["acc@10"] >= 0


def test_recipe_bad_input(medlama_dir, tiny_encoder, sentence_files, tmp_path, capsys):
    corpus, _, held_out = sentence_files
    common = ["--model", str(tiny_encoder), "--data", str(medlama_dir), "--relations", *RELATIONS,
              "--out", str(tmp_path / "o")]
    assert main(["recipe", "--corpus", str(corpus), "--heldout", str(corpus), *common]) == 2
    assert "the held-out corpus is one of the rewiring corpora" in capsys.readouterr().err
    assert main(["recipe", "--corpus", str(corpus), "--heldout", str(tmp_path / "missing"), *common]) == 2
    assert "corpus file not found" in capsys.readouterr().err
    assert main(["recipe", "--corpus", str(corpus), "--repeat", "2", *common]) == 2
    assert "--repeat 2 needs 1 to 1 corpora" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_heldout_pairs_follow_the_masking_rule(sentence_files):
    held_out = sentence_files[2]
    pairs = heldout_queries(held_out, pairs=40, seed=3)
    assert pairs == heldout_queries(held_out, pairs=40, seed=3)  # seeded
    lines = held_out.read_text(encoding="utf-8").splitlines()
    for text, gold in zip(pairs.texts, pairs.gold):
        # query = the line with its tail span (before the last "word", the trailing-space field) as [Y]
        assert text.endswith("[Y] ") and gold[0].strip()
        assert text.replace("[Y]", gold[0]) in lines
    assert len(pairs) <= 40 and set(pairs.candidates) == {gold[0] for gold in pairs.gold}


def test_recipe_overwrite_keeps_finished_rewirings(medlama_dir, tiny_encoder, sentence_files, tmp_path, capsys):
    """--overwrite replaces the results; a finished rewiring with the same settings is kept as it is (never
    trained a step further), and its record names the preset the recipe ran."""
    corpus = sentence_files[0]
    out = tmp_path / "recipe"
    common = ["recipe", "--model", str(tiny_encoder), "--corpus", str(corpus), "--steps", "2", "--rewire-batch-size",
              "8", "--data", str(medlama_dir), "--relations", *RELATIONS, "--limit", "5", "--out", str(out)]
    assert main(common) == 0
    rewired = out / f"rewired-0-{corpus.name}"
    weights = (rewired / "model.safetensors").read_bytes()
    record = json.loads((rewired / "rewire_config.json").read_text())
    assert record["command"].endswith("--preset demo") and record["training"]["global_step"] == 2
    first = json.loads((out / "results.json").read_text())["summary"]
    capsys.readouterr()
    assert main([*common, "--overwrite"]) == 0
    assert "already holds this run's final model, trained for 2 steps" in capsys.readouterr().err
    assert (rewired / "model.safetensors").read_bytes() == weights
    assert json.loads((rewired / "rewire_config.json").read_text())["training"] == record["training"]
    assert not (rewired / "checkpoints" / "checkpoint-3").exists()
    assert json.loads((out / "results.json").read_text())["summary"] == first
