"""Confidence intervals by the percentile bootstrap over queries (or records), seeded for reproducibility.

acc@k is a mean of per-query hits, and a UCM share a mean of per-record indicators, so one resampling of
the items gives both. Items are resampled with replacement ``resamples`` times; the interval is the
``(1 - level) / 2`` and ``(1 + level) / 2`` percentiles of the resampled means. With one item (or none)
there is no interval: ``None``.

A macro average (the mean over relations of each relation's mean) gets its interval from the *stratified*
bootstrap (:func:`bootstrap_macro_ci`): each relation's items are resampled within the relation, so every
resample keeps every relation and its size, as the macro average is a mean over that fixed set of relations.
:func:`bootstrap_group_cis` gives each group (relation) its own interval. A paired comparison of two runs on
the same items is the interval of the per-item differences (:mod:`medlama.analysis.statistics`): one
resampling of the items for both runs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

DEFAULT_RESAMPLES = 1000
#: The most resamples a command takes: its intervals' Monte Carlo error is far below their width long before,
#: and each interval keeps one float per resample (1e8 resamples took 2.8 GB on three queries).
MAX_RESAMPLES = 100_000
DEFAULT_SEED = 0
DEFAULT_LEVEL = 0.95


def bootstrap_mean_ci(values: Sequence[float] | np.ndarray, *, resamples: int = DEFAULT_RESAMPLES,
                      seed: int = DEFAULT_SEED, level: float = DEFAULT_LEVEL) -> tuple[float, float] | None:
    """``(low, high)`` of the mean of ``values`` (each a per-item score such as a 0/1 hit)."""
    items = np.asarray(values, dtype=np.float64).reshape(-1)
    if len(items) < 2:
        return None
    _check(level)
    means = _resampled_means(np.random.default_rng(seed), items, resamples)
    low, high = np.percentile(means, [100 * (1 - level) / 2, 100 * (1 + level) / 2])
    return float(low), float(high)


def _resampled_means(rng: np.random.Generator, items: np.ndarray, resamples: int) -> np.ndarray:
    """The means of ``resamples`` resamples of ``items`` (with replacement, ``len(items)`` each) drawn by ``rng``."""
    # Draw in chunks so that 1,000 resamples of 20,000 queries stay within a few MB.
    means = np.empty(resamples)
    chunk = max(1, 2_000_000 // len(items))
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        picks = rng.integers(0, len(items), size=(stop - start, len(items)))
        means[start:stop] = items[picks].mean(axis=1)
    return means


def _check(level: float) -> None:
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")


def bootstrap_macro_ci(values: Sequence[float] | np.ndarray, groups: Sequence[str], *,
                       resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                       level: float = DEFAULT_LEVEL) -> tuple[float, float] | None:
    """``(low, high)`` of the mean over groups of each group's mean of ``values`` (macro acc@k with the
    relations as ``groups``), by the stratified bootstrap: one generator seeded ``seed`` draws, for each group
    in sorted order, ``resamples`` resamples of that group's items (with replacement, the group's size).
    ``None`` when no group has two items (nothing varies)."""
    items = np.asarray(values, dtype=np.float64).reshape(-1)
    labels = np.asarray(list(groups), dtype=object)
    if len(labels) != len(items):
        raise ValueError(f"{len(items)} values but {len(labels)} groups")
    _check(level)
    names = sorted(set(labels.tolist()))
    if not names or all(int((labels == name).sum()) < 2 for name in names):
        return None
    rng = np.random.default_rng(seed)
    total = np.zeros(resamples)
    for name in names:
        total += _resampled_means(rng, items[labels == name], resamples)
    low, high = np.percentile(total / len(names), [100 * (1 - level) / 2, 100 * (1 + level) / 2])
    return float(low), float(high)


def bootstrap_group_cis(values: Sequence[float] | np.ndarray, groups: Sequence[str],
                        **options) -> dict[str, tuple[float, float] | None]:
    """``{group: (low, high) or None}``: :func:`bootstrap_mean_ci` of each group's items (groups sorted; each
    group's interval seeded alike, so it does not depend on which other groups there are)."""
    items = np.asarray(values, dtype=np.float64).reshape(-1)
    labels = np.asarray(list(groups), dtype=object)
    if len(labels) != len(items):
        raise ValueError(f"{len(items)} values but {len(labels)} groups")
    return {name: bootstrap_mean_ci(items[labels == name], **options) for name in sorted(set(labels.tolist()))}


def bootstrap_shares_ci(labels: Sequence[str], categories: Sequence[str], **options) -> dict[str, tuple[float, float] | None]:
    """Interval of each category's share among ``labels`` (e.g. the U, C and M shares of UCM records)."""
    array = np.asarray(list(labels), dtype=object)
    return {category: bootstrap_mean_ci((array == category).astype(np.float64), **options) for category in categories}
