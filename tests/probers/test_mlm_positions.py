"""``MaskedLM.log_probs`` with rows of different numbers of positions (mask predict's rows have 1..M masks left):
each row's log-probabilities equal the full model run on that row alone, whatever rows share its pass, and the
MLM head runs at a row's own positions only, not at the widest row's (the work a confidence fill's late rounds
wasted); a result's positions axis still comes back as wide as the widest row's, its last slot repeated."""

from __future__ import annotations

import pytest
import torch

from medlama.probers.mlm import MaskedLM

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread (tests/conftest.py)


@pytest.fixture(scope="module")
def lm(make_tiny_bert):
    return MaskedLM(make_tiny_bert("positions-bert", mlm=True), device="cpu", batch_size=2)


def rows_and_positions(lm):
    texts = ["aspirin may treat a headache in adults .", "fever", "salbutamol opens the airways", "cough ."]
    rows = [lm.tokenizer(text)["input_ids"] for text in texts]
    positions = [[1, 2, 3], [1], [2], [1, 3]]  # 3, 1, 1 and 2 positions
    for row, at in zip(rows, positions):
        for p in at:
            row[p] = lm.mask_id
    return rows, positions


def test_each_row_equals_the_full_model_on_it_alone_and_the_head_runs_at_its_own_positions(lm):
    rows, positions = rows_and_positions(lm)
    seen = []
    handle = lm.head.register_forward_pre_hook(lambda _, args: seen.append(tuple(args[0].shape[:2])))
    try:
        values, tokens = lm.log_probs(rows, positions, lambda lp, _: lp.topk(4, dim=-1))
    finally:
        handle.remove()
    # batches of 2 by positions, then length: the two 1-position rows, then the 2- and 3-position rows
    assert seen == [(2, 1), (2, 3)]  # 8 head positions; the widest row's 3 for every row would be 12
    assert values.shape == tokens.shape == (4, 3, 4)
    with torch.inference_mode():
        for r, (row, at) in enumerate(zip(rows, positions)):
            full = lm.model(input_ids=torch.tensor([row])).logits[0].log_softmax(-1)
            padded = at + [at[-1]] * (3 - len(at))  # the last slot repeated up to the widest row's
            expected, expected_tokens = full[padded].topk(4, dim=-1)
            torch.testing.assert_close(values[r], expected, rtol=0, atol=1e-5)
            assert torch.equal(tokens[r], expected_tokens)


def test_the_batch_size_does_not_change_a_row(lm):
    rows, positions = rows_and_positions(lm)
    together = lm.log_probs(rows, positions, lambda lp, _: lp.max(-1).values)
    lm.batch_size = 1
    try:
        alone = lm.log_probs(rows, positions, lambda lp, _: lp.max(-1).values)
    finally:
        lm.batch_size = 2
    torch.testing.assert_close(together, alone, rtol=0, atol=1e-5)


def test_a_second_axis_that_is_not_positions_is_refused_not_reindexed(lm):
    """Only a positions axis is widened: a result whose second axis is something else (here the top 4 of the
    first position) would have its entries shuffled by the widening, so it is an internal error, said so."""
    rows, positions = rows_and_positions(lm)
    with pytest.raises(RuntimeError, match=r"internal error: a reduce result of shape \(2, 4\) in "
                                           r"MaskedLM.log_probs: its second axis must be the batch's 1 positions"):
        lm.log_probs(rows, positions, lambda lp, _: lp[:, 0].topk(4, dim=-1).values)
    # one axis per row (a sum over positions) is kept as it is
    sums = lm.log_probs(rows, positions, lambda lp, _: lp.max(-1).values.sum(-1))
    assert sums.shape == (4,)
