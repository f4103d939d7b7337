"""Bad input to the paper-fidelity choices (the recipe's checkpoint rule and temperature, the UCM decoding
ranker, the fill-mask preset): one ``medlama: error:`` line naming the flag, exit status 2, no traceback,
nothing written, before any model loads."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from medlama.core.errors import MedlamaInputError
from refusals import medlama_here  # tests/helpers: the CLI's main, in this process


def medlama(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """``medlama ARGS`` in ``cwd``, through the CLI's main in this process (tests/helpers/refusals.py)."""
    return medlama_here(*args, cwd=cwd)


def refused(result: subprocess.CompletedProcess, message: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("medlama: error:")]
    assert len(lines) == 1 and message in lines[0], result.stderr


@pytest.mark.parametrize("flags, message", [
    (("--checkpoint-choice", "heldout"),
     "--checkpoint-choice heldout chooses by the held-out cloze check: give --heldout FILE"),
    (("--tau", "-0.03"), "temperature must be a positive number"),
], ids=["heldout choice without a held-out file", "negative temperature"])
def test_recipe_refuses_a_bad_paper_choice(tmp_path, flags, message):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the patients were treated with aspirin for pain \n" * 20, encoding="utf-8")
    refused(medlama("recipe", "--corpus", str(corpus), *flags, "--out", "o", cwd=tmp_path), message)
    assert not (tmp_path / "o").exists()


def test_unknown_checkpoint_choice_is_refused_by_name(tmp_path):
    result = medlama("recipe", "--corpus", "c", "--checkpoint-choice", "best", cwd=tmp_path)
    assert result.returncode == 2 and "invalid choice: 'best'" in result.stderr and "Traceback" not in result.stderr


def test_ucm_decoding_with_fewer_rounds_than_masks_is_refused(tmp_path):
    # the confidence fill takes one round per mask: answers would keep masks
    refused(medlama("ucm", "--sets", str(tmp_path / "sets"), "--method", "mask-predict", "--max-masks", "12",
                    "--out", "o", cwd=tmp_path), "max iterations (10) must be >= max masks (12)")
    assert not (tmp_path / "o").exists()


def test_fill_mask_preset_with_zero_masks_is_refused(tmp_path):
    refused(medlama("probe", "--method", "mask-predict", "--preset", "fill-mask", "--max-masks", "0", "--out", "o",
                    cwd=tmp_path), "max")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(("choice", "heldout", "message"), [
    ("heldout", None, "checkpoint_choice='heldout' chooses by the held-out cloze check: give heldout"),
    ("best", None, "unknown checkpoint_choice 'best'")])
def test_recipe_workflow_checks_the_checkpoint_rule_before_any_work(tmp_path, choice, heldout, message):
    from medlama.probers.query_set import QuerySet
    from medlama.recipe.workflow import rewire_then_probe

    queries = QuerySet(ids=["a"], relations=["r"], texts=["x [Y] ."], gold=[["y"]], candidates=["y", "z"], name="q")
    with pytest.raises(MedlamaInputError, match=message):
        rewire_then_probe(queries, [tmp_path / "corpus"], tmp_path / "o", checkpoint_choice=choice, heldout=heldout,
                          progress=lambda _: pytest.fail("work started"))
    assert not (tmp_path / "o").exists()
