"""``medlama.probe`` and ``medlama.load_medlama`` check their arguments as strictly as ``medlama probe``: a bad
one is a ``MedlamaInputError`` naming it, before any model loads; one relation may be given as its name; and a
result refuses a cut-off it did not score or an average it does not know."""

from __future__ import annotations

import re

import pytest

import medlama
from medlama.core.errors import MedlamaInputError
from medlama.probers import registry, retrieval
from medlama.runs.queries import load_medlama_queries, queries_from

pytestmark = pytest.mark.usefixtures("one_thread")

RELATIONS = ["may_treat", "may_prevent"]


@pytest.fixture(scope="module")
def tiny(make_tiny_bert):
    return make_tiny_bert("arguments-tiny-bert")


@pytest.fixture(scope="module")
def queries(medlama_dir):
    return load_medlama_queries(medlama_dir, "hard", relations=RELATIONS).limit_per_relation(4)


@pytest.fixture(scope="module")
def result(tiny, queries):
    return medlama.probe(str(tiny), queries, relations=["may_treat"])


def test_one_relation_given_as_its_name(tiny, medlama_dir, queries, result):
    one = medlama.load_medlama("hard", data=medlama_dir, relations="may_treat")
    assert len(one) > 0 and set(one["relation"]) == {"may_treat"}
    assert one["id"] == medlama.load_medlama("hard", data=medlama_dir, relations=["may_treat"])["id"]
    named = medlama.probe(str(tiny), queries, relations="may_treat")
    assert named.ids == result.ids == [i for i, r in zip(queries.ids, queries.relations) if r == "may_treat"]
    assert named.predictions == result.predictions


def test_an_unknown_relation_is_an_error_naming_the_nearest_and_the_known(medlama_dir, queries):
    calls = [lambda: medlama.load_medlama("hard", data=medlama_dir, relations=["may_treet"]),
             lambda: medlama.load_medlama("hard", data=medlama_dir, relations="may_treet", split=None),
             lambda: queries_from(queries, relations="may_treet"),
             lambda: load_medlama_queries(medlama_dir, "hard", relations=["may_treet"])]
    for call in calls:
        with pytest.raises(MedlamaInputError, match=r"unknown relation\(s\) 'may_treet' \(did you mean "
                                                    r"'may_treat'\?\); known: .*may_prevent, may_treat"):
            call()
    with pytest.raises(MedlamaInputError, match=r"relations\[1\] must be a relation name \(a non-empty string\), "
                                                r"got 3"):
        medlama.load_medlama("hard", data=medlama_dir, relations=["may_treat", 3])


def test_acc_refuses_an_unknown_average_or_an_unscored_cut_off(result):
    assert result.acc(10, "macro") == result.metrics["acc@10_macro"] and result.acc(1) == result.metrics["acc@1"]
    with pytest.raises(MedlamaInputError, match=r"unknown average 'mciro' \(did you mean 'micro'\?\)"):
        result.acc(10, "mciro")
    for k in (3, 10.0, "10"):
        with pytest.raises(MedlamaInputError, match=rf"acc@{k} was not scored; the scored cut-offs are \[1, 5, 10\]"):
            result.acc(k)


@pytest.fixture
def no_model_loads(monkeypatch):
    """Any model load fails the test: the arguments must be refused first."""
    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded before the arguments were checked")

    monkeypatch.setattr(registry, "make_prober", refuse)
    monkeypatch.setattr(retrieval.RetrievalProber, "__init__", refuse)


@pytest.mark.parametrize("arguments, message", [
    ({"ks": 5}, "setting 'ks' must be a list, got 5"),
    ({"ks": ["1"]}, "setting 'ks' must be an integer, got '1'"),
    ({"ks": [1, 0]}, "setting 'ks' must be at least 1, got 0"),
    ({"ks": []}, "setting 'ks' must list at least one cut-off"),
    ({"top_k": "10"}, "setting 'top_k' must be an integer, got '10'"),
    ({"top_k": 0}, "setting 'top_k' must be at least 1, got 0"),
    ({"match": "fuzzy"}, "setting 'match' must be one of 'exact', 'normalized', got 'fuzzy'"),
    ({"limit": 0}, "setting 'limit' must be at least 1, got 0"),
    ({"device": "banana"}, "device 'banana' is not a device; give cpu, cuda, cuda:N or mps"),
    ({"relations": [None]}, "relations[0] must be a relation name (a non-empty string), got None"),
])
def test_a_bad_argument_is_refused_before_any_model_loads(tiny, queries, no_model_loads, arguments, message):
    with pytest.raises(MedlamaInputError, match=re.escape(message)):
        medlama.probe(str(tiny), queries, **arguments)


def test_a_device_this_machine_lacks_is_refused_before_any_model_loads(tiny, queries, no_model_loads):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    with pytest.raises(MedlamaInputError, match="device cuda: this machine has no CUDA device"):
        medlama.probe(str(tiny), queries, device="cuda")


@pytest.mark.parametrize("field, value, message", [
    ("head_name", None, "head_name must be a non-empty string, got None"),
    ("answer_names", ["pain", None], "answer_names must hold answer names (non-empty strings), got None"),
    ("answer_names", [], "answer_names must be a non-empty list of answer names, got []"),
    ("query_human", None, "query_human must be a non-empty string, got None"),
])
def test_a_dataset_row_that_cannot_make_a_query_is_named(tiny, no_model_loads, field, value, message):
    from datasets import Dataset

    rows = {"id": ["q0", "q1"], "relation": ["may_treat", "may_treat"], "head_name": ["aspirin", "insulin"],
            "answer_names": [["pain"], ["diabetes"]],
            "query_human": ["aspirin may treat [Y] .", "insulin may treat [Y] ."]}
    rows[field] = [rows[field][0], value]
    with pytest.raises(MedlamaInputError, match=re.escape(f"row 1, field '{field}': not a MedLAMA query: {message}")):
        medlama.probe(str(tiny), Dataset.from_dict(rows))

