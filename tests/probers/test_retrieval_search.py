"""The retrieval prober's search (:func:`medlama.probers.faiss_search.rank_pool`) ranks the top and the gold
exactly as the whole float64 score matrix does (:func:`score_matrix` rows through ``Ranking.from_pool``, the
exhaustive computation it replaces): the same top lists, the same gold ranks, ties by pool order, with duplicate
vectors, several golds per query, golds outside the pool and names nearer than the gold by less than float32
can tell apart. The GPU's way (``torch.topk``) is run here on the CPU."""

from __future__ import annotations

import numpy as np
import pytest

from medlama.core.errors import MedlamaInputError
from medlama.probers.faiss_search import rank_pool, score_matrix, search
from medlama.probers.ranking import Ranking, gold_indices


def pool(seed: int = 0, names: int = 400, queries: int = 120, dim: int = 24):
    rng = np.random.default_rng(seed)
    name_vectors = rng.normal(size=(names, dim)).astype(np.float32)
    name_vectors[50:60] = name_vectors[40:50]  # exact duplicates: ties broken by pool order
    query_vectors = rng.normal(size=(queries, dim)).astype(np.float32)
    query_vectors[:10] = name_vectors[40:50]  # a query on a duplicated name: equal scores at the very top
    # names nearer the query than its gold by about float32's rounding: only float64 tells them apart
    for q in range(10, 30):
        near = name_vectors[100 + q]
        for step in range(3):
            near = np.nextafter(near, near + 1, dtype=np.float32)  # one float32 step further each time
            name_vectors[200 + 3 * q + step] = near
    candidates = [f"name {i}" for i in range(names)]
    gold = []
    for q in range(queries):
        picks = rng.choice(names, size=1 + q % 3, replace=False)
        answers = [candidates[i] for i in picks] + (["not in the pool"] if q % 7 == 0 else [])
        if 10 <= q < 30:
            answers = [candidates[100 + q]]
        gold.append(answers if q % 11 else ["not in the pool"])
    return name_vectors, query_vectors, candidates, gold


def exhaustive(name_vectors, query_vectors, candidates, gold, top, distance):
    return Ranking.from_pool(gold, candidates, score_matrix(name_vectors, query_vectors, distance), top)


@pytest.mark.parametrize("distance", ["l2", "cosine"])
def test_faiss_top_and_exact_gold_ranks_as_the_whole_matrix(distance):
    names, queries, candidates, gold = pool()
    found = rank_pool(names, queries, 10, distance, gold_indices(gold, candidates))
    top = [[int(j) for j in row] for row in search(names, queries, 10, distance)]
    reference = exhaustive(names, queries, candidates, gold, top, distance)
    ranked = Ranking.from_ranked(candidates, found.top, found.top_scores, found.gold_ranks, found.gold_scores)
    assert found.top == top and ranked.names == reference.names
    assert ranked.gold_ranks == reference.gold_ranks
    assert any(rank is not None and rank > 10 for rank in ranked.gold_ranks)
    assert np.allclose(np.array(ranked.scores, dtype=float), np.array(reference.scores, dtype=float), rtol=1e-12,
                       atol=1e-12)
    assert [s is None for s in ranked.gold_scores] == [s is None for s in reference.gold_scores]
    assert np.allclose([s for s in ranked.gold_scores if s is not None],
                       [s for s in reference.gold_scores if s is not None], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("distance", ["l2", "cosine"])
def test_the_gpu_way_ranks_exactly_too(distance):
    names, queries, candidates, gold = pool(seed=1)
    found = rank_pool(names, queries, 10, distance, gold_indices(gold, candidates), top_by="torch")
    scores = score_matrix(names, queries, distance)
    exact_top = [np.lexsort((np.arange(len(row)), -row))[:10].tolist() for row in scores]
    assert found.top == exact_top  # float64 order, ties by pool order
    reference = exhaustive(names, queries, candidates, gold, exact_top, distance)
    assert found.gold_ranks == reference.gold_ranks


def test_an_unknown_top_by_is_refused():
    names, queries, candidates, gold = pool()
    with pytest.raises(MedlamaInputError, match="unknown top_by 'gpu'"):
        rank_pool(names, queries, 5, "l2", gold_indices(gold, candidates), top_by="gpu")


@pytest.mark.parametrize("side", ["right", "left"])
def test_batches_are_padded_as_the_tokenizer_pads_them(make_tiny_bert, side):
    """The encoder pads its length-sorted batches itself, into the arrays ``tokenizer.pad`` gives."""
    from medlama.probers.encoding import Encoder

    encoder = Encoder(make_tiny_bert("padded-encoder"), device="cpu")
    encoder.tokenizer.padding_side = side
    texts = ["aspirin may treat [MASK] .", "a", "the longest text of these , cut at eight tokens here", ""]
    encoded = encoder.tokenizer(texts, truncation=True, max_length=8, add_special_tokens=True)
    rows = np.array([2, 0, 3])
    ours = encoder._padded(encoded, rows)
    theirs = encoder.tokenizer.pad({key: [encoded[key][i] for i in rows] for key in encoded.keys()},
                                   return_tensors="np")
    assert set(ours) == set(theirs)
    for key in ours:
        assert ours[key].dtype == np.int64 and np.array_equal(ours[key], theirs[key]), key
