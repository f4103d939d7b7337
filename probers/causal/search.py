"""Exact top-k of ``causal-likelihood`` (sum reduction) without scoring every candidate: best-first search
over the candidates' token trie.

With ``reduction="sum"`` a candidate's score is the sum of its tokens' (and the closing suffix's)
log-probabilities, each <= 0, so the running sum at a node of the trie (:func:`~medlama.probers.causal.trie.
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

Never (much) more work than scoring every name (the work counted as :mod:`medlama.probers.causal.budget`
counts it: the token positions the passes feed, padding included, a pass's fixed cost added; the exhaustive
method's as its shared passes feed them). First, from the prefix pass alone
(:func:`~medlama.probers.causal.budget.prefix_predicted_work`: a later token scored at the prefix's expected
log-probability, minus its next-token entropy), a flat model is told apart: when that prediction, times
``PREFIX_COST``, exceeds the exhaustive work, every name is scored at once as the exhaustive method scores them
(one ``continuation_log_probs`` call on the prefix's cache: the same passes, nothing more). Otherwise the search scores a few names whole,
as the exhaustive method does (the gold names when the gold's rank is exact, the shortest names below the best
first tokens, then the ``n`` names predicted best): they set the threshold at once (any ``n`` scored names bound
the ``n``-th best score from below) and measure the mean log-probability of a token after a name's first. It then
predicts its own work (:func:`~medlama.probers.causal.budget.predicted_work`: every expansion whose bound, at that
mean a token, reaches the limit: the threshold, or the gold's score); when that, times ``PREDICTED_COST``, exceeds
the exhaustive work (a flat model, a gold ranked deep), it **switches**: it scores as the exhaustive method does
(one ``continuation_log_probs`` call, rows sorted by length) every name not yet scored whose first token can reach
the limit, and stops. Before each later pass it checks again (:func:`~medlama.probers.causal.budget.keep_searching`):
the work done, that pass's, and the exhaustive scoring of every name not yet completed or ruled out must stay
within ``1 + SLACK`` of the exhaustive work, else it switches the same way. Either way the result is exact: every
name whose bound can reach the limit is scored. A pass's nodes are fed sorted by length, cut into forward passes
of similar widths (the cut with the least :func:`~medlama.probers.causal.budget.pass_cost`).

:func:`best_first` ranks one query (names, scores, the gold's exact rank (or up to a cut-off) and its score, the
positions fed through the model and the work, whether it switched); :func:`exhaustive_token_forwards` and
:func:`exhaustive_work` count the exhaustive method's alike.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from medlama.core.errors import MedlamaInputError
from medlama.core.finite import require_log_probs
from medlama.probers.causal.budget import PREDICTED_COST, PREFIX_COST, SLACK, exhaustive_token_forwards, \
    exhaustive_work, keep_searching, pass_cost, passes_work, pool_of, predicted_work, prefix_predicted_work, \
    row_lengths, scoring_passes
from medlama.probers.causal.passes import broadcast_cache, padded_tensors, plain_cache_of, plain_layers, with_cache
from medlama.probers.causal.trie import END
from medlama.probers.causal.scoring import CausalLM, CausalQuery
from medlama.probers.mlm import logprob_elements

__all__ = ["SearchResult", "best_first", "exhaustive_token_forwards", "exhaustive_work"]


@dataclass(frozen=True)
class SearchResult:
    """One query's best-first ranking.

    ``names``/``scores``: the top ``top_k`` distinct names, best first, and their summed log-probabilities
    (float64). ``gold_rank``: the 1-based rank of the best-ranked gold name among all candidates when it is
    within ``cutoff`` (every distinct name, by default: the exact rank; ``None``: beyond a cut-off asked for,
    not a candidate, or scoring ``-inf``); ``gold_score``:
    its score (the best gold candidate's, computed also beyond the cut-off; ``None`` when no gold name is a
    candidate). ``token_forwards``: token positions fed through the model, padding included (the prefix once, then
    every pass's). ``switched``: the search handed the names it had not ruled out to exhaustive scoring
    (:func:`keep_searching`). ``work``: the work of its passes after the prefix's, in the budget's unit
    (:func:`~medlama.probers.causal.budget.pass_cost` summed), as :func:`exhaustive_work` counts the exhaustive
    method's.
    """

    names: list[str]
    scores: list[float]
    gold_rank: int | None
    gold_score: float | None
    cutoff: int
    token_forwards: int
    switched: bool = False
    work: int = 0


class _Search:
    """The state of one query's search: the queue, the completed names and the running top ``n``."""

    def __init__(self, lm: CausalLM, split: CausalQuery, names: Sequence[str], n: int, batch_size: int,
                 gold: Sequence[str] = ()) -> None:
        self.lm, self.split, self.names, self.n, self.batch_size = lm, split, names, n, batch_size
        self.pool = pool = pool_of(lm, split, names)
        self.trie, self.where, self.first, self.below = pool.trie, pool.where, pool.first, pool.below
        #: the gold names' token ids (the rank of the best is exact: the search goes on down to its score)
        self.gold_keys = [key for key in dict.fromkeys(pool.ids[pool.first[name]] for name in gold
                                                       if name in pool.first) if key]
        self.prefix = lm.fit_prefix(split.prefix, pool.longest) if pool.longest else list(split.prefix)
        self.budget = logprob_elements(lm.device)  # once per search: on a GPU it asks the driver for free memory
        self.shared = plain_cache_of(lm.model)  # the exhaustive passes share first tokens (set again from the cache)
        self.exhaustive = self._work(pool.lengths, pool.heads)
        self.spent = 0  # work done, in pass_cost's unit (the prefix pass, which both methods run, left out)
        self.switched = False
        self.whole = False  # every name scored (the switch taken from the prefix pass alone)
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
            if (plain_layers(self.cache) is not None) != self.shared:  # as continuation_log_probs will score
                self.shared = not self.shared
                self.exhaustive = self._work(self.pool.lengths, self.pool.heads)
            require_log_probs(first, model=self.lm.model_path)
            self.head = (self.cache, first)
            first = first.cpu()
            listed = first.tolist()
            self.first_lp = {token: listed[token] for token in self.trie}
            # A flat model, predicted from the prefix pass alone: every name scored now, as the exhaustive method
            # scores them (one call, the same batches), before any other pass.
            entropy = float((first.exp() * first).nansum())  # E[log p] of the next token, <= 0
            early = PREFIX_COST * prefix_predicted_work(self.first_lp, self.where, self.pool.expansions, entropy,
                                                           len(self.split.suffix), self.n, self.gold_keys)
            if not keep_searching(0, early, 0, self.exhaustive, 0.0):
                self._score([key for key in self.where if key and any(self.names[i] not in self.done
                                                                      for i in self.where[key])])
                self.switched = self.whole = True
                return
            for token, child in self.trie.items():
                self._reach(child, (token,), self.first_lp[token])
            self._plan(self._seed())
            self._expand_while(self.threshold)

    def _seed(self) -> list[tuple[tuple[int, ...], float]]:
        """A threshold from the first pass on: the gold names and the shortest names below the ``n`` best first
        tokens (taken in turn), scored whole (any ``n`` scored names bound the ``n``-th best score from below),
        so that the bound prunes before the search has completed ``n`` names of its own."""
        keys, need = list(self.gold_keys), self.n - len(self.done)
        lists = []
        for _, _, _, node in heapq.nsmallest(need, self.queue):
            found, level = [], [node]
            while level and len(found) < need:
                found += [child[END] for parent in level for token, child in parent.items()
                          if token != END and END in child]
                level = [child for parent in level for token, child in parent.items() if token != END]
            lists.append(found)
        picked = [key for layer in itertools.zip_longest(*lists) for key in layer if key is not None]
        keys += [key for key in picked if key not in keys][:max(0, need)]
        return self._score(keys)

    def limit(self) -> float:
        """How far down the search must go: the ``n``-th best score, or lower, the gold's (slack: below)."""
        gold = [score for key in self.gold_keys for score in [self.done.get(self.names[self.where[key][0]])]
                if score is not None]
        limit = self.threshold()
        if gold and max(gold) < limit and math.isfinite(max(gold)):
            limit = max(gold) - 1e-3 * max(1.0, abs(max(gold)))
        return limit

    def _plan(self, seeded: list[tuple[tuple[int, ...], float]]) -> None:
        """Best-first or exhaustive, from the seeded names: their tokens after the first scored ``per_token``
        on average; if a search that scored every later token so (:func:`predicted_work`) would cost more than
        scoring the names left, score them now (every name whose first token can reach the limit)."""
        per_token = self._per_token(seeded)
        # The n names predicted best (first token, then per_token a token), scored: the threshold near its end.
        suffix = len(self.split.suffix)
        guess = heapq.nlargest(self.n, ((self.first_lp[key[0]] + (len(key) + suffix - 1) * per_token, key)
                                        for key in self.where if key and self.names[self.where[key][0]]
                                        not in self.done))
        seeded += self._score([key for _, key in guess])
        per_token = self._per_token(seeded)
        limit = self.limit()
        self.predicted = PREDICTED_COST * predicted_work(self.first_lp, self.pool.expansions, min(per_token, 0.0),
                                                         limit)
        if not keep_searching(self.spent, self.predicted, 0, self.exhaustive, 0.0):
            self._switch([], limit)

    def _per_token(self, seeded: list[tuple[tuple[int, ...], float]]) -> float:
        """The mean log-probability of the scored names' tokens after their first (0: none)."""
        longer = [(key, score) for key, score in seeded if len(key) + len(self.split.suffix) > 1]
        tokens = sum(len(key) + len(self.split.suffix) - 1 for key, _ in longer)
        return sum(score - self.first_lp[key[0]] for key, score in longer) / tokens if tokens else 0.0

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
            passes = self._passes(self._jobs(batch))
            step = sum(pass_cost(len(part), max(len(path) + len(chain) for _, path, chain, _ in part),
                                 self.batch_size) for part in passes)
            if not keep_searching(self.spent, step, self._remaining(batch, bound), self.exhaustive, SLACK):
                self._switch(batch, bound)
                break
            self.spent += step
            for part in passes:
                self._expand(self.cache, part)

    def _passes_of(self, lengths: dict[int, int], heads: int) -> list[tuple[int, int]]:
        """The passes ``continuation_log_probs`` runs (its model's batch size) for rows of these ``lengths`` with
        ``heads`` distinct first tokens."""
        return scoring_passes(lengths, heads, shared=self.shared, batch_size=self.lm.settings.batch_size,
                              budget=self.budget, vocab=self.lm.vocab_size)

    def _work(self, lengths: dict[int, int], heads: int) -> int:
        """The work of scoring rows of these ``lengths`` with ``heads`` distinct first tokens exhaustively."""
        return passes_work(self._passes_of(lengths, heads), self.batch_size)

    def _remaining(self, batch, bound: float) -> int:
        """The exhaustive work of the names not completed nor ruled out: those below the popped nodes and below
        the queued ones that can still reach ``bound`` (the rows below a node share its path's first token)."""
        lengths: dict[int, int] = {}
        heads = set()
        for entry in (*batch, *self.queue):
            if -entry[0] >= bound:
                below = self.below[id(entry[3])]
                if below:
                    heads.add(entry[2][0])
                for length, count in below.items():
                    lengths[length] = lengths.get(length, 0) + count
        return self._work(lengths, len(heads))

    def charge(self, rows: Sequence[Sequence[int]]) -> None:
        """Count a ``continuation_log_probs`` call on the prefix's cache for ``rows``: the positions its passes
        feed and their work."""
        passes = self._passes_of(*row_lengths(rows))
        self.token_forwards += sum(count * width for count, width in passes)
        self.spent += passes_work(passes, self.batch_size)

    def _switch(self, batch, bound: float) -> None:
        """Score every name below the popped nodes and the queued ones that can reach ``bound`` as the exhaustive
        method does; the nodes below ``bound`` stay queued (a later, lower limit may need them)."""
        nodes = [entry[3] for entry in batch] + [entry[3] for entry in self.queue if -entry[0] >= bound]
        self.queue = [entry for entry in self.queue if -entry[0] < bound]
        heapq.heapify(self.queue)
        keys: list[tuple[int, ...]] = []
        while nodes:  # every name strictly below the nodes (a node's own end was completed when it was reached)
            node = nodes.pop()
            under = self.pool.under.get(id(node))  # a first token's: listed once per pool
            if under is not None:
                keys += under
                continue
            for token, child in node.items():
                if token != END:
                    nodes.append(child)
                    if END in child:
                        keys.append(child[END])
        # names scored already (the seeds) are not scored again
        self._score([key for key in keys if any(self.names[i] not in self.done for i in self.where.get(key, []))])
        self.switched = True

    def _score(self, keys: list[tuple[int, ...]]) -> list[tuple[tuple[int, ...], float]]:
        """Complete the names with these token ids, scored as the exhaustive method scores them (after the
        prefix's cache); their scores."""
        rows = [key + self.split.suffix for key in keys]
        scores = []
        if rows:
            scores = self.lm.continuation_log_probs(self.prefix, rows, head=self.head).tolist()
            self.charge(rows)
            for key, score in zip(keys, scores):
                self._complete_names(self.where.get(key, []), score)
        return list(zip(keys, scores))

    def _jobs(self, batch) -> list[tuple[float, tuple[int, ...], tuple[int, ...], dict]]:
        """Each popped node's bound, path, the single-child chain below it (scored in the same pass) and the
        node where the chain ends."""
        jobs = []
        for negative, _, path, node in batch:
            chain: list[int] = []
            while END not in node and len(node) == 1:  # one way on: score the chain in this same pass
                (token, node), = node.items()
                chain.append(token)
            jobs.append((-negative, path, tuple(chain), node))
        return jobs

    def _passes(self, jobs) -> list[list]:
        """``jobs`` by fed length, cut into forward passes with the least total :func:`pass_cost` (each pass's
        log-probabilities within the device's :func:`logprob_elements`)."""
        jobs = sorted(jobs, key=lambda job: len(job[1]) + len(job[2]))
        widths = [len(path) + len(chain) for _, path, chain, _ in jobs]
        best = [0] + [math.inf] * len(jobs)  # best[i]: the least cost of the first i jobs; cut[i]: its last pass
        cut = [0] * (len(jobs) + 1)
        budget = self.budget
        for end in range(1, len(jobs) + 1):
            for start in range(end - 1, -1, -1):
                rows = end - start
                if rows > 1 and rows * widths[end - 1] * self.lm.vocab_size > budget:
                    break
                cost = best[start] + pass_cost(rows, widths[end - 1], self.batch_size)
                if cost < best[end]:
                    best[end], cut[end] = cost, start
        passes, end = [], len(jobs)
        while end:
            passes.append(jobs[cut[end]:end])
            end = cut[end]
        return passes[::-1]

    def _expand(self, cache, part) -> None:
        """One forward pass over the jobs' paths (each extended down its single-child chain)."""
        import torch  # torch only when a model runs

        fed = [path + chain for _, path, chain, _ in part]
        # Right padding with no attention mask, as the exhaustive method feeds rows: a causal model never
        # looks ahead, so the padding changes no real position.
        ids, _ = padded_tensors(fed, self.lm.pad_id, self.lm.device)
        repeated = broadcast_cache(cache, len(part))  # the prefix's cache stays as it was for the next pass
        # Only the positions that score something new: the chain's tokens and the last node's children.
        # The LM head runs at those positions alone (the union over the rows: one index list for all);
        # the log-probabilities at each are float32, as the exhaustive method computes them.
        rows, positions, starts = [], [], []
        for r, (_, path, chain, _) in enumerate(part):
            starts.append(len(rows))
            rows += [r] * (len(chain) + 1)
            positions += range(len(path) - 1, len(path) + len(chain))
        keep = sorted(set(positions))
        column = {position: c for c, position in enumerate(keep)}
        logits = self.lm.model(input_ids=ids, **with_cache(self.lm.model, repeated), use_cache=True,
                               logits_to_keep=torch.tensor(keep, device=self.lm.device)).logits
        self.token_forwards += ids.numel()  # the padding runs too
        at = logits[rows, [column[position] for position in positions]]
        at = at.to(torch.promote_types(at.dtype, torch.float32))
        picks, tokens = [], []
        for r, (_, _, chain, node) in enumerate(part):
            picks += range(starts[r], starts[r] + len(chain))
            tokens += chain
            kids = [token for token in node if token != END]
            picks += [starts[r] + len(chain)] * len(kids)
            tokens += kids
        # each picked token's logit minus its position's logsumexp (float32), as the exhaustive method scores it
        picked = at[picks, tokens] - at.logsumexp(-1)[picks]
        # the scored values checked, as the exhaustive method checks its own (a NaN logit spoils its whole row)
        require_log_probs(picked, model=self.lm.model_path)
        values = iter(picked.double().cpu().tolist())
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
    search = _Search(lm, split, names, max(enumerate_to, 1), batch_size, gold if cutoff is None else ())
    search.run()
    ranked = search.ranked()
    top = ranked[:top_k]
    in_pool = [name for name in dict.fromkeys(gold) if name in search.first]
    gold_rank = gold_score = None
    # every name scored: the gold's place in the whole ranking is its exact rank (up to any cut-off)
    seen = ranked if search.whole and cutoff is None else ranked[:enumerate_to]
    place = next((i for i, (name, _) in enumerate(seen) if name in in_pool), None)
    if place is None and in_pool:
        # Not among the names enumerated: score the gold names directly (one small pass, on the prefix as cut
        # for the whole pool) for their best score.
        rows = [search.pool.ids[search.first[name]] + split.suffix for name in in_pool]
        gold_score = float(lm.continuation_log_probs(search.prefix, rows, head=search.head).max())
        search.charge(rows)
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
                        len(search.first) if cutoff is None else enumerate_to, search.token_forwards, search.switched,
                        search.spent)
