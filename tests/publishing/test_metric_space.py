"""The metric Spaces' widget (``app.py``): blank optional columns mean "not given", so the pushed widget
computes what the metric computes without them (evaluate's generic widget dropped every such row)."""

from __future__ import annotations

import runpy

import evaluate
import pytest

from medlama.metrics import metric_path
from medlama.metrics.space_app import parse_inputs
from medlama.publishing.hub import push_metric


def load(name, tmp_path):
    return evaluate.load(str(metric_path(name)), keep_in_memory=True, cache_dir=str(tmp_path / "cache"))


def test_acc_at_k_with_groups_left_blank(tmp_path):
    module = load("acc_at_k", tmp_path)
    features = dict(module.features)
    headers = list(features)  # predictions, references, groups
    rows = [['["Fever", "cough"]', '["fever"]', ""], ['["the rash", "x"]', '["rash"]', "  "], ["", "", ""]]
    inputs = parse_inputs(headers, rows, features)
    assert inputs == {"predictions": [["Fever", "cough"], ["the rash", "x"]], "references": [["fever"], ["rash"]]}
    got = module.compute(**inputs, k=[1, 2], match="normalized")
    assert got == module.compute(predictions=[["Fever", "cough"], ["the rash", "x"]],
                                 references=[["fever"], ["rash"]], k=[1, 2], match="normalized")
    assert got["acc@1"] == 1.0 and got["groups"] is None
    grouped = parse_inputs(headers, [['["a"]', '["a"]', '"r1"'], ['["b"]', '["c"]', "r2"]], features)
    assert grouped["groups"] == ["r1", "r2"]  # quoted or not
    assert set(module.compute(**grouped, k=1)["groups"]) == {"r1", "r2"}


def test_ucm_with_every_optional_column_blank_or_partly_blank(tmp_path):
    module = load("ucm", tmp_path)
    features = dict(module.features)
    headers = list(features)
    required = ["target_rank_before", "target_rank_after", "added_is_correct"]

    def row(before, after, correct, **optional):
        return [{"target_rank_before": before, "target_rank_after": after, "added_is_correct": correct,
                 **optional}.get(name, "") for name in headers]

    rows = [row("2", "1", "true"), row("5", "5", "True"), row("3", "4", "no")]
    inputs = parse_inputs(headers, rows, features)
    assert sorted(inputs) == sorted(required)
    assert inputs["added_is_correct"] == [True, True, False] and inputs["target_rank_before"] == [2, 5, 3]
    expected = module.compute(target_rank_before=[2, 5, 3], target_rank_after=[1, 5, 4],
                              added_is_correct=[True, True, False])
    assert module.compute(**inputs) == expected
    # A partly filled optional column: blank cells are None for their records.
    rows = [row("2", "1", "true", relation="may_treat", correct_ranks_before="[4, 9]", correct_ranks_after="[3, 9]"),
            row("5", "5", "true", relation="may_treat"), row("3", "4", "false", relation="may_treat")]
    inputs = parse_inputs(headers, rows, features)
    assert inputs["correct_ranks_before"] == [[4, 9], None, None] and inputs["relation"] == ["may_treat"] * 3
    result = module.compute(**inputs)
    assert result["per_relation"]["may_treat"]["understand"] == expected["understand"]


def test_bad_cells_are_named():
    features = {"n": type("Value", (), {"dtype": "int64"})(), "flag": type("Value", (), {"dtype": "bool"})()}
    with pytest.raises(ValueError, match="n, row 2: 'x' is not a number"):
        parse_inputs(["n", "flag"], [["1", "yes"], ["x", "no"]], features)
    with pytest.raises(ValueError, match="flag, row 1: 'maybe' is not true or false"):
        parse_inputs(["n", "flag"], [["1", "maybe"]], features)
    with pytest.raises(ValueError, match=r"unknown column\(s\) \['k'\]"):
        parse_inputs(["k"], [["1"]], features)


def test_pushed_app_is_the_widget_for_its_repository(tmp_path):
    push_metric("ucm", "someone/biomed-ucm", dry_run=tmp_path / "dry")
    app = runpy.run_path(str(tmp_path / "dry" / "biomed-ucm" / "app.py"))  # not run as __main__: no launch
    assert app["REPO_ID"] == "someone/biomed-ucm"
    assert app["parse_inputs"](["a"], [[""]], {"a": None}) == {}
