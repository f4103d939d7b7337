"""The Python API and the citable result: ``medlama.probe`` on every kind of model and data it takes (equal
to the folder route), ``ProbeResult``'s intervals, tables and files, ``medlama probe``'s provenance, and the
recipe's mean / std for one run."""

from __future__ import annotations

import json

import pytest

import medlama
from medlama.cli import main
from medlama.core.errors import MedlamaInputError
from medlama.core.intervals import bootstrap_mean_ci
from medlama.runs.workflow import probe
from medlama.runs.queries import load_medlama_queries, queries_from_dataset
from medlama.runs.tables import mean_std, mean_std_text
from medlama.probers.retrieval import RetrievalProber

RELATION = "associated_morphology_of"


@pytest.fixture(scope="module")
def tiny(make_tiny_bert):
    return make_tiny_bert("api-tiny-bert")


@pytest.fixture(scope="module")
def reference(tiny, medlama_dir):
    return medlama.probe(str(tiny), medlama_dir, relations=[RELATION])


def test_loaded_models_and_datasets_equal_the_folder_route(tiny, medlama_dir, reference):
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel, AutoTokenizer

    assert reference.query_set == f"hard[{RELATION}]" and len(reference.ids) == 158 and reference.label == tiny.name
    direct = probe(RetrievalProber(tiny), load_medlama_queries(medlama_dir, "hard", relations=[RELATION]))
    assert reference.predictions == direct.predictions and reference.metrics == direct.metrics
    loaded = SentenceTransformer(str(tiny), device="cpu")
    assert medlama.probe(loaded, medlama_dir, relations=[RELATION]).predictions == reference.predictions
    model, tokenizer = AutoModel.from_pretrained(str(tiny)), AutoTokenizer.from_pretrained(str(tiny))
    assert medlama.probe(model, medlama_dir, relations=[RELATION], tokenizer=tokenizer).predictions \
        == reference.predictions
    dataset = medlama.load_medlama("hard", data=medlama_dir, relations=[RELATION])
    from_dataset = medlama.probe(str(tiny), dataset)
    assert from_dataset.predictions == reference.predictions and from_dataset.metrics == reference.metrics
    whole = medlama.load_medlama("hard", data=medlama_dir, split=None)  # a DatasetDict, relations picked after
    assert queries_from_dataset(whole, relations=[RELATION]).candidates \
        == load_medlama_queries(medlama_dir, "hard", relations=[RELATION]).candidates


def test_limit_settings_and_errors(tiny, medlama_dir, reference):
    limited = medlama.probe(str(tiny), medlama_dir, relations=[RELATION], limit=20)
    assert limited.ids == reference.ids[:20] and limited.predictions == reference.predictions[:20]
    assert limited.data["limit_per_relation"] == 20
    queries = load_medlama_queries(medlama_dir, "hard", relations=[RELATION, "may_treat"])
    assert len(queries.limit_per_relation(3)) == 6
    mean = medlama.probe(str(tiny), medlama_dir, relations=[RELATION], limit=20, preset="cosine",
                         settings={"pooling": "mean"})
    assert mean.settings["pooling"] == "mean" and mean.settings["distance"] == "cosine"
    from sentence_transformers import SentenceTransformer

    encoder = SentenceTransformer(str(tiny), device="cpu")
    with pytest.raises(MedlamaInputError, match="needs its tokenizer"):
        medlama.probe(encoder, medlama_dir, method="mask-average")
    with pytest.raises(MedlamaInputError, match="cannot probe a SentenceTransformer in memory"):
        medlama.probe(encoder, medlama_dir, method="mask-average", tokenizer=encoder.tokenizer)
    with pytest.raises(MedlamaInputError, match="cannot probe a"):
        medlama.probe(object(), medlama_dir)


def test_result_intervals_tables_and_files(tiny, reference, medlama_dir, tmp_path):
    for k in (1, 5, 10):
        hits = reference.hits(k)
        assert sum(hits) / len(hits) == reference.acc(k)
        assert reference.acc_ci(k) == bootstrap_mean_ci([float(h) for h in hits])  # seeded: reproducible
        assert reference.intervals[f"acc@{k}"] == (list(reference.acc_ci(k)) if reference.acc_ci(k) else None)
    low, high = reference.acc_ci(10)
    assert low <= reference.acc(10) <= high
    frame = reference.to_pandas()
    assert len(frame) == 158 and list(frame.columns) == ["id", "relation", "gold", "predictions", "hit@1", "hit@5",
                                                          "hit@10", "input", "scores", "gold_rank", "gold_score",
                                                          "subject", "head_cui", "head_name", "answer_cuis",
                                                          "confidence"]
    assert frame["hit@10"].mean() == reference.acc(10)
    table = reference.to_pandas("relation")
    assert table.loc[RELATION, "queries"] == 158 and table.loc[RELATION, "acc@10"] == reference.acc(10)
    reference.save(tmp_path / "run")
    runs = json.loads((tmp_path / "run" / "results.json").read_text())
    assert isinstance(runs, list) and len(runs) == 1  # the layout of `medlama probe --out`
    results = runs[0]
    assert "queries" not in results and results["metrics"] == reference.metrics
    assert results["per_relation"] == reference.per_relation()
    provenance = results["provenance"]
    assert provenance["data"]["release_commit"] and provenance["settings"]["pooling"] == "cls"
    assert provenance["model"]["name"] == tiny.name and "/" not in provenance["settings"]["model"]
    assert results["settings"]["model"] == tiny.name and str(tiny) not in json.dumps(results)
    assert reference.settings["model"] == str(tiny)  # the object keeps the path it loaded
    lines = [json.loads(line) for line in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()]
    assert [line["id"] for line in lines] == reference.ids and lines[0]["predictions"] == reference.predictions[0][:10]
    # each row names its fact's subject as the data does (what `medlama frequency` looks up in a corpus)
    heads = dict(zip(*(medlama.load_medlama("hard", data=medlama_dir)[column] for column in ("id", "head_name"))))
    assert [line["subject"] for line in lines] == [heads[qid] for qid in reference.ids]
    assert "subjects" not in results and list(frame["subject"]) == [heads[qid] for qid in reference.ids]


