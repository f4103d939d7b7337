"""The UCM metric module (metrics/ucm): loading, figure 1 of the paper, hand-computed values, bad inputs,
card, properties."""

from __future__ import annotations

import math
import random
from pathlib import Path

import evaluate
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import medlama.metrics

REPO = Path(__file__).resolve().parents[2]
METRICS_DIR = REPO / "metrics"
MODULE_DIR = METRICS_DIR / "ucm"

# Figure 1 of papers/context-variance-ucm.md: adding S5 to input 4 (Output4 -> Output5).
FIGURE_1 = dict(
    target_rank_before=[2],  # discolored nasal
    target_rank_after=[1],
    added_is_correct=[True],  # nasal stuffiness, another symptom of nasal polyp
    added_rank_before=[20],
    added_rank_after=[2],
    correct_ranks_before=[[6]],  # postnasal drip
    correct_ranks_after=[[3]],
    incorrect_ranks_before=[[3, 5]],  # sick feeling, heartburn
    incorrect_ranks_after=[[10, 6]],
    triple_id=["nasal polyp|has symptom|discolored nasal"],
    relation=["disease_has_symptom"],
)


# The module itself: the fixtures `ucm` and `ucm_by_path` (tests/metrics/conftest.py).


# --- loading ---------------------------------------------------------------------------------------


def test_loads_by_path_and_through_the_toolkit(ucm, ucm_by_path):
    assert ucm.name == ucm_by_path.name == "ucm"
    # Installed or editable, the toolkit loads the very files of this folder.
    installed = medlama.metrics.metric_path("ucm")
    for name in ("ucm.py", "README.md", "requirements.txt"):
        assert (installed / name).read_bytes() == (MODULE_DIR / name).read_bytes(), name
    assert ucm.compute(**FIGURE_1) == ucm_by_path.compute(**FIGURE_1)


def test_loads_alone_outside_the_repository(tmp_path):
    """As after a push to the Hub: the folder on its own, away from the medlama package (not importable)."""
    from metric_module import compute_alone

    results = compute_alone(MODULE_DIR, tmp_path, FIGURE_1)
    # the paper's figure 1, by hand (as test_figure_1_worked_example)
    assert results["rank_change"]["added_correct"] == {"target": -1.0, "added": -18.0, "correct": -3.0,
                                                       "incorrect": 4.0, "num_target": 1, "num_added": 1,
                                                       "num_correct": 1, "num_incorrect": 1}
    assert (results["understand"], results["confuse"], results["misunderstand"]) == (1.0, 0.0, 0.0)


def test_info(ucm):
    assert {"target_rank_before", "target_rank_after", "added_is_correct", "relation"} <= set(ucm.features)
    assert "Context Variance Evaluation" in ucm.citation
    assert "Misunderstand" in ucm.description


# --- figure 1 and hand-computed values -------------------------------------------------------------


def test_figure_1_worked_example(ucm):
    results = ucm.compute(**FIGURE_1)
    assert results["rank_change"]["added_correct"] == {
        "target": -1.0,
        "added": -18.0,
        "correct": -3.0,
        "incorrect": 4.0,  # ((10 - 3) + (6 - 5)) / 2
        "num_target": 1,
        "num_added": 1,
        "num_correct": 1,
        "num_incorrect": 1,
    }
    assert results["rank_change"]["added_incorrect"] == {
        "target": None, "added": None, "correct": None, "incorrect": None,
        "num_target": 0, "num_added": 0, "num_correct": 0, "num_incorrect": 0,
    }
    assert (results["understand"], results["confuse"], results["misunderstand"]) == (1.0, 0.0, 0.0)
    assert results["num_records"] == results["num_records_correct"] == results["num_triples"] == 1
    assert results["per_relation"]["disease_has_symptom"]["understand"] == 1.0


def test_figure_1_with_the_added_object_incorrect_goes_to_the_other_split(ucm):
    results = ucm.compute(**{**FIGURE_1, "added_is_correct": [False]})
    assert results["rank_change"]["added_incorrect"]["incorrect"] == 4.0
    assert results["rank_change"]["added_correct"]["num_target"] == 0
    assert results["understand"] is results["confuse"] is results["misunderstand"] is None
    assert results["num_records_correct"] == 0 and results["num_understand"] == 0


