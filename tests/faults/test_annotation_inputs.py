"""Kept fault cases of expert annotation sheets, run labels and resampling, each as a user runs it
(``python -m medlama ...`` in a subprocess): the bad input gets one ``medlama: error:`` line naming the file,
row, task or field, and a name a spreadsheet would split or run survives the rating sheet's round trip."""

from __future__ import annotations

import json
import subprocess

import pytest
from refusals import error_line
from refusals import medlama_here as medlama  # the CLI's main, in this process

from annotation_runs import rated_sheet, write_run
from medlama.annotation.label_studio import choice_value


def refused(result: subprocess.CompletedProcess) -> str:
    """The one error line of a refused command, alone on stderr (tests/helpers/refusals.py)."""
    return error_line(result, alone=True)



@pytest.fixture(scope="module")
def sheet(tmp_path_factory):
    """One run whose predictions hold a CR before a formula (a raw causal answer) and the guard itself before
    a formula character, and its exported sheet."""
    root = tmp_path_factory.mktemp("annotation")
    run = write_run(root / "run", "run", predictions={"q1": ["fever\r=SUM(A1:A9)", "'-3 end", "pain"],
                                                      "q2": ["cough", "=1+1", "x\n@y"]})
    result = medlama("annotate", "export", run, "--out", root / "sheet", "--queries", "2", "--k", "3")
    assert result.returncode == 0, result.stderr
    return root, run, root / "sheet"


def test_a_carriage_return_and_a_guarded_name_survive_the_csv(sheet):
    root, run, folder = sheet
    raw = (folder / "sheet.csv").read_bytes().decode("utf-8")
    assert "\r=" not in raw and "\n=" not in raw and "\n@" not in raw  # no line of the file starts a formula
    rated = rated_sheet(folder, root / "alice.csv", lambda row: "5")
    result = medlama("annotate", "score", run, "--sheet", folder, rated, "--json", "--resamples", "100")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["runs"]["run"]["alice"]["predictions"] == 6


@pytest.mark.parametrize("rating", ["4.5", "2-3"])
def test_a_csv_rating_between_levels(sheet, rating):
    root, run, folder = sheet
    rated = rated_sheet(folder, root / "bob.csv", lambda row: rating if row["item"] == "4" else "3")
    line = refused(medlama("annotate", "score", run, "--sheet", folder, rated))
    assert line.startswith(f"medlama: error: {rated}: row 5, column 'rating': query ")
    assert f"is rated {rating!r}, not one of the levels 1-5" in line


@pytest.mark.parametrize("case", ["two choices", "two annotations"])
def test_a_label_studio_task_with_two_levels(sheet, case):
    root, run, folder = sheet
    tasks = json.loads((folder / "label_studio_tasks.json").read_text())
    for number, task in enumerate(tasks, start=1):
        picked = [choice_value(5), choice_value(2)] if case == "two choices" and number == 3 else [choice_value(5)]
        annotation = {"was_cancelled": False, "result": [{"from_name": "rating", "to_name": "prediction",
                                                          "type": "choices", "value": {"choices": picked}}]}
        twice = case == "two annotations" and number == 3
        task.update(id=100 + number, annotations=[annotation, annotation] if twice else [annotation])
    export = root / f"{case.replace(' ', '-')}.json"
    export.write_text(json.dumps(tasks))
    line = refused(medlama("annotate", "score", run, "--sheet", folder, export))
    assert line.startswith(f"medlama: error: {export}: task 3 (Label Studio id 103) ")
    assert ("has 2 levels picked for one prediction" if case == "two choices" else "holds 2 annotations") in line


@pytest.mark.parametrize("label", ["", "a\nb"])
def test_a_label_that_would_give_a_nameless_or_split_row(sheet, tmp_path, label):
    line = refused(medlama("probe", "--model", tmp_path / "missing", "--label", label))
    assert f"--label {label!r} " in line and "visible text on one line" in line
    _, run, _ = sheet
    other = write_run(tmp_path / "other", "rewired")
    for name in ("results.json", "predictions.jsonl"):
        (other / name).write_text((other / name).read_text().replace('"rewired"', json.dumps(label)))
    line = refused(medlama("compare", run, other))
    assert line.startswith(f"medlama: error: {other / 'results.json'}: the run label {label!r} ")


def test_resamples_beyond_the_bound(sheet, tmp_path):
    _, run, folder = sheet
    line = refused(medlama("annotate", "score", run, "--sheet", folder, tmp_path / "x.csv", "--resamples", "100000000"))
    assert line == "medlama: error: setting 'resamples' must be at most 100000, got 100000000"
