"""The sample log of a probe: each ``predictions.jsonl`` row carries the text fed to the model, the top scores,
the gold answer's rank and score, and ``--log-all-scores`` writes every candidate's score to
``scores.parquet``. Checked against an exhaustive ranking of the prober's own full score matrix, and the
Parquet's ranks recompute the run's acc@k."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from medlama.cli import main
from medlama.runs.queries import QuerySource, load_queries
from medlama.probers.registry import make_prober

from probe_outputs import predictions  # tests/helpers: per-query rows of predictions.jsonl

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread (tests/conftest.py)


def exhaustive(scores: np.ndarray, candidates: list[str], gold: list[list[str]]) -> list[tuple[int | None, float]]:
    """The best gold rank (1-based) and its score by sorting every candidate (ties: candidate order)."""
    out = []
    for row, answers in zip(scores, gold):
        order = list(np.argsort(-row, kind="stable"))
        ranks = [order.index(candidates.index(a)) + 1 for a in answers if a in candidates]
        best = min(ranks) if ranks else None
        out.append((best, float(row[order[best - 1]]) if best else None))
    return out


def test_causal_likelihood_rows_and_all_scores(tiny_gpt2, medlama_tiny, tmp_path):
    out = tmp_path / "run"
    assert main(["probe", "--data", str(medlama_tiny), "--config", "full", "--model", str(tiny_gpt2),
                 "--method", "causal-likelihood", "--log-all-scores", "--out", str(out)]) == 0
    (result,) = json.loads((out / "results.json").read_text())
    rows = predictions(out, result["label"])
    assert result["settings"]["score"] == "sum of token log-probabilities (answer and suffix)"
    assert result["extra"]["all_scores"] == "scores.parquet"

    queries = load_queries(QuerySource(data=str(medlama_tiny), config="full"))
    full = make_prober("causal-likelihood", tiny_gpt2).scores(queries)  # the reference: every score
    expected = exhaustive(full, list(queries.candidates), queries.gold)
    assert [row["id"] for row in rows] == queries.ids
    for row, text, scores, (rank, score) in zip(rows, queries.texts, full, expected):
        assert row["input"].endswith(text.split("[Y]")[1]) and "[Y]" in row["input"]
        assert len(row["scores"]) == len(row["predictions"])
        assert row["scores"] == [scores[list(queries.candidates).index(n)] for n in row["predictions"]]
        assert row["scores"] == sorted(row["scores"], reverse=True)
        assert row["gold_rank"] == rank and row["gold_score"] == score
        assert row["hit@1"] == (rank == 1)

    table = pd.read_parquet(out / "scores.parquet")
    assert list(table.columns) == ["run", "id", "relation", "candidate", "score", "rank", "gold_answers"]
    assert dict(zip(table["id"], table["gold_answers"])) == {q: len(set(g)) for q, g in zip(queries.ids, queries.gold)}
    assert len(table) == len(queries) * len(queries.candidates)
    gold = {qid: set(answers) for qid, answers in zip(queries.ids, queries.gold)}
    best = table[[c in gold[q] for q, c in zip(table["id"], table["candidate"])]].groupby("id")["rank"].min()
    ranks = np.array([best.get(qid, math.inf) for qid in queries.ids], dtype=float)
    for k in (1, 5, 10):
        assert float(np.mean(ranks <= k)) == pytest.approx(result["metrics"][f"acc@{k}"], rel=1e-12)
    mrr_rows = np.mean([1 / row["gold_rank"] if row["gold_rank"] else 0.0 for row in rows])
    assert float(np.mean(1 / ranks)) == pytest.approx(mrr_rows, rel=1e-12)
    picked = table[table["id"] == queries.ids[0]].set_index("candidate")["score"]
    assert [picked[c] for c in queries.candidates] == pytest.approx(list(full[0]), rel=1e-12)


def test_gold_ranks_beyond_the_top_k_come_from_the_whole_pool(tiny_gpt2, medlama_tiny):
    from medlama.runs.workflow import probe

    from medlama.probers.causal.prober import LikelihoodSettings

    queries = load_queries(QuerySource(data=str(medlama_tiny), config="full"))
    prober = make_prober("causal-likelihood", tiny_gpt2, LikelihoodSettings(search="exhaustive"))
    expected = exhaustive(prober.scores(queries), list(queries.candidates), queries.gold)
    rows = list(probe(prober, queries, top_k=2, ks=(1, 2)).prediction_rows())
    assert [(row["gold_rank"], row["gold_score"]) for row in rows] == expected
    assert any(rank > 2 for rank, _ in expected)  # the data has gold answers outside the top 2
    # best-first (the default): the exact rank over the whole pool; with --rank-cutoff, exact up to it, null beyond
    rows = list(probe(make_prober("causal-likelihood", tiny_gpt2), queries, top_k=2, ks=(1, 2)).prediction_rows())
    assert [row["gold_rank"] for row in rows] == [rank for rank, _ in expected]
    assert [row["gold_score"] for row in rows] == pytest.approx([score for _, score in expected], rel=1e-5)
    bounded = make_prober("causal-likelihood", tiny_gpt2, LikelihoodSettings(rank_cutoff=2))
    rows = list(probe(bounded, queries, top_k=2, ks=(1, 2)).prediction_rows())
    assert [row["gold_rank"] for row in rows] == [rank if rank <= 2 else None for rank, _ in expected]


def test_generation_methods_refuse_all_scores_before_loading(tmp_path, capsys):
    code = main(["probe", "--model", str(tmp_path / "no-such-model"), "--method", "causal-generate",
                 "--log-all-scores", "--out", str(tmp_path / "out")])
    assert code == 2
    err = capsys.readouterr().err
    assert "causal-generate" in err and "log all scores" in err and "no-such-model" not in err


def test_constrained_rows_rank_the_gold_among_its_answers(tiny_gpt2, medlama_tiny, tmp_path):
    """A method that does not score the pool ranks the gold among the names it returned (null beyond)."""
    from medlama.runs.workflow import probe

    queries = load_queries(QuerySource(data=str(medlama_tiny), config="full"))
    result = probe(make_prober("causal-constrained", tiny_gpt2, {"num_beams": 3}), queries, top_k=3, ks=(1, 3))
    for row, gold in zip(result.prediction_rows(), queries.gold):
        at = [i + 1 for i, name in enumerate(row["predictions"]) if name in gold]
        assert row["gold_rank"] == (at[0] if at else None)
        assert row["gold_score"] == (row["scores"][at[0] - 1] if at else None)
        assert all(isinstance(s, float) and math.isfinite(s) for s in row["scores"])


def test_retrieval_rows_rank_the_gold_among_the_whole_pool(make_tiny_bert, medlama_tiny):
    """Retrieval: scores are the cosines of the query and name vectors, the gold ranked over every candidate
    (the exhaustive float64 score matrix as reference), and the Parquet's pool has every candidate once."""
    from medlama.runs.workflow import probe
    from medlama.probers.retrieval import RetrievalProber, RetrievalSettings

    queries = load_queries(QuerySource(data=str(medlama_tiny), config="full"))
    prober = RetrievalProber(make_tiny_bert("log-bert"), RetrievalSettings(distance="cosine"))
    layer = prober.encoder.layers[0]
    names = prober.encoder.encode(queries.candidates, 25)[layer]
    texts = prober.encoder.encode(queries.with_mask(prober.encoder.mask_token), 50)[layer]
    normed = [v / np.linalg.norm(v, axis=1, keepdims=True) for v in (names.astype(np.float64),
                                                                     texts.astype(np.float64))]
    full = normed[1] @ normed[0].T
    expected = exhaustive(full, list(queries.candidates), queries.gold)
    result = probe(prober, queries, top_k=2, ks=(1, 2), all_scores=True)
    rows = list(result.prediction_rows())
    assert result.settings["score"] == "cosine similarity"
    assert [row["gold_rank"] for row in rows] == [rank for rank, _ in expected]
    assert [row["gold_score"] for row in rows] == pytest.approx([score for _, score in expected], rel=1e-6)
    for row, pool in zip(rows, result.ranking.pools):
        assert sorted(pool.ranks.tolist()) == list(range(1, len(queries.candidates) + 1))
        assert [pool.candidates[j] for j in np.argsort(pool.ranks)[:2]] == row["predictions"]
