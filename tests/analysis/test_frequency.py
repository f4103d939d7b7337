"""``medlama frequency`` on a corpus written here (tests/helpers/frequency_inputs.py), its index built by the
datatrove pipeline: every co-occurrence count checked against the count worked out by hand, every bin's acc@k
and interval against an independent computation from the facts' hits, and the command run end to end on a
probe output folder."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import medlama
from frequency_inputs import EXPECTED, EXPECTED_ENTITY, FACTS, build_index, probe_folder
from medlama.analysis.cooccurrence import sentence_starts
from medlama.core.errors import MedlamaInputError
from medlama.core.intervals import bootstrap_mean_ci


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("frequency")
    return build_index(tmp), probe_folder(tmp / "run")


def _counts(record: dict) -> dict:
    return {fact["id"]: None if fact["sentence"] is None else (fact["sentence"], fact["segment"])
            for fact in record["facts"]}


def test_every_count_is_the_count_by_hand(inputs):
    index, run = inputs
    record = medlama.frequency(run, index)
    assert _counts(record) == EXPECTED
    uncounted = [fact for fact in record["facts"] if fact["sentence"] is None]
    assert [(fact["id"], fact["uncounted"]) for fact in uncounted] == [("q6", "not a form of the index: 'hay fever'")]
    assert record["summary"] == {"facts": 8, "counted": 7, "uncounted": 1}
    assert {fact["id"]: fact["subject"] for fact in record["facts"]} == {f[0]: f[2] for f in FACTS}


def test_aliases_of_the_index_entities_count_when_asked(inputs):
    index, run = inputs
    record = medlama.frequency(run, index, aliases="entity")
    assert _counts(record) == EXPECTED_ENTITY
    assert record["matching"]["aliases"] == "entity" and record["method"]["settings"]["aliases"] == "entity"


def test_each_bin_holds_its_facts_with_their_acc_and_interval(inputs):
    index, run = inputs
    record = medlama.frequency(run, index, resamples=500, seed=3, level=0.9)
    assert [b["bin"] for b in record["bins"]] == ["0", "1", "2-10", "11-100", ">100"]
    hits = {fact[0]: {1: fact[4], 5: fact[5], 10: fact[5]} for fact in FACTS}
    edges = [(0, 0), (1, 1), (2, 10), (11, 100), (101, 10**9)]
    (entry,) = record["runs"]
    for window, position in (("sentence", 0), ("segment", 1)):
        for (low, high), cell in zip(edges, entry[window]):
            members = [qid for qid, counts in EXPECTED.items()
                       if counts is not None and low <= counts[position] <= high]
            assert cell["facts"] == len(members), (window, cell["bin"])
            for k in (1, 5, 10):
                values = [float(hits[qid][k]) for qid in members]
                assert cell[f"acc@{k}"]["value"] == (np.mean(values) if values else None)
                ci = bootstrap_mean_ci(values, resamples=500, seed=3, level=0.9)
                assert cell[f"acc@{k}"]["interval"] == (list(ci) if ci else None)
    # sentence counts 0 (q2, q5), 1 (q7), 2-10 (q1, q3, q4), 11-100 (q8)
    assert [cell["facts"] for cell in entry["sentence"]] == [2, 1, 3, 1, 0]
    assert [cell["facts"] for cell in entry["segment"]] == [1, 3, 2, 1, 0]
    assert record["method"]["settings"] == {"bins": [0, 1, 10, 100], "aliases": "names", "resamples": 500,
                                            "seed": 3, "level": 0.9}


def test_bins_are_chosen_and_recorded(inputs):
    index, run = inputs
    record = medlama.frequency(run, index, bins=(0, 2))
    assert [b["bin"] for b in record["bins"]] == ["0", "1-2", ">2"]
    assert [cell["facts"] for cell in record["runs"][0]["sentence"]] == [2, 3, 2]  # 0: q2, q5; 1-2: q3, q4, q7
    with pytest.raises(MedlamaInputError, match="increasing"):
        medlama.frequency(run, index, bins=(10, 1))
    with pytest.raises(MedlamaInputError, match="bin"):
        medlama.frequency(run, index, bin=(0, 1))  # a misspelt setting is refused, never ignored


def test_the_record_names_the_index_and_the_run_by_content(inputs):
    index, run = inputs
    record = medlama.frequency(run, index)
    manifest = json.loads((index / "manifest.json").read_text())
    assert record["index"]["corpus_fingerprint"] == manifest["corpus_fingerprint"] is not None
    assert record["index"]["num_documents"] == 24 and record["index"]["num_stored_documents"] == 23
    assert len(record["index"]["manifest_sha256"]) == 64 and len(record["inputs"][0]["predictions_sha256"]) == 64
    assert {"case", "tokenization", "aliases", "sentence", "segment", "overlap"} <= set(record["matching"])


def test_the_command_end_to_end(inputs, tmp_path):
    index, run = inputs
    out, plot = tmp_path / "frequency.json", tmp_path / "frequency.png"
    done = subprocess.run([sys.executable, "-P", "-m", "medlama", "frequency", str(run), "--index", str(index),
                           "--out", str(out), "--plot", str(plot)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "acc@k (%) by sentence co-occurrence count" in done.stdout and "7 of 8 facts counted" in done.stdout
    written = json.loads(out.read_text())
    assert _counts(written) == EXPECTED
    assert written["runs"] == medlama.frequency(run, index)["runs"]
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["frequency.json", "frequency.png"]  # no temporary left


def test_sentences_end_as_the_rule_says():
    text = "One ends. Two ends!\nThree (e.g. this) ends? \"Four.\" Five"
    starts = sentence_starts(text)
    assert [text[a:b].strip() for a, b in zip(starts, starts[1:] + [len(text)])] == [
        "One ends.", "Two ends!", "Three (e.g.", "this) ends?", "\"Four.\"", "Five"]


def test_the_python_api_refuses_what_the_command_refuses(inputs, tmp_path):
    index, run = inputs
    with pytest.raises(MedlamaInputError, match="nothing: not a folder: give a context-variance index"):
        medlama.frequency(run, tmp_path / "nothing")
    with pytest.raises(MedlamaInputError, match="nothing: not a folder: give the output folder"):
        medlama.frequency(tmp_path / "nothing", index)
    (tmp_path / "kept.json").write_text("{}")
    with pytest.raises(MedlamaInputError, match="kept.json: exists"):
        medlama.frequency(run, index, out=tmp_path / "kept.json")
    with pytest.raises(MedlamaInputError, match="aliases"):
        medlama.frequency(run, index, aliases="synonyms")
    record = medlama.frequency(run, index, out=tmp_path / "kept.json", overwrite=True)
    assert json.loads((tmp_path / "kept.json").read_text())["runs"] == record["runs"]
