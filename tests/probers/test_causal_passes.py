"""``causal-likelihood``'s exhaustive passes after a prefix's KV cache (``probers/causal/passes.py``): the names'
distinct first tokens run once, each name's later tokens after its first token's cache, the prefix's cache is
broadcast (never deep-copied) and left as it was, and the scores are those of every full sequence run from
scratch (the reference path) on tiny GPT-2 and Llama models, both reductions."""

from __future__ import annotations

import numpy as np
import pytest
from tiny_causal import NAMES, save_causal  # tests/helpers

from medlama.probers.query_set import QuerySet

pytestmark = pytest.mark.usefixtures("one_thread")

POOL = [*NAMES, *(f"{a} {b}" for a in NAMES[:6] for b in NAMES[:6] if a != b)]
TEXTS = ["aspirin may treat [Y] .", "[Y] may cause cough .", "the patient had [Y]", "metformin may treat [Y]."]


@pytest.mark.parametrize("reduction", ["sum", "mean"])
@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_shared_first_tokens_score_as_full_sequences_and_feed_each_position_once(tmp_path, kind, reduction,
                                                                                 monkeypatch):
    import medlama.probers.causal.scoring as scoring
    from medlama.probers.causal.prober import CausalLikelihoodProber, LikelihoodSettings

    path = str(save_causal(tmp_path / kind, kind))
    queries = QuerySet([f"q{i}" for i in range(len(TEXTS))], ["r"] * len(TEXTS), TEXTS, [["pain"]] * len(TEXTS),
                       POOL)
    prober = CausalLikelihoodProber(path, LikelihoodSettings(reduction=reduction, search="exhaustive",
                                                             batch_size=5))
    reference = CausalLikelihoodProber(path, LikelihoodSettings(reduction=reduction, kv_cache=False,
                                                                search="exhaustive"))
    fed = []
    prober.lm.model.register_forward_pre_hook(lambda module, args, kwargs: fed.append(kwargs["input_ids"].numel()),
                                              with_kwargs=True)
    monkeypatch.setattr(scoring.copy, "deepcopy", lambda *args: pytest.fail("the prefix's cache was deep-copied"))
    got = prober.scores(queries)
    np.testing.assert_allclose(got, reference.scores(queries), rtol=1e-5, atol=1e-5)
    # positions fed: the prefix, each distinct first token of a longer row once, then each row's tokens after its
    # second (the last token is predicted, never fed); short rows padded to their pass's widest, counted too
    least = 0
    for text in TEXTS:
        split = prober.lm.split(text)
        rows = [ids + split.suffix for ids in prober.lm.candidate_ids(POOL, split.slot) if ids]
        least += len(split.prefix) + len({row[0] for row in rows if len(row) > 1}) + \
            sum(len(row) - 2 for row in rows if len(row) > 2)
    everything = sum(len(prober.lm.split(text).prefix) + sum(len(row) + len(prober.lm.split(text).suffix) - 1
                                                             for row in prober.lm.candidate_ids(POOL, prober.lm.split(
                                                                 text).slot) if row) for text in TEXTS)
    assert least <= sum(fed) < everything, (least, sum(fed), everything)


def test_the_prefix_cache_is_left_as_it_was(tmp_path):
    import torch

    from medlama.probers.causal.scoring import CausalLM

    lm = CausalLM(str(save_causal(tmp_path / "gpt2", "gpt2")), "causal-likelihood")
    prefix = lm.split("aspirin may treat [Y] .").prefix
    with torch.inference_mode():
        head = lm._prefix_pass(prefix)
    keys = [layer.keys.clone() for layer in head[0].layers]
    rows = [lm.context_ids(" " + name + " .") for name in NAMES]
    first = lm.continuation_log_probs(prefix, rows, head=head)
    assert head[0].get_seq_length() == len(prefix)
    assert all(torch.equal(layer.keys, kept) for layer, kept in zip(head[0].layers, keys))
    assert torch.equal(lm.continuation_log_probs(prefix, rows, head=head), first)  # the same cache, again
