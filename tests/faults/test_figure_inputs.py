"""Bad input to ``medlama figure`` and ``medlama sweep``, run as a user runs them (``python -m medlama``): each gets
one ``medlama: error:`` line naming the file or the setting, exit status 2, no traceback, and nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from refusals import medlama_here  # tests/helpers: the CLI's main, in this process


def medlama(*words: str, cwd: Path) -> tuple[int, str]:
    run = medlama_here(*words, cwd=cwd)  # the CLI's main in this process (tests/helpers/refusals.py)
    return run.returncode, run.stderr


def refused(cwd: Path, *words: str) -> str:
    """The one error line of a refused command (and that it wrote no figure)."""
    before = sorted(p.name for p in cwd.iterdir())
    status, err = medlama(*words, cwd=cwd)
    assert status == 2, err
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("medlama: error:")]
    assert len(lines) == 1, err
    assert sorted(p.name for p in cwd.iterdir()) == before  # nothing written
    return lines[0]


def recipe_record(folder: Path, **changes) -> Path:
    """A recipe output whose results.json records checkpoint probes of acc@1, acc@5 and acc@10."""
    folder.mkdir()
    steps = {"25": {"acc@1": 0.1, "acc@5": 0.2, "acc@10": 0.3, "per_relation": {"may_treat": {"acc@1": 0.1}}}}
    record = {"query_set": "hard", "runs": [{"label": "un-rewired", "metrics": {"acc@1": 0.0}}],
              "checkpoints": [{"corpus": "pubmed_0", "steps": steps}], **changes}
    (folder / "results.json").write_text(json.dumps(record))
    return folder


@pytest.mark.parametrize("words, message", [
    (["figure", "steps", "nowhere"], "nowhere/results.json: no results.json: give the output folder of `medlama recipe"),
    (["figure", "sweep", "."], "sweep.json: no sweep.json: give the output folder of `medlama sweep`"),
    (["figure", "layers", "nowhere"], "nowhere: not a folder: give the output folder of `medlama probe`"),
    (["figure", "steps", "recipe", "--out", "steps.jpg"], "steps.jpg: a figure is written as PNG"),
    (["figure", "steps", "recipe", "--out", "missing/steps.png"], "missing/steps.png: its folder does not exist"),
    (["figure", "tokens", "a", "b"], "figure tokens draws one input (a MedLAMA folder or Hub id); 2 given"),
    (["figure", "steps", "recipe", "--k", "3"], "corpus 'pubmed_0', step '25': no acc@3 recorded"),
    (["figure", "steps", "no-checkpoints"], "no checkpoint probes recorded: run `medlama recipe --probe-checkpoints`"),
    (["figure", "steps", "broken"], "broken/results.json: cannot read it as JSON"),
    (["figure", "steps", "recipe", "--top", "0"], "setting 'top' must be at least 1"),
    (["figure", "tokens", "data", "--tokenizer", "no-such-tokenizer"], "cannot load the tokenizer"),
    (["sweep", "--corpus", "corpus.txt", "--mask-ratio", "0.5", "1.5"], "setting 'mask_ratio' must be at most 1"),
    (["sweep", "--corpus", "corpus.txt", "--tau", "0"], "temperature must be a positive number"),
    (["sweep", "--corpus", "missing.txt"], "missing.txt: corpus file not found"),
    (["sweep", "--corpus", "corpus.txt", "--out", "recipe"], "is not an earlier output of this command"),
])
def test_figure_and_sweep_refuse_bad_input(tmp_path, words, message):
    recipe_record(tmp_path / "recipe")
    recipe_record(tmp_path / "no-checkpoints", checkpoints=[])
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "results.json").write_text("{not json")
    (tmp_path / "corpus.txt").write_text("a sentence of several words here \n" * 20)
    line = refused(tmp_path, *words)
    assert message in line, line


def test_existing_figure_needs_overwrite(tmp_path):
    recipe_record(tmp_path / "recipe")
    (tmp_path / "steps.png").write_bytes(b"earlier")
    line = refused(tmp_path, "figure", "steps", "recipe", "--out", "steps.png")
    assert "steps.png: exists; give --overwrite to replace the figure" in line
    assert (tmp_path / "steps.png").read_bytes() == b"earlier"
    status, err = medlama("figure", "steps", "recipe", "--out", "steps.png", "--overwrite", cwd=tmp_path)
    assert status == 0, err
    assert (tmp_path / "steps.png").read_bytes()[:4] == b"\x89PNG" and (tmp_path / "steps.json").is_file()


def test_steps_of_corpora_without_a_common_step_and_a_broken_sweep_point(tmp_path):
    folder = recipe_record(tmp_path / "recipe")
    record = json.loads((folder / "results.json").read_text())
    record["checkpoints"].append({"corpus": "pubmed_1", "steps": {"50": {"acc@1": 0.2}}})
    (folder / "results.json").write_text(json.dumps(record))
    assert "the corpora share no checkpoint step" in refused(tmp_path, "figure", "steps", "recipe")
    sweep = tmp_path / "sweep"
    (sweep / "points" / "p").mkdir(parents=True)
    (sweep / "sweep.json").write_text(json.dumps({"points": ["p"], "grid": {}}))
    (sweep / "points" / "p" / "point.json").write_text(json.dumps({"checkpoints": record["checkpoints"][:1]}))
    assert "point.json: not a sweep point's record" in refused(tmp_path, "figure", "sweep", "sweep")
