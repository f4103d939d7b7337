"""Best-first search for ``causal-likelihood`` (sum reduction) against the exhaustive ranking: the same top-k
names in the same order (ties included: equal scores in pool order), scores equal up to float32 rounding,
the gold's rank equal up to the cut-off; best-first refused with the mean reduction, before any model loads.
(``--search`` on the command line and in ``results.json``: ``test_causal_cli.py``.)

Models are the tiny GPT-2 and Llama of ``tiny_causal`` (random weights spread wide, so no near-ties; a flat
head for exact ties; a tiny GPT-2 trained a few seconds on the test sentences for a peaked distribution).
The reference is ``rank_unique`` over every candidate's exhaustive score (``CausalLikelihoodProber.scores``).
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from medlama.cli import main
from medlama.core.errors import MedlamaInputError
from medlama.probers.mlm import rank_unique
from medlama.probers.query_set import QuerySet

import cv_inputs  # tests/helpers (pytest pythonpath): a MedLAMA-shaped folder of 6 queries
from fp32 import fp32_sum_atol  # tests/helpers
from tiny_causal import NAMES, SENTENCES, save_causal  # tests/helpers

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread (tests/conftest.py)

#: Names sharing token prefixes (the trie branches), a repeat, and a prefix of another name.
POOL = [*NAMES, "pain", "asthma attack cough", "diabetes mellitus kidney", "back pain fever", "kidney",
        "the cold", "headache and fever", "insulin", "aspirin", "cough and fever", "chronic asthma"]
WORDS = sorted({word for sentence in SENTENCES for word in sentence.split()})


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def tiny_causal(request, tmp_path_factory):
    return save_causal(tmp_path_factory.mktemp(f"bf-{request.param}"), request.param)


def random_queries(seed: int, count: int) -> QuerySet:
    """``count`` cloze queries of random words (some with nothing after the slot, some starting with it),
    each with a random pool subset's gold; the pool is ``POOL`` shuffled by the seed."""
    rng = random.Random(seed)
    pool = rng.sample(POOL, len(POOL))
    texts, gold = [], []
    for _ in range(count):
        left = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 5)))
        right = rng.choice(["", " .", " may cause cough .", " and headache ."])
        texts.append(f"{left} [Y]{right}".strip())
        gold.append(rng.sample(pool, rng.randint(1, 2)))
    return QuerySet([f"q{i}" for i in range(count)], ["rel"] * count, texts, gold, pool, "random")


def reference(prober, queries: QuerySet):
    """Per query: every distinct name by exhaustive score, ties in pool order, and the name -> score map."""
    out = []
    for row in prober.scores(queries):
        scored = list(zip(queries.candidates, row))
        out.append((rank_unique(scored, len(scored)), dict(scored)))
    return out


def gold_rank(order: list[str], scores: dict, gold: list[str]) -> int | None:
    place = next((i for i, name in enumerate(order) if name in gold), None)
    return None if place is None or not np.isfinite(scores[order[place]]) else place + 1


def check_equal(prober, queries: QuerySet, ks=(1, 5, 10), cutoff: int | None = 12) -> None:
    expected = reference(prober, queries)
    terms = 16  # the most tokens any row here scores (name + suffix), for the float32 tolerance
    for k in ks:
        for result, (order, scores), gold, text in zip(prober.best_first(queries, k, cutoff=cutoff), expected,
                                                        queries.gold, queries.texts):
            assert result.names == order[:k], (text, k)
            want = [scores[name] for name in result.names]
            assert result.scores == pytest.approx(want, abs=fp32_sum_atol(want, terms=terms) if want else 0)
            rank = gold_rank(order, scores, gold)
            assert result.gold_rank == (rank if rank is not None and (cutoff is None or rank <= max(k, cutoff))
                                        else None), text
            best = max(scores[name] for name in gold)
            assert result.gold_score == pytest.approx(best, abs=fp32_sum_atol(best, terms=terms))


