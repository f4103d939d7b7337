"""`medlama annotate score` against counts made by hand on a small sheet (two runs, two queries, nine pooled
predictions, three raters: annotation_runs), agreement against scikit-learn's and krippendorff's own functions,
the three rating formats, and the refusals."""

from __future__ import annotations

import csv
import json

import krippendorff
import pytest
from sklearn.metrics import cohen_kappa_score

import medlama
from annotation_runs import MARKUP, RATINGS, write_runs
from medlama.annotation import ExportSettings, export_sheet, score_sheet
from medlama.annotation.export import cell_text
from medlama.annotation.ratings import read_ratings
from medlama.annotation.sheet import read_manifest
from medlama.cli import main
from medlama.core.errors import MedlamaInputError


@pytest.fixture
def made(tmp_path):
    runs = write_runs(tmp_path / "runs")
    export_sheet(runs, tmp_path / "sheet", ExportSettings(queries=2, k=3))
    sheet, _ = read_manifest(tmp_path / "sheet")
    return tmp_path, runs, sheet


def write_csv(folder, sheet_folder, name, ratings, *, rows=None):
    """The sheet's CSV filled in as a spreadsheet user would (the rating column)."""
    with open(sheet_folder / "sheet.csv", encoding="utf-8", newline="") as handle:
        table = list(csv.DictReader(handle))
    for row in table:
        row["rating"] = ratings.get((row["query_id"], cell_text(row["prediction"])), "")
    file = folder / f"{name}.csv"
    with open(file, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(table[0]))
        writer.writeheader()
        writer.writerows(rows if rows is not None else table)
    return file


def write_page_json(folder, sheet, name, ratings, *, sheet_id=None):
    """What the page's export button saves."""
    items = [{"item": item, "query_id": q.id, "prediction": p, "rating": ratings[(q.id, p)]}
             for item, q, p in sheet.items() if (q.id, p) in ratings]
    file = folder / f"ratings-{name}.json"
    file.write_text(json.dumps({"medlama_annotation": 1, "sheet": sheet_id or sheet.id, "rater": name,
                                "ratings": items}))
    return file


def write_label_studio(folder, sheet_folder, name, ratings):
    """Label Studio's full JSON export of the imported tasks, each annotated once with a choice."""
    from medlama.annotation.label_studio import choice_value
    tasks = json.loads((sheet_folder / "label_studio_tasks.json").read_text())
    for number, task in enumerate(tasks, start=1):
        level = ratings[(task["data"]["query_id"], task["data"]["prediction"])]
        task.update(id=number, annotations=[{"id": number, "completed_by": 7, "was_cancelled": False, "result": [
            {"from_name": "rating", "to_name": "prediction", "type": "choices",
             "value": {"choices": [choice_value(level)]}}]}])
    file = folder / f"{name}.json"
    file.write_text(json.dumps(tasks))
    return file


