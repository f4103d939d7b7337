"""Calibration inputs ``medlama compare`` and ``medlama report`` must not turn into a Brier score or an ECE, run
as a user runs them (``python -m medlama``): a ``predictions.jsonl`` row whose ``confidence`` is not a
probability (above 1, negative, text, a boolean). Each gets one ``medlama: error:`` line naming the file, the
run and the query, exit status 2, no traceback, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from refusals import refused_in as refused  # tests/helpers: the error line, nothing written

from report_runs import written_runs  # tests/helpers: two probe output folders written by the probe's writer



def with_confidences(folder: Path, bad) -> str:
    """Give every row of ``folder``'s run a confidence (its results.json a calibration), the third row ``bad``;
    returns that row's query id."""
    results = json.loads((folder / "results.json").read_text())
    results[0]["calibration"] = {"queries": 1}
    (folder / "results.json").write_text(json.dumps(results))
    rows = [json.loads(line) for line in (folder / "predictions.jsonl").read_text().splitlines()]
    for i, row in enumerate(rows):
        row["confidence"] = bad if i == 2 else 0.5
    (folder / "predictions.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return rows[2]["id"]


@pytest.mark.parametrize("command, bad", [("compare", 1.5), ("compare", "high"), ("report", -0.25),
                                          ("report", True)])
def test_a_confidence_that_is_not_a_probability_is_refused(tmp_path, bad, command):
    base, better = written_runs(tmp_path / "runs")
    with_confidences(base, 0.5)
    query = with_confidences(better, bad)
    extra = ["--out", "page.html"] if command == "report" else []
    line = refused(tmp_path, command, "runs/base", "runs/better", *extra)
    assert line.startswith("medlama: error: runs/better/predictions.jsonl")
    assert f"run 'better': query {query!r} has confidence {bad!r}" in line and "a probability in [0, 1]" in line
