"""The forward passes that score continuations after one prefix's KV cache (``causal-likelihood``'s exhaustive
scoring, :meth:`~medlama.probers.causal.scoring.CausalLM.continuation_log_probs`), with no token position run
twice where names share their first token.

* :func:`target_log_probs`: a token's log-probability as its logit minus the float32 logsumexp over the
  vocabulary (no log-softmax written out for every token of it).
* :func:`plain_layers`: the layers of a plain ``DynamicCache`` (keys and values concatenated as tokens come), whose
  rows can be broadcast or picked; ``None`` for any other cache (sliding windows, shared or hybrid layers).
* :func:`shared_first_scores`: every row's summed log-probability in two steps: the distinct first tokens after the
  prefix in one pass (their log-probabilities give every row's second token, and their caches are kept), then
  each row's later tokens after its first token's cache, rows of equal (or near) length together, so there is
  little padding: a name's first-token position runs once per distinct first token, not once per name.
* :func:`shared_plan`: the passes :func:`shared_first_scores` runs for a set of rows (the first tokens of each
  first-token pass, the width and rows of each later-token pass), from the rows' counts alone; :func:`shared_passes`
  the same as ``(rows, width)`` per forward pass, the positions the passes feed (what the best-first search's budget
  counts, :mod:`medlama.probers.causal.budget`).
* :func:`pass_cost`: the work of one pass, in token positions (the unit of these cuts and of the best-first
  search's budget).
* The one way each of the causal scorers' small steps: :func:`padded_tensors` (token rows padded right, or left,
  on the model's device: :func:`~medlama.probers.mlm.padded`'s arrays), :func:`broadcast_cache` (a prefix's cache
  over rows), :func:`picked_cache` (a batch's rows picked from a cache), :func:`row_totals` (each row's sum or
  mean over its own positions, the padding left out), :func:`rows_per_pass` (whole rows a pass) and
  :func:`plain_cache_of` (whether a model's cache is plain, from its config).
* :func:`with_cache` and :func:`returned_cache`: a forward's KV cache by the name the installed transformers gives
  it (``cache``; ``past_key_values`` before, deprecated since and to be removed), given and read back.
"""

from __future__ import annotations

import copy
import functools
import inspect
from collections.abc import Sequence

from medlama.probers.mlm import padded

__all__ = ["broadcast_cache", "padded_tensors", "pass_cost", "picked_cache", "plain_cache_of", "plain_layers",
           "returned_cache", "row_totals", "rows_per_pass", "shared_first_scores", "shared_passes", "shared_plan",
           "sum_dtype", "target_log_probs", "with_cache"]


@functools.lru_cache(maxsize=None)
def _cache_keyword(model_class: type) -> str:
    return "cache" if "cache" in inspect.signature(model_class.forward).parameters else "past_key_values"


def with_cache(model, cache) -> dict:
    """``{keyword: cache}`` for ``model``'s forward: ``cache`` where its forward names it (transformers warns on
    ``past_key_values`` there, and will drop it), else ``past_key_values`` (earlier transformers). A PEFT wrapper
    is asked through the model it wraps (its own forward takes the keyword on as ``**kwargs``)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return {_cache_keyword(type(base)): cache}


def returned_cache(output):
    """The KV cache a forward returned, by either name (an output keeps the fields that are set)."""
    return output["cache"] if "cache" in output else output["past_key_values"]


def pass_cost(rows: int, width: int, batch_size: int) -> int:
    """The work of one forward pass of ``rows`` rows padded to ``width`` tokens: the tokens it runs, plus
    twice ``batch_size`` for the pass itself (what a full batch of two tokens costs: its fixed cost, as measured
    on a tiny GPT-2 on CPU, ~1 ms, ~65 of its tokens, is a floor: on a GPU, a pass is dearer still)."""
    return rows * width + 2 * batch_size


def padded_tensors(rows: Sequence[Sequence[int]], value: int, device, *, left: bool = False):
    """``rows`` padded with ``value`` (:func:`~medlama.probers.mlm.padded`; ``left``: each row ends in the last
    column) as an int64 tensor on ``device``, and the boolean tensor of the filled cells there."""
    import torch  # torch only when a model runs

    ids, filled = padded(rows, value, left=left)
    return torch.from_numpy(ids).to(device), torch.from_numpy(filled).to(device)


def row_totals(values, filled, dtype, *, reduction: str = "sum"):
    """Each row's sum (or, ``reduction="mean"``, mean) of ``values`` (rows x positions) over its ``filled``
    positions (a boolean tensor as wide), in ``dtype`` (:func:`sum_dtype`). The padding is left out before summing,
    not multiplied by zero: a -inf or NaN there must not turn the row's total into NaN."""
    import torch  # torch only when a model runs

    filled = filled.to(values.device)
    total = torch.where(filled, values.to(dtype), 0).sum(1)
    return total / filled.sum(1).to(total.device) if reduction == "mean" else total