def test_hand_counted_confusion_acc_and_agreement(made):
    root, runs, sheet = made
    assert sum(len(q.predictions) for q in sheet.queries) == 9
    files = [write_csv(root, root / "sheet", "alice", RATINGS["alice"]),
             write_page_json(root, sheet, "bob", RATINGS["bob"])]
    record = score_sheet(runs, root / "sheet", files)
    assert record["ks"] == [1, 3] and record["raters"] == ["alice", "bob"]
    base, rewired = record["runs"]["base"]["alice"], record["runs"]["rewired"]["alice"]
    # base's top 3: q1 pain (gold, 5), headache (4), rash (1); q2 sneeze (2), MARKUP (gold, 3), fatigue (1)
    assert base["confusion"] == {"gold": {"1": 0, "2": 0, "3": 1, "4": 0, "5": 1},
                                 "not_gold": {"1": 2, "2": 1, "3": 0, "4": 1, "5": 0}}
    assert base["acc"]["umls"] == pytest.approx({"1": 50.0, "3": 100 * 2 / 6})
    assert base["acc"]["expert"] == pytest.approx({"1": 50.0, "3": 100 * 1 / 6})
    assert base["acc_queries"]["umls"] == pytest.approx({"1": 50.0, "3": 100.0})
    assert base["acc_queries"]["expert"] == pytest.approx({"1": 50.0, "3": 50.0})
    assert [(e["query_id"], e["prediction"], e["rank"], e["rating"]) for e in base["umls_below_threshold"]] == [
        ("q2", MARKUP, 2, 3)]
    assert base["expert_not_umls"] == []
    assert (base["umls_vs_expert"]["3"]["umls_only"], base["umls_vs_expert"]["3"]["expert_only"]) == (1, 0)
    # rewired's top 3: q1 headache (4), nausea (5), pain (gold, 5); q2 cough (gold, 5), sneeze (2), =1+1 (5)
    assert rewired["confusion"] == {"gold": {"1": 0, "2": 0, "3": 0, "4": 0, "5": 2},
                                    "not_gold": {"1": 0, "2": 1, "3": 0, "4": 1, "5": 2}}
    assert rewired["acc"]["umls"] == pytest.approx({"1": 50.0, "3": 100 * 2 / 6})
    assert rewired["acc"]["expert"] == pytest.approx({"1": 50.0, "3": 100 * 4 / 6})
    assert sorted((e["prediction"], e["rank"]) for e in rewired["expert_not_umls"]) == [("=1+1", 3), ("nausea", 2)]
    paired = rewired["umls_vs_expert"]["3"]
    assert (paired["umls_only"], paired["expert_only"], paired["p_value"]) == (0, 2, pytest.approx(0.5))
    assert paired["difference"] == pytest.approx(100 * 2 / 6)
    bob = record["runs"]["base"]["bob"]
    assert bob["confusion"]["gold"]["5"] == 2 and bob["acc"]["expert"]["3"] == pytest.approx(50.0)
    pairs = list(RATINGS["alice"])
    expected = cohen_kappa_score([RATINGS["alice"][p] for p in pairs], [RATINGS["bob"][p] for p in pairs],
                                 weights="quadratic")
    assert record["agreement"]["kappa"] == pytest.approx(expected) and record["agreement"]["value"] == record[
        "agreement"]["kappa"]
    # a lower threshold counts level 4 too
    lower = medlama.annotate_score(runs[0], sheet=root / "sheet", ratings=files[:1], threshold=4)  # the Python API
    assert lower["runs"]["base"]["alice"]["acc"]["expert"]["3"] == pytest.approx(100 * 2 / 6)
    assert lower["agreement"]["value"] is None


def test_three_raters_alpha_and_the_formats_read_alike(made):
    root, runs, sheet = made
    files = [write_csv(root, root / "sheet", "alice", RATINGS["alice"]),
             write_page_json(root, sheet, "bob", RATINGS["bob"]),
             write_label_studio(root, root / "sheet", "carol", RATINGS["carol"])]
    for file, name in zip(files, ("alice", "bob", "carol")):
        assert read_ratings(file, sheet).ratings == RATINGS[name]
    # Label Studio's JSON-MIN export: each task's data with the chosen level beside it
    full = json.loads(files[2].read_text())
    minimal = root / "carol-min.json"
    minimal.write_text(json.dumps([{**task["data"], "id": task["id"], "rating": task["annotations"][0]["result"][0][
        "value"]["choices"][0]} for task in full]))
    assert read_ratings(minimal, sheet).ratings == RATINGS["carol"]
    full[0]["annotations"].append(full[0]["annotations"][0])
    (root / "two.json").write_text(json.dumps(full))
    with pytest.raises(MedlamaInputError, match=r"two\.json: task 1 \(Label Studio id 1\) holds 2 annotations of one "
                                                r"task; export one file per rater"):
        read_ratings(root / "two.json", sheet)
    record = score_sheet(runs, root / "sheet", files)
    pairs = list(RATINGS["alice"])
    expected = krippendorff.alpha(reliability_data=[[RATINGS[r][p] for p in pairs] for r in ("alice", "bob", "carol")],
                                  level_of_measurement="ordinal")
    assert record["agreement"]["alpha"] == pytest.approx(expected)
    assert "kappa" not in record["agreement"]


