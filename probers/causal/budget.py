"""The work of ``causal-likelihood``'s best-first search (:mod:`medlama.probers.causal.search`) against scoring
every name, in one unit (token positions fed through the model, padding included, a pass's fixed cost added), and
the rule by which the search hands over to exhaustive scoring: counts only, never time, so the same query takes
the same path on every machine with as much memory.

* :func:`pass_cost` / :func:`scoring_passes` / :func:`passes_work`: the work of one forward pass; the passes the
  exhaustive method runs to score rows (with a plain cache, the shared positions: each distinct first token once
  after the prefix, each row's later tokens after its first token's cache, :func:`~medlama.probers.causal.passes.
  shared_passes`; else every row whole), from the rows' lengths alone; their work.
* :func:`predicted_work`: the work a search would do were every token after a name's first to score the same
  (the mean the search measured on names it scored whole), from each first token's log-probability and the
  trie's shape (:class:`Pool`, built once per pool, slot and suffix: :func:`pool_of`).
* :func:`prefix_predicted_work`: the same from the prefix pass alone (no name scored yet): a token after a name's
  first scored at the prefix's expected log-probability (minus the entropy of its next-token distribution), the
  limit the ``n``-th best name (or the gold) so predicted. A flat model (high entropy, little spread between first
  tokens) predicts a search that prunes little: the search then scores every name at once, as the exhaustive
  method does, and costs what it costs.
* :func:`exhaustive_token_forwards` / :func:`exhaustive_work`: the positions the exhaustive method feeds for a
  query (the prefix's included), the work of its passes after the prefix's.
* :func:`keep_searching`: the rule, before the search starts (predicted work, times ``PREDICTED_COST``) and
  before each pass (work done, the pass's, and the exhaustive work of every name not yet completed or ruled
  out, within ``1 + SLACK`` of the exhaustive work).
"""

from __future__ import annotations

import heapq
import math
import weakref
from collections.abc import Sequence
from dataclasses import dataclass

from medlama.probers.causal.passes import pass_cost, plain_cache_of, rows_per_pass, shared_passes
from medlama.probers.causal.scoring import CausalLM, CausalQuery
from medlama.probers.causal.trie import END, candidate_trie
from medlama.probers.mlm import logprob_elements

__all__ = ["PREDICTED_COST", "PREFIX_COST", "Pool", "SLACK", "exhaustive_token_forwards", "exhaustive_work",
           "keep_searching", "pass_cost", "passes_work", "pool_of", "predicted_work", "prefix_predicted_work",
           "row_lengths", "scoring_passes"]

#: How much more work than the exhaustive method's the search may risk to find out whether its bound prunes.
SLACK = 0.25
#: A search costs about this many times what :func:`predicted_work` counts (the names expanded deeper than the
#: mean predicts; chosen on the benchmark: 1.5 switched the right queries more often than 2.0 or 2.5).
PREDICTED_COST = 1.5
#: The same factor for :func:`prefix_predicted_work` (the switch taken from the prefix pass alone, before any name
#: is scored). A token the search feeds costs about twice one the exhaustive method feeds (a copy of the prefix's
#: cache per row, short rows, more passes: measured per query on the benchmark's untrained tiny GPT-2 on CPU, a search
#: fed 1.5x fewer tokens than the exhaustive method and still took longer), so the rule weighs the search's
#: predicted work about double: 1.9 switched every query of the untrained model that the search loses, and of the
#: trained model's only those predicted to save less than half the work.
PREFIX_COST = 1.9


def row_lengths(rows: Sequence[Sequence[int]]) -> tuple[dict[int, int], int]:
    """What :func:`scoring_passes` needs of ``rows``: how many have each length (empty rows left out), and how
    many distinct first tokens the rows of two tokens or more have."""
    lengths: dict[int, int] = {}
    for row in rows:
        if row:
            lengths[len(row)] = lengths.get(len(row), 0) + 1
    return lengths, len({row[0] for row in rows if len(row) >= 2})


def scoring_passes(lengths: dict[int, int], heads: int, *, shared: bool, batch_size: int, budget: int,
                   vocab: int) -> list[tuple[int, int]]:
    """``(rows, width)`` of each forward pass ``CausalLM.continuation_log_probs`` runs after the prefix's to score
    rows of these ``lengths`` (tokens -> rows) whose rows of two tokens or more have ``heads`` distinct first
    tokens. ``shared`` (a plain cache): :func:`~medlama.probers.causal.passes.shared_passes` (a one- or two-token
    row feeds no later-token pass); else every row whole, sorted by length, ``rows_per_pass`` a pass, each pass
    fed its rows but their last token (a pass of one-token rows runs nothing). ``budget``: the device's
    log-probability budget (:func:`~medlama.probers.mlm.logprob_elements`), as the scoring reads it."""
    if shared:
        return shared_passes(heads, {n - 2: count for n, count in lengths.items() if n >= 3}, batch_size=batch_size,
                             budget=budget, vocab=vocab)
    order = [n for n in sorted(lengths) for _ in range(lengths[n])]
    step = rows_per_pass(order[-1] if order else 1, batch_size=batch_size, budget=budget, vocab=vocab)
    chunks = [order[at:at + step] for at in range(0, len(order), step)]
    return [(len(chunk), chunk[-1] - 1) for chunk in chunks if chunk[-1] > 1]