def target_log_probs(logits, targets):
    """The log-probability of each ``targets`` token under ``logits`` (... x vocabulary), in at least float32:
    its logit minus the logsumexp over the vocabulary (the value of a log-softmax there, without writing one
    out for every token of the vocabulary)."""
    import torch  # torch only when a model runs

    logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
    targets = targets.to(logits.device)
    return logits.gather(-1, targets[..., None]).squeeze(-1) - logits.logsumexp(-1)


def sum_dtype(device):
    """float64 for summing log-probabilities where the device has it (not Apple's MPS), else float32."""
    import torch  # torch only when a model runs

    return torch.float32 if getattr(device, "type", str(device)) == "mps" else torch.float64


def plain_layers(cache) -> list | None:
    """The layers of ``cache`` when it is a plain ``DynamicCache`` of filled ``DynamicLayer`` s, else ``None``."""
    from transformers import DynamicCache  # transformers only when a model runs

    try:
        from transformers.cache_utils import DynamicLayer  # absent before transformers 4.56
    except ImportError:
        return None
    layers = getattr(cache, "layers", None)
    if type(cache) is not DynamicCache or not layers or any(
            type(layer) is not DynamicLayer or getattr(layer, "keys", None) is None for layer in layers):
        return None
    return list(layers)


def plain_cache_of(model) -> bool:
    """Whether ``model``'s KV cache is a plain ``DynamicCache`` of ``DynamicLayer`` s (what :func:`plain_layers`
    takes once filled), from its config alone, before any pass."""
    from transformers import DynamicCache  # transformers only when a model runs

    try:
        from transformers.cache_utils import DynamicLayer  # absent before transformers 4.56
    except ImportError:
        return False
    cache = DynamicCache(config=model.config)
    return type(cache) is DynamicCache and all(type(layer) is DynamicLayer for layer in getattr(cache, "layers", []))