def test_hand_computed_full_output(ucm):
    results = ucm.compute(
        target_rank_before=[2, 5, 3, 4, 7, 1],
        target_rank_after=[1, 5, 4, 6, 7, 1],
        added_is_correct=[True, True, False, True, False, True],
        added_rank_before=[10, None, 8, 30, None, 4],
        added_rank_after=[3, None, 2, 29, None, 5],
        correct_ranks_before=[[4, 8], [], None, [2], [9], None],
        correct_ranks_after=[[3, 6], [], None, [2], [12], None],
        incorrect_ranks_before=[None, [1], [5, 6, 7], None, [], [3]],
        incorrect_ranks_after=[None, [4], [4, 6, 9], None, [], [2]],
        triple_id=["t1", "t1", "t1", "t2", "t2", "t3"],
        relation=["has_symptom", "has_symptom", "has_symptom", "may_treat", "may_treat", "has_symptom"],
    )
    assert results == {
        # Correct O_a: records 0 (-1), 1 (0), 3 (+2), 5 (0).
        "understand": 0.25,
        "confuse": 0.5,
        "misunderstand": 0.25,
        "num_understand": 1,
        "num_confuse": 2,
        "num_misunderstand": 1,
        "num_records_correct": 4,
        "num_records": 6,
        "num_triples": 3,
        "per_relation": {
            "has_symptom": {
                "understand": pytest.approx(1 / 3),
                "confuse": pytest.approx(2 / 3),
                "misunderstand": 0.0,
                "num_understand": 1,
                "num_confuse": 2,
                "num_misunderstand": 0,
                "num_records_correct": 3,
                "num_records": 4,
                "num_triples": 2,
            },
            "may_treat": {
                "understand": 0.0,
                "confuse": 0.0,
                "misunderstand": 1.0,
                "num_understand": 0,
                "num_confuse": 0,
                "num_misunderstand": 1,
                "num_records_correct": 1,
                "num_records": 2,
                "num_triples": 1,
            },
        },
        "rank_change": {
            "added_correct": {
                "target": pytest.approx((-1 + 0 + 2 + 0) / 4),
                "added": pytest.approx((-7 - 1 + 1) / 3),
                "correct": pytest.approx((-1.5 + 0) / 2),  # record 0: (-1 - 2) / 2; record 3: 0; record 1 empty
                "incorrect": pytest.approx((3 - 1) / 2),  # records 1 (+3) and 5 (-1)
                "num_target": 4,
                "num_added": 3,
                "num_correct": 2,
                "num_incorrect": 2,
            },
            "added_incorrect": {
                "target": pytest.approx((1 + 0) / 2),
                "added": -6.0,
                "correct": 3.0,  # record 4
                "incorrect": pytest.approx((-1 + 0 + 2) / 3),  # record 2; record 4 empty
                "num_target": 2,
                "num_added": 1,
                "num_correct": 1,
                "num_incorrect": 1,
            },
        },
    }


def test_minimal_columns(ucm):
    results = ucm.compute(target_rank_before=[3, 3, 3], target_rank_after=[2, 3, 9], added_is_correct=[True] * 3)
    assert (results["num_understand"], results["num_confuse"], results["num_misunderstand"]) == (1, 1, 1)
    assert results["per_relation"] is None and results["num_triples"] is None
    assert results["rank_change"]["added_correct"]["target"] == pytest.approx((-1 + 0 + 6) / 3)
    assert results["rank_change"]["added_correct"]["num_added"] == 0


def test_relation_with_only_incorrect_added_objects_has_undefined_shares(ucm):
    results = ucm.compute(
        target_rank_before=[3, 3], target_rank_after=[2, 4], added_is_correct=[True, False], relation=["r1", "r2"]
    )
    assert results["per_relation"]["r2"]["understand"] is None
    assert results["per_relation"]["r2"]["num_records"] == 1
    assert results["per_relation"]["r2"]["num_records_correct"] == 0
    assert results["per_relation"]["r1"]["understand"] == 1.0


def test_known_relations(ucm):
    results = ucm.compute(
        target_rank_before=[3], target_rank_after=[2], added_is_correct=[True], relation=["r1"], known_relations=["r1", "r2"]
    )
    assert list(results["per_relation"]) == ["r1"]


