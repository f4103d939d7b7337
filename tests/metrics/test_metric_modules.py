"""What every metric module of the toolkit must be, as an `evaluate` community module: a self-contained
script, a card with evaluate's front matter and sections citing its paper, and examples (card and script
docstring) that run as written."""

from __future__ import annotations

import re
from pathlib import Path

import evaluate
import pytest

from metric_module import assert_card_sections, assert_self_contained, run_doctest  # tests/helpers

METRICS_DIR = Path(__file__).resolve().parents[2] / "metrics"

#: name -> what its card must cite (the paper's title, or the method's name).
CITES = {
    "acc_at_k": ("Rewire-then-Probe", "Can Language Models be Biomedical Knowledge Bases?"),
    "ucm": ("Context Variance Evaluation of Pretrained Language Models",),
}


#: name -> (inputs, a score those inputs must give or None): what each module is computed on when loaded
#: by its relative path and by its bare name.
INPUTS = {
    "acc_at_k": (dict(predictions=[["a", "b"]], references=[["b"]], k=2), ("acc@2", 1.0)),
    "ucm": (dict(target_rank_before=[2, 3], target_rank_after=[1, 5], added_is_correct=[True, False]), None),
}


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_loads_by_relative_path_and_bare_name(name, monkeypatch, cache_dir):
    inputs, expected = INPUTS[name]
    monkeypatch.chdir(METRICS_DIR.parent)
    by_relative = evaluate.load(f"metrics/{name}", keep_in_memory=True, cache_dir=cache_dir)
    monkeypatch.chdir(METRICS_DIR)
    by_name = evaluate.load(name, keep_in_memory=True, cache_dir=cache_dir)
    assert by_relative.compute(**inputs) == by_name.compute(**inputs)
    if expected is not None:
        assert by_relative.compute(**inputs)[expected[0]] == expected[1]


def _card(name: str) -> str:
    return (METRICS_DIR / name / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(CITES))
def test_script_is_self_contained(name):
    assert_self_contained(METRICS_DIR / name / f"{name}.py")


@pytest.mark.parametrize("name", sorted(CITES))
def test_card_has_evaluate_front_matter_and_sections(name):
    card = _card(name)
    assert_card_sections(card)
    assert all(cited in card for cited in CITES[name])


@pytest.mark.parametrize("name", sorted(CITES))
def test_card_examples_are_correct(name, monkeypatch, cache_dir):
    blocks = re.findall(r"```python\n(.*?)```", _card(name), flags=re.S)
    results, report = run_doctest("\n".join(b for b in blocks if ">>>" in b), f"{name} card", monkeypatch, cache_dir)
    assert results.attempted >= 10
    assert results.failed == 0, report


@pytest.mark.parametrize("name, fixture", [("acc_at_k", "acc"), ("ucm", "ucm")])
def test_script_docstring_example_is_correct(name, fixture, request, monkeypatch, cache_dir):
    module = request.getfixturevalue(fixture)
    results, report = run_doctest(module.inputs_description, f"{name} inputs", monkeypatch, cache_dir)
    assert results.attempted >= 3
    assert results.failed == 0, report
