"""Exact top-k of ``causal-likelihood`` (sum reduction) without scoring every candidate: best-first search
over the candidates' token trie.

With ``reduction="sum"`` a candidate's score is the sum of its tokens' (and the closing suffix's)
log-probabilities, each <= 0, so the running sum at a node of the trie (:func:`~medlama.probers.causal_trie.
candidate_trie`) is an upper bound on the score of every candidate below it. The search keeps a priority
queue of trie nodes keyed by that bound and expands the best ones first; a candidate is complete when the
last token of its closing suffix is scored (exactly what the exhaustive method sums: name + the query's
whole text after ``[Y]``; with no text after the slot, the name alone). It stops when ``n`` distinct
names are complete and no node left in the queue has a bound >= the ``n``-th best score: every name not
reached scores below it, so the top ``n`` are those of the exhaustive ranking. Nodes whose bound *equals*
the ``n``-th score are still expanded, so equal scores are ordered as ``rank_unique`` orders them (by the
candidate's first place in the pool), as the exhaustive method does.

The work: the query's prefix runs once (its KV cache, as ``CausalLM.continuation_log_probs`` uses it) and
gives every first token's log-probability; each later expansion feeds one node's path after a copy of that
cache, up to ``batch_size`` nodes (the best of the queue) per forward pass. A path through a chain of
single-child nodes (a name's unique rest) is fed in one go, scoring the whole chain in that pass.

Floating point: a node's bound and a candidate's score are the same float64 running sum of the same float32
token log-probabilities, and adding a term <= 0 never raises a float64 sum, so the stopping rule is exact
for the scores the search computes (no slack is needed). Those scores differ from the exhaustive method's by
float32 rounding only (other batches, other pass widths), as the exhaustive scores themselves differ from
one batch size to another; two candidates closer than that rounding may swap places either way.

:func:`best_first` ranks one query (names, scores, the gold's exact rank (or up to a cut-off) and its score, the tokens
fed through the model); :func:`exhaustive_token_forwards` counts the exhaustive method's tokens alike.
"""

from __future__ import annotations

import copy
import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

from medlama.core.errors import MedlamaInputError
from medlama.core.finite import require_log_probs
from medlama.probers.causal_trie import END, candidate_trie
from medlama.probers.causal_scoring import CausalLM, CausalQuery, _log_softmax
from medlama.probers.mlm import MAX_LOGPROB_ELEMENTS

__all__ = ["SearchResult", "best_first", "exhaustive_token_forwards"]


@dataclass(frozen=True)
class SearchResult:
    """One query's best-first ranking.

    ``names``/``scores``: the top ``top_k`` distinct names, best first, and their summed log-probabilities
    (float64). ``gold_rank``: the 1-based rank of the best-ranked gold name among all candidates when it is
    within ``cutoff`` (every distinct name, by default: the exact rank; ``None``: beyond a cut-off asked for,
    not a candidate, or scoring ``-inf``); ``gold_score``:
    its score (the best gold candidate's, computed also beyond the cut-off; ``None`` when no gold name is a
    candidate). ``token_forwards``: tokens fed through the model (the prefix once, then every fed path).
    """

    names: list[str]
    scores: list[float]
    gold_rank: int | None
    gold_score: float | None
    cutoff: int
    token_forwards: int


def _rows(lm: CausalLM, split: CausalQuery, names: Sequence[str]) -> list[tuple[int, ...]]:
    """Each name's scored tokens, as the exhaustive method builds them: name + suffix (empty name: none)."""
    return [ids + split.suffix if ids else () for ids in lm.candidate_ids(names, split.slot)]


def exhaustive_token_forwards(lm: CausalLM, text: str, names: Sequence[str]) -> int:
    """Tokens the exhaustive method (KV cache on) feeds for ``text``: the prefix, then each row but its last."""
    split = lm.split(text)
    rows = _rows(lm, split, names)
    return _fed(lm.fit_prefix(split.prefix, max(map(len, rows))), rows) if any(rows) else 0


def _fed(prefix: Sequence[int], rows: Sequence[Sequence[int]]) -> int:
    """Tokens ``continuation_log_probs`` feeds for ``rows`` after ``prefix``: the prefix, each row but its last."""
    real = [row for row in rows if row]
    return len(prefix) + sum(len(row) - 1 for row in real) if real else 0


