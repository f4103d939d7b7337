"""The acc@k metric module (metrics/acc_at_k): loading, hand-computed values, bad inputs, card, properties."""

from __future__ import annotations

import random
from pathlib import Path

import evaluate
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import medlama.metrics

REPO = Path(__file__).resolve().parents[2]
METRICS_DIR = REPO / "metrics"
MODULE_DIR = METRICS_DIR / "acc_at_k"


# The module itself: the fixtures `acc` and `acc_by_path` (tests/metrics/conftest.py).


def naive_acc(predictions, references, k):
    """An independent, slow oracle: deduplicate, cut at k, look for any gold answer."""
    hits = 0
    for preds, golds in zip(predictions, references):
        distinct = []
        for pred in preds:
            if pred not in distinct:
                distinct.append(pred)
        hits += any(pred in golds for pred in distinct[:k])
    return hits / len(predictions)


# --- loading ---------------------------------------------------------------------------------------


def test_loads_by_path_and_through_the_toolkit(acc, acc_by_path):
    assert acc.name == acc_by_path.name == "acc_at_k"
    # Installed or editable, the toolkit loads the very files of this folder.
    installed = medlama.metrics.metric_path("acc_at_k")
    for name in ("acc_at_k.py", "README.md", "requirements.txt"):
        assert (installed / name).read_bytes() == (MODULE_DIR / name).read_bytes(), name
    args = dict(predictions=[["a", "b"]], references=[["b"]], k=[1, 2])
    assert acc.compute(**args) == acc_by_path.compute(**args)


def test_loads_alone_outside_the_repository(tmp_path):
    """As after a push to the Hub: the folder on its own, away from the medlama package (not importable)."""
    from metric_module import compute_alone

    args = dict(predictions=[["a", "b"], ["c", "b"], ["d", "e"]], references=[["b"], ["c"], ["x"]], k=[1, 2])
    # by hand: query 1 is right at 2, query 2 at 1, query 3 never
    scores = compute_alone(MODULE_DIR, tmp_path, args)
    assert (scores["acc@1"], scores["acc@2"], scores["acc@2_macro"]) == (1 / 3, 2 / 3, 2 / 3)


def test_unknown_metric_name():
    with pytest.raises(ValueError, match="unknown metric 'acc_at_kk'"):
        medlama.metrics.metric_path("acc_at_kk")


def test_info(acc):
    assert set(acc.features) == {"predictions", "references", "groups"}
    assert "Rewire-then-Probe" in acc.citation and "Biomedical Knowledge Bases" in acc.citation
    assert "acc@k" in acc.description


# --- hand-computed values --------------------------------------------------------------------------


def test_hand_computed_without_groups(acc):
    results = acc.compute(
        predictions=[["x", "gold1", "y"], ["y", "x"], ["gold3"], ["a", "b", "c", "d", "e", "gold4"]],
        references=[["gold1"], ["gold2"], ["nope", "gold3"], ["gold4"]],
    )
    assert results == {
        "acc@1": 0.25,
        "acc@1_macro": 0.25,
        "short@1": 0.0,
        "num_short@1": 0,
        "acc@5": 0.5,
        "acc@5_macro": 0.5,
        "short@5": 0.75,
        "num_short@5": 3,
        "acc@10": 0.75,
        "acc@10_macro": 0.75,
        "short@10": 1.0,
        "num_short@10": 4,
        "num_queries": 4,
        "num_groups": 1,
        "k": [1, 5, 10],
        "match": "exact",
        "groups": None,
    }


