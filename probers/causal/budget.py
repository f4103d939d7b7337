"""The work of ``causal-likelihood``'s best-first search (:mod:`medlama.probers.causal.search`) against scoring
every name, in one unit (tokens run through the model, a pass's fixed cost included), and the rule by which the
search hands over to exhaustive scoring: counts only, never time, so the same query takes the same path on
every machine.

* :func:`pass_cost` / :func:`scoring_cost`: the work of one forward pass; of scoring rows as the exhaustive
  method does (sorted by length, ``batch_size`` per pass).
* :func:`predicted_work`: the work a search would do were every token after a name's first to score the same
  (the mean the search measured on names it scored whole), from each first token's log-probability and the
  trie's shape (:class:`Pool`, built once per pool, slot and suffix: :func:`pool_of`).
* :func:`prefix_predicted_work`: the same from the prefix pass alone (no name scored yet): a token after a name's
  first scored at the prefix's expected log-probability (minus the entropy of its next-token distribution), the
  limit the ``n``-th best name (or the gold) so predicted. A flat model (high entropy, little spread between first
  tokens) predicts a search that prunes little: the search then scores every name at once, as the exhaustive
  method does, and costs what it costs.
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

from medlama.probers.causal.passes import pass_cost
from medlama.probers.causal.scoring import CausalLM, CausalQuery
from medlama.probers.causal.trie import END, candidate_trie

__all__ = ["PREDICTED_COST", "PREFIX_COST", "Pool", "SLACK", "keep_searching", "pass_cost", "pool_of", "predicted_work",
           "prefix_predicted_work", "scoring_cost"]

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


def scoring_cost(rows: int, tokens: int, batch_size: int) -> int:
    """The work of scoring ``rows`` continuations of more than one token (``tokens`` fed in all) as the exhaustive
    method does: sorted by length (little padding), ``batch_size`` per pass. (A one-token row needs no pass.)"""
    return tokens + -(-rows // batch_size) * 2 * batch_size


def keep_searching(spent: int, step: int, remaining: int, exhaustive: int, slack: float = SLACK) -> bool:
    """Whether the search takes its next pass (``step``, after ``spent``) rather than scoring the ``remaining``
    names exhaustively now: only while all three stay within ``1 + slack`` of the ``exhaustive`` work. The
    remaining work never grows with a pass, so the search never exceeds that bound."""
    return spent + step + remaining <= (1 + slack) * exhaustive


@dataclass(frozen=True)
class Pool:
    """What a search needs of a pool in one slot and before one suffix (the same for every query of a relation,
    so built once): the trie, each token sequence's distinct names, each distinct name's first place, the
    exhaustive method's rows (count and tokens of those it feeds) and, per trie node, the same for the distinct
    token sequences strictly below it; per first token, the work of the expansions below it by depth and the names
    below it."""

    trie: dict
    ids: list[tuple[int, ...]]
    where: dict[tuple[int, ...], list[int]]
    first: dict[str, int]
    longest: int
    fed_rows: int
    fed_tokens: int
    below: dict[int, tuple[int, int]]  # id(node) -> (rows fed, tokens fed) below it
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
    rows = [len(sequence) + len(split.suffix) for sequence in ids if sequence]
    trie = candidate_trie(ids, split.suffix)
    below: dict[int, tuple[int, int]] = {}
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
    found = Pool(trie, ids, where, first, max(rows, default=0), sum(n > 1 for n in rows),
                      sum(n - 1 for n in rows), below, expansions, under)
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


def _count_below(node: dict, suffix: int, below: dict[int, tuple[int, int]]) -> tuple[int, int]:
    """Fill ``below`` for ``node``'s subtree; ``node``'s own (rows fed, tokens fed), its end included."""
    rows = tokens = 0
    for token, child in node.items():
        if token != END:
            more = _count_below(child, suffix, below)
            rows, tokens = rows + more[0], tokens + more[1]
    below[id(node)] = (rows, tokens)
    if END in node:
        length = len(node[END]) + suffix
        rows, tokens = rows + (length > 1), tokens + length - 1
    return rows, tokens
