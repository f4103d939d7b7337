""":func:`medlama.probers.faiss_search.rank_pool` against an exhaustive float64 computation written here: every
query scored against every name in float64 (:func:`score_matrix`), the top taken from those scores (``torch``)
or from FAISS, and the gold's rank counted over the whole row, ties by pool order. Seeded random pools hold
the cases where a float32 search can go wrong: names that tie the gold exactly (duplicates before and after it
in the pool), names nearer or farther than the gold by a few float32 steps (within the float32 product's
rounding bound, so only the float64 rescore decides them), golds outside the pool, queries with no gold, several
blocks of queries, and more picked and unsure pairs than one chunk of the CPU's pair sums."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from medlama.probers import faiss_search
from medlama.probers.faiss_search import rank_pool, score_matrix, search


def hard_pool(seed: int, names: int, queries: int, dim: int):
    """Random vectors with exact ties and float32 near-ties around each query's gold."""
    rng = np.random.default_rng(seed)
    name_vectors = rng.normal(size=(names, dim)).astype(np.float32)
    query_vectors = rng.normal(size=(queries, dim)).astype(np.float32)
    gold_at = [[] if q % 13 == 0 else sorted(rng.choice(names, size=1 + q % 3, replace=False).tolist())
               for q in range(queries)]  # every 13th query: no gold in the pool
    golds = {j for answers in gold_at for j in answers}
    spare = iter(rng.permutation([j for j in range(names) if j not in golds]).tolist())
    for q, answers in enumerate(gold_at):
        if not answers or q % 2:
            continue
        # around the first gold: exact duplicates (earlier or later in the pool) and names moved from it by a
        # few float32 steps to a thousand (gaps far inside the float32 product's rounding bound, far outside
        # float64's)
        base = name_vectors[answers[0]].copy()
        for j in [next(spare, None) for _ in range(4)]:
            if j is None:
                break
            kind = rng.integers(0, 3)
            step = np.float32(10.0 ** rng.uniform(-6, -4) * (1 if kind == 1 else -1))
            name_vectors[j] = base if kind == 0 else base + step * rng.normal(size=dim).astype(np.float32)
        if q % 4 == 0:  # the query on its gold: the gold (and its duplicates) at the very top
            query_vectors[q] = base
    return name_vectors, query_vectors, gold_at


def exhaustive_gold_ranks(scores: np.ndarray, top: list[list[int]], gold_at: list[list[int]]):
    """The best gold's rank and score per query over the whole float64 row: its place in ``top``, else after the
    top, counting every other name that scores higher, or equal and earlier in the pool."""
    ranks, gold_scores = [], []
    positions = np.arange(scores.shape[1])
    for row, picked, golds in zip(scores, top, gold_at):
        inside = [place for place, j in enumerate(picked) if j in golds]
        if inside:
            ranks.append(inside[0] + 1)
            gold_scores.append(float(row[picked[inside[0]]]))
            continue
        if not golds:
            ranks.append(None)
            gold_scores.append(None)
            continue
        rest = np.ones(len(row), dtype=bool)
        rest[picked] = False
        best = min((int(np.count_nonzero(rest & ((row > row[g]) | ((row == row[g]) & (positions < g))))), g)
                   for g in golds)
        ranks.append(len(picked) + 1 + best[0])
        gold_scores.append(float(row[best[1]]))
    return ranks, gold_scores


def log_sum_exp(row: np.ndarray) -> float:
    top = row.max()
    return float(top + np.log(np.exp(row - top).sum()))