def test_add_and_add_batch_stream_into_one_computation(ucm):
    ucm.add_batch(target_rank_before=[2, 3], target_rank_after=[1, 3], added_is_correct=[True, False], relation=["r", "r"])
    ucm.add(
        target_rank_before=4, target_rank_after=5, added_is_correct=True, relation="q",
        correct_ranks_before=[1, 2], correct_ranks_after=[2, 2],
    )
    streamed = ucm.compute()
    at_once = ucm.compute(
        target_rank_before=[2, 3, 4],
        target_rank_after=[1, 3, 5],
        added_is_correct=[True, False, True],
        relation=["r", "r", "q"],
        correct_ranks_before=[None, None, [1, 2]],
        correct_ranks_after=[None, None, [2, 2]],
    )
    assert streamed == at_once
    assert at_once["rank_change"]["added_correct"]["correct"] == 0.5


def test_numpy_inputs(ucm):
    np = pytest.importorskip("numpy")
    results = ucm.compute(
        target_rank_before=np.array([2, 2]), target_rank_after=np.array([1, 3]), added_is_correct=np.array([True, True])
    )
    assert results["understand"] == results["misunderstand"] == 0.5


# --- bad inputs ------------------------------------------------------------------------------------

BASE = dict(target_rank_before=[2, 3], target_rank_after=[1, 3], added_is_correct=[True, False])

BAD_INPUTS = [
    ({"target_rank_before": [2, 0]}, r"target_rank_before\[1\] is 0; ranks start at 1"),
    ({"target_rank_after": [-1, 3]}, r"target_rank_after\[0\] is -1; ranks start at 1"),
    ({"target_rank_after": [1.5, 3]}, r"target_rank_after\[0\] must be an int rank"),
    ({"target_rank_after": [True, 3]}, r"target_rank_after\[0\] must be an int rank"),
    ({"target_rank_after": [None, 3]}, r"target_rank_after\[0\] is missing"),
    ({"added_rank_before": [1, 2], "added_rank_after": [0, 2]}, r"added_rank_after\[0\] is 0; ranks start at 1"),
    ({"correct_ranks_before": [[1], [0]], "correct_ranks_after": [[1], [2]]}, r"correct_ranks_before\[1\]\[0\] is 0"),
    ({"incorrect_ranks_before": [[1], [2]], "incorrect_ranks_after": [[1], [-3]]}, r"incorrect_ranks_after\[1\]\[0\] is -3"),
    ({"target_rank_before": [2, 3, 4]}, r"length mismatch between columns: 3 in `target_rank_before`, 2 in `target_rank_after`"),
    ({"relation": ["r"]}, r"length mismatch between columns: .*1 in `relation`"),
    ({"added_rank_before": [1, 2]}, r"record 0 has added_rank_before but no added_rank_after; give both or neither"),
    ({"added_rank_before": [1, None], "added_rank_after": [1, 2]}, r"record 1 has added_rank_after but no added_rank_before"),
    ({"correct_ranks_after": [[1], [2]]}, r"record 0 has correct_ranks_after but no correct_ranks_before"),
    (
        {"incorrect_ranks_before": [[1, 2], [3]], "incorrect_ranks_after": [[1], [3]]},
        r"record 0: incorrect_ranks_before has 2 ranks but incorrect_ranks_after has 1; the lists are paired",
    ),
    ({"correct_ranks_before": [[1], 2], "correct_ranks_after": [[1], [2]]}, r"correct_ranks_before\[1\] must be a list of int ranks"),
    ({"added_is_correct": [True, 1]}, r"added_is_correct\[1\] must be True or False, got 1"),
    ({"added_is_correct": [True, "yes"]}, r"added_is_correct\[1\] must be True or False, got 'yes'"),
    ({"relation": ["r", ""]}, r"relation\[1\] must be a non-empty string, got ''"),
    ({"relation": [None, "r"]}, r"relation\[0\] must be a non-empty string, got None"),
    ({"triple_id": ["t", 7]}, r"triple_id\[1\] must be a non-empty string, got 7"),
    ({"relation": ["r", "x"], "known_relations": ["r", "s"]}, r"unknown relation 'x' at relation\[1\]; known: \['r', 's'\]"),
    ({"known_relations": ["r"]}, r"`known_relations` given but the records have no `relation` column"),
    ({"known_relations": ["r", ""]}, r"known_relations\[1\] must be a non-empty string"),
    (
        {"relation": ["r", "s"], "triple_id": ["t", "t"]},
        r"triple 't' has relation 'r' and, at record 1, 's'; a triple belongs to one relation",
    ),
    # Too large for the int64 the metric stores: named, not an OverflowError from pyarrow.
    ({"target_rank_after": [10**30, 3]}, r"target_rank_after\[0\] is 10{30}, more than the largest rank .*2\*\*63 - 1"),
    ({"target_rank_before": [2, 2**63]}, r"target_rank_before\[1\] is 9223372036854775808, more than the largest rank"),
    ({"added_rank_before": [1, 2], "added_rank_after": [1, 10**30]}, r"added_rank_after\[1\] is 10{30}, more than"),
    ({"correct_ranks_before": [[1], [2, 10**30]], "correct_ranks_after": [[1], [2, 3]]}, r"correct_ranks_before\[1\]\[1\] is 10{30}, more"),
    ({"target_rank_after": [float("nan"), 3]}, r"target_rank_after\[0\] must be an int rank .*got nan"),
    ({"target_rank_after": None}, r"required columns missing: \['target_rank_after'\]"),
    ({"rank_before": [1, 2]}, r"unknown arguments \['rank_before'\]"),
    ({"target_rank_before": 2}, r"`target_rank_before` must be a list with one entry per record"),
]