class _Search:
    """The state of one query's search: the queue, the completed names and the running top ``n``."""

    def __init__(self, lm: CausalLM, split: CausalQuery, names: Sequence[str], n: int, batch_size: int) -> None:
        self.lm, self.names, self.n, self.batch_size = lm, names, n, batch_size
        ids = lm.candidate_ids(names, split.slot)
        self.first: dict[str, int] = {}
        self.where: dict[tuple[int, ...], list[int]] = {}  # token ids -> the pool's distinct names with them
        for index, (name, key) in enumerate(zip(names, ids)):
            if name and name not in self.first:  # rank_unique: empty names never rank, a repeat counts once
                self.first[name] = index
                self.where.setdefault(key, []).append(index)
        rows = _rows(lm, split, names)
        longest = max((len(row) for row in rows), default=0)
        self.prefix = lm.fit_prefix(split.prefix, longest) if longest else list(split.prefix)
        self.trie = candidate_trie(ids, split.suffix)
        self.done: dict[str, float] = {}
        self.best: list[float] = []  # min-heap of the n best completed scores: best[0] is the threshold
        self.queue: list[tuple[float, int, tuple[int, ...], dict]] = []
        self.pushed = 0
        self.token_forwards = 0
        for key in self.where.get((), []):  # a name with no tokens scores -inf, as in the exhaustive method
            self._complete_names([key], float("-inf"))

    def threshold(self) -> float:
        """The n-th best completed score (-inf until n names are complete): nodes below it cannot rank."""
        return self.best[0] if len(self.best) == self.n else float("-inf")

    def _complete_names(self, indices: list[int], score: float) -> None:
        for index in indices:
            if self.names[index] in self.done:  # a popped node that ends a name was completed when reached
                continue
            self.done[self.names[index]] = score
            if len(self.best) < self.n:
                heapq.heappush(self.best, score)
            elif score > self.best[0]:
                heapq.heapreplace(self.best, score)

    def _reach(self, node: dict, path: tuple[int, ...], score: float) -> None:
        """A node just scored: complete its names, queue it when names continue below it."""
        if END in node:
            self._complete_names(self.where.get(node[END], []), score)
        if len(node) > (END in node):
            # Ties in bound: the node queued first goes first (any order is exact; this one is deterministic).
            heapq.heappush(self.queue, (-score, self.pushed, path, node))
            self.pushed += 1

    def run(self) -> None:
        import torch  # torch only when a model runs

        with torch.inference_mode():
            self.cache, first = self.lm._prefix_pass(self.prefix)
            self.token_forwards += len(self.prefix)
            require_log_probs(first, model=self.lm.model_path)
            first = first.cpu()
            for token, child in self.trie.items():
                self._reach(child, (token,), float(first[token]))
            self._expand_while(self.threshold)

    def extend(self, limit: float) -> None:
        """Go on until every name that can score ``limit`` or more is complete: the exact rank of a name scoring
        at least ``limit``, below the top ``n``."""
        import torch  # torch only when a model runs

        with torch.inference_mode():
            self._expand_while(lambda: limit)

    def _expand_while(self, limit) -> None:
        while self.queue:
            # The best nodes that can still reach the limit; >= keeps ties with it exploring.
            bound = limit()
            batch = []
            while self.queue and len(batch) < self.batch_size and -self.queue[0][0] >= bound:
                batch.append(heapq.heappop(self.queue))
            if not batch:
                break
            self._expand(self.cache, batch)

    def _expand(self, cache, batch) -> None:
        """One forward pass over the batch's paths (each extended down its single-child chain)."""
        import torch  # torch only when a model runs

        jobs = []
        for negative, _, path, node in batch:
            chain: list[int] = []
            while END not in node and len(node) == 1:  # one way on: score the chain in this same pass
                (token, node), = node.items()
                chain.append(token)
            jobs.append((-negative, path, tuple(chain), node))
        width = max(len(path) + len(chain) for _, path, chain, _ in jobs)
        per_pass = max(1, min(len(jobs), MAX_LOGPROB_ELEMENTS // max(1, width * self.lm.vocab_size)))
        for start in range(0, len(jobs), per_pass):
            part = jobs[start:start + per_pass]
            fed = [path + chain for _, path, chain, _ in part]
            wide = max(map(len, fed))
            # Right padding with no attention mask, as the exhaustive method feeds rows: a causal model never
            # looks ahead, so the padding changes no real position.
            ids = torch.full((len(part), wide), self.lm.pad_id, dtype=torch.long)
            for r, row in enumerate(fed):
                ids[r, :len(row)] = torch.tensor(row, dtype=torch.long)
            repeated = copy.deepcopy(cache)  # the prefix's cache stays as it was for the next pass
            repeated.batch_repeat_interleave(len(part))
            # Only the positions that score something new: the chain's tokens and the last node's children.
            # The LM head runs at those positions alone (the union over the rows: one index list for all);
            # the log-softmax over the vocabulary at each is float32, as the exhaustive method computes it.
            rows, positions, starts = [], [], []
            for r, (_, path, chain, _) in enumerate(part):
                starts.append(len(rows))
                rows += [r] * (len(chain) + 1)
                positions += range(len(path) - 1, len(path) + len(chain))
            keep = sorted(set(positions))
            column = {position: c for c, position in enumerate(keep)}
            logits = self.lm.model(input_ids=ids.to(self.lm.device), past_key_values=repeated, use_cache=True,
                                   logits_to_keep=torch.tensor(keep, device=self.lm.device)).logits
            self.token_forwards += sum(map(len, fed))
            lp = _log_softmax(logits[rows, [column[position] for position in positions]])
            require_log_probs(lp, model=self.lm.model_path)
            picks, tokens = [], []
            for r, (_, _, chain, node) in enumerate(part):
                picks += range(starts[r], starts[r] + len(chain))
                tokens += chain
                kids = [token for token in node if token != END]
                picks += [starts[r] + len(chain)] * len(kids)
                tokens += kids
            values = iter(lp[picks, tokens].double().cpu().tolist())
            for score, path, chain, node in part:
                for _ in chain:  # the chain's nodes: a running float64 sum, in token order
                    score += next(values)
                if END in node:
                    self._complete_names(self.where.get(node[END], []), score)
                whole = path + chain
                for token, child in node.items():
                    if token != END:
                        self._reach(child, whole + (token,), score + next(values))

    def ranked(self) -> list[tuple[str, float]]:
        """The completed names by score, ties in pool order (``rank_unique``'s order)."""
        return sorted(self.done.items(), key=lambda item: (-item[1], self.first[item[0]]))


def best_first(lm: CausalLM, text: str, names: Sequence[str], top_k: int, *, gold: Sequence[str] = (),
               cutoff: int | None = None, batch_size: int = 32) -> SearchResult:
    """The exact top ``top_k`` of ``names`` for query ``text`` (one ``[Y]``) by summed log-probability.

    ``cutoff``: ``None`` (default), the gold's rank is exact over the whole pool, the one exhaustive search
    gives: when the gold is not in the top ``top_k``, its score is computed and the search goes on until every
    name that can score as much is complete (the names whose bound is below it are never scored); a number,
    the search enumerates the top ``max(top_k, cutoff)`` and the gold's rank is exact up to it, ``None``
    beyond (less work). ``batch_size``: nodes per forward pass. Equals ``rank_unique`` over the exhaustive
    scores (see the module docstring for float32 rounding).
    """
    if top_k < 1 or (cutoff is not None and cutoff < 0) or batch_size < 1:
        raise MedlamaInputError(f"best-first search needs top_k >= 1, cutoff >= 0 and batch_size >= 1; got "
                                f"{top_k}, {cutoff} and {batch_size}")
    split = lm.split(text)
    enumerate_to = max(top_k, cutoff or 0)
    search = _Search(lm, split, names, max(enumerate_to, 1), batch_size)
    search.run()
    ranked = search.ranked()
    top = ranked[:top_k]
    in_pool = [name for name in dict.fromkeys(gold) if name in search.first]
    gold_rank = gold_score = None
    place = next((i for i, (name, _) in enumerate(ranked[:enumerate_to]) if name in in_pool), None)
    if place is None and in_pool:
        # Not among the names enumerated: score the gold names directly (one small pass, on the prefix as cut
        # for the whole pool) for their best score.
        rows = _rows(lm, split, in_pool)
        gold_score = float(lm.continuation_log_probs(search.prefix, rows).max())
        search.token_forwards += _fed(search.prefix, rows)
        if cutoff is None and math.isfinite(gold_score):
            # Every name that can score as much as the gold, completed: the gold's place among them is its rank.
            # The slack covers the float32 rounding between that pass and the search's own running sums.
            search.extend(gold_score - 1e-3 * max(1.0, abs(gold_score)))
            if not any(name in search.done for name in in_pool):
                # the search's own sum fell further below (half precision rounds coarser): go on to the gold
                search.extend(float("-inf"))
            ranked = search.ranked()
            place = next((i for i, (name, _) in enumerate(ranked) if name in in_pool), None)
    if place is not None:
        gold_score = ranked[place][1]
        gold_rank = place + 1 if math.isfinite(gold_score) else None
    return SearchResult([name for name, _ in top], [score for _, score in top], gold_rank, gold_score,
                        len(search.first) if cutoff is None else enumerate_to, search.token_forwards)
