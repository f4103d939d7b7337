"""Kept fault cases of inverse consistency and the expert estimate, each as a user runs it (``python -m medlama
...`` in a subprocess): the bad input gets one ``medlama: error:`` line naming the file, query or relation."""

from __future__ import annotations

import json
import subprocess

from annotation_runs import rated_sheet, write_run
from consistency_runs import QUERIES, R, write_fact_run
from estimate_runs import write_scored_run
from refusals import error_line
from refusals import medlama_here as medlama  # the CLI's main, in this process


def refused(result: subprocess.CompletedProcess) -> str:
    """The one error line of a refused command, alone on stderr (tests/helpers/refusals.py)."""
    return error_line(result, alone=True)


def test_rows_that_do_not_name_their_fact(tmp_path):
    run = write_fact_run(tmp_path / "run", drop="answer_cuis")
    line = refused(medlama("consistency", run))
    assert line.startswith(f"medlama: error: {run / 'predictions.jsonl'}: run 'run': query 'g1' does not name its fact")
    assert not (run / "consistency.json").exists()


def test_a_run_of_one_direction_only(tmp_path):
    run = write_fact_run(tmp_path / "run", queries=[q for q in QUERIES if q[1] == R])
    line = refused(medlama("consistency", run))
    assert "has no fact probed in both directions: probe both relations of an inverse pair" in line


def test_not_a_run_folder(tmp_path):
    assert refused(medlama("consistency", tmp_path / "nowhere")).startswith(
        f"medlama: error: {tmp_path / 'nowhere'}: not a folder")


def test_an_existing_record_is_refused_before_any_work(tmp_path):
    run = write_fact_run(tmp_path / "run")
    (tmp_path / "taken.json").write_text("{}")
    line = refused(medlama("consistency", run, "--out", tmp_path / "taken.json"))
    assert line == f"medlama: error: {tmp_path / 'taken.json'}: exists; give --overwrite (overwrite=True) to replace it, or another --out"
    assert json.loads((tmp_path / "taken.json").read_text()) == {}
    assert "a file ending in .json" in refused(medlama("consistency", run, "--out", tmp_path / "c.txt"))


def test_an_estimate_with_one_rated_query_in_a_relation(tmp_path):
    run = write_scored_run(tmp_path / "run")
    assert medlama("annotate", "export", run, "--out", tmp_path / "sheet", "--queries", "3", "--k", "3").returncode == 0
    rated = rated_sheet(tmp_path / "sheet", tmp_path / "alice.csv", lambda row: "5")
    line = refused(medlama("annotate", "estimate", run, "--sheet", tmp_path / "sheet", rated))
    assert "1 rated query of 20; the stratified estimate needs 2 or more in every relation" in line


def test_an_uncertainty_sheet_of_a_run_without_scores(tmp_path):
    run = write_run(tmp_path / "run", "base")
    line = refused(medlama("annotate", "export", run, "--out", tmp_path / "sheet", "--queries", "2", "--strategy",
                           "uncertainty"))
    assert line == (f"medlama: error: {run}: run 'base': query 'q1' keeps no score of its predictions, which "
                    "--strategy uncertainty ranks queries by; use --strategy stratified")
    assert not (tmp_path / "sheet").exists()
