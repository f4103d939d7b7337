"""Probing a multiple-choice config: each query ranked against its own choices by every method, the chance level
printed and recorded, and the choices kept through the shard store.

* A method's score of a name does not depend on the other names ranked with it (retrieval, mask-average,
  masked-likelihood), so a query's multiple-choice ranking is its ranking over the union of every query's
  choices, restricted to its own: checked for retrieval (which ranks per-query pools in one call), mask-average
  and masked-likelihood (one query at a time).
* ``medlama probe --config hard_mc`` with causal-likelihood on a tiny GPT-2: acc@1 is the argmax of the choices'
  scores, the chance level is printed and in ``results.json``, every query's scores in ``scores.parquet`` are
  over its own choices, and a candidate rule is refused for a multiple-choice config.
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from medlama.probers.pools import rank_choices
from medlama.probers.query_set import QuerySet

pytestmark = pytest.mark.usefixtures("one_thread")

NAMES = ["aspirin", "heparin", "insulin", "warfarin", "codeine", "morphine", "digoxin", "naproxen"]


def _choice_set() -> QuerySet:
    texts = ["headache may be treated by [Y] .", "[Y] thins the blood .", "diabetes needs [Y] daily .",
             "pain is relieved by [Y] ."]
    gold = [["aspirin"], ["heparin", "warfarin"], ["insulin"], ["morphine"]]
    choices = [["codeine", "aspirin", "insulin"], ["heparin", "digoxin", "naproxen", "aspirin"],
               ["warfarin", "insulin"], ["morphine", "codeine", "heparin", "naproxen", "digoxin"]]
    return QuerySet(ids=[f"q{i}" for i in range(4)], relations=["r", "r", "s", "s"], texts=texts, gold=gold,
                    candidates=sorted({n for row in choices for n in row}), rule="choices", choices=choices)


def _check_restricted(prober, queries):
    ranked = rank_choices(prober, queries, 10, all_scores=True)
    whole = prober.rank_scored(replace(queries, candidates=NAMES, choices=None, rule="evaluated"), top_k=10,
                               all_scores=True)
    for q, choices in enumerate(queries.choices):
        pool = whole.pools[q]
        score = {name: float(value) for name, value in zip(pool.candidates, pool.scores)}
        order = sorted(choices, key=lambda name: (-score[name], choices.index(name)))
        assert ranked.names[q] == order
        np.testing.assert_allclose(ranked.scores[q], [score[name] for name in order], rtol=1e-6, atol=1e-6)
        assert list(ranked.pools[q].candidates) == choices
        assert ranked.gold_ranks[q] == min(order.index(g) + 1 for g in queries.gold[q] if g in order)
    return ranked


def test_retrieval_and_mask_average_rank_each_query_among_its_choices(make_tiny_bert):
    from medlama.probers.mask_average import MaskAverageProber, MaskAverageSettings
    from medlama.probers.masked_likelihood import MaskedLikelihoodProber, MaskedLikelihoodSettings
    from medlama.probers.retrieval import RetrievalProber, RetrievalSettings

    queries = _choice_set()
    retrieval = RetrievalProber(str(make_tiny_bert("choices-encoder")), RetrievalSettings(distance="cosine"))
    assert retrieval.ranks_choices
    _check_restricted(retrieval, queries)
    mlm = str(make_tiny_bert("choices-mlm", mlm=True))
    mask_average = MaskAverageProber(mlm, MaskAverageSettings())
    assert not mask_average.ranks_choices  # one query at a time, its choices as its pool
    _check_restricted(mask_average, queries)
    _check_restricted(MaskedLikelihoodProber(mlm, MaskedLikelihoodSettings()), queries)  # the PLL of each statement


def test_probe_of_hard_mc_with_causal_likelihood(medlama_dir, tmp_path, capsys):
    from tiny_causal import save_causal  # tests/helpers

    from medlama.cli import main
    from medlama.probers.causal.prober import CausalLikelihoodProber, LikelihoodSettings
    from medlama.probers.pools import one_choice_pool
    from medlama.runs.queries import load_medlama_queries

    gpt2 = save_causal(tmp_path / "gpt2", "gpt2", positions=512)
    out = tmp_path / "probe"
    args = ["probe", "--data", str(medlama_dir), "--config", "hard_mc", "--relations", "may_treat", "occurs_after",
            "--limit", "3", "--method", "causal-likelihood", "--model", str(gpt2), "--device", "cpu"]
    assert main([*args, "--candidates", "relation"]) == 2
    assert "multiple-choice config" in capsys.readouterr().err
    assert main([*args, "--log-all-scores", "--out", str(out)]) == 0
    assert "chance level acc@1 10.00%" in capsys.readouterr().out
    (run,) = json.loads((out / "results.json").read_text())
    assert run["data"]["candidates"]["rule"] == "choices"
    assert run["data"]["candidates"]["chance_level"] == pytest.approx(0.1)
    queries = load_medlama_queries(medlama_dir, "hard_mc", relations=["may_treat", "occurs_after"]
                                   ).limit_per_relation(3)
    scores = CausalLikelihoodProber(str(gpt2), LikelihoodSettings()).scores
    lines = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert [line["id"] for line in lines] == queries.ids
    for q, line in enumerate(lines):
        expected = scores(one_choice_pool(queries, q))[0]
        assert line["predictions"][0] == queries.choices[q][int(np.argmax(expected))]
        assert line["hit@1"] == (line["predictions"][0] in queries.gold[q])
    import pandas as pd

    table = pd.read_parquet(out / "scores.parquet")
    for q, query_id in enumerate(queries.ids):
        assert table[table["id"] == query_id]["candidate"].tolist() == queries.choices[q]