def rows_per_pass(longest: int, *, batch_size: int, budget: int, vocab: int) -> int:
    """Whole rows per pass when every row is fed whole (no cache shared between them): ``batch_size``, fewer
    when the log-probabilities of ``longest`` positions a row would exceed ``budget`` float32 values."""
    return max(1, min(batch_size, budget // max(1, longest * vocab)))


def _cache(tensors):
    from transformers import DynamicCache  # transformers only when a model runs

    return DynamicCache(list(tensors))


def broadcast_cache(cache, rows: int):
    """A cache for ``rows`` continuations of one prefix's ``cache``, which stays as it was.

    Plain layers (keys and values concatenated as tokens come) get the prefix's tensors broadcast over the rows
    (``expand``: no copy until the pass appends to them); any other cache (sliding windows, shared or hybrid
    layers) is deep-copied and repeated, which every cache supports."""
    layers = plain_layers(cache)
    if layers is None:
        batch = copy.deepcopy(cache)
        batch.batch_repeat_interleave(rows)
        return batch
    return _cache((layer.keys.expand(rows, *layer.keys.shape[1:]), layer.values.expand(rows, *layer.values.shape[1:]))
                  for layer in layers)


def picked_cache(layers: Sequence, index):
    """A plain cache of the rows ``index`` (a long tensor) of ``layers`` (:func:`plain_layers`, or their
    ``(keys, values)`` pairs): each row continues the cached row it picks."""
    pairs = ((layer.keys, layer.values) if hasattr(layer, "keys") else layer for layer in layers)
    return _cache((keys[index], values[index]) for keys, values in pairs)


def _groups(lengths: Sequence[tuple[int, Sequence[int]]], batch_size: int, rows_for: callable
            ) -> list[tuple[int, list[int]]]:
    """Rows grouped by fed width (``lengths``: ``(width, rows)``, widths ascending) cut into passes of consecutive
    widths with the least total :func:`pass_cost` (a pass padded to its widest row; ``rows_for(width)`` rows at
    most per pass); each pass's width and rows."""
    best, cut = [0.0] + [float("inf")] * len(lengths), [0] * (len(lengths) + 1)
    for end in range(1, len(lengths) + 1):
        width, rows = lengths[end - 1][0], 0
        for start in range(end - 1, -1, -1):
            rows += len(lengths[start][1])
            cap = rows_for(width)
            cost = best[start] + rows * width + -(-rows // cap) * 2 * batch_size
            if cost < best[end]:
                best[end], cut[end] = cost, start
    passes, end = [], len(lengths)
    while end:
        members = [(width, i) for width, rows in lengths[cut[end]:end] for i in rows]
        cap = rows_for(lengths[end - 1][0])
        parts = [members[at:at + cap] for at in range(0, len(members), cap)]
        # widths ascending: a pass is as wide as its last row
        passes += [(part[-1][0], [i for _, i in part]) for part in parts][::-1]
        end = cut[end]
    return passes[::-1]


def shared_plan(heads: Sequence, by_width: Sequence[tuple[int, Sequence[int]]], *, batch_size: int, budget: int,
                vocab: int) -> tuple[list[Sequence], list[tuple[int, list[int]]]]:
    """The passes :func:`shared_first_scores` runs: the distinct first tokens ``heads`` (of the rows of two tokens
    or more) cut into first-token passes, and the rows of three tokens or more (``by_width``: ``(later tokens
    fed, rows)``, widths ascending) cut into later-token passes, each pass's ``(width, rows)``.

    A pass holds as many token positions as ``batch_size`` whole rows would (the memory ``batch_size`` is set
    for), so a pass of short rows takes more of them (a thin matrix product wastes the hardware); and at most
    ``budget`` float32 log-probabilities (rows x fed positions x ``vocab``). Counts alone decide it: the rows'
    tokens do not, so their counts (``range(n)`` for ``n`` rows) plan the same passes."""
    if not heads:
        return [], []
    positions = batch_size * (by_width[-1][0] + 1 if by_width else 1)  # the longest row's fed tokens

    def rows_for(width: int) -> int:
        return max(1, min(positions // width, budget // max(1, width * vocab)))

    step = rows_for(1)
    return [heads[at:at + step] for at in range(0, len(heads), step)], _groups(by_width, batch_size, rows_for)


def shared_passes(heads: int, widths: dict[int, int], *, batch_size: int, budget: int,
                  vocab: int) -> list[tuple[int, int]]:
    """``(rows, width)`` of each forward pass :func:`shared_first_scores` runs (after the prefix's) for rows of
    ``heads`` distinct first tokens (of the rows of two tokens or more), ``widths[w]`` of them with ``w`` later
    tokens fed (``w + 2`` tokens long): the positions those passes feed, padding included."""
    first, later = shared_plan(range(heads), [(width, range(widths[width])) for width in sorted(widths)],
                               batch_size=batch_size, budget=budget, vocab=vocab)
    return [(len(part), 1) for part in first] + [(len(members), width) for width, members in later]


def shared_first_scores(model, cache, first, rows: Sequence[Sequence[int]], *, batch_size: int, budget: int,
                        vocab: int, pad_id: int):
    """Each (non-empty) row's summed log-probability after the prefix whose plain cache ``cache``
    (:func:`plain_layers`) and next-token log-probabilities ``first`` (vocabulary, float32) are given; on the
    model's device, :func:`sum_dtype`.

    ``budget``: the float32 log-probabilities one pass may hold (rows x fed positions x ``vocab``); the passes are
    :func:`shared_plan`'s."""
    import torch  # torch only when a model runs

    device = first.device
    wide = sum_dtype(device)
    total = first[torch.tensor([row[0] for row in rows], device=device)].to(wide)
    heads = sorted({row[0] for row in rows if len(row) >= 2})
    by_width: dict[int, list[int]] = {}
    for i, row in enumerate(rows):
        if len(row) >= 3:
            by_width.setdefault(len(row) - 2, []).append(i)
    parts, chunks = shared_plan(heads, sorted(by_width.items()), batch_size=batch_size, budget=budget, vocab=vocab)
    if not parts:
        return total
    slot = {token: j for j, token in enumerate(heads)}
    # 1. The distinct first tokens after the prefix: each row's second token, and each first token's cache.
    grown: list[list] = []
    later = [i for i, row in enumerate(rows) if len(row) >= 2]
    start = 0
    for part in parts:
        out = model(input_ids=torch.tensor(part, dtype=torch.long, device=device)[:, None],
                    **with_cache(model, broadcast_cache(cache, len(part))), use_cache=True)
        grown.append([(layer.keys, layer.values) for layer in returned_cache(out).layers])
        here = [i for i in later if start <= slot[rows[i][0]] < start + len(part)]
        at = torch.tensor([slot[rows[i][0]] - start for i in here], device=device)
        scored = target_log_probs(out.logits[at, -1], torch.tensor([rows[i][1] for i in here], device=device))
        total[torch.tensor(here, device=device)] += scored.to(wide)
        start += len(part)
    kept = grown[0] if len(grown) == 1 else [(torch.cat([p[k][0] for p in grown]), torch.cat([p[k][1] for p in grown]))
                                              for k in range(len(grown[0]))]
    # 2. Each row's later tokens after its first token's cache, rows of near lengths together.
    for _, chunk in chunks:
        pick = torch.tensor([slot[rows[i][0]] for i in chunk], device=device)
        fed, filled = padded_tensors([rows[i][1:-1] for i in chunk], pad_id, device)
        targets, _ = padded_tensors([rows[i][2:] for i in chunk], pad_id, device)
        logits = model(input_ids=fed, **with_cache(model, picked_cache(kept, pick)), use_cache=True).logits
        total[torch.tensor(chunk, device=device)] += row_totals(target_log_probs(logits, targets), filled, wide)
    return total
