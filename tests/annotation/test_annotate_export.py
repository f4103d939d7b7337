"""`medlama annotate export`: the seeded stratified sample, the pooled blind predictions, the files raters get
(page, CSV, Label Studio) and the manifest tying them to the runs."""

from __future__ import annotations

import csv
import hashlib
import json
import xml.etree.ElementTree as ET
from collections import Counter

import pytest

from annotation_runs import MARKUP, PREDICTIONS, QUERIES, write_runs
from medlama.annotation import ExportSettings, export_sheet
from medlama.annotation.sheet import LEVELS, read_manifest, sample_queries
from medlama.cli import main
from medlama.core.errors import MedlamaInputError


def test_the_sample_is_stratified_by_relation_and_seeded():
    relations = ["a"] * 10 + ["b"] * 6 + ["c"] * 2
    picked = sample_queries(relations, 8, seed=3)
    assert len(set(picked)) == 8
    counts = Counter(relations[i] for i in picked)
    assert sorted(counts.values()) == [2, 3, 3]  # c has only two; a and b share the rest evenly
    assert picked == sample_queries(relations, 8, seed=3)
    assert picked != sample_queries(relations, 8, seed=4)
    assert Counter(relations[i] for i in sample_queries(relations, 2, seed=0)).most_common(1)[0][1] == 1


def test_the_sheet_pools_the_runs_blind_and_the_manifest_ties_it_to_them(tmp_path):
    runs = write_runs(tmp_path / "runs")
    manifest = export_sheet(runs, tmp_path / "sheet", ExportSettings(queries=2, k=3, seed=5))
    sheet, _ = read_manifest(tmp_path / "sheet")
    assert manifest["sheet"] == sheet.id and manifest["items"] == 9
    for query in sheet.queries:
        pooled = {name for run in PREDICTIONS.values() for name in run[query.id]}
        assert sorted(query.predictions) == sorted(pooled)  # every run's top 3, each name once
        assert query.text == QUERIES[query.id]["input"]
    assert manifest["sampling"]["per_relation"] == {"has_finding": 1, "may_treat": 1}
    for entry, folder in zip(manifest["runs"], runs):
        for key, name in (("results_sha256", "results.json"), ("predictions_sha256", "predictions.jsonl")):
            assert entry[key] == hashlib.sha256((folder / name).read_bytes()).hexdigest()
    # blind: nothing raters get names a run or a gold answer's status
    page = (tmp_path / "sheet" / "annotate.html").read_text()
    data = json.loads(page.split('id="sheet-data">', 1)[1].split("</script>", 1)[0])
    assert set(data) == {"format", "sheet", "k", "levels", "queries"}
    assert all(set(q) == {"id", "relation", "query", "predictions"} for q in data["queries"])
    assert data["queries"] == sheet.to_json() and data["levels"] == [[k, v] for k, v in LEVELS.items()]
    tasks = json.loads((tmp_path / "sheet" / "label_studio_tasks.json").read_text())
    for text in (page, json.dumps(tasks)):
        assert "rewired" not in text and '"gold"' not in text and "hit@" not in text
    # the same seed gives the same sheet, another seed another order
    again = export_sheet(runs, tmp_path / "again", ExportSettings(queries=2, k=3, seed=5))
    other = export_sheet(runs, tmp_path / "other", ExportSettings(queries=2, k=3, seed=6))
    assert again["queries"] == manifest["queries"] and other["sheet"] != manifest["sheet"]


def test_the_csv_and_label_studio_files(tmp_path):
    runs = write_runs(tmp_path / "runs")
    assert main(["annotate", "export", *map(str, runs), "--out", str(tmp_path / "sheet"), "--queries", "2",
                 "--k", "3"]) == 0
    sheet, _ = read_manifest(tmp_path / "sheet")
    with open(tmp_path / "sheet" / "sheet.csv", encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0])[:6] == ["item", "query_id", "relation", "query", "prediction", "rating"]
    assert [row["rating"] for row in rows] == [""] * 9 and {row["sheet"] for row in rows} == {sheet.id}
    shown = [row["prediction"] for row in rows]
    assert "'=1+1" in shown and MARKUP in shown  # a formula is kept as text; markup is plain text in a CSV
    assert [(r["query_id"], r["prediction"].lstrip("'")) for r in rows] == [(q.id, p) for _, q, p in sheet.items()]
    config = ET.fromstring((tmp_path / "sheet" / "label_studio_config.xml").read_text())
    choices = [c.get("value") for c in config.iter("Choice")]
    assert choices == [f"{level}: {words}" for level, words in LEVELS.items()]
    tasks = json.loads((tmp_path / "sheet" / "label_studio_tasks.json").read_text())
    assert [(t["data"]["query_id"], t["data"]["prediction"]) for t in tasks] == [(q.id, p) for _, q, p in sheet.items()]


def test_refusals(tmp_path):
    runs = write_runs(tmp_path / "runs")
    with pytest.raises(MedlamaInputError, match=r"no relation 'may_treats' \(did you mean 'may_treat'\?\)"):
        export_sheet(runs, tmp_path / "sheet", ExportSettings(relations=("may_treats",)))
    with pytest.raises(MedlamaInputError, match="--queries 3 but the runs have 2 queries"):
        export_sheet(runs, tmp_path / "sheet", ExportSettings(queries=3))
    with pytest.raises(MedlamaInputError, match=r"setting 'k' must be at most 10, got 11"):
        ExportSettings(k=11)  # predictions.jsonl keeps the top 10
    assert not (tmp_path / "sheet").exists()
    export_sheet(runs, tmp_path / "sheet", ExportSettings(queries=1))
    with pytest.raises(MedlamaInputError, match="earlier run; give --overwrite"):
        export_sheet(runs, tmp_path / "sheet", ExportSettings(queries=2))
    assert len(export_sheet(runs, tmp_path / "sheet", ExportSettings(queries=2, overwrite=True))["queries"]) == 2
