"""``medlama report`` of a ``probe --templates`` run in a real browser (headless Chromium, from ``file://``):
the leaderboard's rows are the templates' runs and the ensemble, the differences name each pair's baseline
and templates, and the table across templates shows what results.json records (each template, best-of, mean,
ensemble), checked against that file."""

from __future__ import annotations

import json

import pytest

import cv_inputs  # tests/helpers (pytest pythonpath): the 6-query MedLAMA-shaped folder
from browser import browser, wait_for  # noqa: F401 - tests/helpers: the fixture and its wait

from medlama.cli import main

pytestmark = pytest.mark.usefixtures("one_thread")
TEMPLATES = [(cv_inputs.FINDING, "[X] may have finding [Y] ."), (cv_inputs.FINDING, "[X] shows [Y] ."),
             (cv_inputs.TREAT, "[X] may treat [Y] ."), (cv_inputs.TREAT, "[Y] is treated with [X] .")]


def test_the_page_shows_the_runs_and_the_table_across_templates(browser, tmp_path):
    data = cv_inputs.write_probe_folder(tmp_path / "medlama")
    file = tmp_path / "templates.jsonl"
    file.write_text("".join(json.dumps({"relation": r, "template": t}) + "\n" for r, t in TEMPLATES),
                    encoding="utf-8")
    out, page = tmp_path / "out", tmp_path / "page.html"
    assert main(["probe", "--data", str(data), "--config", "full", "--templates", str(file), "--log-all-scores",
                 "--out", str(out)]) == 0
    assert main(["report", str(out), "--out", str(page), "--resamples", "100"]) == 0
    runs = json.loads((out / "results.json").read_text())
    summary = runs[0]["extra"]["templates"]
    browser.get(page.as_uri())
    wait_for(browser, lambda d: d.find_element("tag name", "body").get_attribute("data-ready") == "true")
    rows = browser.execute_script(
        "return Array.from(document.querySelectorAll('#leaderboard-section table')).map((table) => "
        "Array.from(table.rows).map((tr) => Array.from(tr.cells).map((td) => td.textContent)))")
    leaderboard, differences, across = rows
    assert [cells[0] for cells in leaderboard[1:]] == ["bundled T1", "bundled T2", "bundled ensemble"]
    assert [cells[:3] for cells in differences[1:]] == [["bundled T2", "bundled T1", "T2 vs T1"],
                                                        ["bundled ensemble", "bundled T1", "ensemble vs T1"]]
    assert across[0][0] == "template (out, templates.jsonl)"
    expected = [[run["label"]] + [f"{100 * summary['per_template'][t][f'acc@{k}']:.2f}" for k in (1, 5, 10)]
                for run, t in zip(runs, ("T1", "T2"))]
    expected += [[name] + [f"{100 * summary[key][f'acc@{k}']:.2f}" for k in (1, 5, 10)]
                 for name, key in (("best-of (chosen on test)", "best_of"), ("mean over templates", "mean"),
                                   ("ensemble", "ensemble"))]
    assert [cells[:4] for cells in across[1:]] == expected
    assert summary["ensemble"]["acc@1"] == runs[2]["metrics"]["acc@1"]
