"""Confidence intervals by the percentile bootstrap over queries (or records), seeded for reproducibility.

acc@k is a mean of per-query hits, and a UCM share a mean of per-record indicators, so one resampling of
the items gives both. Items are resampled with replacement ``resamples`` times; the interval is the
``(1 - level) / 2`` and ``(1 + level) / 2`` percentiles of the resampled means. With one item (or none)
there is no interval: ``None``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

DEFAULT_RESAMPLES = 1000
DEFAULT_SEED = 0
DEFAULT_LEVEL = 0.95


def bootstrap_mean_ci(values: Sequence[float] | np.ndarray, *, resamples: int = DEFAULT_RESAMPLES,
                      seed: int = DEFAULT_SEED, level: float = DEFAULT_LEVEL) -> tuple[float, float] | None:
    """``(low, high)`` of the mean of ``values`` (each a per-item score such as a 0/1 hit)."""
    items = np.asarray(values, dtype=np.float64).reshape(-1)
    if len(items) < 2:
        return None
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    rng = np.random.default_rng(seed)
    # Draw in chunks so that 1,000 resamples of 20,000 queries stay within a few MB.
    means = np.empty(resamples)
    chunk = max(1, 2_000_000 // len(items))
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        picks = rng.integers(0, len(items), size=(stop - start, len(items)))
        means[start:stop] = items[picks].mean(axis=1)
    low, high = np.percentile(means, [100 * (1 - level) / 2, 100 * (1 + level) / 2])
    return float(low), float(high)


def bootstrap_shares_ci(labels: Sequence[str], categories: Sequence[str], **options) -> dict[str, tuple[float, float] | None]:
    """Interval of each category's share among ``labels`` (e.g. the U, C and M shares of UCM records)."""
    array = np.asarray(list(labels), dtype=object)
    return {category: bootstrap_mean_ci((array == category).astype(np.float64), **options) for category in categories}
