"""``medlama recipe``: ``--json``, ``--quiet``, ``--limit``, ``--device``, ``--overwrite`` (a finished run is not
rerun into the same folder without it; an interrupted one resumes), and batch sizes refused with a message."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from medlama.core.atomic import OWNER_NAME, owner_kind
from medlama.cli import main


@pytest.fixture(scope="module")
def corpus(corpus_head) -> Path:
    return corpus_head(0, 60)


@pytest.fixture
def recipe_args(biolama_dir, corpus, make_tiny_bert):
    model = make_tiny_bert("recipe-cli-tiny")

    def args(out: Path, *more: str) -> list[str]:
        return ["recipe", "--model", str(model), "--corpus", str(corpus), "--steps", "2", "--rewire-batch-size", "4",
                "--dataset", "biolama", "--data", str(biolama_dir), "--config", "umls", "--batch-size", "8",
                "--out", str(out), *more]
    return args


def test_recipe_json_limit_device_and_reruns(recipe_args, tmp_path, capsys, monkeypatch):
    import medlama.commands.recipe as recipe_command

    out = tmp_path / "recipe"
    assert main(recipe_args(out, "--json", "--limit", "2", "--device", "cpu")) == 0
    captured = capsys.readouterr()
    assert captured.out == (out / "results.json").read_text()
    results = json.loads(captured.out)
    assert "before and after rewiring" in captured.err  # the tables went to stderr
    assert "\r" not in captured.err and "it/s" not in captured.err  # no progress bars in a pipe (rewiring's too)
    assert results["query_set"].endswith("[first 2 per relation]")
    predictions = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert Counter(p["relation"] for p in predictions if p["run"] == "un-rewired") == {"umls_UR44": 2,
                                                                                        "umls_UR116": 2}
    assert owner_kind(out) == "recipe"
    rewired = Path(results["rewired_models"][0])
    assert rewired.resolve().parent == out.resolve()

    # a finished run: refused before any work without --overwrite
    monkeypatch.setattr(recipe_command, "load_queries", lambda args: pytest.fail("the recipe ran"))
    assert main(recipe_args(out, "--limit", "2")) == 2
    err = capsys.readouterr().err
    assert "results of a finished run; give --overwrite" in err and "Traceback" not in err
    monkeypatch.undo()

    # --overwrite --quiet: nothing printed, results replaced, the rewired model reused
    assert main(recipe_args(out, "--limit", "1", "--overwrite", "--quiet")) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    assert json.loads((out / "results.json").read_text())["query_set"].endswith("[first 1 per relation]")
    assert (rewired / "config.json").is_file() and (rewired / "rewire_config.json").is_file()

    # an interrupted run (no results.json yet) resumes without --overwrite
    (out / "results.json").unlink()
    assert main(recipe_args(out, "--limit", "1", "--quiet")) == 0
    assert (out / "results.json").is_file()


def test_recipe_refuses_other_folders_and_bad_batch_sizes_before_any_work(recipe_args, tmp_path, capsys,
                                                                           monkeypatch):
    import medlama.commands.recipe as recipe_command

    monkeypatch.setattr(recipe_command, "load_queries", lambda args: pytest.fail("the recipe ran"))
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    assert main(recipe_args(foreign)) == 2
    assert f"it has no {OWNER_NAME}" in capsys.readouterr().err
    assert sorted(p.name for p in foreign.iterdir()) == ["notes.txt"]
    afile = tmp_path / "afile"
    afile.write_text("mine")
    assert main(recipe_args(afile, "--overwrite")) == 2
    assert "exists and is not a folder" in capsys.readouterr().err
    for flags, message in ((["--batch-size", "0"], "must be >= 1, got 0"),
                           (["--batch-size", "-2"], "must be >= 1, got -2"),
                           (["--rewire-batch-size", "0"], "batch")):
        args = recipe_args(tmp_path / "o", *flags)
        assert main(args) == 2, flags
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, err
    assert not (tmp_path / "o").exists()


def test_a_failed_recipe_leaves_no_folder(recipe_args, corpus, tmp_path, capsys):
    out = tmp_path / "failed"
    assert main(recipe_args(out, "--heldout", str(corpus))) == 2
    assert "the held-out corpus is one of the rewiring corpora" in capsys.readouterr().err
    assert not out.exists()
