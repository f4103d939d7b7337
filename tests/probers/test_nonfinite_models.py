"""A model with NaN weights (a rewiring that diverged) is refused by name by every probing method and UCM
ranker, instead of being scored as if its arbitrary ranking of NaNs were answers."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer, BertForMaskedLM, GPT2LMHeadModel

from medlama.core.errors import MedlamaInputError
from medlama.probers.mlm import MaskedLM
from medlama.probers.query_set import QuerySet
from medlama.probers.registry import make_prober
from medlama.ucm_eval.rankers import make_ranker
from tiny_causal import NAMES, save_causal  # tests/helpers

pytestmark = pytest.mark.usefixtures("one_thread")

QUERIES = ["aspirin may treat [Y] .", "asthma may cause [Y] ."]
REFUSED = r"the model's (embeddings|logits|log-probabilities) are not finite numbers \(NaN or infinity\)"


def poisoned(source: Path, folder: Path, model_class) -> Path:
    """``source`` saved again into ``folder`` with every weight NaN."""
    model = model_class.from_pretrained(source)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.fill_(float("nan"))
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(source).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def nan_bert(make_tiny_bert, tmp_path_factory) -> Path:
    return poisoned(make_tiny_bert("healthy-mlm", mlm=True), tmp_path_factory.mktemp("nan-bert"), BertForMaskedLM)


@pytest.fixture(scope="module")
def nan_gpt2(tmp_path_factory) -> Path:
    healthy = save_causal(tmp_path_factory.mktemp("healthy-gpt2"), "gpt2")
    return poisoned(healthy, tmp_path_factory.mktemp("nan-gpt2"), GPT2LMHeadModel)


def query_set() -> QuerySet:
    return QuerySet([f"q{i}" for i in range(len(QUERIES))], ["rel"] * len(QUERIES), list(QUERIES),
                    [["pain"], ["cough"]], list(NAMES), "q")


@pytest.mark.parametrize("method", ["retrieval", "mask-average", "mask-predict"])
def test_masked_and_encoder_methods_refuse_a_nan_model(method, nan_bert):
    prober = make_prober(method, nan_bert, device="cpu")
    with pytest.raises(MedlamaInputError, match=rf"^{nan_bert}: {REFUSED}"):
        prober.rank(query_set(), 10)


@pytest.mark.parametrize("method", ["causal-likelihood", "causal-constrained", "causal-generate"])
def test_causal_methods_refuse_a_nan_model(method, nan_gpt2):
    prober = make_prober(method, nan_gpt2, device="cpu")
    with pytest.raises(MedlamaInputError, match=rf"^{nan_gpt2}: {REFUSED}"):
        prober.rank(query_set(), 5)


@pytest.mark.parametrize(("method", "model"), [("retrieval", "nan_bert"), ("mask-average", "nan_bert"),
                                                ("mask-predict", "nan_bert"),
                                                ("causal-likelihood", "nan_gpt2")])
def test_ucm_rankers_refuse_a_nan_model(method, model, request):
    folder = request.getfixturevalue(model)
    ranker = make_ranker(method, folder, device="cpu")
    with pytest.raises(MedlamaInputError, match=rf"^{folder}: {REFUSED}"):
        ranker.scores(["the patient took aspirin . aspirin may treat [Y] ."], list(NAMES))


def test_masked_likelihood_refuses_a_nan_model_after_its_first_pass(nan_bert, monkeypatch):
    """The PLL of a whole relation runs in many passes: a NaN model is refused after the first, not after all."""

    prober = make_prober("masked-likelihood", nan_bert, {"batch_size": 1}, device="cpu")
    passes = []  # counted from here: loading the prober runs a pass of its own (its output head's check)
    logits_at = MaskedLM.logits_at
    monkeypatch.setattr(MaskedLM, "logits_at", lambda lm, *args: passes.append(1) or logits_at(lm, *args))
    with pytest.raises(MedlamaInputError, match=rf"^{nan_bert}: {REFUSED}"):
        prober.rank(query_set(), 10)
    assert len(passes) == 1  # one copy per pass: every statement of every candidate would be dozens
