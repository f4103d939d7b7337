"""Causal-LM probing: loading and errors, query splitting, exact likelihood scores (KV-cached and not),
constrained beam search against the exhaustive ranking, free generation, and the UCM causal ranker.

The models are tiny GPT-2 and Llama configurations with tokenizers trained here with the ``tokenizers``
library (byte-level BPE for GPT-2, SentencePiece-style BPE with a BOS for Llama), saved to a folder and
loaded through the probers like a user's checkpoint. Reference log-probabilities come from plain forward
passes over the whole tokenised sentence, independent of the probers' prefix/candidate split.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from medlama.core.errors import MedlamaInputError
from medlama.runs.workflow import probe
from medlama.probers.query_set import QuerySet

from fp32 import fp32_sum_atol  # tests/helpers (pytest pythonpath)
from tiny_causal import NAMES, gpt2_tokenizer, reference_log_prob, save_causal


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread (tests/conftest.py)


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def tiny_causal(request, tmp_path_factory):
    return save_causal(tmp_path_factory.mktemp(f"tiny-{request.param}"), request.param)


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory):
    return save_causal(tmp_path_factory.mktemp("tiny-gpt2"), "gpt2")


def queries(texts, candidates=NAMES, gold=("pain",)):
    return QuerySet([f"q{i}" for i in range(len(texts))], ["rel"] * len(texts), list(texts),
                    [list(gold)] * len(texts), list(candidates), "q")


def scored_tokens(lm, texts, names) -> int:
    """The most token log-probabilities any (query, name) score of ``lm`` sums: the name's and the suffix's."""
    return max(len(ids) + len(lm.split(text).suffix) for text in texts
               for ids in lm.candidate_ids(names, lm.split(text).slot))


# -- loading and bad input ----------------------------------------------------------------------------------


def test_split_is_the_tokenisation_of_the_whole_sentence(tiny_causal):
    from medlama.probers.causal.scoring import CausalLM

    lm = CausalLM(tiny_causal, "causal-likelihood")
    tok = lm.tokenizer
    for text in ["aspirin may treat [Y] .", "the cold may cause [Y] and headache .", "[Y] may cause cough ."]:
        split = lm.split(text)
        for name, ids in zip(NAMES, lm.candidate_ids(NAMES, split.slot)):
            whole = tok(text.replace("[Y]", name))["input_ids"]
            if text.startswith("[Y]"):
                assert list(ids) + list(split.suffix) == whole[len(lm.lead):]
            else:
                assert list(split.prefix) + list(ids) + list(split.suffix) == whole, (text, name)
    assert [lm.split(t).slot for t in ("a may [Y] .", "[Y] may", "x-[Y]")] == ["space", "start", "glued"]


def test_wrong_models_and_tokenizers_get_clear_errors(tmp_path, tiny_gpt2):
    from transformers import BertConfig, BertForMaskedLM, BertModel, T5Config, T5ForConditionalGeneration

    from medlama.probers.causal.prober import CausalConstrainedProber, CausalGenerateProber, CausalLikelihoodProber
    from medlama.probers.causal.scoring import CausalLM

    tokenizer = gpt2_tokenizer()
    small = {"vocab_size": len(tokenizer), "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
             "intermediate_size": 32}
    for name, model in [("bert-mlm", BertForMaskedLM(BertConfig(**small))), ("bert", BertModel(BertConfig(**small))),
                        ("t5", T5ForConditionalGeneration(T5Config(vocab_size=len(tokenizer), d_model=16, d_ff=32,
                                                                   num_layers=1, num_heads=2, d_kv=8)))]:
        model.save_pretrained(tmp_path / name)
        tokenizer.save_pretrained(tmp_path / name)
    with pytest.raises(MedlamaInputError, match=r"'bert' is an encoder-only.*causal-likelihood.*mask-predict"):
        CausalLikelihoodProber(tmp_path / "bert-mlm")
    with pytest.raises(MedlamaInputError, match=r"encoder-only.*causal-generate.*retrieval"):
        CausalGenerateProber(tmp_path / "bert")
    with pytest.raises(MedlamaInputError, match=r"'t5' is a sequence-to-sequence.*causal-constrained.*generative"):
        CausalConstrainedProber(tmp_path / "t5")
    with pytest.raises(MedlamaInputError, match="no config.json"):
        CausalLM(tmp_path, "causal-likelihood")

    no_eos = save_causal(tmp_path / "llama-no-eos", "llama", eos=False)
    bare = QuerySet(["a"], ["r"], ["aspirin may treat [Y]"], [["pain"]], NAMES)
    with pytest.raises(MedlamaInputError, match="no EOS token.*causal-constrained.*no text after"):
        CausalConstrainedProber(no_eos).rank(bare, 3)
    # With text after the slot, its first token closes an answer: no EOS needed.
    assert CausalConstrainedProber(no_eos).rank(queries(["aspirin may treat [Y] ."]), 2)[0][0] in NAMES
    # The likelihood method needs no EOS at all.
    assert len(CausalLikelihoodProber(no_eos).rank(bare, 3)[0]) == 3

    likelihood = CausalLikelihoodProber(tiny_gpt2)
    with pytest.raises(MedlamaInputError, match="needs exactly one"):
        QuerySet(["a"], ["r"], ["aspirin may treat pain ."], [["pain"]], NAMES)
    with pytest.raises(MedlamaInputError, match="needs exactly one"):
        likelihood.lm.split("aspirin may treat pain .")
    for prober in (likelihood, CausalConstrainedProber(tiny_gpt2)):
        with pytest.raises(MedlamaInputError, match=f"candidate set of 'q' is empty.*{prober.method}"):
            prober.rank(queries(["aspirin may treat [Y] ."], candidates=[]), 3)
    with pytest.raises(MedlamaInputError, match="no chat template"):
        CausalLikelihoodProber(tiny_gpt2, _settings("causal-likelihood", chat_template=True))
    with pytest.raises(MedlamaInputError, match=r"unknown reduction 'max'; choose from \['sum', 'mean'\]"):
        _settings("causal-likelihood", reduction="max")
    with pytest.raises(MedlamaInputError, match="unknown LikelihoodSettings setting.*did you mean 'kv_cache'"):
        _settings("causal-likelihood", kv_cahce=False)


def _settings(method, **values):
    from medlama.probers.registry import METHODS
    from medlama.core.settings import settings_from

    return settings_from(METHODS[method].settings, values)


# -- exact likelihood ----------------------------------------------------------------------------------------


def test_likelihood_by_hand_on_three_candidates(tiny_causal):
    from medlama.probers.causal.prober import CausalLikelihoodProber, LikelihoodSettings

    text, names = "aspirin may treat [Y] .", ["pain", "asthma attack", "diabetes mellitus"]
    expected = [reference_log_prob(tiny_causal, text, name) for name in names]
    prober = CausalLikelihoodProber(tiny_causal)
    got = prober.scores(queries([text], names))[0]
    terms = scored_tokens(prober.lm, [text], names)
    assert got == pytest.approx(expected, abs=fp32_sum_atol(expected, terms=terms))
    lm = CausalLikelihoodProber(tiny_causal, LikelihoodSettings(reduction="mean"))
    split = lm.lm.split(text)
    counts = [len(ids) + len(split.suffix) for ids in lm.lm.candidate_ids(names, split.slot)]
    means = [e / n for e, n in zip(expected, counts)]
    assert lm.scores(queries([text], names))[0] == pytest.approx(means, abs=fp32_sum_atol(means, terms=terms))
    assert lm.settings()["reduction"] == "mean" and lm.settings()["kv_cache"] is True


def test_kv_cached_scores_equal_full_passes(tiny_causal):
    from medlama.probers.causal.prober import CausalLikelihoodProber, LikelihoodSettings

    qs = queries(["aspirin may treat [Y] .", "[Y] may cause cough .", "the cold may cause [Y] and headache ."])
    cached = CausalLikelihoodProber(tiny_causal, LikelihoodSettings(batch_size=3))
    naive = CausalLikelihoodProber(tiny_causal, LikelihoodSettings(batch_size=4, kv_cache=False))
    assert np.isfinite(cached.scores(qs)).all()
    # float32 weights: equal up to float32 rounding over the tokens each score sums (the scores reach -780;
    # seen 1e-5 apart at -70 on a busy machine), far below any real difference (a token more or less)
    fast, full = cached.scores(qs), naive.scores(qs)
    np.testing.assert_allclose(fast, full, rtol=0,
                               atol=fp32_sum_atol(fast, full, terms=scored_tokens(cached.lm, qs.texts, NAMES)))
    for prober in (cached, naive):
        prober.lm.model.double()  # float64: the two computations agree far below 1e-5
    np.testing.assert_allclose(cached.scores(qs), naive.scores(qs), rtol=0, atol=1e-9)


def test_prefix_candidates_and_cut_prefixes(tiny_gpt2):
    from medlama.probers.causal.prober import CausalLikelihoodProber

    prober = CausalLikelihoodProber(tiny_gpt2)
    text = "the patient had [Y] ."
    short, long = prober.scores(queries([text], ["asthma", "asthma attack"]))[0]
    terms = scored_tokens(prober.lm, [text], ["asthma", "asthma attack"])
    for got, name in ((short, "asthma"), (long, "asthma attack")):
        expected = reference_log_prob(tiny_gpt2, text, name)
        assert got == pytest.approx(expected, abs=fp32_sum_atol(expected, terms=terms))
    expected = ["asthma", "asthma attack"] if short > long else ["asthma attack", "asthma"]
    assert prober.rank(queries([text], ["asthma", "asthma attack"]), 2) == [expected]
    # A prefix too long for the 64 positions loses its start, never the candidate.
    long_text = "aspirin may treat pain . " * 12 + "aspirin may treat [Y] ."
    assert len(prober.lm.split(long_text).prefix) > 64
    assert np.isfinite(prober.scores(queries([long_text]))).all()


# -- constrained beam search ----------------------------------------------------------------------------------


@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_constrained_beam_search_equals_the_exhaustive_ranking(tiny_causal, reduction):
    from medlama.probers.causal.prober import CausalConstrainedProber, CausalLikelihoodProber, ConstrainedSettings, \
        LikelihoodSettings

    exhaustive = CausalLikelihoodProber(tiny_causal, LikelihoodSettings(reduction=reduction))
    simple = ["aspirin may treat [Y] .", "the cold may cause [Y] .", "insulin may treat [Y] ."]
    assert all(len(exhaustive.lm.split(t).suffix) == 1 for t in simple)  # one closing token: the same scores
    gaps = np.diff(np.sort(exhaustive.scores(queries(simple)), axis=1), axis=1)
    assert gaps.min() > 1e-4  # no near-ties that float noise could flip
    wide = ConstrainedSettings(num_beams=len(NAMES), batch_size=2, reduction=reduction)
    constrained = CausalConstrainedProber(tiny_causal, wide)
    for k in (1, 3, 5, len(NAMES)):
        assert constrained.rank(queries(simple), k) == exhaustive.rank(queries(simple), k)
    # Longer suffixes (and a slot opening the text): closed by the whole suffix, beams score exactly too.
    # (With nothing after the slot, beams also score the closing EOS, which the likelihood method does not.)
    longer = ["[Y] may cause cough .", "the cold may cause [Y] and headache ."]
    whole = CausalConstrainedProber(tiny_causal, ConstrainedSettings(num_beams=len(NAMES), close_tokens=None,
                                                                     reduction=reduction))
    assert whole.rank(queries(longer), 5) == exhaustive.rank(queries(longer), 5)


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def flat_causal(request, tmp_path_factory):
    """A tiny model with an all-zero LM head: every token has log-probability -log(V), so candidates tie."""
    return save_causal(tmp_path_factory.mktemp(f"flat-{request.param}"), request.param, flat=True)


@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_constrained_breaks_ties_as_the_exhaustive_ranking(flat_causal, reduction):
    from medlama.probers.causal.prober import CausalConstrainedProber, CausalLikelihoodProber, ConstrainedSettings, \
        LikelihoodSettings

    exhaustive = CausalLikelihoodProber(flat_causal, LikelihoodSettings(reduction=reduction))
    texts = ["aspirin may treat [Y] .", "the cold may cause [Y] ."]
    for names in (NAMES, NAMES[::-1]):
        qs = queries(texts, names)
        scores = exhaustive.scores(qs)
        # exact ties: under a mean every candidate, under a sum every candidate with as many tokens
        counts = [len(ids) for ids in exhaustive.lm.candidate_ids(names, "space")]
        assert all(len(set(row)) == (1 if reduction == "mean" else len(set(counts))) for row in scores)
        # ties in candidate order: best score first, then the earlier candidate
        by_hand = sorted(names, key=lambda n: (0 if reduction == "mean" else counts[names.index(n)], names.index(n)))
        assert exhaustive.rank(qs, len(names)) == [by_hand] * 2
        for beams in (len(names), len(names) + 2):
            constrained = CausalConstrainedProber(flat_causal, ConstrainedSettings(num_beams=beams,
                                                                                   reduction=reduction))
            for k in (1, 3, 5, len(names)):
                assert constrained.rank(qs, k) == exhaustive.rank(qs, k) == [by_hand[:k]] * 2, (names, beams, k)
    # the whole suffix closing a candidate: ties broken the same way too
    longer = queries(["the cold may cause [Y] and headache .", "[Y] may cause cough ."])
    whole = CausalConstrainedProber(flat_causal, ConstrainedSettings(num_beams=len(NAMES), close_tokens=None,
                                                                     reduction=reduction))
    for k in (1, 4, len(NAMES)):
        assert whole.rank(longer, k) == exhaustive.rank(longer, k)


def test_constrained_predictions_are_candidates_with_narrow_beams_and_eos(tiny_causal):
    from medlama.probers.causal.prober import CausalConstrainedProber, ConstrainedSettings

    prober = CausalConstrainedProber(tiny_causal, ConstrainedSettings(num_beams=2))
    qs = QuerySet(["a", "b"], ["r", "r"], ["aspirin may treat [Y] .", "the patient had [Y]"], [["pain"]] * 2,
                  ["asthma", "asthma attack", "pain", "back pain"])
    for row in prober.rank(qs, 2):
        assert row and len(row) <= 2 and set(row) <= set(qs.candidates)
    assert prober.settings()["num_beams"] == 2


def test_candidate_trie_keeps_prefix_candidates():
    from medlama.probers.causal.trie import candidate_trie

    from medlama.probers.causal.trie import END, walk

    trie = candidate_trie([(5,), (5, 7), (8, 3), ()], close=(3,))
    assert trie == {5: {3: {END: (5,)}, 7: {3: {END: (5, 7)}}}, 8: {3: {3: {END: (8, 3)}}}}
    assert walk(trie, [5, 3, 0, 0])[END] == (5,) and walk(trie, [8, 3, 3])[END] == (8, 3)
    assert sorted(walk(trie, [5])) == [3, 7] and walk(trie, [5, 9]) is None


# -- free generation ---------------------------------------------------------------------------------------


def test_generate_matches_answers_to_candidates(tiny_causal, monkeypatch):
    from medlama.probers.causal.prober import CausalGenerateProber, GenerateSettings

    prober = CausalGenerateProber(tiny_causal, GenerateSettings(num_beams=3, max_answer_tokens=6))
    qs = queries(["aspirin may treat [Y] .", "the patient had [Y]"])
    answers = prober.generate(qs, 3)
    assert [len(a) for a in answers] == [3, 3]
    ranked = prober.rank(qs, 3)
    for row, raw in zip(ranked, answers):
        assert row == list(dict.fromkeys(a for a in raw if a))[:3]  # random model: answers are what it generated

    designed = [["Asthma", "back pain", "not a name"]]
    monkeypatch.setattr(prober, "generate", lambda q, k: designed)
    assert prober.rank(queries(["aspirin may treat [Y] ."]), 3) == [["Asthma", "back pain", "not a name"]]
    prober.settings_ = GenerateSettings(answer_match="normalized")
    assert prober.rank(queries(["aspirin may treat [Y] ."]), 3) == [["asthma", "back pain", "not a name"]]
    prober.settings_ = GenerateSettings(to_candidates=False, answer_match="normalized")
    assert prober.rank(queries(["aspirin may treat [Y] ."]), 3) == designed


def test_generate_with_no_candidates_fails_unless_raw(tiny_gpt2):
    from medlama.probers.causal.prober import CausalGenerateProber, GenerateSettings

    empty = queries(["aspirin may treat [Y] ."], candidates=[])
    prober = CausalGenerateProber(tiny_gpt2, GenerateSettings(num_beams=2, max_answer_tokens=3))
    with pytest.raises(MedlamaInputError, match=r"^the candidate set of 'q' is empty; --method causal-generate "
                                                r"ranks candidates$"):
        prober.rank(empty, 2)
    raw = CausalGenerateProber(tiny_gpt2, GenerateSettings(num_beams=2, max_answer_tokens=3, to_candidates=False))
    assert raw.rank(empty, 2) == [list(dict.fromkeys(a for a in raw.generate(empty, 2)[0] if a))]


def test_greedy_generation_is_the_argmax_continuation(tiny_gpt2):
    from medlama.probers.causal.prober import CausalGenerateProber, GenerateSettings

    prober = CausalGenerateProber(tiny_gpt2, GenerateSettings(num_beams=1, max_answer_tokens=4))
    lm = prober.lm
    text = "aspirin may treat [Y] ."
    ids = list(lm.split(text).prefix)
    stops = {lm.split(text).suffix[0], lm.eos_id}
    generated = []
    with torch.no_grad():
        for _ in range(4):
            token = int(lm.model(torch.tensor([ids])).logits[0, -1].argmax())
            if token in stops:
                break
            ids.append(token)
            generated.append(token)
    assert prober.generate(queries([text]), 5) == [[lm.decode(generated)]]


# -- end to end and the UCM ranker -------------------------------------------------------------------------------


def test_probe_end_to_end_scores_every_method(tiny_gpt2):
    from medlama.probers.registry import METHODS

    qs = QuerySet(["a", "b", "c"], ["r1", "r1", "r2"],
                  ["aspirin may treat [Y] .", "asthma may cause [Y] .", "insulin may treat [Y] ."],
                  [["pain"], ["cough"], ["diabetes"]], NAMES, "tiny")
    results = {}
    for method in ("causal-likelihood", "causal-constrained", "causal-generate"):
        cls, settings_cls = METHODS[method].prober, METHODS[method].settings
        prober = cls(tiny_gpt2, settings_cls(num_beams=len(NAMES)) if method == "causal-constrained" else settings_cls())
        result = probe(prober, qs, top_k=10)
        assert result.settings["method"] == method and result.settings["model"] == str(tiny_gpt2)
        assert set(result.metrics) >= {"acc@1", "acc@5", "acc@10"}
        results[method] = result
    ranked = results["causal-likelihood"].predictions
    assert all(sorted(r) == sorted(NAMES) for r in ranked)  # every candidate ranked
    hits = [sum(g[0] in p[:k] for g, p in zip(qs.gold, ranked)) / 3 for k in (1, 5, 10)]
    assert [results["causal-likelihood"].acc(k) for k in (1, 5, 10)] == pytest.approx(hits)
    assert results["causal-likelihood"].acc(10) == 1.0
    assert results["causal-constrained"].predictions == ranked


def test_causal_ranker_ranks_pools_and_counts_long_inputs(tiny_gpt2):
    from medlama.probers.causal.prober import CausalLikelihoodProber
    from medlama.ucm_eval.causal_ranker import CausalRanker

    ranker = CausalRanker(tiny_gpt2, batch_size=4)
    pool = ["pain", "fever", "asthma attack", "asthma"]
    inputs = ["aspirin may treat [Y] .", "aspirin is a drug . aspirin may treat [Y] .",
              "aspirin may treat pain . " * 14 + "aspirin may treat [Y] ."]
    scores = ranker.scores(inputs, pool)
    prober = CausalLikelihoodProber(tiny_gpt2)
    expected = prober.scores(queries(inputs[:2], pool))
    np.testing.assert_allclose(scores[:2], expected, rtol=0,
                               atol=fp32_sum_atol(expected, terms=scored_tokens(prober.lm, inputs[:2], pool)))
    ranks = ranker.rank(inputs, pool)
    assert sorted(ranks[0]) == [1, 2, 3, 4] and ranks[0][int(np.argmax(scores[0]))] == 1
    assert ranker.whole(inputs, pool).tolist() == [True, True, False]
    assert ranker.settings()["method"] == "causal-likelihood" and ranker.settings()["reduction"] == "sum"
    with pytest.raises(MedlamaInputError, match="pool is empty"):
        ranker.rank(inputs, [])
    assert math.isfinite(scores[2].max())