@pytest.mark.parametrize("distance", ["l2", "cosine"])
@pytest.mark.parametrize("top_by", ["faiss", "torch"])
@pytest.mark.parametrize("seed, names, queries, dim", [(0, 700, 90, 37), (1, 1500, 60, 384)])
def test_rank_pool_equals_the_exhaustive_float64_ranking(monkeypatch, distance, top_by, seed, names, queries, dim):
    # a few queries per block: several blocks, each with its own picked and unsure pairs
    monkeypatch.setitem(faiss_search.BLOCK_ELEMENTS, "cpu", names * 25)
    name_vectors, query_vectors, gold_at = hard_pool(seed, names, queries, dim)
    found = rank_pool(name_vectors, query_vectors, 10, distance, gold_at, top_by=top_by)
    scores = score_matrix(name_vectors, query_vectors, distance)
    if top_by == "torch":  # the float64 order, ties by pool order
        top = [np.lexsort((np.arange(len(row)), -row))[:10].tolist() for row in scores]
    else:
        top = [[int(j) for j in row] for row in search(name_vectors, query_vectors, 10, distance)]
    assert found.top == top
    # equal but for the float64 rounding of the sums (scores of about 400 cancelling to 0: 1e-12 apart)
    np.testing.assert_allclose(found.top_scores, np.take_along_axis(scores, np.array(top), 1), rtol=1e-12,
                               atol=1e-10)
    ranks, gold_scores = exhaustive_gold_ranks(scores, top, gold_at)
    assert found.gold_ranks == ranks
    assert [s is None for s in found.gold_scores] == [s is None for s in gold_scores]
    np.testing.assert_allclose([s for s in found.gold_scores if s is not None],
                               [s for s in gold_scores if s is not None], rtol=1e-12, atol=1e-10)
    # the cases are there: golds deep in the pool, and golds tied or nearly tied with another name
    assert sum(rank is not None and rank > 10 for rank in ranks) > queries // 2
    tied = [any(np.isclose(row[j], row[golds[0]], rtol=1e-6, atol=0) for j in range(len(row)) if j != golds[0])
            for row, golds in zip(scores, gold_at) if golds]
    assert sum(tied) >= queries // 4
    # the softmax's normaliser: float32 keys outside the top, within the documented 1e-6 of the float64 one
    np.testing.assert_allclose(found.log_normalizers, [log_sum_exp(row) for row in scores], rtol=1e-6)


def test_the_cpu_pair_sums_are_the_torch_sums_bit_for_bit():
    """On a CPU numpy sums the pairs (a chunk at a time); on other devices torch does (the whole set at once):
    the same order, so the same bits, whatever the chunk or the number of pairs."""
    rng = np.random.default_rng(3)
    for dim in (1, 2, 37, 384, 385):
        left, right = rng.normal(size=(50, dim)), rng.normal(size=(80, dim)) * 1e3
        left_at, right_at = rng.integers(0, 50, 700), rng.integers(0, 80, 700)
        ours = faiss_search._dot_pairs(left, right, left_at, right_at)
        torch_sums = faiss_search._dot(torch.from_numpy(left)[left_at], torch.from_numpy(right)[right_at]).numpy()
        assert np.array_equal(ours, torch_sums)
        np.testing.assert_allclose(ours, np.einsum("ij,ij->i", left[left_at], right[right_at]), rtol=1e-9,
                                   atol=1e-9 * dim)


def test_the_normaliser_is_torch_logsumexp_bit_for_bit():
    """The in-place log-sum-exp that skips the subnormal exponentials gives torch.logsumexp's bits, on rows whose
    scores spread far (most terms underflow), rows with ``-inf`` (the top, summed apart), and rows all ``-inf``."""
    generator = torch.Generator().manual_seed(0)
    keys = torch.randn(64, 3000, generator=generator) * torch.logspace(-2, 3, 64)[:, None]
    keys[5, :40] = float("-inf")
    keys[7] = float("-inf")
    keys[9, 100] = 1e30
    expected = torch.logsumexp(keys, dim=1)
    ours = faiss_search._log_sum_exp_(keys.clone())
    assert torch.equal(ours, expected)
    assert ours[7] == float("-inf")


@pytest.mark.usefixtures("one_thread")  # the benchmark's --threads 1 then changes nothing
def test_the_search_benchmark_checks_its_rankings(capsys):
    """``benchmarks/bench_retrieval_search.py`` runs and checks every ``rank_pool`` (today's and, with ``--before``,
    an earlier commit's) against the whole matrix; speed is measured by the benchmark only, never asserted."""
    import subprocess

    from scripts import BENCHMARKS as benchmarks, script  # tests/helpers

    bench_retrieval_search = script("bench_retrieval_search")
    flags = ["--queries", "40", "--names", "70", "--dim", "12", "--repeat", "1", "--threads", "1", "--clock", "cpu"]
    in_git = subprocess.run(["git", "-C", str(benchmarks), "rev-parse", "HEAD"], capture_output=True).returncode == 0
    assert bench_retrieval_search.main(flags + (["--before", "HEAD"] if in_git else [])) == 0
    printed = capsys.readouterr().out
    assert "cpu seconds, best of 1" in printed and "top lists and gold ranks identical: True" in printed
    assert ("rank_pool HEAD" in printed) == in_git