def test_hand_computed_with_groups(acc):
    # r1: hit@1, miss; r2: hit@3 (after dedup of "z"), hit@2, miss.
    results = acc.compute(
        predictions=[["a"], ["b", "c"], ["z", "z", "z", "w", "g"], ["q", "g2"], ["m"]],
        references=[["a"], ["x"], ["g"], ["g2"], ["n"]],
        groups=["r1", "r1", "r2", "r2", "r2"],
        k=[2, 1, 3, 2],
    )
    assert results["k"] == [1, 2, 3]
    assert results["acc@1"] == pytest.approx(1 / 5)
    assert results["acc@2"] == pytest.approx(2 / 5)
    assert results["acc@3"] == pytest.approx(3 / 5)
    assert results["acc@1_macro"] == pytest.approx((1 / 2 + 0 / 3) / 2)
    assert results["acc@2_macro"] == pytest.approx((1 / 2 + 1 / 3) / 2)
    assert results["acc@3_macro"] == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert results["num_groups"] == 2
    # Distinct predictions per query: 1, 2, 3, 2, 1.
    assert [results[f"num_short@{k}"] for k in (1, 2, 3)] == [0, 2, 4]
    assert results["short@3"] == pytest.approx(4 / 5)
    assert results["groups"] == {
        "r1": {
            "acc@1": 0.5, "short@1": 0.0, "num_short@1": 0,
            "acc@2": 0.5, "short@2": 0.5, "num_short@2": 1,
            "acc@3": 0.5, "short@3": 1.0, "num_short@3": 2,
            "num_queries": 2,
        },
        "r2": {
            "acc@1": 0.0, "short@1": 0.0, "num_short@1": 0,
            "acc@2": pytest.approx(1 / 3), "short@2": pytest.approx(1 / 3), "num_short@2": 1,
            "acc@3": pytest.approx(2 / 3), "short@3": pytest.approx(2 / 3), "num_short@3": 2,
            "num_queries": 3,
        },
    }


def test_gold_listed_twice_counts_once(acc):
    """The upstream bug: counting every gold answer in the top 10 let acc@10 exceed 1."""
    results = acc.compute(
        predictions=[["g", "h", "g", "g", "h"]], references=[["g", "h", "g"]], k=[1, 5, 10]
    )
    assert results["acc@1"] == results["acc@5"] == results["acc@10"] == 1.0
    # Two distinct predictions: short for k = 5 and 10, reported rather than hidden.
    assert (results["num_short@1"], results["num_short@5"], results["num_short@10"]) == (0, 1, 1)


def test_deduplication_moves_later_predictions_up(acc):
    results = acc.compute(predictions=[["x", "x", "gold"]], references=[["gold"]], k=2)
    assert results["acc@2"] == 1.0


def test_short_lists_are_scored_on_what_they_have_and_reported(acc):
    results = acc.compute(predictions=[["g"], [], ["a"]], references=[["g"], ["g"], ["g"]], k=[1, 3])
    assert results["acc@1"] == results["acc@3"] == pytest.approx(1 / 3)
    assert results["num_short@1"] == 1 and results["short@1"] == pytest.approx(1 / 3)
    assert results["num_short@3"] == 3 and results["short@3"] == 1.0


def test_exact_matching_is_exact(acc):
    results = acc.compute(
        predictions=[["Cough", "cough "], ["the fever"], ["rash."]],
        references=[["cough"], ["fever"], ["rash"]],
        k=5,
    )
    assert results["acc@5"] == 0.0


def test_normalized_matching_as_biolama(acc):
    results = acc.compute(
        predictions=[["Cough", "cough "], ["the fever"], ["rash."], ["An  Acute   pain!"], ["vitamin a"]],
        references=[["cough"], ["Fever"], ["rash"], ["acute pain"], ["vitamin b"]],
        k=1,
        match="normalized",
    )
    assert results["acc@1"] == pytest.approx(4 / 5)
    assert results["match"] == "normalized"


def test_normalized_deduplicates_after_normalisation(acc):
    predictions, references = [["Cough", "cough", "COUGH!", "rash"]], [["rash"]]
    assert acc.compute(predictions=predictions, references=references, k=2, match="normalized")["acc@2"] == 1.0
    assert acc.compute(predictions=predictions, references=references, k=2, match="exact")["acc@2"] == 0.0


def test_normalized_ignores_golds_that_normalise_to_nothing(acc):
    results = acc.compute(predictions=[["the"], ["x", "y"]], references=[["The", "y"], ["y"]], k=1, match="normalized")
    assert results["acc@1"] == 0.0
    results = acc.compute(predictions=[["The"]], references=[["The"]], k=1)  # exact mode keeps it
    assert results["acc@1"] == 1.0


def test_single_int_k_and_default_k(acc):
    results = acc.compute(predictions=[["a"]], references=[["a"]], k=3)
    assert results["k"] == [3] and "acc@3" in results and "acc@1" not in results
    results = acc.compute(predictions=[["a"]], references=[["a"]])
    assert results["k"] == [1, 5, 10]