def test_best_first_equals_exhaustive_on_random_queries(tiny_causal):
    from medlama.probers.causal.prober import CausalLikelihoodProber, LikelihoodSettings

    prober = CausalLikelihoodProber(tiny_causal, LikelihoodSettings(search="exhaustive", batch_size=8))
    for seed in range(3):
        check_equal(prober, random_queries(seed, 8))
    # no cut-off (the default): the gold's rank is the exhaustive one however deep it is
    check_equal(prober, random_queries(5, 8), ks=(1, 3), cutoff=None)
    # The prober's own rank is the search's names (the default search for sum), and differs in no query.
    queries = random_queries(7, 6)
    default = CausalLikelihoodProber(tiny_causal)
    assert default.settings()["search"] == "best-first" and prober.settings()["search"] == "exhaustive"
    assert default.rank(queries, 5) == prober.rank(queries, 5)


def test_names_ending_inside_other_names(tiny_causal, tmp_path):
    """Nothing after the slot: a name that starts another ends inside its path, and is complete once only."""
    from medlama.probers.causal.prober import CausalLikelihoodProber, LikelihoodSettings

    pool = ["asthma", "asthma attack", "diabetes", "diabetes mellitus", "pain", "back pain", "kidney disease",
            "kidney", "cough"]
    texts = ["aspirin may treat [Y]", "the patient had [Y]", "[Y]", "asthma attack treated with [Y]"]
    queries = QuerySet(list("abcd"), ["r"] * 4, texts, [["asthma"], ["pain"], ["kidney"], ["diabetes"]], pool)
    for folder in (tiny_causal, save_causal(tmp_path / "flat", "gpt2", flat=True)):
        prober = CausalLikelihoodProber(folder, LikelihoodSettings(search="exhaustive", batch_size=2))
        check_equal(prober, queries, ks=(1, 2, 3, 5, 9), cutoff=2)


@pytest.mark.parametrize("batch_size", [1, 3, 64])
def test_every_batch_size_gives_the_same_ranking(tiny_causal, batch_size):
    from medlama.probers.causal.prober import CausalLikelihoodProber, LikelihoodSettings

    prober = CausalLikelihoodProber(tiny_causal, LikelihoodSettings(search="exhaustive", batch_size=batch_size))
    check_equal(prober, random_queries(11, 4), ks=(1, 10), cutoff=3)


def test_ties_keep_pool_order(tmp_path):
    """A flat head: every token has log-probability -log(vocabulary), so names of as many tokens tie exactly
    and the top-k boundary cuts through ties; the search must order them by pool place as exhaustive does."""
    from medlama.probers.causal.prober import CausalLikelihoodProber, LikelihoodSettings

    flat = save_causal(tmp_path / "flat", "gpt2", flat=True)
    prober = CausalLikelihoodProber(flat, LikelihoodSettings(search="exhaustive", batch_size=4))
    queries = random_queries(3, 3)
    lengths = {len(ids) for ids in prober.lm.candidate_ids(queries.candidates, "space")}
    assert len(lengths) < len(set(queries.candidates))  # ties there are
    check_equal(prober, queries, ks=(1, 2, 5, 10, 30), cutoff=4)
    # An empty name never ranks; a repeated name counts once, at its first place.
    odd = QuerySet(["a"], ["r"], ["aspirin may treat [Y] ."], [["fever"]], ["", "fever", "pain", "fever", "cough"])
    check_equal(prober, odd, ks=(1, 2, 5))


