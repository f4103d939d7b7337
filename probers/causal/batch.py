"""Many queries' continuations scored together with a causal LM: the multiple-choice configs (``hard_mc``), where a
query has a handful of choices and one prefix pass plus one scoring pass per query would leave every pass nearly
empty.

:func:`batched_log_probs` scores ``(prefix, rows)`` requests as :meth:`~medlama.probers.causal.scoring.CausalLM.
continuation_log_probs` scores one (the same sum or mean of the same tokens' log-probabilities, float64), but
the prefixes of many queries run in one pass, left-padded (an attention mask hides the padding; each token's
position is counted from its own prefix's start), and the rows of all those queries in shared passes, sorted by
length, each row reading its own query's prefix from the batched KV cache. The numbers are the per-query ones up
to float32 rounding (other passes, masked padding); the token ids are the same.

Models whose cache is not a plain ``DynamicCache`` of ``DynamicLayer`` s (sliding windows, shared or hybrid layers),
or whose forward takes no ``position_ids`` (ALiBi: BLOOM, MPT), are scored one query at a time (``continuation_log_probs``), which every cache supports.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence

from medlama.core.errors import MedlamaInputError
from medlama.core.finite import require_log_probs
from medlama.probers.causal.passes import (padded_tensors, picked_cache, plain_cache_of, row_totals, rows_per_pass,
                                           returned_cache, sum_dtype, target_log_probs, with_cache)
from medlama.probers.causal.scoring import CausalLM, _log_softmax
from medlama.probers.mlm import logprob_elements

__all__ = ["batched_log_probs"]


def _plain_cache(lm: CausalLM) -> bool:
    """Whether ``lm``'s KV cache is a plain ``DynamicCache`` of ``DynamicLayer`` s (rows can be picked from it) and
    its forward takes ``position_ids`` (ALiBi models such as BLOOM and MPT take none: one query at a time)."""
    if not {"position_ids", "attention_mask"} <= set(inspect.signature(lm.model.forward).parameters):
        return False
    return plain_cache_of(lm.model)


def batched_log_probs(lm: CausalLM, requests: Sequence[tuple[Sequence[int], Sequence[Sequence[int]]]], *,
                      reduction: str = "sum"):
    """Per request ``(prefix, rows)``, a float64 CPU tensor of each row's summed (or mean) log-probability as the
    continuation of ``prefix`` (an empty row: ``-inf``), as ``lm.continuation_log_probs`` gives it."""
    import torch  # torch only when a model runs

    if reduction not in ("sum", "mean"):
        raise MedlamaInputError(f"unknown reduction {reduction!r}; choose 'sum' or 'mean'")
    if not _plain_cache(lm):
        return [lm.continuation_log_probs(prefix, rows, reduction=reduction) for prefix, rows in requests]
    out = [torch.full((len(rows),), float("-inf"), dtype=torch.float64) for _, rows in requests]
    prefixes = [lm.fit_prefix(prefix, max((len(row) for row in rows), default=0)) for prefix, rows in requests]
    live = sorted((q for q, (_, rows) in enumerate(requests) if any(rows)), key=lambda q: len(prefixes[q]))
    # queries per prefix pass: the rows' bound, and the first tokens' log-probabilities (queries x vocabulary)
    budget = logprob_elements(lm.device)  # once per call: on a GPU it asks the driver for free memory
    step = rows_per_pass(1, batch_size=lm.settings.batch_size, budget=budget, vocab=lm.vocab_size)
    with torch.inference_mode():
        for start in range(0, len(live), step):
            chunk = live[start:start + step]
            _score_chunk(lm, chunk, [prefixes[q] for q in chunk], [requests[q][1] for q in chunk],
                         [out[q] for q in chunk], reduction, budget)
    return out


def _score_chunk(lm: CausalLM, queries: list[int], prefixes: list[list[int]], rows: list, out: list,
                 reduction: str, budget: int) -> None:
    """One prefix pass for ``queries`` (left-padded), then their rows in passes sorted by length, each pass's
    log-probabilities within ``budget`` elements."""
    import torch  # torch only when a model runs
    from transformers import DynamicCache  # transformers only when a model loads or runs

    device, pad = lm.device, lm.pad_id
    ids, filled = padded_tensors(prefixes, pad, device, left=True)
    mask = filled.long()
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    result = lm.model(input_ids=ids, attention_mask=mask, position_ids=positions,
                      **with_cache(lm.model, DynamicCache(config=lm.model.config)), use_cache=True, logits_to_keep=1)
    cache, first = returned_cache(result), _log_softmax(result.logits[:, -1])
    lengths = torch.tensor([len(p) for p in prefixes], device=device)
    # every row of every query, sorted by length (little padding), as many per pass as the budget allows
    order = sorted(((len(row), q, r) for q, query_rows in enumerate(rows) for r, row in enumerate(query_rows) if row))
    longest = order[-1][0] if order else 0
    per_batch = rows_per_pass(longest, batch_size=lm.settings.batch_size, budget=budget, vocab=lm.vocab_size)
    wide = sum_dtype(device)
    sums = []
    for begin in range(0, len(order), per_batch):
        part = order[begin:begin + per_batch]
        span = part[-1][0]
        picked = torch.tensor([q for _, q, _ in part], device=device)
        fed, scored = padded_tensors([rows[q][r] for _, q, r in part], pad, device)
        lp = first[picked, fed[:, 0]][:, None]
        if span > 1:
            batch = picked_cache(cache.layers, picked)
            attention = torch.cat([mask[picked], torch.ones((len(part), span - 1), dtype=torch.long, device=device)],
                                  dim=1)
            at = lengths[picked, None] + torch.arange(span - 1, device=device)[None, :]
            logits = lm.model(input_ids=fed[:, :-1], attention_mask=attention, position_ids=at, **with_cache(lm.model, batch),
                              use_cache=True).logits
            lp = torch.cat([lp, target_log_probs(logits, fed[:, 1:]).to(lp.device, lp.dtype)], dim=1)
        sums.append(row_totals(lp, scored, wide, reduction=reduction))
    scores = torch.cat(sums).to("cpu", torch.float64) if sums else torch.zeros(0, dtype=torch.float64)
    require_log_probs(scores, model=lm.model_path)
    for (_, q, r), score in zip(order, scores.tolist()):
        out[q][r] = score