def test_known_groups_accepts_listed_groups(acc):
    results = acc.compute(
        predictions=[["a"], ["b"]], references=[["a"], ["a"]], groups=["r1", "r2"], known_groups=["r1", "r2", "r3"], k=1
    )
    assert set(results["groups"]) == {"r1", "r2"}
    assert results["acc@1_macro"] == 0.5


def test_add_and_add_batch_stream_into_one_computation(acc):
    acc.add_batch(predictions=[["a", "b"], ["c"]], references=[["b"], ["d"]], groups=["r1", "r1"])
    acc.add(prediction=["g"], reference=["g"], groups="r2")
    streamed = acc.compute(k=[1, 2])
    at_once = acc.compute(
        predictions=[["a", "b"], ["c"], ["g"]],
        references=[["b"], ["d"], ["g"]],
        groups=["r1", "r1", "r2"],
        k=[1, 2],
    )
    assert streamed == at_once
    assert at_once["acc@2_macro"] == pytest.approx((1 / 2 + 1) / 2)


def test_add_batch_without_groups(acc):
    acc.add_batch(predictions=[["a"]], references=[["a"]])
    acc.add(prediction=["b"], reference=["a"])
    results = acc.compute(k=1)
    assert results["acc@1"] == 0.5 and results["groups"] is None


def test_combine_passes_groups_on(cache_dir, acc):
    """evaluate.combine routes inputs by the module's feature names: the groups given reach the module (never
    dropped), so combine scores as the module alone does; without groups, combine itself refuses (the card says
    to give one key for every query)."""
    predictions = [["fever", "cough"], ["rash"], ["cough", "pain"]]
    references = [["cough"], ["rash"], ["fever"]]
    groups = ["a", "b", "b"]

    def combined():
        return evaluate.combine([evaluate.load(str(MODULE_DIR), keep_in_memory=True, cache_dir=cache_dir)])

    grouped = combined()
    grouped.add_batch(predictions=predictions[:2], references=references[:2], groups=groups[:2])
    grouped.add(prediction=predictions[2], reference=references[2], groups=groups[2])
    result = grouped.compute(k=[1, 2])
    assert result == acc.compute(predictions=predictions, references=references, groups=groups, k=[1, 2])
    assert result["num_groups"] == 2 and result["acc@1_macro"] == 0.25
    one = combined()
    one.add_batch(predictions=predictions, references=references, groups=["all"] * 3)
    alone = acc.compute(predictions=predictions, references=references, k=[1, 2])
    assert {key: value for key, value in one.compute(k=[1, 2]).items() if key != "groups"} == \
        {key: value for key, value in alone.items() if key != "groups"}
    with pytest.raises(KeyError, match="groups"):
        combined().add_batch(predictions=predictions, references=references)


def test_numpy_inputs(acc):
    np = pytest.importorskip("numpy")
    results = acc.compute(predictions=np.array([["a", "b"], ["c", "d"]]), references=[["b"], ["x"]], k=2)
    assert results["acc@2"] == 0.5


# --- bad inputs ------------------------------------------------------------------------------------

