"""The prober interface (:class:`medlama.probers.prober.Prober`) declares every member a method may lack, with its
default: every registered method satisfies it as built by :func:`medlama.probers.registry.make_prober`, and a
method that has none of the optional capabilities reads the declared defaults (never an ``AttributeError``),
through :func:`~medlama.runs.workflow.probe` and :class:`~medlama.probers.prober.ProberNote` as a user runs it."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from medlama.core.errors import MedlamaInputError
from medlama.probers.pools import rank_choices
from medlama.probers.prober import Prober, ProberNote, device_of
from medlama.probers.query_set import QuerySet
from medlama.probers.registry import METHODS, make_prober
from medlama.runs.workflow import probe
from tiny_causal import save_causal
from tiny_t5 import save_t5

pytestmark = pytest.mark.usefixtures("one_thread")

#: The members every prober has, each declared on Prober with its default.
DECLARED = {"method": "prober", "independent_queries": False, "scores_pool": False, "ranks_choices": False,
            "settings_": None, "loaded": None, "device": None}


@pytest.fixture(scope="module")
def models(make_tiny_bert, tmp_path_factory) -> dict[str, Path]:
    mlm = make_tiny_bert("iface-mlm", mlm=True)
    causal = save_causal(tmp_path_factory.mktemp("iface-gpt2"), "gpt2")
    return {"retrieval": make_tiny_bert("iface-encoder"), "mask-average": mlm, "mask-predict": mlm,
            "masked-likelihood": mlm, "generative": save_t5(tmp_path_factory.mktemp("iface-t5")),
            "causal-likelihood": causal, "causal-constrained": causal, "causal-generate": causal}


class OnlyRank(Prober):
    """A method with none of the optional capabilities: names only, no settings, no model to report."""

    method = "only-rank"

    def rank(self, queries: QuerySet, top_k: int = 10) -> list[list[str]]:
        return [list(queries.candidates[:top_k]) for _ in queries.texts]


def _queries(choices: bool = False) -> QuerySet:
    names = ["aspirin", "heparin", "insulin"]
    return QuerySet(ids=["q0", "q1"], relations=["r", "r"], texts=["pain is treated by [Y] .", "[Y] thins blood ."],
                    gold=[["aspirin"], ["heparin"]], candidates=names, name="tiny",
                    **({"rule": "choices", "choices": [["insulin", "aspirin"], ["heparin", "insulin"]]}
                       if choices else {}))


def test_the_interface_declares_each_optional_member_with_its_default():
    for name, default in DECLARED.items():
        assert name in vars(Prober), f"Prober does not declare {name}"
        assert getattr(Prober, name) == default
    assert inspect.isfunction(vars(Prober)["rank_layers_scored"])


@pytest.mark.parametrize("method", list(METHODS))
def test_every_registered_method_satisfies_the_interface(method, models):
    entry = METHODS[method]
    assert issubclass(entry.prober, Prober) and entry.prober.method == method
    for flag in ("independent_queries", "scores_pool", "ranks_choices"):
        assert isinstance(getattr(entry.prober, flag), bool), f"{method}: {flag}"
    prober = make_prober(method, models[method], device="cpu")
    assert isinstance(prober.settings_, entry.settings)  # the typed settings it was made with
    assert str(prober.device) == "cpu" and device_of(prober) == "cpu"
    assert prober.loaded is None  # made by hand, not by the probe workflow
    assert prober.settings()["method"] == method
    note = ProberNote.of(prober)
    assert (note.device, note.loaded, note.score) == ("cpu", {}, prober.score_meaning)
    if method == "retrieval":  # a layer sweep: {layer: Ranking}, from one pass
        assert list(prober.rank_layers_scored(_queries(), top_k=2)) == prober.encoder.layers == [2]
    elif method == "causal-likelihood":  # the logit lens sweeps the layers given, and refuses without them
        with pytest.raises(MedlamaInputError, match="scores layers with the logit lens only when layers are given"):
            prober.rank_layers_scored(_queries(), top_k=2)
    else:
        with pytest.raises(MedlamaInputError, match=f"--method {method} has no layer sweep"):
            prober.rank_layers_scored(_queries(), top_k=2)


def test_a_method_lacking_every_capability_reads_the_defaults():
    prober = OnlyRank()
    assert (prober.ranks_choices, prober.settings_, prober.loaded, prober.device) == (False, None, None, None)
    assert device_of(prober) is None
    assert ProberNote.of(prober) == ProberNote({"method": "only-rank"}, None, None, {})
    with pytest.raises(MedlamaInputError, match="--method only-rank has no layer sweep"):
        prober.rank_layers_scored(_queries())
    # the user's path: a prober made by hand, probed (no batch size to resolve), its note recorded
    result = probe(prober, _queries(), ks=(1,))
    assert result.settings["method"] == "only-rank" and result.device is None
    # multiple choice without ranks_choices: each query alone, its choices as its pool
    assert rank_choices(prober, _queries(choices=True), 5).names == [["insulin", "aspirin"], ["heparin", "insulin"]]
