"""Which queries experts rate: the sampling designs of ``medlama annotate export --strategy``, each with the
inclusion probability of every query, which :mod:`medlama.annotation.estimate` needs to estimate the whole
run's expert acc@k from the rated ones.

* ``stratified`` (the default): :func:`medlama.annotation.sheet.sample_queries`, equal numbers per relation;
  within a relation h of N_h queries of which n_h are drawn, each has inclusion probability n_h / N_h, and the
  estimate is stratified by relation.
* ``uncertainty``: queries drawn with probability growing with the model's uncertainty, so that experts rate
  more of the queries whose UMLS verdict is least settled. A query's uncertainty is one minus its top
  prediction's share of the softmax over the scores its row keeps (the run's own scores, as the method gives
  them); the inclusion probability is half uniform and half proportional to it (every query keeps a chance of
  at least half a uniform draw's, which the estimate's weights ``1 / pi`` need), capped at 1 with the rest
  scaled up so that they sum to the sample's size; the sample is then drawn by systematic sampling in a
  seeded random order (:func:`systematic_sample`: exactly n queries, each drawn with its probability).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from medlama.analysis.runs import Run
from medlama.core.errors import MedlamaInputError

#: The sampling designs, in the order ``--strategy`` lists them.
STRATEGIES = ("stratified", "uncertainty")


def capped_probabilities(weights: Sequence[float] | np.ndarray, n: int) -> np.ndarray:
    """Inclusion probabilities proportional to ``weights`` (all > 0) summing to ``n``, none above 1: those that
    would exceed 1 are set to 1 and the others scaled up again, until none does."""
    w = np.asarray(weights, dtype=np.float64)
    if not 0 < n <= len(w) or not np.all(w > 0):
        raise ValueError(f"need 0 < n <= {len(w)} and positive weights, got n = {n}")
    pi = np.zeros(len(w))
    capped = np.zeros(len(w), dtype=bool)
    while True:
        free = ~capped
        pi[free] = (n - capped.sum()) * w[free] / w[free].sum()
        over = free & (pi >= 1)
        if not over.any():
            break
        capped |= over
        pi[capped] = 1.0
    return pi


def systematic_sample(pi: np.ndarray, rng: np.random.Generator) -> list[int]:
    """Exactly ``round(sum(pi))`` indices, index i drawn with probability ``pi[i]``: the units in a random
    order, their probabilities laid end to end, and the points u, u + 1, ... (u uniform in [0, 1)) pick the
    units they fall in."""
    order = rng.permutation(len(pi))
    ends = np.cumsum(pi[order])
    n = int(round(float(ends[-1])))
    points = rng.uniform() + np.arange(n)
    positions = np.searchsorted(ends, points, side="right")
    return sorted(int(order[p]) for p in np.minimum(positions, len(pi) - 1))


def uncertainty(run: Run, indices: Sequence[int]) -> np.ndarray:
    """Each query's uncertainty in [0, 1) (module docstring) from its row's kept ``scores``; a run whose rows
    keep no score is refused (the design needs the model's scores)."""
    out = np.empty(len(indices))
    for position, index in enumerate(indices):
        scores = run.rows[index].get("scores")
        kept = [float(s) for s in scores or () if isinstance(s, (int, float)) and np.isfinite(s)]
        if not kept:
            raise MedlamaInputError(
                f"run {run.label!r}: query {run.ids[index]!r} keeps no score of its predictions, which --strategy "
                "uncertainty ranks queries by; use --strategy stratified", file=run.folder)
        shares = np.exp(np.array(kept) - max(kept))
        out[position] = 1.0 - float(shares[0] / shares.sum())
    return out


def uncertainty_sample(run: Run, eligible: Sequence[int], n: int, seed: int) -> tuple[list[int], dict[int, float]]:
    """``n`` of the ``eligible`` queries of ``run`` by the ``uncertainty`` design, and each drawn query's
    inclusion probability (``{index: pi}``)."""
    u = uncertainty(run, eligible)
    weights = 0.5 / len(eligible) + 0.5 * (u / u.sum() if u.sum() > 0 else np.full(len(u), 1 / len(u)))
    pi = capped_probabilities(weights, n)
    chosen = systematic_sample(pi, np.random.default_rng([seed, 2]))
    return [eligible[i] for i in chosen], {eligible[i]: float(pi[i]) for i in chosen}


def stratified_probabilities(relations: dict[int, str], picked: Sequence[int]) -> dict[int, float]:
    """``{index: n_h / N_h}`` of the ``picked`` queries; ``relations``: each eligible query's, by its index."""
    population = Counter(relations.values())
    drawn = Counter(relations[index] for index in picked)
    return {index: drawn[relations[index]] / population[relations[index]] for index in picked}