BAD_INPUTS = [
    (
        dict(predictions=[["a"], ["b"]], references=[["a"]]),
        r"length mismatch: 2 queries in `predictions`, 1 queries in `references`",
    ),
    (
        dict(predictions=[["a"], ["b"]], references=[["a"], ["b"]], groups=["r1"]),
        r"length mismatch: .*1 queries in `groups`",
    ),
    (dict(predictions=[["a"], ["b"]], references=[["a"], []]), r"references\[1\] is an empty gold list"),
    (
        dict(predictions=[["a"]], references=[["the", "."]], match="normalized"),
        r"references\[0\] has no usable gold answer under match='normalized'",
    ),
    (dict(predictions=[["a"]], references=[[""]]), r"references\[0\] has no usable gold answer under match='exact'"),
    (dict(predictions=[["a"], ["b"]], references=[["a"], ["b"]], groups=["r1", ""]), r"groups\[1\] must be a non-empty string"),
    (dict(predictions=[["a"], ["b"]], references=[["a"], ["b"]], groups=["r1", None]), r"groups\[1\] must be a non-empty string"),
    (
        dict(predictions=[["a"], ["b"]], references=[["a"], ["b"]], groups=["r1", "r9"], known_groups=["r1", "r2"]),
        r"unknown group 'r9' at groups\[1\]; known groups: \['r1', 'r2'\]",
    ),
    (dict(predictions=[["a"]], references=[["a"]], known_groups=["r1"]), r"`known_groups` given but the queries have no `groups`"),
    (dict(predictions=[["a"]], references=[["a"]], k=0), r"every k must be >= 1, got 0"),
    (dict(predictions=[["a"]], references=[["a"]], k=[1, -5]), r"every k must be >= 1, got -5"),
    (dict(predictions=[["a"]], references=[["a"]], k=1.5), r"every k must be an int >= 1, got 1.5"),
    (dict(predictions=[["a"]], references=[["a"]], k=True), r"every k must be an int >= 1, got True"),
    (dict(predictions=[["a"]], references=[["a"]], k=[]), r"`k` is empty"),
    # The class of the UCM metric's overflow: NaN, huge ints and negatives are named, never passed to pyarrow.
    (dict(predictions=[["a"]], references=[["a"]], k=float("nan")), r"every k must be an int >= 1, got nan"),
    (dict(predictions=[["a"]], references=[["a"]], k=[1, -(10**30)]), r"every k must be >= 1, got -10{30}"),
    (dict(predictions=[["a", float("nan")]], references=[["a"]]), r"predictions\[0\]\[1\] must be a string, got nan"),
    (dict(predictions=[["a"]], references=[["a", 10**30]]), r"references\[0\]\[1\] must be a string, got 10{30}"),
    (dict(predictions=[["a"]], references=[["a"]], match="fuzzy"), r"unknown match mode 'fuzzy'; use one of \['exact', 'normalized'\]"),
    (dict(predictions=["a"], references=[["a"]]), r"predictions\[0\] must be a list of strings"),
    (dict(predictions=[["a"]], references=["a"]), r"references\[0\] must be a list of gold strings"),
    (dict(predictions=[["a", 3]], references=[["a"]]), r"predictions\[0\]\[1\] must be a string, got 3"),
    (dict(predictions=[["a"]], references=[[None]]), r"references\[0\]\[0\] must be a string, got None"),
    (dict(predictions=[["a"]]), r"references missing"),
    (dict(predictions=[["a"]], references=[["a"]], top_k=3), r"unknown arguments \['top_k'\]"),
    (dict(predictions="abc", references=[["a"]]), r"`predictions` must be a list with one entry per query"),
]


@pytest.mark.parametrize("kwargs, message", BAD_INPUTS)
def test_bad_inputs_raise_clear_errors(acc, kwargs, message):
    with pytest.raises(ValueError, match=message):
        acc.compute(**kwargs)
    # A rejected call leaves nothing behind: the next computation sees only its own queries.
    assert acc.compute(predictions=[["a"]], references=[["a"]], k=1)["num_queries"] == 1


def test_huge_k_is_a_plain_cut_off(acc):
    # k is a compute argument, never stored by pyarrow: any size works, and a huge one cuts nothing off.
    np = pytest.importorskip("numpy")
    results = acc.compute(predictions=[["a", "b"], ["c"]], references=[["b"], ["x"]], k=[np.int64(1), 10**30])
    assert results["k"] == [1, 10**30]
    assert (results["acc@1"], results[f"acc@{10**30}"], results[f"num_short@{10**30}"]) == (0.0, 0.5, 2)


def test_length_mismatch_in_add_batch(acc):
    with pytest.raises(ValueError, match=r"length mismatch: 1 queries in `predictions`, 2 queries in `references`"):
        acc.add_batch(predictions=[["a"]], references=[["a"], ["b"]])
    with pytest.raises(ValueError, match=r"references\[0\] is an empty gold list"):
        acc.add(prediction=["a"], reference=[])
    with pytest.raises(ValueError, match=r"unexpected inputs \['k'\]"):
        acc.add_batch(predictions=[["a"]], references=[["a"]], k=1)
    assert acc.compute(predictions=[["a"]], references=[["a"]], k=1)["num_queries"] == 1


def test_error_indices_count_earlier_batches(acc):
    acc.add_batch(predictions=[["a"], ["b"]], references=[["a"], ["b"]])
    with pytest.raises(ValueError, match=r"references\[2\] is an empty gold list"):
        acc.add_batch(predictions=[["c"]], references=[[]])
    assert acc.compute(k=1)["num_queries"] == 2


