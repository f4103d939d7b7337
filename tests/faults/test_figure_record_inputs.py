"""Records that ``medlama figure steps`` / ``medlama figure sweep`` must not draw, run as a user runs them
(``python -m medlama``): hand-edited fields of the wrong JSON type, and folders whose corpora may not be averaged
together (another base model, another rewiring config). Each gets one ``medlama: error:`` line naming the file
(and the folder and field), exit status 2, no traceback, nothing written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from refusals import refused_in as refused  # tests/helpers: the error line, nothing written

STEPS = {"25": {"acc@1": 0.1, "acc@10": 0.3, "per_relation": {"may_treat": {"acc@1": 0.1}}}}
BERT = {"name": "bert", "sha256": "a" * 64}



def recipe(folder: Path, *, model: dict = BERT, config: dict | None = None, corpus: str = "pubmed_0",
           **changes) -> Path:
    """A recipe output of one corpus with checkpoint probes, as `medlama recipe --probe-checkpoints` records it."""
    folder.mkdir()
    record = {"query_set": "hard", "runs": [{"label": "un-rewired", "metrics": {"acc@1": 0.0}}],
              "rewire_config": {"model": f"/somewhere/{corpus}/bert", "steps": 200, "learning_rate": 2e-5,
                                **(config or {})},
              "checkpoints": [{"corpus": corpus, "steps": STEPS}],
              "provenance": {"data": {"sha256": "d" * 64}, "models": [model, {"name": "rewired"}]}, **changes}
    (folder / "results.json").write_text(json.dumps(record))
    return folder


@pytest.mark.parametrize("changes, message", [
    ({"runs": [{"metrics": [0.1]}]}, "runs[0].metrics: a JSON object expected, not list"),
    ({"runs": [{"metrics": {"acc@1": 0.0}, "per_relation": [["may_treat", 0.1]]}]},
     "runs[0].per_relation: a JSON object expected, not list"),
    ({"runs": ["un-rewired"]}, "runs[0]: a JSON object expected, not str"),
    ({"checkpoints": [{"corpus": "pubmed_0", "steps": {"25": {"acc@1": 0.1, "per_relation": [0.1]}}}]},
     "corpus 'pubmed_0', step '25', `per_relation`: a JSON object expected, not list"),
    ({"checkpoints": [{"corpus": "pubmed_0", "steps": {"25": {"acc@1": 0.1, "per_relation": {"may_treat": 0.1}}}}]},
     "`per_relation` 'may_treat': a JSON object expected, not float"),
    ({"provenance": ["data"]}, "`provenance`: a JSON object expected, not list"),
    ({"rewire_config": "quick"}, "`rewire_config`: a JSON object expected, not str"),
])
def test_steps_refuses_a_field_of_the_wrong_type(tmp_path, changes, message):
    recipe(tmp_path / "recipe", **changes)
    line = refused(tmp_path, "figure", "steps", "recipe")
    assert line.startswith("medlama: error: recipe/results.json") and message in line


def test_steps_refuses_corpora_of_another_base_model_or_rewiring_config(tmp_path):
    """Averaging over corpora is only sound where everything else is the same: the base model (by content, not
    path) and every rewiring setting; the corpus alone differs."""
    recipe(tmp_path / "a")
    recipe(tmp_path / "same", corpus="pubmed_1")  # another corpus, and the model at another path: averaged
    recipe(tmp_path / "other-model", model={"name": "bert", "sha256": "b" * 64}, corpus="pubmed_1")
    recipe(tmp_path / "other-lr", config={"learning_rate": 1e-4}, corpus="pubmed_1")
    line = refused(tmp_path, "figure", "steps", "a", "other-model")
    assert "other-model/results.json: another base model than a's" in line
    line = refused(tmp_path, "figure", "steps", "a", "same", "other-lr")
    assert "other-lr/results.json: another rewiring config than a's (learning_rate)" in line
    run = subprocess.run([sys.executable, "-P", "-m", "medlama", "figure", "steps", "a", "same", "--out", "s.png"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stderr
    assert json.loads((tmp_path / "s.json").read_text())["data"]["corpora"] == ["pubmed_0", "pubmed_1"]


def sweep(folder: Path, points: dict[str, dict], **changes) -> Path:
    """A sweep output with finished points (``{key: rewire_config}``), as `medlama sweep` records it."""
    plan = {"query_set": "hard", "data": {"sha256": "d" * 64}, "sweep": {"model": BERT}}
    (folder / "points").mkdir(parents=True)
    (folder / "sweep.json").write_text(json.dumps({"plan": plan, "grid": {}, "base": {"acc@1": 0.0},
                                                   "points": sorted(points), **changes}))
    for key, config in points.items():
        (folder / "points" / key).mkdir()
        (folder / "points" / key / "point.json").write_text(json.dumps(
            {"point": {"learning_rate": 2e-5, "tau": 0.04, "mask_ratio": 0.5, "corpus_size": 100}, "key": key,
             "rewire_config": config, "checkpoints": [{"corpus": "pubmed_0", "steps": STEPS}]}))
    return folder


def test_steps_refuses_sweep_points_of_other_grid_values(tmp_path):
    sweep(tmp_path / "sw", {"lr-a": {"learning_rate": 2e-5}, "lr-b": {"learning_rate": 1e-4}})
    line = refused(tmp_path, "figure", "steps", "sw/points/lr-a", "sw/points/lr-b")
    assert "sw/points/lr-b/point.json: another rewiring config than sw/points/lr-a's (learning_rate)" in line


@pytest.mark.parametrize("changes, message", [
    ({"grid": ["learning_rate"]}, "sweep.json: `grid`: a JSON object expected, not list"),
    ({"base": [0.1]}, "sweep.json: `base`: a JSON object expected, not list"),
    ({"plan": "hard"}, "sweep.json: `plan`: a JSON object expected, not str"),
])
def test_sweep_figure_refuses_a_field_of_the_wrong_type(tmp_path, changes, message):
    sweep(tmp_path / "sw", {"p": {}}, **changes)
    assert message in refused(tmp_path, "figure", "sweep", "sw")
