"""The causal scorers' shared steps, one way each (``probers/causal/passes.py``, ``probers/mlm.py``'s ``padded``), and
the best-first search's budget in the unit it spends (``probers/causal/budget.py``): the positions the passes
feed, counted by a hook on the model's forward, equal what the budget counts, for the exhaustive method and for the
search whichever way it goes."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from tiny_causal import NAMES, save_causal, save_mistral  # tests/helpers

from medlama.probers.query_set import QuerySet

pytestmark = pytest.mark.usefixtures("one_thread")

#: Names that share first tokens (the shared passes' case), of one to four words, and a repeat.
POOL = [*NAMES, "pain", "kidney", *(f"{a} {b}" for a in NAMES[:7] for b in NAMES[:7] if a != b),
        "asthma attack cough", "back pain fever", "diabetes mellitus kidney pain"]
TEXTS = ["aspirin may treat [Y] .", "[Y] may cause cough .", "the patient had [Y]", "metformin may treat [Y]."]
ROWS = [[5, 6, 7], [], [8], [9, 10, 11, 12, 13], [14, 15]]


def test_padding_right_and_left_equals_a_hand_made_tensor():
    from medlama.probers.causal.passes import padded_tensors
    from medlama.probers.mlm import padded

    right = [[5, 6, 7, -1, -1], [-1] * 5, [8, -1, -1, -1, -1], [9, 10, 11, 12, 13], [14, 15, -1, -1, -1]]
    left = [[-1, -1, 5, 6, 7], [-1] * 5, [-1, -1, -1, -1, 8], [9, 10, 11, 12, 13], [-1, -1, -1, 14, 15]]
    for side, expected in ((False, right), (True, left)):
        ids, filled = padded(ROWS, -1, left=side)
        assert ids.dtype == np.int64 and ids.tolist() == expected
        assert filled.tolist() == [[cell != -1 for cell in row] for row in expected]
        tensor, mask = padded_tensors(ROWS, -1, "cpu", left=side)
        assert tensor.dtype == torch.long and tensor.tolist() == expected and mask.tolist() == filled.tolist()
    assert padded([], 0)[0].shape == (0, 0) and padded([[]], 0, left=True)[0].shape == (1, 0)


@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_row_totals_equal_a_loop_and_leave_the_padding_out(reduction):
    from medlama.probers.causal.passes import padded_tensors, row_totals

    rows = [row for row in ROWS if row]
    _, filled = padded_tensors(rows, 0, "cpu")
    values = torch.randn(filled.shape, generator=torch.Generator().manual_seed(0))
    values[~filled] = float("-inf")  # a padding position's -inf (or NaN) must not reach a total
    values[0, 0] = float("nan") if reduction == "sum" else values[0, 0]
    values[1, 1:] = float("nan")
    totals = row_totals(values, filled, torch.float64, reduction=reduction)
    assert totals.dtype == torch.float64
    for r, row in enumerate(rows):
        own = [float(values[r, c]) for c in range(len(row))]
        expected = math.fsum(own) / (len(own) if reduction == "mean" else 1)
        assert (math.isnan(expected) and math.isnan(totals[r])) or totals[r].item() == pytest.approx(expected,
                                                                                                      rel=1e-12)
    assert not math.isnan(totals[1]) and not math.isnan(totals[2])


def _fed(prober):
    """The ``(rows, width)`` of every forward pass of ``prober``'s model, as they run."""
    calls = []
    prober.lm.model.register_forward_pre_hook(lambda module, args, kwargs: calls.append(
        tuple(kwargs["input_ids"].shape)), with_kwargs=True)
    return calls


@pytest.mark.parametrize("kind", ["gpt2", "llama", "mistral"])
def test_the_exhaustive_count_is_the_positions_its_passes_feed(tmp_path, kind):
    """``exhaustive_token_forwards`` / ``exhaustive_work``: the prefix and the positions of every pass after it
    (padding included), and their work, as the exhaustive method runs them: shared first tokens with a plain cache
    (GPT-2, Llama), every row whole with a sliding window (Mistral); several batch sizes (one pass or many)."""
    from medlama.probers.causal.budget import pass_cost
    from medlama.probers.causal.prober import CausalLikelihoodProber, LikelihoodSettings
    from medlama.probers.causal.search import exhaustive_token_forwards, exhaustive_work

    path = save_mistral(tmp_path / kind) if kind == "mistral" else str(save_causal(tmp_path / kind, kind))
    for batch_size in (2, 7, 64):
        prober = CausalLikelihoodProber(path, LikelihoodSettings(search="exhaustive", batch_size=batch_size))
        calls = _fed(prober)
        for text in TEXTS:
            calls.clear()
            prober.scores(QuerySet(["q"], ["r"], [text], [["pain"]], POOL))
            assert len(calls) >= 2  # the prefix's pass, then one or more
            assert exhaustive_token_forwards(prober.lm, text, POOL) == sum(rows * width for rows, width in calls)
            assert exhaustive_work(prober.lm, text, POOL) == sum(pass_cost(rows, width, batch_size)
                                                                 for rows, width in calls[1:])


