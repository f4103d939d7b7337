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
* :func:`pass_cost`: the work of one pass, in token positions (the unit of these cuts and of the best-first
  search's budget, :mod:`medlama.probers.causal.budget`).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["pass_cost", "plain_layers", "shared_first_scores", "sum_dtype", "target_log_probs"]


def pass_cost(rows: int, width: int, batch_size: int) -> int:
    """The work of one forward pass of ``rows`` rows padded to ``width`` tokens: the tokens it runs, plus
    twice ``batch_size`` for the pass itself (what a full batch of two tokens costs: its fixed cost, as measured
    on a tiny GPT-2 on CPU, ~1 ms, ~65 of its tokens, is a floor: on a GPU, a pass is dearer still)."""
    return rows * width + 2 * batch_size


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


def _cache(tensors):
    from transformers import DynamicCache  # transformers only when a model runs

    return DynamicCache(list(tensors))


def _groups(lengths: list[tuple[int, list[int]]], batch_size: int, rows_for: callable) -> list[list[int]]:
    """Rows grouped by fed width (``lengths``: ``(width, rows)``, widths ascending) cut into passes of consecutive
    widths with the least total :func:`pass_cost` (a pass padded to its widest row; ``rows_for(width)`` rows at
    most per pass); the rows of each pass."""
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
        members = [i for _, rows in lengths[cut[end]:end] for i in rows]
        cap = rows_for(lengths[end - 1][0])
        passes += [members[at:at + cap] for at in range(0, len(members), cap)][::-1]
        end = cut[end]
    return passes[::-1]


def shared_first_scores(model, layers: list, first, rows: Sequence[Sequence[int]], *, batch_size: int, budget: int,
                        vocab: int, pad_id: int):
    """Each (non-empty) row's summed log-probability after the prefix whose cache ``layers`` and next-token
    log-probabilities ``first`` (vocabulary, float32) are given; on the model's device, :func:`sum_dtype`.

    ``budget``: the float32 log-probabilities one pass may hold (rows x fed positions x ``vocab``)."""
    import torch  # torch only when a model runs

    device = first.device
    wide = sum_dtype(device)
    total = first[torch.tensor([row[0] for row in rows], device=device)].to(wide)
    heads = sorted({row[0] for row in rows if len(row) >= 2})
    if not heads:
        return total
    slot = {token: j for j, token in enumerate(heads)}
    # A pass holds as many token positions as ``batch_size`` whole rows would (the memory ``batch_size`` is set
    # for), so a pass of short rows takes more of them: a thin matrix product wastes the hardware.
    positions = batch_size * max(len(row) - 1 for row in rows)

    def rows_for(width: int) -> int:
        return max(1, min(positions // width, budget // max(1, width * vocab)))

    # 1. The distinct first tokens after the prefix: each row's second token, and each first token's cache.
    grown: list[list] = [[] for _ in layers]
    step = rows_for(1)
    later = [i for i, row in enumerate(rows) if len(row) >= 2]
    for start in range(0, len(heads), step):
        part = heads[start:start + step]
        cache = _cache((layer.keys.expand(len(part), *layer.keys.shape[1:]),
                        layer.values.expand(len(part), *layer.values.shape[1:])) for layer in layers)
        out = model(input_ids=torch.tensor(part, dtype=torch.long, device=device)[:, None], past_key_values=cache,
                    use_cache=True)
        for k, layer in enumerate(out.past_key_values.layers):
            grown[k].append((layer.keys, layer.values))
        here = [i for i in later if start <= slot[rows[i][0]] < start + step]
        at = torch.tensor([slot[rows[i][0]] - start for i in here], device=device)
        scored = target_log_probs(out.logits[at, -1], torch.tensor([rows[i][1] for i in here], device=device))
        total[torch.tensor(here, device=device)] += scored.to(wide)
    kept = [(torch.cat([k for k, _ in parts]), torch.cat([v for _, v in parts])) if len(parts) > 1 else parts[0]
            for parts in grown]
    # 2. Each row's later tokens after its first token's cache, rows of near lengths together.
    by_width: dict[int, list[int]] = {}
    for i, row in enumerate(rows):
        if len(row) >= 3:
            by_width.setdefault(len(row) - 2, []).append(i)
    for chunk in _groups(sorted(by_width.items()), batch_size, rows_for):
        width = max(len(rows[i]) - 2 for i in chunk)
        pick = torch.tensor([slot[rows[i][0]] for i in chunk], device=device)
        fed = torch.tensor([[*rows[i][1:-1], *[pad_id] * (width + 2 - len(rows[i]))] for i in chunk],
                           dtype=torch.long, device=device)
        targets = torch.tensor([[*rows[i][2:], *[pad_id] * (width + 2 - len(rows[i]))] for i in chunk],
                               dtype=torch.long, device=device)
        logits = model(input_ids=fed, past_key_values=_cache((k[pick], v[pick]) for k, v in kept),
                       use_cache=True).logits
        lp = target_log_probs(logits, targets).to(wide)
        counts = torch.tensor([len(rows[i]) - 2 for i in chunk], device=device)
        # padding left out (a -inf there must not turn the row's sum into NaN)
        lp = torch.where(torch.arange(width, device=device)[None, :] < counts[:, None], lp, 0)
        total[torch.tensor(chunk, device=device)] += lp.sum(1)
    return total
