"""``medlama report``'s page without a browser: its data against ``medlama compare``'s record and against
``predictions.jsonl`` read here, markup in the data kept inside the data element, and the command's refusals
before any work (the page in a real browser: test_report_browser.py)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from probe_outputs import predictions  # tests/helpers (pytest pythonpath)
from report_runs import MARKUP_NAMES, written_runs  # tests/helpers

import medlama
from medlama.cli import main
from medlama.core.errors import MedlamaInputError
from medlama.analysis import CompareSettings, compare_runs, load_runs
from medlama.reports import ReportSettings, report_record

DATA = re.compile(r'<script type="application/json" id="page-data">(.*?)</script>', re.S)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return written_runs(tmp_path_factory.mktemp("report"))


def test_page_data_is_compares_record_and_the_predictions_file(runs):
    settings = CompareSettings(resamples=200, seed=3)
    data = report_record(runs, ReportSettings(out="x.html"), settings)
    record = compare_runs(load_runs(runs), settings)
    assert data["leaderboard"] == record["leaderboard"] and data["comparisons"] == record["comparisons"]
    assert data["ks"] == record["ks"] == [1, 5, 10]
    assert [entry["label"] for entry in data["inputs"]] == ["base", "better"]
    names, queries = data["names"], data["queries"]
    for run, folder in zip(data["runs"], runs):
        rows = {row["id"]: row for row in predictions(folder)}
        assert sorted(rows) == sorted(queries["id"])
        for q, qid in enumerate(queries["id"]):
            row = rows[qid]
            assert data["relations"][queries["relation"][q]] == row["relation"]
            assert sorted(names[g] for g in queries["gold"][q]) == sorted(row["gold"])
            assert [names[p] for p in run["predictions"][q]] == row["predictions"]
            assert run["scores"][q] == pytest.approx(row["scores"], rel=1e-6)
            assert run["gold_rank"][q] == row["gold_rank"]
            for k in data["ks"]:
                assert run["hits"][str(k)][q] == ("1" if row[f"hit@{k}"] else "0")
        # the input shown is the first run's; another run's own input is kept where it differs
        first = predictions(runs[0])
        assert queries["input"] == [{r["id"]: r for r in first}[qid]["input"] for qid in queries["id"]]
        assert run["inputs"] is None if folder == runs[0] else run["inputs"] == [rows[qid]["input"] for qid in queries["id"]]
        # acc@k per relation: each relation's hits, with the percentile bootstrap of its queries done here
        for k in data["ks"]:
            hits = np.array([row[f"hit@{k}"] for row in rows.values()], dtype=float)
            relations = np.array([row["relation"] for row in rows.values()])
            for relation, entry in run["per_relation"][str(k)].items():
                mine = hits[relations == relation]
                assert entry["value"] == pytest.approx(mine.mean()) and entry["queries"] == len(mine)
                picks = np.random.default_rng(3).integers(0, len(mine), size=(200, len(mine)))
                assert entry["interval"] == pytest.approx(np.percentile(mine[picks].mean(axis=1), [2.5, 97.5]))


def test_report_command_writes_one_page_and_refuses_before_work(runs, tmp_path, capsys):
    page = tmp_path / "page.html"
    assert main(["report", str(runs[0]), str(runs[1]), "--out", str(page), "--top", "5", "--resamples", "100"]) == 0
    text = page.read_text(encoding="utf-8")
    data = json.loads(DATA.search(text).group(1))
    assert data["top"] == 5 and all(len(p) == 5 for p in data["runs"][0]["predictions"])
    assert data["method"]["settings"]["resamples"] == 100
    assert "<script>window" not in text  # the markup names are in the data, escaped
    assert not re.search(r"(src|href)=[\"']?(https?:)?//", text)  # nothing fetched from anywhere
    assert main(["report", str(runs[0]), "--out", str(page)]) == 2  # exists: refused, the page kept
    assert "exists; give --overwrite" in capsys.readouterr().err and page.read_text(encoding="utf-8") == text
    assert main(["report", str(runs[0]), "--out", str(page), "--overwrite"]) == 0  # one run is a page too
    assert len(json.loads(DATA.search(page.read_text(encoding="utf-8")).group(1))["runs"]) == 1
    for out, message in ((tmp_path / "page.txt", "ending in .html"), (tmp_path / "no" / "p.html", "folder does not exist")):
        assert main(["report", str(runs[0]), "--out", str(out)]) == 2
        assert message in capsys.readouterr().err
    assert main(["report", str(tmp_path / "missing"), "--out", str(tmp_path / "p.html")]) == 2
    assert "not a folder" in capsys.readouterr().err and not (tmp_path / "p.html").exists()


def test_runs_of_other_queries_are_refused(runs, tmp_path, capsys):
    other = written_runs(tmp_path / "other", specs=(("fewer", 0.5, 4),), per_relation=5)[0]
    assert main(["report", str(runs[0]), str(other), "--out", str(tmp_path / "p.html")]) == 2
    assert "differ in their queries" in capsys.readouterr().err and not (tmp_path / "p.html").exists()


def test_python_api_writes_the_same_page(runs, tmp_path):
    page = medlama.report(*runs, out=tmp_path / "api.html", top=3, resamples=100, title="two <runs>")
    data = json.loads(DATA.search(page.read_text(encoding="utf-8")).group(1))
    assert data["title"] == "two <runs>" and data["top"] == 3 and data["method"]["settings"]["resamples"] == 100
    assert "<title>two &lt;runs&gt;</title>" in page.read_text(encoding="utf-8")
    with pytest.raises(MedlamaInputError, match="resample"):
        medlama.report(*runs, out=tmp_path / "bad.html", resample=100)
    with pytest.raises(MedlamaInputError, match="top"):
        medlama.report(*runs, out=tmp_path / "bad.html", top=11)
    assert not (tmp_path / "bad.html").exists()
