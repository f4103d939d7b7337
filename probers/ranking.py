"""A prober's scored ranking (:class:`Ranking`): what :meth:`Prober.rank_scored <medlama.probers.prober.Prober.rank_scored>`
returns, and what ``predictions.jsonl`` and ``scores.parquet`` are written from.

Per query, in query order:

* ``names``: the top predictions, best first (what acc@k scores);
* ``scores``: their scores, aligned with ``names`` (higher is better; ``None`` where the method gives none);
* ``inputs``: the text as fed to the model (after the prober's template: the mask token in the slot, the
  causal prefix with any chat template and BOS);
* ``gold_ranks`` and ``gold_scores``: the 1-based rank and the score of the best-ranked gold answer (an exact
  name match). Methods that score the whole candidate pool (:meth:`Ranking.from_pool`) rank the gold among
  all candidates, so a gold outside the top-k still gets its rank; methods that generate answers
  (:meth:`Ranking.from_names`) rank it among the names they returned only: ``None`` when it is not there;
* ``pools`` (only when asked, ``all_scores=True``): every candidate's score and rank (:class:`PoolScores`);
* ``confidences``: the top-1 prediction's confidence, the softmax over the query's scored pool (or its own
  choices) of the scores, at the top-1 candidate (:func:`top1_confidence`); ``None`` for a method that does not
  score every candidate (it generates or searches its answers), or a query with nothing ranked.

Ties between equal scores are broken as the probers break them: by candidate order (the pool's order), so
the ranks agree with ``names``. A score that is not finite (a candidate a method cannot rank scores
``-inf``) is written as ``null`` and such a candidate has no rank.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["PoolScores", "Ranking", "finite_or_none", "gold_indices", "top1_confidence"]


def finite_or_none(value: Any) -> float | None:
    """``value`` as a float when it is finite, else ``None`` (JSON has no infinities or NaN)."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


@dataclass(frozen=True)
class PoolScores:
    """Every candidate of a query's pool with its score (float64, higher is better) and 1-based rank (0: not
    ranked, its score not finite)."""

    candidates: Sequence[str]
    scores: np.ndarray
    ranks: np.ndarray


@dataclass(frozen=True)
class Ranking:
    """Scored predictions of a query set (see the module docstring); every list is in query order."""

    names: list[list[str]]
    scores: list[list[float | None]]
    inputs: list[str | None]
    gold_ranks: list[int | None]
    gold_scores: list[float | None]
    pools: list[PoolScores] | None = None
    confidences: list[float | None] | None = None

    def __len__(self) -> int:
        return len(self.names)

    @classmethod
    def from_names(cls, gold: Sequence[Sequence[str]], names: Sequence[Sequence[str]], *,
                   scores: Sequence[Sequence[float | None]] | None = None,
                   inputs: Sequence[str | None] | None = None) -> "Ranking":
        """A ranking of names a method produced (generated or decoded answers), not scored over a pool: the
        gold rank is its place among ``names`` (``None`` when absent), its score the name's score there."""
        names = [list(row) for row in names]
        scores = [[finite_or_none(s) for s in row] for row in scores] if scores is not None else \
            [[None] * len(row) for row in names]
        ranks, gold_scores = [], []
        for row, row_scores, answers in zip(names, scores, gold):
            answers = set(answers)
            at = next((i for i, name in enumerate(row) if name in answers), None)
            ranks.append(None if at is None else at + 1)
            gold_scores.append(None if at is None else row_scores[at])
        return cls(names, scores, list(inputs) if inputs is not None else [None] * len(names), ranks, gold_scores)

    @classmethod
    def from_pool(cls, gold: Sequence[Sequence[str]], candidates: Sequence[str], rows: Any,
                  top: Sequence[Sequence[int]], *, inputs: Sequence[str | None] | None = None,
                  all_scores: bool = False) -> "Ranking":
        """A ranking by scores over the whole pool ``candidates``: ``rows[q]`` is query q's score of every
        candidate (higher is better; an array, or any sequence of them), ``top[q]`` the candidate indices
        the prober ranked first, best first (its own order decides ``names``; the other candidates follow by
        score, ties by candidate order). ``all_scores``: keep every candidate's score and rank
        (:attr:`pools`)."""
        golds = gold_indices(gold, candidates)
        names, scores, ranks, gold_scores, pools, confidences = [], [], [], [], [], []
        for q, picked in enumerate(top):
            row = np.asarray(rows[q], dtype=np.float64)
            picked = [int(j) for j in picked]
            confidences.append(top1_confidence(row[picked[0]], log_sum_exp(row)) if picked else None)
            names.append([candidates[j] for j in picked])
            scores.append([finite_or_none(row[j]) for j in picked])
            rank, score = _gold_rank(row, picked, golds[q])
            ranks.append(rank)
            gold_scores.append(finite_or_none(score))
            if all_scores:
                pools.append(PoolScores(candidates, row, _all_ranks(row, picked)))
        return cls(names, scores, list(inputs) if inputs is not None else [None] * len(names), ranks, gold_scores,
                   pools if all_scores else None, confidences)

    @classmethod
    def from_ranked(cls, candidates: Sequence[str], top: Sequence[Sequence[int]],
                    top_scores: Sequence[Sequence[float]], gold_ranks: Sequence[int | None],
                    gold_scores: Sequence[float | None], *, inputs: Sequence[str | None] | None = None,
                    log_normalizers: Sequence[float] | None = None) -> "Ranking":
        """A ranking over the pool ``candidates`` whose gold ranks a scorer has found itself, as
        :meth:`from_pool` would from the whole score rows (:func:`~medlama.probers.faiss_search.rank_pool`):
        ``top[q]`` the candidate indices ranked first, ``top_scores[q]`` their scores; ``log_normalizers[q]``
        the log-sum-exp of query q's scores over the whole pool (for the top-1 confidence)."""
        names = [[candidates[j] for j in row] for row in top]
        scores = [[finite_or_none(s) for s in row] for row in top_scores]
        confidences = None if log_normalizers is None else \
            [top1_confidence(row[0], lse) if len(row) else None for row, lse in zip(top_scores, log_normalizers)]
        return cls(names, scores, list(inputs) if inputs is not None else [None] * len(names), list(gold_ranks),
                   [finite_or_none(s) for s in gold_scores], confidences=confidences)

    def rows(self) -> list[tuple]:
        """One tuple per query (names, scores, input, gold rank, gold score, pool scores or None, top-1
        confidence or None)."""
        pools = self.pools if self.pools is not None else [None] * len(self.names)
        confidences = self.confidences if self.confidences is not None else [None] * len(self.names)
        return list(zip(self.names, self.scores, self.inputs, self.gold_ranks, self.gold_scores, pools, confidences))

    @classmethod
    def from_rows(cls, rows: Sequence[tuple]) -> "Ranking":
        """The ranking of :meth:`rows` (e.g. put back in query order after ranking per relation pool)."""
        names, scores, inputs, ranks, gold_scores, pools, confidences = \
            (list(column) for column in zip(*rows)) if rows else ([], [], [], [], [], [], [])
        return cls(names, scores, inputs, ranks, gold_scores,
                   None if any(pool is None for pool in pools) or not pools else pools,
                   None if all(c is None for c in confidences) else confidences)


