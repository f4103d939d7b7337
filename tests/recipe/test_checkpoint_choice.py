"""``medlama recipe --checkpoint-choice``: the paper's rule (the final step of a fixed number) by default, or the
checkpoint with the best held-out cloze self-retrieval, recorded with every checkpoint's figure."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoTokenizer

from medlama.cli import main
from medlama.runs.queries import load_medlama_queries
from medlama.probers.retrieval import PRESETS, RetrievalProber
from medlama.runs.workflow import probe
from medlama.recipe.heldout import MAX_LENGTH, heldout_queries

RELATIONS = ["associated_morphology_of"]


@pytest.fixture(scope="module")
def tiny_encoder(make_tiny_bert) -> Path:
    return make_tiny_bert("choice-tiny-bert")


@pytest.fixture(scope="module")
def sentence_files(corpus_head) -> list[Path]:
    return [corpus_head(index, 150) for index in (0, 9)]


def heldout_acc10_by_hand(model: Path, pairs) -> float:
    """[CLS] of one text at a time (no padding), exact L2, the pair's own span among the first 10."""
    tokenizer = AutoTokenizer.from_pretrained(str(model))
    encoder = AutoModel.from_pretrained(str(model)).eval()

    def cls(texts):
        with torch.no_grad():
            return np.stack([encoder(**tokenizer(t, truncation=True, max_length=MAX_LENGTH, return_tensors="pt"))
                             .last_hidden_state[0, 0].numpy() for t in texts])

    names, texts = cls(pairs.candidates), cls(pairs.with_mask("[MASK]"))
    ranked = np.argsort(((texts[:, None, :] - names[None]) ** 2).sum(-1), axis=1, kind="stable")
    own = [pairs.candidates.index(gold[0]) for gold in pairs.gold]
    return float(np.mean([own[i] in ranked[i, :10] for i in range(len(own))]))


def test_heldout_choice_probes_the_best_checkpoint_and_records_each(medlama_dir, tiny_encoder, sentence_files,
                                                                     tmp_path, capsys):
    corpus, held_out = sentence_files
    common = ["recipe", "--model", str(tiny_encoder), "--corpus", str(corpus), "--heldout", str(held_out),
              "--steps", "4", "--save-steps", "2", "--rewire-batch-size", "8", "--data", str(medlama_dir),
              "--relations", *RELATIONS]
    assert main([*common, "--checkpoint-choice", "heldout", "--out", str(tmp_path / "chosen")]) == 0
    printed = capsys.readouterr().out
    assert "checkpoint chosen by held-out cloze acc@10" in printed
    results = json.loads((tmp_path / "chosen" / "results.json").read_text())
    choice = results["checkpoint_choice"]
    assert choice["rule"] == "heldout" and "held-out cloze self-retrieval acc@10" in choice["criterion"]
    (record,) = choice["models"]
    figures = record["heldout_acc@10"]
    assert sorted(figures, key=int) == ["2", "4"]
    pairs = heldout_queries(held_out)
    folder = tmp_path / "chosen" / f"rewired-0-{corpus.name}"
    by_hand = {int(step): heldout_acc10_by_hand(folder / "checkpoints" / f"checkpoint-{step}", pairs)
               for step in figures}
    for step, value in figures.items():  # each checkpoint's figure, against a hand computation
        assert value == pytest.approx(by_hand[int(step)], abs=1.5 / len(pairs))  # a near-tie at most
    # the chosen step is the best by the hand computation, the earlier step on a tie
    assert record["chosen_step"] == min(by_hand, key=lambda step: (-by_hand[step], step))
    best = max(figures.values())
    # the rewired row is the probe of the chosen checkpoint
    queries = load_medlama_queries(medlama_dir, "hard", relations=RELATIONS)
    chosen = folder / "checkpoints" / f"checkpoint-{record['chosen_step']}"
    expected = probe(RetrievalProber(chosen, PRESETS["reference"]), queries)
    assert results["runs"][1]["metrics"]["acc@10"] == pytest.approx(expected.acc(10))
    assert results["summary"]["heldout_cloze"]["rewired_mean"]["acc@10"] == pytest.approx(best)

    # the default is the paper's rule: the final step, recorded; the rewiring already there is reused
    assert main([*common, "--out", str(tmp_path / "last")]) == 0
    last = json.loads((tmp_path / "last" / "results.json").read_text())["checkpoint_choice"]
    assert last["rule"] == "last" and "paper's rule" in last["criterion"]
    assert [m["chosen_step"] for m in last["models"]] == [4]


def test_heldout_choice_without_heldout_is_refused_before_any_work(medlama_dir, tiny_encoder, sentence_files,
                                                                   tmp_path, capsys):
    corpus, _ = sentence_files
    assert main(["recipe", "--model", str(tiny_encoder), "--corpus", str(corpus), "--checkpoint-choice", "heldout",
                 "--data", str(medlama_dir), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "medlama: error: --checkpoint-choice heldout chooses by the held-out cloze check: give --heldout" in err
    assert "Traceback" not in err and not (tmp_path / "o").exists()
