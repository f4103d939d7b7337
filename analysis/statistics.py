"""Paired comparison of two runs on the same queries: the difference in a per-query 0/1 score (acc@k hits),
its bootstrap interval, McNemar's exact test, and Holm's correction across relations.

* :func:`paired_difference`: ``B - A`` of two runs' hits on the same queries. Its interval is the percentile
  bootstrap of the per-query differences (:func:`medlama.core.intervals.bootstrap_mean_ci`): each resample
  draws query indices once and both runs are scored on those same queries, which is the paired bootstrap
  (the mean of the differences is the difference of the means). Micro differences resample all queries
  together, as each run's own micro interval does (not stratified by relation: a new sample of queries would
  not keep each relation's count either); macro differences (mean over relations) resample within each
  relation (:func:`medlama.core.intervals.bootstrap_macro_ci`), as the macro average is over a fixed set of
  relations. Seeded: the same inputs give the same interval.
* :func:`mcnemar_exact`: McNemar's exact test, the two-sided binomial test of the discordant pairs ``b`` (A hit,
  B missed) and ``c`` (A missed, B hit) with p = 1/2: ``min(1, 2 * P(X <= min(b, c)))`` for X ~ Bin(b + c, 1/2),
  computed in exact integer arithmetic (as ``scipy.stats.binomtest(b, b + c, 0.5).pvalue``); 1 when there is
  no discordant pair.
* :func:`holm`: Holm's step-down adjustment of a family of p-values (one per relation): sorted ascending,
  the i-th (from 0) of m is multiplied by m - i, made monotone by the running maximum and capped at 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from medlama.core.intervals import (DEFAULT_LEVEL, DEFAULT_RESAMPLES, DEFAULT_SEED, MAX_RESAMPLES, bootstrap_macro_ci,
                                    bootstrap_mean_ci)
from medlama.core.settings import Checked, setting

__all__ = ["IntervalSettings", "PairedDifference", "holm", "mcnemar_exact", "paired_difference"]


@dataclass(frozen=True)
class IntervalSettings(Checked):
    """How an analysis computes its bootstrap intervals (recorded with them): ``medlama compare``'s, and every
    analysis of runs that resamples (consistency, frequency, the expert sheets)."""

    resamples: int = setting(DEFAULT_RESAMPLES, min=100, max=MAX_RESAMPLES, metavar="N",
                             help=f"bootstrap resamples for every interval (100 to {MAX_RESAMPLES:,})")
    seed: int = setting(DEFAULT_SEED, min=0, help="seed of the bootstrap (the same seed gives the same intervals)")
    level: float = setting(DEFAULT_LEVEL, min=0.5, max=0.999, help="confidence level of the intervals")


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value of ``b`` and ``c`` discordant pairs (module docstring)."""
    for name, value in (("b", b), ("c", c)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise ValueError(f"{name} must be a count (an integer >= 0), got {value!r}")
    n, low = int(b) + int(c), min(int(b), int(c))
    if n == 0 or 2 * low >= n:  # no discordant pair, or b == c: nothing favours either run
        return 1.0
    term, tail = 1, 1  # C(n, 0), then C(n, i) by C(n, i) = C(n, i - 1) * (n - i + 1) / i, exactly
    for i in range(1, low + 1):
        term = term * (n - i + 1) // i
        tail += term
    return min(1.0, float(Fraction(2 * tail, 2 ** n)))


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values, in the order given (module docstring)."""
    values = [float(p) for p in pvalues]
    if any(not 0 <= p <= 1 for p in values):
        raise ValueError(f"p-values must be in [0, 1], got {values}")
    m = len(values)
    adjusted = [0.0] * m
    running = 0.0
    for rank, index in enumerate(sorted(range(m), key=lambda i: values[i])):
        running = max(running, min(1.0, (m - rank) * values[index]))
        adjusted[index] = running
    return adjusted


@dataclass(frozen=True)
class PairedDifference:
    """``B - A`` of two runs' 0/1 scores on the same queries: the difference, its interval (``None`` with fewer
    than two queries), the discordant counts ``b`` (A only) and ``c`` (B only) and McNemar's exact p."""

    difference: float
    interval: tuple[float, float] | None
    b: int
    c: int
    p_value: float
    queries: int

    def to_json(self) -> dict:
        return {"difference": self.difference, "interval": list(self.interval) if self.interval else None,
                "a_only": self.b, "b_only": self.c, "p_value": self.p_value, "queries": self.queries}


def paired_difference(hits_a: Sequence[bool], hits_b: Sequence[bool], *, groups: Sequence[str] | None = None,
                      resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                      level: float = DEFAULT_LEVEL) -> PairedDifference:
    """The paired difference ``B - A`` of ``hits_b`` and ``hits_a`` (the same queries, in the same order).

    Without ``groups``: the micro difference (mean over queries). With ``groups`` (each query's relation): the
    macro difference (mean over relations of each relation's difference) with its stratified interval; ``b``,
    ``c`` and the p-value are the queries' in both cases (McNemar's test is about queries)."""
    a = np.asarray(hits_a, dtype=bool).reshape(-1)
    b = np.asarray(hits_b, dtype=bool).reshape(-1)
    if len(a) != len(b):
        raise ValueError(f"the runs have {len(a)} and {len(b)} queries; a paired comparison needs the same ones")
    delta = b.astype(np.float64) - a.astype(np.float64)
    options = {"resamples": resamples, "seed": seed, "level": level}
    if groups is None:
        difference = float(delta.mean()) if len(delta) else 0.0
        interval = bootstrap_mean_ci(delta, **options)
    else:
        labels = np.asarray(list(groups), dtype=object)
        if len(labels) != len(delta):
            raise ValueError(f"{len(delta)} queries but {len(labels)} groups")
        names = sorted(set(labels.tolist()))
        difference = float(np.mean([delta[labels == name].mean() for name in names])) if names else 0.0
        interval = bootstrap_macro_ci(delta, labels, **options)
    only_a, only_b = int((a & ~b).sum()), int((b & ~a).sum())
    return PairedDifference(difference, interval, only_a, only_b, mcnemar_exact(only_a, only_b), len(delta))