def test_the_cli_prints_the_json_keys_and_draws_figure_8(made, capsys):
    root, runs, sheet = made
    files = [write_csv(root, root / "sheet", "alice", RATINGS["alice"])]
    plot = root / "figure8.png"
    status = main(["annotate", "score", *map(str, runs), "--sheet", str(root / "sheet"), *map(str, files),
                   "--json", "--plot", str(plot)])
    assert status == 0
    record = json.loads(capsys.readouterr().out)
    entry = record["runs"]["base"]["alice"]
    assert set(entry["confusion"]) == {"gold", "not_gold"} and set(entry["acc"]) == {"umls", "expert"}
    assert set(entry["acc"]["umls"]) == {"1", "3"} and "agreement" in record
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_refusals_name_the_query_and_prediction(made):
    root, runs, sheet = made
    alice = dict(RATINGS["alice"])
    other = write_page_json(root, sheet, "other", alice, sheet_id="f" * 64)
    with pytest.raises(MedlamaInputError, match="another sheet"):
        score_sheet(runs, root / "sheet", [other])
    missing = dict(alice)
    del missing[("q2", MARKUP)]
    with pytest.raises(MedlamaInputError, match=r"1 of the sheet's 9 predictions are not rated .*query 'q2', "
                                                r"prediction '<img"):
        score_sheet(runs, root / "sheet", [write_page_json(root, sheet, "missing", missing)])
    out_of_range = {**alice, ("q1", "nausea"): 6}
    with pytest.raises(MedlamaInputError, match=r"query 'q1', prediction 'nausea' is rated '6', not one of the levels 1-5"):
        score_sheet(runs, root / "sheet", [write_csv(root, root / "sheet", "range", out_of_range)])
    with open(root / "sheet" / "sheet.csv", encoding="utf-8", newline="") as handle:
        table = list(csv.DictReader(handle))
    for row in table:
        row["rating"] = "5"
    twice = write_csv(root, root / "sheet", "twice", {}, rows=[*table, table[3]])
    with pytest.raises(MedlamaInputError, match=r"twice\.csv: row 11: query '.*', prediction '.*' is rated twice"):
        score_sheet(runs, root / "sheet", [twice])
    alien = [{**table[0], "prediction": "not shown"}, *table[1:]]
    with pytest.raises(MedlamaInputError, match="prediction 'not shown' is not on the sheet"):
        score_sheet(runs, root / "sheet", [write_csv(root, root / "sheet", "alien", {}, rows=alien)])
    good = write_csv(root, root / "sheet", "alice", alice)
    with pytest.raises(MedlamaInputError, match="two ratings files are of the rater 'alice'"):
        score_sheet(runs, root / "sheet", [good, write_page_json(root, sheet, "alice", alice)])
    (runs[0] / "predictions.jsonl").write_text((runs[0] / "predictions.jsonl").read_text() + "\n")
    with pytest.raises(MedlamaInputError, match="its files differ from those the sheet was made from"):
        score_sheet(runs, root / "sheet", [good])


def test_the_cli_refuses_with_one_line(made, capsys):
    root, runs, sheet = made
    bad = write_page_json(root, sheet, "bad", {**RATINGS["alice"], ("q1", "pain"): 0})
    assert main(["annotate", "score", str(runs[0]), "--sheet", str(root / "sheet"), str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("medlama: error:") and "'pain' is rated 0" in err[0]
    assert main(["annotate", "score", str(runs[0]), "--sheet", str(root / "sheet")]) == 2
    assert "one ratings file per rater" in capsys.readouterr().err


def test_the_tables_show_names_as_written(made, capsys):
    root, runs, sheet = made
    file = write_page_json(root, sheet, "odd", RATINGS["alice"])
    file.write_text(file.read_text().replace('"rater": "odd"', '"rater": "[/] [bold]Dr"'))
    assert main(["annotate", "score", str(runs[0]), "--sheet", str(root / "sheet"), str(file)]) == 0
    out = capsys.readouterr().out
    assert "rater [/] [bold]Dr" in out and f"{MARKUP!r}, rank 2, rated 3" in out


def test_a_run_exported_beside_a_namesake_is_found_alone(tmp_path):
    from annotation_runs import write_run

    runs = [write_run(tmp_path / "x", "base"), write_run(tmp_path / "y", "base")]
    manifest = export_sheet(runs, tmp_path / "sheet", ExportSettings(queries=2, k=3))
    assert [entry["label"] for entry in manifest["runs"]] == ["x/base", "y/base"]
    sheet, _ = read_manifest(tmp_path / "sheet")
    file = write_page_json(tmp_path, sheet, "alice", {pair: RATINGS["alice"][pair] for pair in RATINGS["alice"]
                                                      if any(p == pair[1] for q in sheet.queries for p in q.predictions
                                                             if q.id == pair[0])})
    record = score_sheet(runs[1:], tmp_path / "sheet", [file])
    assert list(record["runs"]) == ["base"] and record["inputs"]["runs"][0]["folder"] == "y"