def test_peaked_model_scores_fewer_tokens(tmp_path):
    """A tiny GPT-2 trained a few seconds on the sentences: the same ranking, far fewer tokens fed."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from medlama.probers.causal.prober import CausalLikelihoodProber, LikelihoodSettings
    from medlama.probers.causal.search import exhaustive_token_forwards

    folder = save_causal(tmp_path / "peaked", "gpt2")
    tokenizer, model = AutoTokenizer.from_pretrained(folder), AutoModelForCausalLM.from_pretrained(folder)
    with torch.no_grad():
        model.get_output_embeddings().weight.div_(60)  # back to the usual scale before training
    batch = [tokenizer(s)["input_ids"] for s in SENTENCES]
    width = max(map(len, batch))
    ids = torch.tensor([row + [0] * (width - len(row)) for row in batch])
    labels = torch.tensor([row + [-100] * (width - len(row)) for row in batch])
    torch.manual_seed(0)
    optimiser = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(150):
        optimiser.zero_grad()
        model(input_ids=ids, labels=labels).loss.backward()
        optimiser.step()
    model.eval().save_pretrained(folder)
    prober = CausalLikelihoodProber(folder, LikelihoodSettings(search="exhaustive"))
    pool = [*POOL, *(f"{a} {b}" for a in NAMES for b in NAMES if a != b)]
    texts = ["aspirin may treat [Y] .", "asthma may cause [Y] .", "insulin may treat [Y] .", "the patient had [Y] ."]
    queries = QuerySet(list("abcd"), ["r"] * 4, texts, [["pain"], ["cough"], ["diabetes"], ["asthma"]], pool)
    check_equal(prober, queries, ks=(1, 10), cutoff=10)
    check_equal(prober, queries, ks=(1, 10), cutoff=None)  # the gold's exact rank (the default), however deep
    # Fewer tokens fed where the search pays: on these 111 names the exhaustive method's few shared passes cost
    # less than the search's seeds and expansions, and it switches; on 831 names (three words too), it searches.
    pool = [*pool, *(f"{a} {b} {c}" for a in NAMES for b in NAMES for c in NAMES if len({a, b, c}) == 3)]
    queries = QuerySet(list("abcd"), ["r"] * 4, texts, [["pain"], ["cough"], ["diabetes"], ["asthma"]], pool)
    results = prober.best_first(queries, 10)
    assert [result.names for result in results] == [rank_unique(list(zip(pool, row)), 10)
                                                    for row in prober.scores(queries)]
    searched = sum(result.token_forwards for result in results)
    exhaustive = sum(exhaustive_token_forwards(prober.lm, text, pool) for text in texts)
    assert searched * 2 < exhaustive, (searched, exhaustive)


def test_best_first_with_mean_is_refused_before_loading(tmp_path, capsys):
    from medlama.probers.causal.prober import LikelihoodSettings
    from medlama.probers.registry import make_prober

    with pytest.raises(MedlamaInputError, match="search 'best-first' needs reduction 'sum'.*use search 'exhaustive'"):
        LikelihoodSettings(reduction="mean", search="best-first")
    with pytest.raises(MedlamaInputError, match="with kv_cache off use search 'exhaustive'"):
        LikelihoodSettings(kv_cache=False, search="best-first")
    assert LikelihoodSettings(reduction="mean").resolved_search == "exhaustive"
    assert LikelihoodSettings(kv_cache=False).resolved_search == "exhaustive"
    assert LikelihoodSettings().resolved_search == "best-first"
    # No model folder at all: the settings are refused first.
    with pytest.raises(MedlamaInputError, match="needs reduction 'sum'"):
        make_prober("causal-likelihood", tmp_path / "missing", {"reduction": "mean", "search": "best-first"})
    data = cv_inputs.write_medlama_folder(tmp_path / "medlama")
    assert main(["probe", "--data", str(data), "--model", str(tmp_path / "missing"), "--method",
                 "causal-likelihood", "--reduction", "mean", "--search", "best-first", "--out",
                 str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "search 'best-first' needs reduction 'sum'" in err and "Traceback" not in err



@pytest.mark.parametrize("flat", [False, True])
def test_every_way_of_the_switch_equals_exhaustive(tmp_path, monkeypatch, flat):
    """The search forced to go on to the end (no switch), forced to switch after its seeds, and forced to switch
    from the prefix pass alone (every name scored at once, no more tokens fed than the exhaustive method feeds)
    gives the exhaustive top-k, scores and exact gold ranks, on a spread and on a flat model (ties by length)."""
    from medlama.probers.causal import search as causal_search
    from medlama.probers.causal.prober import CausalLikelihoodProber, LikelihoodSettings

    folder = save_causal(tmp_path / "m", "gpt2", flat=flat)
    prober = CausalLikelihoodProber(folder, LikelihoodSettings(search="exhaustive", batch_size=4))
    queries = random_queries(13, 6)
    for prefix_cost, cost, slack, switched in ((0.0, 0.0, 1e9, False), (0.0, 1e9, 0.0, True),
                                               (1e9, 0.0, 1e9, True)):
        monkeypatch.setattr(causal_search, "PREFIX_COST", prefix_cost)
        monkeypatch.setattr(causal_search, "PREDICTED_COST", cost)
        monkeypatch.setattr(causal_search, "SLACK", slack)
        check_equal(prober, queries, ks=(1, 5), cutoff=None)
        check_equal(prober, queries, ks=(1,), cutoff=3)
        results = prober.best_first(queries, 5, cutoff=None)
        assert {result.switched for result in results} == {switched}
        if prefix_cost:
            for result, text in zip(results, queries.texts):
                assert result.token_forwards <= causal_search.exhaustive_token_forwards(prober.lm, text, POOL)


def test_prefix_switch_rule_counts():
    """The switch from the prefix pass alone, by counts: each name's score predicted as its first token's
    log-probability plus ``per_token`` a later token (suffix included), the limit the n-th best prediction or the
    gold's when lower, then :func:`predicted_work` to that limit."""
    from medlama.probers.causal.budget import predicted_work, prefix_predicted_work

    first = {1: -1.0, 2: -4.0}
    expansions = {1: [(1, 10), (2, 20), (3, 30)], 2: [(1, 7), (2, 9)]}
    keys = [(1,), (1, 5), (1, 5, 6), (2, 7), ()]  # predicted with per_token -2, suffix 1: -3, -5, -7, -8
    assert prefix_predicted_work(first, keys, expansions, -2.0, 1, 2) == predicted_work(first, expansions, -2.0,
                                                                                        -5.0) == 10 + 20 + 30 + 7
    assert prefix_predicted_work(first, keys, expansions, -2.0, 1, 1) == 10 + 20  # limit -3: depths 1, 2
    # the gold (predicted -8) below the n-th best: the limit goes down to it (less a small slack)
    assert prefix_predicted_work(first, keys, expansions, -2.0, 1, 1, gold=[(2, 7)]) == \
        predicted_work(first, expansions, -2.0, -8.008) == 10 + 20 + 30 + 7 + 9
    # fewer names than n: no threshold, everything predicted; later tokens certain (per_token 0): the best first
    # token's names alone reach the limit (-1)
    assert prefix_predicted_work(first, keys, expansions, -2.0, 1, 9) == 10 + 20 + 30 + 7 + 9
    assert prefix_predicted_work(first, keys, expansions, 0.0, 0, 2) == 10 + 20 + 30
    assert prefix_predicted_work(first, [()], expansions, -2.0, 1, 1) == 0


