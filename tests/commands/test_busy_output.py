"""``probe``, ``ucm``, ``recipe`` and ``rewire`` refuse an output folder another process is writing:
at once, with exit status 2 and a message naming the holder, before any work (no query, set or model loads)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from locks import lock_held_elsewhere  # tests/helpers
from medlama.cli import main


def fail(what: str):
    def called(*_args, **_kwargs):
        pytest.fail(f"{what} ran although the output folder is busy")
    return called


def probe_args(tmp_path: Path, out: Path) -> list[str]:
    return ["probe", "--dataset", "biolama", "--data", str(tmp_path / "no-data"), "--config", "umls", "--out", str(out)]


def ucm_args(tmp_path: Path, out: Path) -> list[str]:
    sets = tmp_path / "sets"
    sets.mkdir()
    (sets / "build_info.json").write_text(json.dumps({"dataset": "context-variance"}))  # passes the early check
    return ["ucm", "--sets", str(sets), "--out", str(out)]


def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "sentences.txt"
    path.write_text("aspirin may treat pain in patients .\nmetformin lowers blood glucose in mice .\n")
    return path


def recipe_args(tmp_path: Path, out: Path) -> list[str]:
    return ["recipe", "--corpus", str(corpus(tmp_path)), "--steps", "1", "--dataset", "biolama", "--data",
            str(tmp_path / "no-data"), "--config", "umls", "--out", str(out)]


def rewire_args(tmp_path: Path, out: Path) -> list[str]:
    return ["rewire", "--corpus", str(corpus(tmp_path)), "--out", str(out), "--steps", "1"]


COMMANDS = {"probe": probe_args, "ucm": ucm_args, "recipe": recipe_args, "rewire": rewire_args}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_busy_output_folder_is_refused_before_any_work(command, tmp_path, capsys, monkeypatch):
    import medlama.runs.queries as queries
    import medlama.recipe.workflow as workflow
    import medlama.trainers.trainer as trainer
    import medlama.ucm_eval.evaluation as evaluation
    import medlama.ucm_eval.rankers as rankers
    import medlama.ucm_eval.sets as sets

    # The commands look these up when they run: any call means work started.
    monkeypatch.setattr(queries, "load_queries", fail("load_queries"))
    monkeypatch.setattr(sets, "load_sets", fail("load_sets"))
    monkeypatch.setattr(rankers, "make_ranker", fail("make_ranker"))
    monkeypatch.setattr(evaluation, "run_ucm", fail("run_ucm"))
    monkeypatch.setattr(workflow, "rewire_then_probe", fail("rewire_then_probe"))
    monkeypatch.setattr(trainer, "build_rewire_model", fail("build_rewire_model"))
    monkeypatch.setattr(trainer, "build_cloze_dataset", fail("build_cloze_dataset"))

    out = tmp_path / "out"
    args = COMMANDS[command](tmp_path, out)
    with lock_held_elsewhere(out) as holder:
        status = main(args)
        err = capsys.readouterr().err
    assert status == 2, err
    assert "is writing this output folder right now" in err and f"pid {holder.pid}" in err, err
    assert "nothing was changed" in err and "Traceback" not in err
    assert not out.exists()  # nothing written: not even the folder
