"""acc@k by the number of gold answers (1, 2-5, >5), beside the answer-length breakdown: on seven queries whose
answers are counted here by hand, ``medlama probe`` records the bins' sizes and acc@k in results.json (what
the per-query hits of predictions.jsonl give), each query's count in scores.parquet, the table and the plot."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import cv_inputs  # tests/helpers (pytest pythonpath)
from medlama.cli import main
from medlama.probers.prober import ProberNote
from medlama.probers.query_set import QuerySet
from medlama.runs import plots
from medlama.runs.cardinality import cardinality_bin
from medlama.runs.result import result_of

FINDING, TREAT = cv_inputs.FINDING, cv_inputs.TREAT
SYMPTOMS = ["fever", "cough", "wheeze", "nausea", "headache", "fatigue", "rash", "dyspnea"]
# (id, relation, head cui, head name, [(answer cui, answer name)], is_hard)
ROWS = [
    (f"{TREAT}-0001", TREAT, "C201", "salbutamol", [("C001", "asthma")], True),
    (f"{TREAT}-0002", TREAT, "C202", "oseltamivir", [("C002", "influenza")], True),
    (f"{FINDING}-0001", FINDING, "C001", "asthma", [("C1", "wheeze"), ("C2", "cough")], True),
    (f"{FINDING}-0002", FINDING, "C002", "influenza", [(f"C{i}", s) for i, s in enumerate(SYMPTOMS[:5])], True),
    (f"{FINDING}-0003", FINDING, "C003", "pneumonia", [(f"C{i}", s) for i, s in enumerate(SYMPTOMS[:6])], True),
    (f"{FINDING}-0004", FINDING, "C004", "sepsis", [(f"C{i}", s) for i, s in enumerate(SYMPTOMS)], True),
    (f"{FINDING}-0005", FINDING, "C005", "gastritis", [("C3", "nausea"), ("C4", "headache"), ("C5", "rash")], True),
]
#: Counted by hand from ROWS.
COUNTS = {f"{TREAT}-0001": 1, f"{TREAT}-0002": 1, f"{FINDING}-0001": 2, f"{FINDING}-0002": 5,
          f"{FINDING}-0003": 6, f"{FINDING}-0004": 8, f"{FINDING}-0005": 3}
BINS = {"1": [f"{TREAT}-0001", f"{TREAT}-0002"],
        "2-5": [f"{FINDING}-0001", f"{FINDING}-0002", f"{FINDING}-0005"],
        ">5": [f"{FINDING}-0003", f"{FINDING}-0004"]}


def write_folder(root):
    return cv_inputs.write_probe_folder(root, rows=ROWS)


def test_the_bins_are_the_counts_by_hand():
    assert {qid: cardinality_bin([n for _, n in row[4]]) for row in ROWS for qid in [row[0]]} == {
        qid: name for name, ids in BINS.items() for qid in ids}
    assert cardinality_bin(["a", "a"]) == "1"  # distinct names


def test_probe_breaks_results_down_by_the_number_of_gold_answers(tmp_path, capsys):
    data = write_folder(tmp_path / "medlama")
    out = tmp_path / "out"
    assert main(["probe", "--data", str(data), "--config", "full", "--log-all-scores", "--out", str(out)]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "acc@k per number of gold answers (%)" in printed
    [run] = json.loads((out / "results.json").read_text())
    record = run["by_cardinality"]
    assert list(record["bins"]) == ["1", "2-5", ">5"]
    assert {name: entry["queries"] for name, entry in record["bins"].items()} == {n: len(i) for n, i in BINS.items()}
    rows = {row["id"]: row for row in map(json.loads, (out / "predictions.jsonl").read_text().splitlines())}
    gold = {row[0]: {name for _, name in row[4]} for row in ROWS}
    for name, ids in BINS.items():
        for k in (1, 5, 10):  # a hit by hand: a gold name among the top k (exact matching)
            hits = [any(p in gold[i] for p in rows[i]["predictions"][:k]) for i in ids]
            assert record["bins"][name][f"acc@{k}"] == pytest.approx(sum(hits) / len(ids))
    assert sum(entry["queries"] for entry in record["bins"].values()) == len(ROWS)
    table = pd.read_parquet(out / "scores.parquet")
    assert dict(zip(table["id"], table["gold_answers"])) == COUNTS
    assert (out / "cardinality.png").stat().st_size > 0 and (out / "answer_length.png").exists()
    assert "gold answers" in printed and " >5 | 2 |" in printed.replace("│", "|")


def test_the_plot_shows_each_bin_with_its_size(monkeypatch, tmp_path):
    drawn = []
    monkeypatch.setattr(plots, "save_figure", lambda fig, path, **_: drawn.append(fig) or path)
    queries = QuerySet([row[0] for row in ROWS], [row[1] for row in ROWS], ["[X] [Y]"] * len(ROWS),
                       [[name for _, name in row[4]] for row in ROWS], SYMPTOMS)
    result = result_of(ProberNote({"method": "m"}, None, "score"), queries, [["fever"]] * len(ROWS), 0.0, label="run")
    plots.plot_cardinality([result], tmp_path / "c.png")
    ax = drawn[0].axes[0]
    assert [tick.get_text() for tick in ax.get_xticklabels()] == ["1\n(n=2)", "2-5\n(n=3)", ">5\n(n=2)"]
    # acc@10 per bin, by hand: "fever" is a gold answer of influenza, pneumonia and sepsis
    assert list(ax.lines[0].get_ydata()) == pytest.approx([0.0, 100 / 3, 100.0])