@pytest.mark.parametrize("changes, message", BAD_INPUTS)
def test_bad_inputs_raise_clear_errors(ucm, changes, message):
    kwargs = {**BASE, **changes}
    kwargs = {name: value for name, value in kwargs.items() if value is not None}
    with pytest.raises(ValueError, match=message):
        ucm.compute(**kwargs)
    # A rejected call leaves nothing behind: the next computation sees only its own records.
    assert ucm.compute(**BASE)["num_records"] == 2


def test_bad_inputs_in_add_and_add_batch(ucm):
    with pytest.raises(ValueError, match=r"length mismatch between columns"):
        ucm.add_batch(target_rank_before=[1], target_rank_after=[1, 2], added_is_correct=[True])
    with pytest.raises(ValueError, match=r"target_rank_before\[0\] is 0"):
        ucm.add(target_rank_before=0, target_rank_after=1, added_is_correct=True)
    with pytest.raises(ValueError, match=r"required columns missing: \['added_is_correct'\]"):
        ucm.add(target_rank_before=1, target_rank_after=1)
    with pytest.raises(ValueError, match=r"unknown inputs \['rank'\]"):
        ucm.add_batch(target_rank_before=[1], target_rank_after=[1], added_is_correct=[True], rank=[1])
    assert ucm.compute(**BASE)["num_records"] == 2


def test_huge_ranks_in_add_and_add_batch_and_the_largest_rank_accepted(ucm):
    np = pytest.importorskip("numpy")
    with pytest.raises(ValueError, match=r"target_rank_after\[0\] is 10{30}, more than the largest rank"):
        ucm.add(target_rank_before=1, target_rank_after=10**30, added_is_correct=True)
    with pytest.raises(ValueError, match=r"incorrect_ranks_after\[0\]\[0\] is 18446744073709551615, more than"):
        ucm.add_batch(target_rank_before=[1], target_rank_after=[1], added_is_correct=[True],
                      incorrect_ranks_before=[[1]], incorrect_ranks_after=np.array([[2**64 - 1]], dtype=np.uint64))
    largest = 2**63 - 1
    results = ucm.compute(target_rank_before=[largest, 1], target_rank_after=[1, largest], added_is_correct=[True, True])
    assert (results["num_understand"], results["num_misunderstand"]) == (1, 1)
    assert results["rank_change"]["added_correct"]["target"] == 0.0


def test_error_indices_count_earlier_batches(ucm):
    ucm.add_batch(**BASE)
    with pytest.raises(ValueError, match=r"target_rank_after\[2\] is 0"):
        ucm.add_batch(target_rank_before=[1], target_rank_after=[0], added_is_correct=[True])
    assert ucm.compute()["num_records"] == 2


def test_relation_for_some_batches_only(ucm):
    ucm.add_batch(target_rank_before=[1], target_rank_after=[1], added_is_correct=[True], relation=["r"])
    ucm.add_batch(target_rank_before=[1], target_rank_after=[1], added_is_correct=[True])
    with pytest.raises(ValueError, match=r"record 1 has no relation while other records have one"):
        ucm.compute()
    assert ucm.compute(**BASE)["num_records"] == 2


