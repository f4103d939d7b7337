"""The two rankers against hand computations, ranker settings by name, and which inputs a model sees whole."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from medlama.core.errors import MedlamaInputError
from medlama.probers.mask_average import MaskAverageSettings
from medlama.ucm_eval.rankers import (MaskAverageRanker, MaskPredictRanker, RankerSettings, RetrievalRanker, RetrievalRankerSettings,
                                 make_ranker, ranker_settings, ranks_from_scores)
from fp32 import fp32_sum_atol  # tests/helpers (pytest pythonpath)

POOL = ["wheeze", "cough", "fever", "heartburn", "runny nose", "shortness of breath", "nausea"]
INPUTS = ["asthma may have finding [Y] .",
          "The patient reports wheeze and cough at night. asthma may have finding [Y] .",
          "wheeze, cough, heartburn. asthma may have finding [Y] ."]
LONG_INPUT = "The patient reports " + "wheeze and cough, " * 40 + "at night. asthma may have finding [Y] ."



def test_ranks_from_scores_breaks_ties_by_pool_order():
    assert ranks_from_scores(np.array([[1.0, 3.0, 3.0, 0.0], [0.0, 0.0, 0.0, 0.0]])).tolist() == [[3, 1, 2, 4],
                                                                                                 [1, 2, 3, 4]]


def test_retrieval_ranker_equals_numpy_distances(tiny_encoder):
    from transformers import AutoModel, AutoTokenizer

    ranker = RetrievalRanker(tiny_encoder, RetrievalRankerSettings(query_max_length=12))
    long_input = "wheeze " * 30 + "and cough. asthma may have finding [Y] ."  # cut from its start
    inputs = [*INPUTS, long_input, INPUTS[0]]  # a repeated input is scored once
    scores = ranker.scores(inputs, POOL)
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_encoder))
    model = AutoModel.from_pretrained(str(tiny_encoder)).eval()

    def cls(ids):
        with torch.no_grad():
            return model(input_ids=torch.tensor([ids])).last_hidden_state[0, 0].double().numpy()

    names = np.stack([cls(tokenizer(name, truncation=True, max_length=25)["input_ids"]) for name in POOL])
    queries = []
    for text in inputs:  # one at a time, no padding; the left end is cut to 12 tokens
        ids = tokenizer(text.replace("[Y]", "[MASK]"), add_special_tokens=False)["input_ids"][-10:]
        queries.append(cls([tokenizer.cls_token_id, *ids, tokenizer.sep_token_id]))
    distances = ((np.stack(queries)[:, None, :] - names[None]) ** 2).sum(-1)
    assert np.allclose(-scores, distances, rtol=1e-4, atol=1e-5)
    assert (ranker.rank(inputs, POOL) == ranks_from_scores(-distances)).all()
    assert (scores[0] == scores[-1]).all()
    assert ranker.rank(inputs, POOL)[0].tolist() != ranker.rank(inputs, POOL)[2].tolist()
    assert sorted(ranker.rank(inputs, POOL)[1].tolist()) == list(range(1, len(POOL) + 1))
    cosine = RetrievalRanker(tiny_encoder, RetrievalRankerSettings(distance="cosine")).scores(INPUTS[:1], POOL)
    unit = lambda x: x / np.linalg.norm(x, axis=-1, keepdims=True)  # noqa: E731
    assert np.allclose(cosine[0], unit(names) @ unit(queries[0]), atol=1e-5)


def test_masked_lm_ranker_equals_mean_log_probs_by_hand(tiny_mlm):
    from transformers import AutoTokenizer, BertForMaskedLM

    ranker = MaskAverageRanker(tiny_mlm)
    scores = ranker.scores(INPUTS, POOL)
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_mlm))
    model = BertForMaskedLM.from_pretrained(str(tiny_mlm)).eval()
    expected, terms = np.empty((len(INPUTS), len(POOL))), 1
    for i, text in enumerate(INPUTS):
        left, right = text.split("[Y]")
        prefix = tokenizer(left.rstrip(), add_special_tokens=False)["input_ids"]
        suffix = tokenizer(right, add_special_tokens=False)["input_ids"]
        for j, name in enumerate(POOL):
            ids = tokenizer(name, add_special_tokens=False)["input_ids"]
            terms = max(terms, len(ids))
            row = [tokenizer.cls_token_id, *prefix, *[tokenizer.mask_token_id] * len(ids), *suffix,
                   tokenizer.sep_token_id]
            with torch.no_grad():
                log_probs = model(input_ids=torch.tensor([row])).logits[0].double().log_softmax(-1)
            start = 1 + len(prefix)
            expected[i, j] = np.mean([log_probs[start + t, token].item() for t, token in enumerate(ids)])
    # float32 means of up to `terms` log-probabilities: equal up to float32 rounding at their scale
    np.testing.assert_allclose(scores, expected, rtol=0, atol=fp32_sum_atol(scores, expected, terms=terms))
    assert (ranker.rank(INPUTS, POOL) == ranks_from_scores(expected)).all()


def test_make_ranker_and_bad_input(tiny_mlm, tiny_encoder):
    assert isinstance(make_ranker("auto", tiny_mlm), MaskPredictRanker)  # the UCM paper's decoding
    assert isinstance(make_ranker("mask-average", tiny_mlm), MaskAverageRanker)
    assert isinstance(make_ranker("auto", tiny_encoder), RetrievalRanker)
    assert isinstance(make_ranker("retrieval", tiny_mlm, RankerSettings(mask_average=MaskAverageSettings(
        max_tokens=3))), RetrievalRanker)
    with pytest.raises(MedlamaInputError, match="no MLM head"):
        make_ranker("mask-average", tiny_encoder)
    with pytest.raises(MedlamaInputError, match="unknown ranker"):
        make_ranker("bm25", tiny_encoder)
    ranker = RetrievalRanker(tiny_encoder)
    with pytest.raises(MedlamaInputError, match=r"input 0 has 0 \[Y\] slots"):
        ranker.rank(["no slot here"], POOL)
    with pytest.raises(MedlamaInputError, match="pool is empty"):
        ranker.rank(INPUTS, [])


def test_rankers_say_which_inputs_they_see_whole(tiny_mlm, tiny_encoder):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_encoder))
    lengths = [len(tokenizer(text.replace("[Y]", "[MASK]"))["input_ids"]) for text in (*INPUTS, LONG_INPUT)]
    assert max(lengths[:3]) < 24 < 128 < lengths[3]
    retrieval = RetrievalRanker(tiny_encoder, RetrievalRankerSettings(query_max_length=24))
    assert retrieval.whole([*INPUTS, LONG_INPUT], POOL).tolist() == [True, True, True, False]
    assert retrieval.whole([LONG_INPUT], POOL).tolist() == [False]
    # the tiny MLM has 128 positions; the longest name needs as many masks as it has tokens
    mlm = MaskAverageRanker(tiny_mlm)
    assert mlm.whole([*INPUTS, LONG_INPUT], POOL).tolist() == [True, True, True, False]
    masks = max(len(tokenizer(name, add_special_tokens=False)["input_ids"]) for name in POOL)
    assert masks == 4  # "shortness of breath"
    left, right = INPUTS[0].split("[Y]")
    inner = len(tokenizer(left.rstrip(), add_special_tokens=False)["input_ids"]) + \
        len(tokenizer(right, add_special_tokens=False)["input_ids"])
    padding = " ".join(["cough"] * (128 - 2 - masks - inner))  # exactly 128 positions with the masks
    assert mlm.whole([padding + " " + INPUTS[0]], POOL).tolist() == [True]
    assert mlm.whole(["cough " + padding + " " + INPUTS[0]], POOL).tolist() == [False]
    assert mlm.whole(["cough " + padding + " " + INPUTS[0]], ["cough"]).tolist() == [True]  # 1 mask fits


def test_retrieval_scores_are_the_numpy_distance_of_its_own_vectors(tiny_encoder):
    """The ranker's scores are the one scorer's float64 formula, to the last bit (l2 and cosine)."""
    for distance in ("l2", "cosine"):
        ranker = RetrievalRanker(tiny_encoder, RetrievalRankerSettings(distance=distance, pooling="mean"))
        names = ranker.name_vectors(POOL)
        queries = ranker.query_vectors(INPUTS)
        assert names.dtype == queries.dtype == np.float64
        if distance == "l2":
            expected = -((queries ** 2).sum(1)[:, None] - 2 * queries @ names.T + (names ** 2).sum(1)[None, :])
            direct = -((queries[:, None, :] - names[None]) ** 2).sum(-1)
            assert np.allclose(expected, direct, rtol=1e-12, atol=1e-9)
        else:
            unit_names = names / np.maximum(np.linalg.norm(names, axis=1, keepdims=True), 1e-12)
            unit_queries = queries / np.maximum(np.linalg.norm(queries, axis=1, keepdims=True), 1e-12)
            expected = unit_queries @ unit_names.T
        scores = ranker.scores(INPUTS, POOL)
        assert scores.dtype == np.float64 and np.array_equal(scores, expected)
        assert (ranker.rank(INPUTS, POOL) == ranks_from_scores(expected)).all()


def test_ranker_settings_are_typed_and_checked(tiny_mlm, tiny_encoder):
    with pytest.raises(MedlamaInputError, match=r"unknown retrieval ranker setting\(s\): 'pooing' "
                                                r"\(did you mean 'pooling'\?\)"):
        ranker_settings("retrieval", {"pooing": "mean"})
    with pytest.raises(MedlamaInputError, match=r"unknown mask-average ranker setting\(s\): 'max_token' "
                                                r"\(did you mean 'max_tokens'\?\)"):
        ranker_settings("mask-average", max_token=3)
    assert ranker_settings("retrieval", {"distance": "cosine"}) == RetrievalRankerSettings(distance="cosine")
    with pytest.raises(MedlamaInputError, match="setting 'distance' must be one of 'l2', 'cosine', got 'dot'"):
        RetrievalRankerSettings(distance="dot")
    with pytest.raises(MedlamaInputError, match="batch size must be >= 1, got 0"):
        MaskAverageSettings(batch_size=0)
    with pytest.raises(MedlamaInputError, match="the mask-average ranker takes MaskAverageSettings"):
        make_ranker("mask-average", tiny_mlm, RetrievalRankerSettings())
    # pre-release names are not rankers; auto hands each method its part of the settings
    with pytest.raises(MedlamaInputError, match="unknown ranker 'mlm'"):
        make_ranker("mlm", tiny_mlm, MaskAverageSettings(max_tokens=2))
    auto = make_ranker("auto", tiny_encoder, RankerSettings(retrieval=RetrievalRankerSettings(pooling="mean")))
    assert isinstance(auto, RetrievalRanker) and auto.settings()["pooling"] == "mean"


def test_rankers_take_the_probers_names_and_settings(tiny_mlm, tiny_encoder):
    """One table of methods: a ranker is a probing method, a pre-release name is neither, and the
    mask-average ranker is configured by the mask-average prober's own settings."""
    from medlama.probers import registry
    from medlama.ucm_eval import rankers

    assert set(rankers.METHODS) <= set(registry.METHODS)
    with pytest.raises(MedlamaInputError, match="unknown ranker 'contrastive'"):
        make_ranker("contrastive", tiny_encoder)
    assert rankers.SETTINGS["mask-average"] is registry.METHODS["mask-average"].settings
    assert rankers.SETTINGS["causal-likelihood"] is registry.METHODS["causal-likelihood"].settings
    ranker = make_ranker("mask-average", tiny_mlm, registry.settings_for("mask-average", {"max_tokens": 2}))
    assert ranker.prober.settings_ == MaskAverageSettings(max_tokens=2)