def passes_work(passes: Sequence[tuple[int, int]], batch_size: int) -> int:
    """The work of ``(rows, width)`` forward passes: :func:`pass_cost` summed."""
    return sum(pass_cost(rows, width, batch_size) for rows, width in passes)


def keep_searching(spent: int, step: int, remaining: int, exhaustive: int, slack: float = SLACK) -> bool:
    """Whether the search takes its next pass (``step``, after ``spent``) rather than scoring the ``remaining``
    names exhaustively now: only while all three stay within ``1 + slack`` of the ``exhaustive`` work. The
    remaining work never grows with a pass, so the search never exceeds that bound."""
    return spent + step + remaining <= (1 + slack) * exhaustive


@dataclass(frozen=True)
class Pool:
    """What a search needs of a pool in one slot and before one suffix (the same for every query of a relation,
    so built once): the trie, each token sequence's distinct names, each distinct name's first place, the
    exhaustive method's rows (:func:`row_lengths`: their lengths and distinct first tokens) and, per trie node, the
    lengths of the distinct token sequences' rows strictly below it; per first token, the work of the expansions
    below it by depth and the names below it."""

    trie: dict
    ids: list[tuple[int, ...]]
    where: dict[tuple[int, ...], list[int]]
    first: dict[str, int]
    longest: int
    lengths: dict[int, int]  # the exhaustive method's rows: tokens -> rows
    heads: int  # their distinct first tokens (of the rows of two tokens or more)
    below: dict[int, dict[int, int]]  # id(node) -> the lengths of the rows below it (tokens -> rows)
    expansions: dict[int, list[tuple[int, int]]]  # first token -> (depth, work) of the nodes queued below it
    under: dict[int, list[tuple[int, ...]]]  # id(a first token's node) -> the token ids of the names below it


_POOLS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # per model: {(names, slot, suffix): pool}


def pool_of(lm: CausalLM, split: CausalQuery, names: Sequence[str]) -> Pool:
    key = (tuple(names), split.slot, split.suffix)
    found = _POOLS.get(lm, {}).get(key)
    if found is not None:
        return found
    ids = lm.candidate_ids(names, split.slot)
    first: dict[str, int] = {}
    where: dict[tuple[int, ...], list[int]] = {}  # token ids -> the pool's distinct names with them
    for index, (name, sequence) in enumerate(zip(names, ids)):
        if name and name not in first:  # rank_unique: empty names never rank, a repeat counts once
            first[name] = index
            where.setdefault(sequence, []).append(index)
    lengths, heads = row_lengths([sequence + split.suffix if sequence else () for sequence in ids])
    trie = candidate_trie(ids, split.suffix)
    below: dict[int, dict[int, int]] = {}
    _count_below(trie, len(split.suffix), below)
    expansions: dict[int, list[tuple[int, int]]] = {}
    for token, child in trie.items():
        queued: list[tuple[int, int]] = []
        _expansions(child, 1, queued)
        by_depth: dict[int, int] = {}
        for depth, fed in queued:  # each row's share of its pass: see pass_cost
            by_depth[depth] = by_depth.get(depth, 0) + fed + 2
        expansions[token] = sorted(by_depth.items())
    under = {id(child): _ends_below(child) for child in trie.values()}
    found = Pool(trie, ids, where, first, max(lengths, default=0), lengths, heads, below, expansions, under)
    kept = _POOLS.setdefault(lm, {})
    if len(kept) >= 8:  # the last few (a relation's queries may read the slot or the suffix in a few ways)
        kept.pop(next(iter(kept)))
    kept[key] = found
    return found


def _ends_below(node: dict) -> list[tuple[int, ...]]:
    """The token ids of the names that end strictly below ``node``."""
    found, nodes = [], [node]
    while nodes:
        for token, child in nodes.pop().items():
            if token != END:
                nodes.append(child)
                if END in child:
                    found.append(child[END])
    return found


