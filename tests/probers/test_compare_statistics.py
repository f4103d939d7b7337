"""Paired comparisons: McNemar's exact p against scipy's binomial test, Holm against a direct implementation,
and the bootstrap intervals (paired, stratified macro, per group) against a direct numpy computation."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest

from medlama.core.intervals import bootstrap_group_cis, bootstrap_macro_ci, bootstrap_mean_ci
from medlama.analysis.statistics import holm, mcnemar_exact, paired_difference


def test_mcnemar_exact_is_scipys_two_sided_binomial_test_of_the_discordant_pairs():
    rng = np.random.default_rng(7)
    tables = [(int(b), int(c)) for b, c in rng.integers(0, 60, size=(300, 2))]
    tables += [(0, 1), (1, 0), (5, 5), (0, 25), (1200, 1290), (3, 400), (17, 17)]
    for b, c in tables:
        if b + c == 0:
            continue
        expected = binomtest(b, b + c, 0.5).pvalue  # two-sided by default
        assert mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-9), (b, c)
        assert mcnemar_exact(c, b) == mcnemar_exact(b, c)
    assert mcnemar_exact(0, 0) == 1.0  # no discordant pair: no evidence either way (scipy refuses n = 0)
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError):
            mcnemar_exact(bad, 3)


def _holm_direct(p):
    """Holm's procedure as the textbook states it: at level alpha, reject the sorted hypotheses in turn while
    p_(j) <= alpha / (m - j), stopping at the first that is not; a hypothesis' adjusted p is the smallest alpha
    at which it is rejected (found among the candidate levels (m - j) p_(j), and 1)."""
    m = len(p)
    order = list(np.argsort(p, kind="stable"))
    levels = sorted({min(1.0, (m - j) * p[order[j]]) for j in range(m)} | {1.0})

    def rejected(alpha):
        out = set()
        for j, index in enumerate(order):
            if (m - j) * p[index] > alpha:
                break
            out.add(index)
        return out

    return [next((alpha for alpha in levels if i in rejected(alpha)), 1.0) for i in range(m)]


def test_holm_matches_a_direct_implementation():
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.9]) == [1.0, 1.0]  # capped
    assert holm([]) == []
    rng = np.random.default_rng(3)
    for size in (1, 2, 5, 19):
        for _ in range(20):
            p = rng.random(size) ** 3
            adjusted = holm(p.tolist())
            assert adjusted == pytest.approx(_holm_direct(p))
            ranked = [adjusted[i] for i in np.argsort(p, kind="stable")]
            assert ranked == sorted(ranked) and all(a >= q for a, q in zip(adjusted, p))
    with pytest.raises(ValueError):
        holm([0.2, 1.5])


def _percentiles(means, level=0.95):
    return tuple(np.percentile(means, [100 * (1 - level) / 2, 100 * (1 + level) / 2]).tolist())


def test_paired_bootstrap_resamples_the_same_queries_for_both_runs():
    rng = np.random.default_rng(11)
    a, b = rng.random(300) < 0.4, rng.random(300) < 0.5
    found = paired_difference(a, b, resamples=500, seed=4)
    direct = np.random.default_rng(4)
    picks = direct.integers(0, 300, size=(500, 300))
    differences = b[picks].mean(axis=1) - a[picks].mean(axis=1)  # each run scored on the same resampled queries
    assert found.interval == pytest.approx(_percentiles(differences), rel=1e-12)
    assert found.difference == pytest.approx(b.mean() - a.mean())
    assert (found.b, found.c) == (int((a & ~b).sum()), int((b & ~a).sum()))
    assert found.p_value == pytest.approx(binomtest(found.b, found.b + found.c, 0.5).pvalue, rel=1e-9)
    assert paired_difference(a, b, resamples=500, seed=4) == found
    with pytest.raises(ValueError, match="same ones"):
        paired_difference(a, b[:-1])


def test_macro_interval_resamples_within_each_relation():
    rng = np.random.default_rng(5)
    groups = np.array(["r2"] * 40 + ["r1"] * 25 + ["r3"] * 60)
    values = (rng.random(len(groups)) < 0.3).astype(float)
    low, high = bootstrap_macro_ci(values, groups, resamples=400, seed=9)
    direct = np.random.default_rng(9)
    total = np.zeros(400)
    for name in ("r1", "r2", "r3"):  # sorted, one generator
        member = values[groups == name]
        total += member[direct.integers(0, len(member), size=(400, len(member)))].mean(axis=1)
    assert (low, high) == pytest.approx(_percentiles(total / 3), rel=1e-12)
    macro = np.mean([values[groups == g].mean() for g in ("r1", "r2", "r3")])
    assert low <= macro <= high
    assert bootstrap_macro_ci([1.0, 0.0], ["x", "y"]) is None  # no relation with two queries: nothing varies
    # the paired macro difference is the stratified interval of the per-query differences
    other = (rng.random(len(groups)) < 0.5).astype(float)
    paired = paired_difference(values, other, groups=groups, resamples=400, seed=9)
    assert paired.interval == bootstrap_macro_ci(other - values, groups, resamples=400, seed=9)
    assert paired.difference == pytest.approx(np.mean([other[groups == g].mean() - values[groups == g].mean()
                                                       for g in ("r1", "r2", "r3")]))


def test_group_intervals_are_each_groups_own_interval():
    groups = ["b", "a", "b", "a", "b", "c"]
    values = [1, 0, 0, 1, 1, 1]
    cis = bootstrap_group_cis(values, groups, seed=2)
    assert list(cis) == ["a", "b", "c"]
    assert cis["a"] == bootstrap_mean_ci([0, 1], seed=2) and cis["b"] == bootstrap_mean_ci([1, 0, 1], seed=2)
    assert cis["c"] is None