def test_groups_for_some_batches_only(acc):
    acc.add_batch(predictions=[["a"]], references=[["a"]], groups=["r1"])
    acc.add_batch(predictions=[["b"]], references=[["b"]])
    with pytest.raises(ValueError, match=r"query 1 has no group key while others have one"):
        acc.compute(k=1)
    assert acc.compute(predictions=[["a"]], references=[["a"]], k=1)["num_queries"] == 1


def test_no_queries(acc):
    with pytest.raises(ValueError, match="no queries to score"):
        acc.compute(predictions=[], references=[], k=1)


# The script's self-containment, its card and its docstring examples: tests/metrics/test_metric_modules.py.


# --- properties ------------------------------------------------------------------------------------

NAMES = st.sampled_from(["a", "b", "c", "d", "e", "f", "A", "a.", "the b"])
QUERY = st.tuples(
    st.lists(NAMES, max_size=12),  # predictions
    st.lists(NAMES, min_size=1, max_size=3),  # gold answers
    st.sampled_from(["r1", "r2", "r3"]),  # group
)
QUERIES = st.lists(QUERY, min_size=1, max_size=15)
PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
KS = list(range(1, 14))


def _columns(queries):
    return [list(q[0]) for q in queries], [list(q[1]) for q in queries], [q[2] for q in queries]


@PROPERTY
@given(queries=QUERIES)
def test_property_matches_a_naive_oracle_and_is_monotone_in_k(acc, queries):
    predictions, references, groups = _columns(queries)
    results = acc.compute(predictions=predictions, references=references, groups=groups, k=KS)
    for key in ("acc@{}", "acc@{}_macro"):
        values = [results[key.format(k)] for k in KS]
        assert values == sorted(values), key
        assert all(0.0 <= value <= 1.0 for value in values)
    shorts = [results[f"num_short@{k}"] for k in KS]
    assert shorts == sorted(shorts)
    for k in KS:
        assert results[f"acc@{k}"] == pytest.approx(naive_acc(predictions, references, k))
    assert sum(entry["num_queries"] for entry in results["groups"].values()) == len(queries)


@PROPERTY
@given(queries=QUERIES, seed=st.integers(0, 2**32 - 1), match=st.sampled_from(["exact", "normalized"]))
def test_property_permuting_queries_changes_nothing(acc, queries, seed, match):
    shuffled = list(queries)
    random.Random(seed).shuffle(shuffled)
    results = []
    for order in (queries, shuffled):
        predictions, references, groups = _columns(order)
        try:
            results.append(
                acc.compute(predictions=predictions, references=references, groups=groups, k=[1, 3, 10], match=match)
            )
        except ValueError as error:  # a gold list that normalises to nothing, whatever the order
            assert "no usable gold answer" in str(error)
            results.append("error")
    assert results[0] == results[1]


@PROPERTY
@given(queries=QUERIES)
def test_property_macro_equals_micro_with_one_group(acc, queries):
    predictions, references, _ = _columns(queries)
    one_group = acc.compute(predictions=predictions, references=references, groups=["r"] * len(queries), k=KS)
    no_groups = acc.compute(predictions=predictions, references=references, k=KS)
    for k in KS:
        assert one_group[f"acc@{k}_macro"] == one_group[f"acc@{k}"] == no_groups[f"acc@{k}"]
        assert no_groups[f"acc@{k}_macro"] == no_groups[f"acc@{k}"]
        assert one_group["groups"]["r"][f"acc@{k}"] == one_group[f"acc@{k}"]
    assert no_groups["num_groups"] == one_group["num_groups"] == 1


@PROPERTY
@given(queries=QUERIES)
def test_property_repeating_predictions_changes_nothing(acc, queries):
    predictions, references, groups = _columns(queries)
    doubled = [[pred for pred in preds for _ in range(2)] for preds in predictions]
    golds_doubled = [golds * 3 for golds in references]
    base = acc.compute(predictions=predictions, references=references, groups=groups, k=KS)
    again = acc.compute(predictions=doubled, references=golds_doubled, groups=groups, k=KS)
    assert base == again


def test_class_docstring_carries_the_inputs_description(acc_by_path):
    """``help()`` on the loaded module shows what ``compute`` takes (evaluate's add_start_docstrings)."""
    doc = type(acc_by_path).__doc__
    assert "Args:" in doc and "predictions" in doc and "acc@k with micro and macro" in doc