def test_switch_rule_counts():
    """The rule by counts: a pass's work (padded tokens + twice the batch size), the exhaustive work, the
    predicted work of a search (expansions whose predicted bound reaches the limit) and the decision."""
    from medlama.probers.causal.budget import keep_searching, pass_cost, passes_work, predicted_work, scoring_passes

    assert pass_cost(3, 5, 4) == 3 * 5 + 8
    # 9 rows fed whole (no shared cache), by length, in passes of 4: each pass as wide as its longest row but one
    whole = scoring_passes({1: 2, 3: 3, 5: 4}, 2, shared=False, batch_size=4, budget=10 ** 9, vocab=10)
    assert whole == [(4, 2), (4, 4), (1, 4)] and passes_work(whole, 4) == 8 + 16 + 4 + 3 * 8
    # shared: the 2 distinct first tokens in one pass, then the later tokens of the 3- and 5-token rows
    shared = scoring_passes({1: 2, 2: 1, 3: 3, 5: 4}, 2, shared=True, batch_size=4, budget=10 ** 9, vocab=10)
    assert shared == [(2, 1), (3, 1), (4, 3)]  # apart: 3 + 8 + 12 + 8 < 7 x 3 + 2 x 8 together
    assert scoring_passes({}, 0, shared=True, batch_size=4, budget=10, vocab=10) == []
    assert scoring_passes({1: 5}, 0, shared=False, batch_size=4, budget=10, vocab=10) == []
    assert keep_searching(10, 5, 85, 100) and keep_searching(10, 5, 110, 100, slack=0.25)
    assert not keep_searching(10, 5, 111, 100, slack=0.25) and not keep_searching(10, 5, 86, 100, slack=0.0)
    # first tokens 1 (log-prob -1) and 2 (-4); below 1: work 10 at depth 1, 20 at depth 2, 30 at depth 3
    first = {1: -1.0, 2: -4.0}
    expansions = {1: [(1, 10), (2, 20), (3, 30)], 2: [(1, 7), (2, 9)]}
    assert predicted_work(first, expansions, -2.0, -5.0) == 10 + 20 + 30 + 7  # -1, -3, -5 | -4 (-6 < -5)
    assert predicted_work(first, expansions, -2.0, -2.0) == 10  # only token 1's own expansion reaches -2
    assert predicted_work(first, expansions, 0.0, -4.0) == 10 + 20 + 30 + 7 + 9
    assert predicted_work(first, expansions, -1.0, 0.0) == 0