def test_probe_command_results_carry_provenance_and_intervals(tiny, medlama_dir, tmp_path, capsys):
    out = tmp_path / "probe"
    assert main(["probe", "--data", str(medlama_dir), "--relations", RELATION, "--model", str(tiny),
                 "--out", str(out)]) == 0
    capsys.readouterr()
    run = json.loads((out / "results.json").read_text())[0]
    assert "queries" not in run and run["settings"]["model"] == tiny.name  # no per-query rows, no local path
    assert str(tiny) not in (out / "results.json").read_text()
    assert set(run["intervals"]) >= {"acc@1", "acc@5", "acc@10", "method"}
    versions = run["provenance"]["versions"]
    assert {"medlama", "torch", "transformers", "sentence-transformers", "datasets"} <= set(versions)
    assert run["provenance"]["model"]["name"] == tiny.name and run["provenance"]["data"]["relations"] == [RELATION]
    lines = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert len(lines) == 158 and {line["run"] for line in lines} == {run["label"]}


def test_mean_std_needs_two_runs(reference):
    mean, std = mean_std([reference], 10)
    assert mean == reference.acc(10) and std is None
    assert mean_std_text(0.0502, None) == "5.02" and mean_std_text(0.0502, 0.001) == "5.02 ± 0.10"


def test_probe_docstring_names_every_method():
    from medlama.probers.registry import METHODS

    assert all(f"``{name}``" in medlama.probe.__doc__ for name in METHODS)


def test_load_medlama_reads_each_folder_by_its_files(tmp_path, monkeypatch):
    """Two folders named ``medlama`` with the same card: each gives its own rows (``load_dataset(DIR, config)``
    would not: ``datasets`` caches a local folder by name and card), and a relative path the one it names."""
    from datasets import DatasetDict

    from named_folders import medlama_named_folder as make  # tests/helpers

    first, second = make(tmp_path / "a", ["a1", "a2"]), make(tmp_path / "b", ["b1"])
    assert medlama.load_medlama("hard", data=first)["id"] == ["a1", "a2"]
    assert medlama.load_medlama("hard", data=second)["id"] == ["b1"]
    monkeypatch.chdir(tmp_path / "b")
    assert medlama.load_medlama("hard", data="medlama")["id"] == ["b1"]
    whole = medlama.load_medlama("hard", data=first, split=None)
    assert isinstance(whole, DatasetDict) and list(whole) == ["test"] and whole["test"]["id"] == ["a1", "a2"]
    with pytest.raises(MedlamaInputError, match="cannot load config 'full'"):
        medlama.load_medlama("full", data=first, split=None)
    with pytest.raises(MedlamaInputError, match="no such dataset folder, and not a Hub dataset id"):
        medlama.load_medlama("hard", data=tmp_path / "missing")


def test_a_query_set_as_data_and_the_scoring_plan(medlama_dir):
    from medlama.runs.queries import queries_from
    from medlama.runs.tables import scoring_plan

    queries = load_medlama_queries(medlama_dir, "hard", relations=[RELATION, "may_treat"])
    picked = queries_from(queries, relations=[RELATION])
    assert set(picked.relations) == {RELATION} and len(picked) == 158
    assert picked.name == f"hard[{RELATION},may_treat][{RELATION}]" and picked.candidates == queries.candidates
    with pytest.raises(MedlamaInputError, match=r"unknown relation\(s\) 'may_cure'"):
        queries_from(queries, relations=["may_cure"])
    # The CLI's rule, the API's too: the cut-offs asked for are reported, acc@1/5/10 always scored.
    assert scoring_plan("medlama", [1]) == ((1,), (1, 5, 10), "exact")
    assert scoring_plan("biolama") == ((1, 5), (1, 5, 10), "normalized")
    assert scoring_plan("medlama", [20, 1], "normalized") == ((1, 20), (1, 5, 10, 20), "normalized")
    with pytest.raises(MedlamaInputError, match=r"every ks value must be >= 1, got \[0, 1\]"):
        scoring_plan("medlama", [1, 0])
