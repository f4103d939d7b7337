"""Bootstrap intervals: reproducible, degenerate cases, and agreement with the normal approximation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from medlama.core.intervals import bootstrap_mean_ci, bootstrap_shares_ci


def test_interval_matches_the_normal_approximation_of_a_proportion():
    hits = np.zeros(2000)
    hits[:600] = 1  # p = 0.3
    low, high = bootstrap_mean_ci(hits, resamples=2000, seed=1)
    half = 1.96 * math.sqrt(0.3 * 0.7 / 2000)
    assert low == pytest.approx(0.3 - half, abs=0.004)
    assert high == pytest.approx(0.3 + half, abs=0.004)


def test_same_seed_same_interval_and_degenerate_inputs():
    values = np.random.default_rng(3).random(50)
    assert bootstrap_mean_ci(values, seed=5) == bootstrap_mean_ci(values, seed=5)
    assert bootstrap_mean_ci(values, seed=5) != bootstrap_mean_ci(values, seed=6)
    assert bootstrap_mean_ci([1.0, 1.0, 1.0]) == (1.0, 1.0)
    assert bootstrap_mean_ci([0.5]) is None and bootstrap_mean_ci([]) is None


def test_share_intervals_contain_each_share():
    labels = ["U"] * 30 + ["C"] * 50 + ["M"] * 20
    intervals = bootstrap_shares_ci(labels, ["U", "C", "M"])
    for category, share in {"U": 0.3, "C": 0.5, "M": 0.2}.items():
        low, high = intervals[category]
        assert low < share < high