def log_sum_exp(row: np.ndarray) -> float:
    """``log(sum(exp(row)))`` over the finite scores of ``row`` (``-inf`` when none is), in float64."""
    finite = row[np.isfinite(row)]
    if not len(finite):
        return float("-inf")
    top = float(finite.max())
    return top + float(np.log(np.exp(finite - top).sum()))


def top1_confidence(top_score: float | None, log_normalizer: float) -> float | None:
    """The softmax probability of the top-1 candidate over its pool, ``exp(top_score - log_normalizer)``
    (temperature 1: the scores as the method gives them); ``None`` when the top score is not finite."""
    if top_score is None or not math.isfinite(float(top_score)) or not math.isfinite(float(log_normalizer)):
        return None
    return min(1.0, math.exp(float(top_score) - float(log_normalizer)))


def gold_indices(gold: Sequence[Sequence[str]], candidates: Sequence[str]) -> list[list[int]]:
    """Per query, the pool indices of its gold answers (a name's first place in the pool), in pool order."""
    index: dict[str, int] = {}
    for i, name in enumerate(candidates):
        index.setdefault(name, i)
    return [sorted({index[name] for name in answers if name in index}) for answers in gold]


def _gold_rank(row: np.ndarray, picked: list[int], gold_at: list[int]) -> tuple[int | None, float | None]:
    """The best rank (1-based) of a gold candidate, and its score: its place in ``picked``, else after the
    picked ones, counting the other candidates scoring higher (or equal and earlier in the pool)."""
    for place, j in enumerate(picked):
        if j in gold_at:
            return place + 1, float(row[j])
    best: tuple[int, float] | None = None
    if gold_at:
        rest = np.ones(len(row), dtype=bool)
        rest[picked] = False
        positions = np.arange(len(row))
        for j in gold_at:
            g = row[j]
            if not math.isfinite(g):
                continue
            ahead = int(np.count_nonzero(rest & ((row > g) | ((row == g) & (positions < j)))))
            rank = len(picked) + 1 + ahead
            if best is None or rank < best[0]:
                best = (rank, float(g))
    return (best[0], best[1]) if best else (None, None)


def _all_ranks(row: np.ndarray, picked: list[int]) -> np.ndarray:
    """Every candidate's 1-based rank: ``picked`` first in their order, then the others by score, ties by
    candidate order; 0 for a candidate whose score is not finite."""
    ranks = np.zeros(len(row), dtype=np.int64)
    ranks[picked] = np.arange(1, len(picked) + 1)
    rest = np.ones(len(row), dtype=bool)
    rest[picked] = False
    rest &= np.isfinite(row)
    others = np.flatnonzero(rest)
    order = others[np.argsort(-row[others], kind="stable")]
    ranks[order] = np.arange(len(picked) + 1, len(picked) + 1 + len(order))
    return ranks
