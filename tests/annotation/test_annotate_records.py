"""Every record of a rating sheet true: a name holding a line break or starting like a formula (or like the
formula guard itself) comes back from ``sheet.csv`` exactly, a rating that is not a whole level is refused in
every format, and a Label Studio export that picks two levels for one prediction is refused, naming the file
and task."""

from __future__ import annotations

import csv
import io
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from annotation_runs import rated_sheet, write_run
from medlama.annotation.export import FORMULA_STARTS, sheet_csv
from medlama.annotation.label_studio import choice_value
from medlama.annotation.ratings import read_ratings
from medlama.annotation.sheet import Sheet, SheetQuery, read_manifest, sheet_id
from medlama.cli import main

#: Predictions a spreadsheet would split or run: a CR before a formula (a causal model's raw answer), a name
#: starting with the guard and a formula character, a formula on a cell's second line, a tab, a plain formula.
ODD = {"q1": ["fever\r=SUM(A1:A9)", "'-3 end", "pain"], "q2": ["cough\n+1", "\t@x", "=1+1"]}



@pytest.fixture
def odd_sheet(tmp_path):
    run = write_run(tmp_path / "odd", "odd", predictions=ODD)
    assert main(["annotate", "export", str(run), "--out", str(tmp_path / "sheet"), "--queries", "2", "--k", "3"]) == 0
    return tmp_path, run


def starts_of_lines(text):
    """Where a spreadsheet (or a reader splitting at every line break) could start a cell's text."""
    return [line[:1] for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]


