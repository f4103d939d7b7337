"""``masked-likelihood`` runs the masked copies of several queries' statements in the same passes (a query's
copies alone leave its last pass part-empty, once per query): two queries that fit one pass take one, and every
score equals the one the query gets scored on its own."""

from __future__ import annotations

import numpy as np
import pytest

from medlama.probers.query_set import QuerySet
from medlama.probers.registry import make_prober

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread (tests/conftest.py)

NAMES = ["aspirin", "salbutamol", "shortness of breath", "beta-blocker", "fever", "runny nose"]
TEXTS = ["salbutamol may treat [Y] .", "[Y] is a finding of influenza, often mild.", "a [Y] was given ."]


def test_queries_share_passes_and_keep_their_own_scores(make_tiny_bert):
    prober = make_prober("masked-likelihood", make_tiny_bert("pll-passes-bert", mlm=True), {"batch_size": 1000},
                         device="cpu")
    queries = QuerySet([f"q{i}" for i in range(len(TEXTS))], ["r"] * len(TEXTS), TEXTS, [["fever"]] * len(TEXTS),
                       NAMES, "passes")
    passes = []
    handle = prober.lm.model.base_model.register_forward_pre_hook(lambda *_: passes.append(1))
    try:
        together = prober.scores(queries)
    finally:
        handle.remove()
    assert len(passes) == 1  # every copy of the three queries' 18 statements fits one pass of 1,000 rows
    alone = np.vstack([prober.scores(queries.subset([q])) for q in range(len(TEXTS))])
    np.testing.assert_allclose(together, alone, rtol=0, atol=1e-5)