@pytest.mark.parametrize("kind", ["gpt2", "mistral"])
@pytest.mark.parametrize("flat", [False, True])
def test_the_search_counts_the_positions_its_passes_feed(tmp_path, monkeypatch, kind, flat):
    """A search's ``token_forwards`` is every position its passes feed (the prefix's, its own expansions' and the
    names it hands to exhaustive scoring), its ``work`` the budget's unit over the passes after the prefix's: forced
    to search to the end, to switch after its seeds and to switch from the prefix pass (then it does the exhaustive
    method's work, or less: each distinct name once), on a spread and a flat model; the ranking is the exhaustive
    one every way."""
    from medlama.probers.causal import search as causal_search
    from medlama.probers.causal.budget import pass_cost
    from medlama.probers.causal.prober import CausalLikelihoodProber, LikelihoodSettings
    from medlama.probers.mlm import rank_unique

    path = save_mistral(tmp_path / kind) if kind == "mistral" else str(save_causal(tmp_path / kind, kind, flat=flat))
    prober = CausalLikelihoodProber(path, LikelihoodSettings(search="exhaustive", batch_size=4))
    queries = QuerySet([f"q{i}" for i in range(len(TEXTS))], ["r"] * len(TEXTS), TEXTS,
                       [["pain"], ["asthma attack cough"], ["kidney"], ["fever"]], POOL)
    exhaustive = [rank_unique(list(zip(POOL, row)), 5) for row in prober.scores(queries)]
    calls = _fed(prober)
    for prefix_cost, cost, slack, switched in ((0.0, 0.0, 1e9, False), (0.0, 1e9, 0.0, True),
                                               (1e9, 0.0, 1e9, True)):
        monkeypatch.setattr(causal_search, "PREFIX_COST", prefix_cost)
        monkeypatch.setattr(causal_search, "PREDICTED_COST", cost)
        monkeypatch.setattr(causal_search, "SLACK", slack)
        for q, text in enumerate(TEXTS):
            calls.clear()
            result = causal_search.best_first(prober.lm, text, POOL, 5, gold=queries.gold[q], batch_size=4)
            assert result.names == exhaustive[q] and result.switched == switched
            assert result.token_forwards == sum(rows * width for rows, width in calls)
            assert result.work == sum(pass_cost(rows, width, 4) for rows, width in calls[1:])
            if q == 0:  # its own passes of 3 rows, the exhaustive scoring's of the model's 4: both counted as run
                calls.clear()
                other = causal_search.best_first(prober.lm, text, POOL, 5, gold=queries.gold[q], batch_size=3)
                assert other.names == exhaustive[q]
                assert other.token_forwards == sum(rows * width for rows, width in calls)
                assert other.work == sum(pass_cost(rows, width, 3) for rows, width in calls[1:])
            if prefix_cost and kind != "mistral":  # each distinct name once, in the shared passes: no more work
                # (rows fed whole go in passes of 4 by length: a repeat left out can shift a pass's longest row)
                assert result.work <= causal_search.exhaustive_work(prober.lm, text, POOL, batch_size=4)


def test_the_cache_goes_by_the_name_the_installed_transformers_gives_it(tmp_path, caplog):
    """Every causal scorer (exhaustive, best-first, multiple choice, the logit lens) hands the model its KV cache
    by the keyword its forward names (``cache`` in a transformers that deprecates ``past_key_values`` and will
    drop it): no deprecation is warned of, and the scores are those of the other keyword; a model class whose
    forward names ``past_key_values`` (an earlier transformers, remote code) is given that one."""
    import logging
    import warnings

    from medlama.probers.causal.passes import returned_cache, with_cache
    from medlama.probers.causal.prober import CausalLikelihoodProber, LikelihoodSettings
    from medlama.probers.pools import rank_choices

    class Earlier:
        def forward(self, input_ids=None, past_key_values=None, use_cache=None):
            return {"past_key_values": past_key_values}

    assert with_cache(Earlier(), "kv") == {"past_key_values": "kv"}
    assert returned_cache(Earlier().forward(**with_cache(Earlier(), "kv"))) == "kv"

    path = str(save_causal(tmp_path / "gpt2", "gpt2"))
    gold = [["pain"], ["asthma attack cough"], ["kidney"], ["fever"]]
    queries = QuerySet([f"q{i}" for i in range(len(TEXTS))], ["r"] * len(TEXTS), TEXTS, gold, POOL)
    offered = [[g[0], *[name for name in POOL if name != g[0]][:2]] for g in gold]
    choices = QuerySet(queries.ids, queries.relations, TEXTS, gold, sorted({n for row in offered for n in row}),
                       choices=offered)
    caplog.set_level(logging.WARNING)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for search in ("exhaustive", "best-first"):
            CausalLikelihoodProber(path, LikelihoodSettings(search=search, batch_size=4)).rank(queries, 5)
        rank_choices(CausalLikelihoodProber(path, LikelihoodSettings(batch_size=4)), choices, 1)
        CausalLikelihoodProber(path, LikelihoodSettings(layers=(1,), batch_size=4)).rank_layers_scored(queries, 5)
    said = [str(w.message) for w in caught] + [record.getMessage() for record in caplog.records]
    assert not [text for text in said if "past_key_values" in text or "cache_params" in text], said