def _expansions(node: dict, depth: int, out: list[tuple[int, int]]) -> None:
    """The expansions the search makes below a node reached at ``depth`` (when the bound lets it), as
    ``(depth, tokens fed)``: the node queued, fed with its single-child chain; then its children likewise."""
    if len(node) <= (END in node):
        return  # a leaf: complete when reached, never queued
    chain = 0
    while END not in node and len(node) == 1:
        (node,) = node.values()
        chain += 1
    out.append((depth, depth + chain))
    for token, child in node.items():
        if token != END:
            _expansions(child, depth + chain + 1, out)


def predicted_work(first: dict[int, float], expansions: dict[int, list[tuple[int, int]]], per_token: float,
                   limit: float) -> int:
    """The work a search to ``limit`` would do, were each token after a name's first to score ``per_token``
    (<= 0): the work (``expansions``, by first token: ``(depth, tokens fed + each row's share of its pass)``,
    by depth) of every expansion whose predicted bound (its first token's log-probability ``first``, then
    ``per_token`` a token) reaches ``limit``."""
    work = 0
    for token, below in expansions.items():
        head = first[token]
        for depth, cost in below:  # by depth, deepest last: the predicted bound only falls
            if head + (depth - 1) * per_token < limit:
                break
            work += cost
    return work


def prefix_predicted_work(first: dict[int, float], keys, expansions: dict[int, list[tuple[int, int]]],
                          per_token: float, suffix: int, n: int, gold: Sequence[tuple[int, ...]] = ()) -> int:
    """:func:`predicted_work` from the prefix pass alone: each name's (token ids ``keys``, then ``suffix`` more
    tokens) score predicted as its first token's log-probability plus ``per_token`` (<= 0) a later token; the
    limit the ``n``-th best predicted score, or the best gold name's when lower (its rank is exact)."""
    per_token = min(per_token, 0.0)
    scores = heapq.nlargest(n, (first[key[0]] + (len(key) + suffix - 1) * per_token for key in keys if key))
    if not scores:
        return 0
    limit = scores[-1] if len(scores) == n else -math.inf
    golds = [first[key[0]] + (len(key) + suffix - 1) * per_token for key in gold if key]
    if golds and max(golds) < limit:
        limit = max(golds) - 1e-3 * max(1.0, abs(max(golds)))
    return predicted_work(first, expansions, per_token, limit)


def _count_below(node: dict, suffix: int, below: dict[int, dict[int, int]]) -> dict[int, int]:
    """Fill ``below`` for ``node``'s subtree; the lengths of ``node``'s own rows (tokens -> rows), its end
    included."""
    lengths: dict[int, int] = {}
    for token, child in node.items():
        if token != END:
            for length, count in _count_below(child, suffix, below).items():
                lengths[length] = lengths.get(length, 0) + count
    below[id(node)] = dict(lengths)
    if END in node:
        length = len(node[END]) + suffix
        lengths[length] = lengths.get(length, 0) + 1
    return lengths


def _rows(lm: CausalLM, split: CausalQuery, names: Sequence[str]) -> list[tuple[int, ...]]:
    """Each name's scored tokens, as the exhaustive method builds them: name + suffix (empty name: none)."""
    return [ids + split.suffix if ids else () for ids in lm.candidate_ids(names, split.slot)]


def _exhaustive_passes(lm: CausalLM, text: str, names: Sequence[str], batch_size: int | None):
    """The prefix the exhaustive method (KV cache on) feeds for ``text`` and its ``(rows, width)`` passes after it."""
    split = lm.split(text)
    rows = _rows(lm, split, names)
    if not any(rows):
        return [], []
    lengths, heads = row_lengths(rows)
    passes = scoring_passes(lengths, heads, shared=plain_cache_of(lm.model),
                            batch_size=batch_size or lm.settings.batch_size, budget=logprob_elements(lm.device),
                            vocab=lm.vocab_size)
    return lm.fit_prefix(split.prefix, max(lengths)), passes


def exhaustive_token_forwards(lm: CausalLM, text: str, names: Sequence[str], *, batch_size: int | None = None) -> int:
    """Token positions the exhaustive method (KV cache on, ``batch_size`` rows a pass: ``lm``'s by default) feeds
    for ``text``, padding included: the prefix, then its passes' (with a plain cache, each distinct first token
    once and each row's later tokens after its first token's cache)."""
    prefix, passes = _exhaustive_passes(lm, text, names, batch_size)
    return len(prefix) + sum(rows * width for rows, width in passes)


def exhaustive_work(lm: CausalLM, text: str, names: Sequence[str], *, batch_size: int | None = None) -> int:
    """The work of the exhaustive method's passes after the prefix's, in the budget's unit (what the search's
    ``work`` is weighed against)."""
    return passes_work(_exhaustive_passes(lm, text, names, batch_size)[1], batch_size or lm.settings.batch_size)