def test_no_records(ucm):
    with pytest.raises(ValueError, match="no records to score"):
        ucm.compute(target_rank_before=[], target_rank_after=[], added_is_correct=[])


# The script's self-containment, its card and its docstring examples: tests/metrics/test_metric_modules.py.


# --- properties ------------------------------------------------------------------------------------

RANK = st.integers(1, 30)


@st.composite
def records(draw):
    """One record with every optional column sometimes present, sometimes None."""
    record = {
        "target_rank_before": draw(RANK),
        "target_rank_after": draw(RANK),
        "added_is_correct": draw(st.booleans()),
        "relation": draw(st.sampled_from(["r1", "r2", "r3"])),
        "added_rank_before": None,
        "added_rank_after": None,
    }
    if draw(st.booleans()):
        record["added_rank_before"], record["added_rank_after"] = draw(RANK), draw(RANK)
    for kind in ("correct", "incorrect"):
        pairs = draw(st.none() | st.lists(st.tuples(RANK, RANK), max_size=4))
        record[f"{kind}_ranks_before"] = None if pairs is None else [before for before, _ in pairs]
        record[f"{kind}_ranks_after"] = None if pairs is None else [after for _, after in pairs]
    record["triple_id"] = f"{record['relation']}-{draw(st.integers(0, 3))}"
    return record


RECORDS = st.lists(records(), min_size=1, max_size=20)
PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _columns(recs):
    return {name: [record[name] for record in recs] for name in recs[0]}


@PROPERTY
@given(recs=RECORDS)
def test_property_shares_sum_to_one_when_defined(ucm, recs):
    results = ucm.compute(**_columns(recs))
    entries = [results, *results["per_relation"].values()]
    for entry in entries:
        counts = entry["num_understand"] + entry["num_confuse"] + entry["num_misunderstand"]
        assert counts == entry["num_records_correct"] <= entry["num_records"]
        shares = [entry["understand"], entry["confuse"], entry["misunderstand"]]
        if entry["num_records_correct"]:
            assert math.isclose(sum(shares), 1.0)
            assert all(0.0 <= share <= 1.0 for share in shares)
        else:
            assert shares == [None, None, None]
    assert results["num_records_correct"] == sum(1 for record in recs if record["added_is_correct"])
    for name in ("num_understand", "num_confuse", "num_misunderstand", "num_records", "num_records_correct"):
        assert sum(entry[name] for entry in results["per_relation"].values()) == results[name]
    split = results["rank_change"]
    assert split["added_correct"]["num_target"] + split["added_incorrect"]["num_target"] == len(recs)


@PROPERTY
@given(recs=RECORDS, seed=st.integers(0, 2**32 - 1))
def test_property_permuting_records_changes_nothing(ucm, recs, seed):
    shuffled = list(recs)
    random.Random(seed).shuffle(shuffled)
    assert ucm.compute(**_columns(recs)) == ucm.compute(**_columns(shuffled))


@PROPERTY
@given(recs=RECORDS, cut=st.integers(0, 20))
def test_property_streaming_in_batches_changes_nothing(ucm, recs, cut):
    cut = min(cut, len(recs))
    for part in (recs[:cut], recs[cut:]):
        if part:
            ucm.add_batch(**_columns(part))
    assert ucm.compute() == ucm.compute(**_columns(recs))


@PROPERTY
@given(recs=RECORDS)
def test_property_shares_follow_the_sign_of_the_target_rank_change(ucm, recs):
    results = ucm.compute(**_columns(recs))
    correct = [r["target_rank_after"] - r["target_rank_before"] for r in recs if r["added_is_correct"]]
    assert results["num_understand"] == sum(change < 0 for change in correct)
    assert results["num_confuse"] == sum(change == 0 for change in correct)
    assert results["num_misunderstand"] == sum(change > 0 for change in correct)
    if correct:
        assert results["rank_change"]["added_correct"]["target"] == pytest.approx(sum(correct) / len(correct))


def test_class_docstring_carries_the_inputs_description(ucm_by_path):
    """``help()`` on the loaded module shows what ``compute`` takes (evaluate's add_start_docstrings)."""
    doc = type(ucm_by_path).__doc__
    assert "target_rank_before" in doc and "Understand / Confuse / Misunderstand shares" in doc
