"""Bad input to ``medlama frequency``, run as a user runs it (``python -m medlama``): a run folder that is none, or
whose rows do not name their subjects; an index folder that is none, incomplete or damaged, or built for other
data; bins that are no bins; outputs that would replace a file. Each gets one ``medlama: error:`` line naming the
file or the setting, exit status 2, no traceback, and nothing written."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from frequency_inputs import build_index, probe_folder
from refusals import medlama_here  # tests/helpers: the command line through the CLI's main, in this process


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("frequency-faults")
    return build_index(tmp), probe_folder(tmp / "run")


def refused(cwd: Path, *words: str) -> str:
    """The one error line of a refused ``medlama frequency`` (and that it wrote nothing into ``cwd``)."""
    before = sorted(p.name for p in cwd.iterdir())
    done = medlama_here("frequency", *words, cwd=cwd)  # the CLI's main in this process; the bins cases run python -m
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("medlama: error:")]
    assert len(lines) == 1, done.stderr
    assert sorted(p.name for p in cwd.iterdir()) == before  # nothing written
    return lines[0]


def copy_index(good, tmp_path: Path) -> Path:
    index = tmp_path / "index"
    shutil.copytree(good[0], index)
    return index


def test_a_run_folder_that_is_none(good, tmp_path):
    index, _ = good
    assert "nothing: not a folder" in refused(tmp_path, str(tmp_path / "nothing"), "--index", str(index))
    (tmp_path / "empty").mkdir()
    assert "empty: no results.json" in refused(tmp_path, "empty", "--index", str(index))


def test_rows_without_their_subjects(good, tmp_path):
    index, _ = good
    run = probe_folder(tmp_path / "old", subjects=False)
    line = refused(tmp_path, str(run), "--index", str(index))
    assert "predictions.jsonl" in line and "has no subject name" in line and "probe again" in line


@pytest.mark.parametrize("damage", ["no folder", "no manifest", "not json", "other format", "no entities",
                                    "forms cut", "bucket gone"])
def test_an_index_that_is_none_or_is_damaged(good, tmp_path, damage):
    _, run = good
    index = tmp_path / "nothing" if damage == "no folder" else copy_index(good, tmp_path)
    if damage == "no manifest":
        (index / "manifest.json").unlink()
    elif damage == "not json":
        (index / "manifest.json").write_text("{")
    elif damage == "other format":
        manifest = json.loads((index / "manifest.json").read_text())
        (index / "manifest.json").write_text(json.dumps({**manifest, "version": 2}))
    elif damage == "no entities":
        (index / "entities.json").unlink()
    elif damage == "forms cut":
        (index / "forms.json").write_text((index / "forms.json").read_text()[:20])
    elif damage == "bucket gone":
        for path in (index / "postings").glob("*.rows.npy"):
            path.unlink()
    line = refused(tmp_path, str(run), "--index", str(index))
    assert str(index) in line, line
    assert {"no folder": "not a folder", "no manifest": "not a context-variance index", "not json": "unreadable manifest",
            "other format": "rebuild it", "no entities": "not a readable context-variance index",
            "forms cut": "the index is incomplete", "bucket gone": "the index is incomplete"}[damage] in line


def test_a_damaged_document_part(good, tmp_path):
    _, run = good
    index = copy_index(good, tmp_path)
    for part in (index / "documents").glob("*.parquet"):
        part.write_bytes(part.read_bytes()[:200])
    line = refused(tmp_path, str(run), "--index", str(index))
    assert str(index) in line and "rebuild it" in line


def test_an_index_of_other_data(good, tmp_path):
    _, run = good
    from medlama.datasets.context_variance.index.corpus_index import CorpusIndex
    from medlama.datasets.context_variance.knowledge import Entity

    other = tmp_path / "other"
    CorpusIndex.build([{"text": "Influenza with myalgia."}], [Entity("X1", "influenza"), Entity("X2", "myalgia")],
                      other, fingerprint="other")
    line = refused(tmp_path, str(run), "--index", str(other))
    assert "none of the run's 8 facts can be counted" in line and str(other) in line


@pytest.mark.parametrize("bins, said", [(["10", "1"], "increasing"), (["-1", "5"], "increasing"),
                                        (["1", "x"], "--bins")])
def test_bins_that_are_no_bins(good, tmp_path, bins, said):
    index, run = good
    done = subprocess.run([sys.executable, "-P", "-m", "medlama", "frequency", str(run), "--index", str(index),
                           "--bins", *bins], capture_output=True, text=True, timeout=600)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert said in done.stderr and "bins" in done.stderr


def test_outputs_that_would_replace_a_file(good, tmp_path):
    index, run = good
    (tmp_path / "kept.json").write_text("{}")
    assert "kept.json: exists; give --overwrite" in refused(tmp_path, str(run), "--index", str(index),
                                                            "--out", "kept.json")
    assert (tmp_path / "kept.json").read_text() == "{}"
    assert "ending in .json" in refused(tmp_path, str(run), "--index", str(index), "--out", "record.txt")
    assert "ending in .png" in refused(tmp_path, str(run), "--index", str(index), "--plot", "plot.pdf")
    assert "folder does not exist" in refused(tmp_path, str(run), "--index", str(index), "--out", "no/record.json")
