"""``medlama push-results``: a probe output's results and per-query rows as a dataset tree, gated as the data it
quotes, with a card naming model, data, settings and scores, and no local path; refusals of what may not go up.

That ``push-model --results OUT`` puts a probe's scores into the model card's ``model-index`` is tested in
``tests/publishing/test_push_model.py`` (``--results PROBE_OUT``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from huggingface_hub import DatasetCard

from dry_runs import assert_busy_dry_run_refused  # tests/helpers (pytest pythonpath)
from probe_outputs import toy_queries, toy_result

from medlama.cli import main
from medlama.core.errors import MedlamaInputError
from medlama.datasets.licences import GATED_FIELDS, GATED_PROMPT
from medlama.publishing.hub import push_results


@pytest.fixture(scope="module")
def probe_out(tmp_path_factory):
    root = tmp_path_factory.mktemp("results")
    note = f"sentences from {root}/corpus/pubmed.txt"  # a local path inside a run's record
    run = toy_result(toy_queries(), "my-model", 0.5, 1, settings={"method": "retrieval", "model": str(root / "my-model")},
                     extra={"note": note})
    return run.save(root / "probe", argv=["medlama", "probe", "--model", str(root / "my-model")])


def test_dry_run_tree_is_gated_path_free_and_loads(probe_out, tmp_path, capsys):
    target = tmp_path / "dry"
    assert main(["push-results", str(probe_out), "someone/my-results", "--dry-run", str(target)]) == 0
    assert "gated (manual)" in capsys.readouterr().out
    tree = target / "my-results"
    assert sorted(p.name for p in tree.iterdir()) == ["README.md", "predictions.jsonl", "results.json"]
    card = DatasetCard.load(tree / "README.md")
    assert card.data.gated == "manual" and card.data.extra_gated_prompt == GATED_PROMPT
    assert card.data.extra_gated_fields == GATED_FIELDS and "umls" in card.data.tags
    run = json.loads((probe_out / "results.json").read_text())[0]
    for fact in ("my-model", run["data"]["candidates"]["sha256"], "`hard`, 90 queries", "fingerprint `f0`",
                 f"| acc@10 | {100 * run['metrics']['acc@10']:.2f} [{100 * run['intervals']['acc@10'][0]:.2f}, "):
        assert fact in card.text
    manifest = json.loads((target / "manifest.json").read_text())
    assert manifest["gated"] == "manual" and manifest["repo_type"] == "dataset"
    for file in tree.iterdir():  # no local path: the temporary folders, the home folder
        text = file.read_text()
        assert str(probe_out.parent) not in text and str(Path.home()) + "/" not in text, file.name
    pushed = json.loads((tree / "results.json").read_text())
    assert pushed[0]["extra"]["note"] == "sentences from pubmed.txt" and pushed[0]["metrics"] == run["metrics"]
    assert (tree / "predictions.jsonl").read_bytes() == (probe_out / "predictions.jsonl").read_bytes()
    from datasets import load_dataset

    rows = load_dataset(str(tree), "predictions", split="test")
    assert rows.num_rows == 90 and rows[0]["id"] == "disease_has_finding-0"


def test_what_may_not_go_up_is_refused(probe_out, tmp_path):
    with pytest.raises(MedlamaInputError, match="the per-query rows quote names derived from the UMLS Metathesaurus.*push it gated"):
        push_results(probe_out, "me/r", gated="none", dry_run=tmp_path / "a")
    assert push_results(probe_out, "me/r", gated="none", private=True, dry_run=tmp_path / "b")["gated"] is False
    other = toy_result(toy_queries(dataset="context-variance"), "cv", 0.5, 2).save(tmp_path / "cv")
    with pytest.raises(MedlamaInputError, match="push them --private"):
        push_results(other, "me/r", dry_run=tmp_path / "c")
    edited = toy_result(toy_queries(), "x", 0.5, 3).save(tmp_path / "edited")
    with open(edited / "predictions.jsonl", "a") as handle:
        handle.write("{}\n")
    with pytest.raises(MedlamaInputError, match="'predictions.jsonl' has changed since `medlama probe` wrote it"):
        push_results(edited, "me/r", dry_run=tmp_path / "d")
    assert_busy_dry_run_refused(lambda **dry: push_results(probe_out, "me/r", **dry), tmp_path)


def test_relative_local_paths_are_not_uploaded(tmp_path, monkeypatch):
    """A run given relative paths (a model, the data, the output folder) names none of them upstream: the
    command, the settings and the card name each by its last part; a Hub id stays whole."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models" / "gpt2").mkdir(parents=True)
    (tmp_path / "you" / "local-data").mkdir(parents=True)  # shaped like a Hub id, but a folder here
    argv = ["medlama", "probe", "--model", "../models/gpt2", "--data", "../data/medlama", "--out", "./run",
            "--peft=./adapters/lora", "--label", "org/other-model", "--relations", "you/local-data"]
    run = toy_result(toy_queries(), "gpt2", 0.5, 4, settings={"method": "causal-likelihood", "model": "../models/gpt2",
                                                              "peft": "./adapters/lora", "base": "org/other-model"},
                     extra={"source": "you/local-data"})
    out = run.save(tmp_path / "run", argv=argv)
    assert "../models/gpt2" in (out / "results.json").read_text()  # the local record keeps what was typed
    tree = tmp_path / "dry" / "r"
    push_results(out, "me/r", dry_run=tmp_path / "dry")
    for file in tree.iterdir():
        text = file.read_text()
        for local in ("../models", "../data", "./run", "./adapters", "you/local-data"):
            assert local not in text, (file.name, local)
    pushed = json.loads((tree / "results.json").read_text())[0]
    assert pushed["settings"]["model"] == "gpt2" and pushed["settings"]["peft"] == "lora"
    assert pushed["settings"]["base"] == "org/other-model"  # a Hub id is no local path
    assert pushed["extra"]["source"] == "local-data"
    command = pushed["provenance"]["command"]
    assert command == ("medlama probe --model gpt2 --data medlama --out run --peft=lora --label org/other-model "
                       "--relations local-data")


def test_values_with_a_slash_that_are_no_local_path_go_up_whole():
    """Only a value that is a relative local path (``./x``, ``../x``, or existing here) is reduced: dates,
    ratios, Hub ids and URLs of any scheme stay whole."""
    from medlama.publishing.results_push import public_results

    values = ["2026/11/26", "acc@1/macro", "org/name@main", "a/b=c", "1/2/3", "s3://bucket/x", "HTTPS://x.org/a/b",
              "TP/(TP+FP)", "hard[first 20 per relation]", "org/name", "UR44/UR116"]
    pushed = json.loads(public_results(json.dumps([{"extra": {str(i): v for i, v in enumerate(values)}}])))
    assert list(pushed[0]["extra"].values()) == values