def test_a_prediction_holding_a_line_break_stays_in_its_cell_and_scores(odd_sheet, capsys):
    root, run = odd_sheet
    sheet, _ = read_manifest(root / "sheet")
    raw = (root / "sheet" / "sheet.csv").read_bytes().decode("utf-8")
    with open(root / "sheet" / "sheet.csv", encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle))
    assert len(rows) == 1 + len(sheet.items())  # one row per prediction: no row split at a CR
    assert not {start for start in starts_of_lines(raw) if start in FORMULA_STARTS}  # no live formula anywhere
    for row in rows[1:]:
        for cell in row:
            assert not {start for start in starts_of_lines(cell) if start in FORMULA_STARTS}
    rated = rated_sheet(root / "sheet", root / "alice.csv", lambda row: "3")
    capsys.readouterr()
    assert main(["annotate", "score", str(run), "--sheet", str(root / "sheet"), str(rated), "--json",
                 "--resamples", "100"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["runs"]["odd"]["alice"]["confusion"]["not_gold"]["3"] + \
        record["runs"]["odd"]["alice"]["confusion"]["gold"]["3"] == 6


def test_a_name_starting_with_the_guard_comes_back_with_it(tmp_path, capsys):
    guarded = {"q1": ["'-3 end", "'=x", "pain"], "q2": ["''", "'", "cough"]}
    run = write_run(tmp_path / "guarded", "guarded", predictions=guarded)
    assert main(["annotate", "export", str(run), "--out", str(tmp_path / "sheet"), "--queries", "2", "--k", "3"]) == 0
    sheet, _ = read_manifest(tmp_path / "sheet")
    rated = rated_sheet(tmp_path / "sheet", tmp_path / "bob.csv", lambda row: "4")
    assert read_ratings(rated, sheet).ratings == {(q.id, p): 4 for _, q, p in sheet.items()}
    capsys.readouterr()
    assert main(["annotate", "score", str(run), "--sheet", str(tmp_path / "sheet"), str(rated), "--json",
                 "--resamples", "100"]) == 0
    assert json.loads(capsys.readouterr().out)["runs"]["guarded"]["bob"]["predictions"] == 6


# Any text but lone surrogates (which no UTF-8 file can hold), the formula characters and the guard often.
TEXT = st.text(st.one_of(st.sampled_from("=+-@\t\r\n'\" ,;a"), st.characters(exclude_categories=("Cs",))),
               max_size=12)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ids=st.lists(TEXT, min_size=1, max_size=3, unique=True), texts=st.lists(TEXT, min_size=1, max_size=4,
                                                                                unique=True))
def test_every_text_survives_the_csv_exactly(tmp_path, ids, texts):
    queries = tuple(SheetQuery(qid, qid, qid, tuple(texts)) for qid in ids)
    sheet = Sheet(sheet_id(3, queries), 3, queries)
    written = sheet_csv(sheet)
    rows = list(csv.reader(io.StringIO(written, newline="")))
    assert len(rows) == 1 + len(sheet.items())
    for row in rows:
        for cell in row:
            assert not {start for start in starts_of_lines(cell) if start in FORMULA_STARTS}
    file = tmp_path / "rater.csv"
    table = list(csv.DictReader(io.StringIO(written, newline="")))
    for row in table:
        row["rating"] = "2"
    with open(file, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(table[0]))
        writer.writeheader()
        writer.writerows(table)
    assert read_ratings(file, sheet).ratings == {(q.id, p): 2 for _, q, p in sheet.items()}


@pytest.mark.parametrize("given_rating", ["4.5", "2-3", "4)", "3 or 4", "five"])
def test_a_csv_rating_that_is_not_a_whole_level_is_refused(odd_sheet, capsys, given_rating):
    root, run = odd_sheet
    file = rated_sheet(root / "sheet", root / "carol.csv", lambda row: given_rating if row["item"] == "2" else "5")
    assert main(["annotate", "score", str(run), "--sheet", str(root / "sheet"), str(file)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"medlama: error: {file}: row 3, column 'rating': query ")
    assert f"is rated {given_rating!r}, not one of the levels 1-5" in err[0]


def test_the_page_and_label_studio_refuse_a_fraction_alike(odd_sheet):
    root, _ = odd_sheet
    sheet, _ = read_manifest(root / "sheet")
    page = root / "ratings-dan.json"
    page.write_text(json.dumps({"medlama_annotation": 1, "sheet": sheet.id, "rater": "dan", "ratings": [
        {"item": i, "query_id": q.id, "prediction": p, "rating": "4.5" if i == 1 else 5} for i, q, p in sheet.items()]}))
    with pytest.raises(ValueError, match=r"rating 1: .* is rated '4\.5', not one of the levels"):
        read_ratings(page, sheet)
    minimal = root / "erin.json"
    minimal.write_text(json.dumps([{"sheet": sheet.id, "item": i, "query_id": q.id, "prediction": p,
                                    "rating": "4.5: Similar" if i == 1 else choice_value(5)}
                                   for i, q, p in sheet.items()]))
    with pytest.raises(ValueError, match=r"task 1: .* is rated '4\.5: Similar', not one of the levels"):
        read_ratings(minimal, sheet)


def label_studio_export(sheet_folder, file, choices_of):
    """Label Studio's full export of the sheet's tasks, each annotated once; ``choices_of(number)``: the choices
    of that task's rating result(s), a list per result."""
    tasks = json.loads((sheet_folder / "label_studio_tasks.json").read_text())
    for number, task in enumerate(tasks, start=1):
        task.update(id=40 + number, annotations=[{"id": number, "was_cancelled": False, "result": [
            {"from_name": "rating", "to_name": "prediction", "type": "choices", "value": {"choices": picked}}
            for picked in choices_of(number)]}])
    file.write_text(json.dumps(tasks))
    return file


def test_two_choices_in_one_annotation_are_refused_naming_file_and_task(odd_sheet, capsys):
    root, run = odd_sheet
    sheet, _ = read_manifest(root / "sheet")
    two = label_studio_export(root / "sheet", root / "two.json",
                              lambda n: [[choice_value(5), choice_value(1)] if n == 2 else [choice_value(5)]])
    assert main(["annotate", "score", str(run), "--sheet", str(root / "sheet"), str(two)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"medlama: error: {two}: task 2 (Label Studio id 42) has 2 levels "
                                               "picked for one prediction")
    results = label_studio_export(root / "sheet", root / "results.json",
                                  lambda n: [[choice_value(4)], [choice_value(2)]] if n == 3 else [[choice_value(5)]])
    with pytest.raises(ValueError, match=r"results\.json: task 3 \(Label Studio id 43\) has 2 levels picked"):
        read_ratings(results, sheet)
    minimal = root / "min.json"
    minimal.write_text(json.dumps([{"sheet": sheet.id, "query_id": q.id, "prediction": p,
                                    "rating": {"choices": [choice_value(5), choice_value(3)]} if i == 1 else
                                    choice_value(5)} for i, q, p in sheet.items()]))
    with pytest.raises(ValueError, match=r"min\.json: task 1 has 2 levels picked for one prediction"):
        read_ratings(minimal, sheet)
    one = label_studio_export(root / "sheet", root / "one.json", lambda n: [[choice_value(5)]])
    assert set(read_ratings(one, sheet).ratings.values()) == {5}


def test_a_rater_name_that_would_split_a_row_is_refused(odd_sheet):
    root, _ = odd_sheet
    sheet, _ = read_manifest(root / "sheet")
    page = root / "ratings.json"
    page.write_text(json.dumps({"medlama_annotation": 1, "sheet": sheet.id, "rater": "Dr\nX", "ratings": [
        {"item": i, "query_id": q.id, "prediction": p, "rating": 5} for i, q, p in sheet.items()]}))
    with pytest.raises(ValueError, match=r"ratings\.json: the rater's name 'Dr\\nX' holds the control character"):
        read_ratings(page, sheet)
