"""``causal-likelihood`` on a multiple-choice query set: every query's choices scored together, the prefixes of many
queries in one left-padded pass and their choices in shared passes, with the numbers of the reference (every full
sequence from scratch, one query at a time), the order of the exhaustive ranking (ties in choice order) and the
gold's exact rank; a handful of passes for the whole set where one query at a time took two or more per query."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tiny_causal import save_causal  # tests/helpers

from medlama.probers.query_set import QuerySet

pytestmark = pytest.mark.usefixtures("one_thread")


def _choice_set() -> QuerySet:
    # prefixes of different lengths (left padding), a slot opening the text, a slot glued to a word, no suffix
    texts = ["aspirin may treat [Y] .", "[Y] may cause cough .", "the patient had [Y]",
             "chronic asthma attack treated with inhaler and the cold may cause [Y] and headache .",
             "metformin may treat [Y].", "insulin may treat [Y] ."]
    gold = [["pain"], ["asthma"], ["asthma attack"], ["fever"], ["diabetes mellitus"], ["diabetes"]]
    choices = [["fever", "pain", "headache"], ["cough", "asthma", "asthma attack", "diabetes"],
               ["asthma", "asthma attack"], ["fever", "kidney disease", "back pain", "pain", "headache"],
               ["diabetes", "diabetes mellitus", "kidney disease"], ["diabetes", "diabetes", "pain"]]
    return QuerySet(ids=[f"q{i}" for i in range(len(texts))], relations=["r"] * 3 + ["s"] * 3, texts=texts,
                    gold=gold, candidates=sorted({n for row in choices for n in row}), rule="choices",
                    choices=choices)


@pytest.mark.parametrize("reduction", ["sum", "mean"])
@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_choices_scored_together_equal_full_sequences_one_query_at_a_time(tmp_path, kind, reduction):
    from medlama.probers.causal.prober import CausalLikelihoodProber, LikelihoodSettings
    from medlama.probers.pools import one_choice_pool, rank_choices

    path = str(save_causal(tmp_path / kind, kind))
    queries = _choice_set()
    prober = CausalLikelihoodProber(path, LikelihoodSettings(reduction=reduction, batch_size=4))
    assert prober.ranks_choices
    ranked = rank_choices(prober, queries, 10, all_scores=True)
    reference = CausalLikelihoodProber(path, LikelihoodSettings(reduction=reduction, kv_cache=False,
                                                                search="exhaustive"))
    for q, choices in enumerate(queries.choices):
        expected = reference.scores(one_choice_pool(queries, q))[0]  # every full sequence from scratch
        pool = ranked.pools[q]
        assert list(pool.candidates) == choices
        np.testing.assert_allclose(pool.scores, expected, rtol=1e-5, atol=1e-5)
        order = list(dict.fromkeys(sorted(choices, key=lambda name: (-expected[choices.index(name)],
                                                                      choices.index(name)))))
        assert ranked.names[q] == order
        assert ranked.gold_ranks[q] == min(order.index(g) + 1 for g in queries.gold[q])
        assert ranked.gold_scores[q] == pytest.approx(max(expected[choices.index(g)] for g in queries.gold[q]),
                                                      abs=1e-5)


def test_probe_of_a_choice_set_runs_shared_passes_and_records_it(tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import medlama

    path = save_causal(tmp_path / "gpt2", "gpt2")
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    passes = []
    model.register_forward_pre_hook(lambda module, args, kwargs: passes.append(kwargs["input_ids"].shape),
                                    with_kwargs=True)
    queries = _choice_set()
    result = medlama.probe(model, data=queries, method="causal-likelihood", tokenizer=AutoTokenizer.from_pretrained(path),
                           settings={"batch_size": 64}, device="cpu")
    # per pool (two relations): one pass over the prefixes, one over every choice; one query at a time: 2 or more each
    assert len(passes) <= 4, passes
    (ran, count), = result.settings["search_ran"].items()  # counted as results.json counts it: the first shard's
    assert ran == "every choice scored (multiple choice)" and 1 <= count <= len(queries)
    assert [row[0] for row in result.predictions] == [names[0] for names in (
        medlama.probe(model, data=queries, method="causal-likelihood", tokenizer=AutoTokenizer.from_pretrained(path),
                      settings={"kv_cache": False, "search": "exhaustive"}, device="cpu").predictions)]
    json.dumps(result.settings)  # recorded as results.json records it
    assert torch.is_inference_mode_enabled() is False


def test_a_sliding_window_cache_is_scored_one_query_at_a_time_with_the_same_numbers(tmp_path):
    """A cache that is not plain keys and values (a sliding window, here shorter than the longest prefix) cannot
    have rows picked from it: the choices are scored one query at a time, its cache deep-copied per pass."""
    from tiny_causal import save_mistral

    from medlama.probers.causal.prober import CausalLikelihoodProber, LikelihoodSettings
    from medlama.probers.pools import one_choice_pool, rank_choices

    path = save_mistral(tmp_path / "mistral")
    queries = _choice_set()
    prober = CausalLikelihoodProber(path, LikelihoodSettings(batch_size=4))
    calls = []
    original = prober.lm.continuation_log_probs
    prober.lm.continuation_log_probs = lambda *args, **kwargs: calls.append(1) or original(*args, **kwargs)
    ranked = rank_choices(prober, queries, 10, all_scores=True)
    assert len(calls) == len(queries)  # one query at a time
    reference = CausalLikelihoodProber(path, LikelihoodSettings(kv_cache=False, search="exhaustive"))
    for q in range(len(queries)):
        np.testing.assert_allclose(ranked.pools[q].scores, reference.scores(one_choice_pool(queries, q))[0],
                                   rtol=1e-5, atol=1e-5)
