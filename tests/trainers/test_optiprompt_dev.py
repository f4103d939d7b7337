"""OptiPrompt's dev evaluation decodes the whole dev set in one block of wide passes (not one narrow pass per
``batch_size`` queries, which on a GPU made the dev decoding most of a relation's time) and gives every query
the answers it gets decoded on its own: the dev acc@1 is the one of the per-query decoding, and the prober's
settings are as they were afterwards."""

from __future__ import annotations

from dataclasses import replace

import pytest

from medlama.probers.mask_predict import PRESETS, MaskPredictProber
from medlama.probers.query_set import QuerySet
from medlama.trainers.optiprompt.trainer import dev_accuracy

pytestmark = pytest.mark.usefixtures("one_thread")

TEXTS = ["aspirin may treat [Y] .", "[Y] is a finding of influenza .", "salbutamol opens the [Y] .",
         "the patient has [Y] and fever .", "[Y] lowers blood glucose .", "metformin is taken for [Y] ."]


def test_the_dev_set_is_decoded_in_one_block_with_each_querys_own_answers(make_tiny_bert):
    prober = MaskPredictProber(make_tiny_bert("dev-block-bert", mlm=True),
                               replace(PRESETS["biolama"], max_masks=3, batch_size=1), device="cpu")
    ids, relations = [f"d{i}" for i in range(len(TEXTS))], ["r"] * len(TEXTS)
    alone = prober.decode(QuerySet(ids, relations, TEXTS, [["zzz"]] * len(TEXTS), ["zzz"], "dev"))
    assert all(answers for answers in alone)
    # the first half's gold is the answer each query gets decoded alone: acc@1 is a half exactly when every
    # query keeps its own answer in the block
    gold = [[answers[0][0]] if i < 3 else ["zzz"] for i, answers in enumerate(alone)]
    dev = QuerySet(ids, relations, TEXTS, gold, sorted({g for row in gold for g in row}), "dev")
    passes = []
    handle = prober.lm.head.register_forward_pre_hook(lambda _, args: passes.append(args[0].shape[0]))
    try:
        assert dev_accuracy(prober, dev, None) == 0.5
    finally:
        handle.remove()
    assert max(passes) > 5  # queries decoded together: wider than one query's 5 beam entries
    assert prober.settings_.batch_size == 1 and prober.lm.batch_size == 5  # as they were
