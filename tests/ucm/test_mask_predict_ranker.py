"""The UCM paper's ranker (X-FACTR confidence decoding, as BioLAMA decodes) is ``medlama ucm``'s default for a
masked LM; mask average is a recorded choice. Ranks against the mask-predict prober's own decoding."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np

from medlama.cli import main
from medlama.probers.mask_predict import PRESETS, MaskPredictProber, MaskPredictSettings
from medlama.probers.query_set import QuerySet
from medlama.ucm_eval.mask_predict_ranker import MaskPredictRanker
from medlama.ucm_eval.rankers import RankerSettings, make_ranker, ranks_from_scores
from medlama.ucm_eval.records import sequence_records

INPUTS = ["asthma may have finding [Y] .",
          "The patient reports wheeze and cough at night. asthma may have finding [Y] .",
          "wheeze, cough, heartburn. asthma may have finding [Y] ."]
SMALL = MaskPredictSettings(max_masks=2, beam_size=5, init="confidence", max_iterations=10)


def test_auto_on_a_masked_lm_is_the_papers_confidence_decoding(tiny_mlm):
    ranker = make_ranker("auto", tiny_mlm)
    assert isinstance(ranker, MaskPredictRanker)
    settings = ranker.settings()
    # BioLAMA's README: --init_method confidence --iter_method none --max_iter 10 --beam_size 5 --num_mask 10
    assert (settings["method"], settings["decoding"], settings["beam_size"], settings["max_masks"],
            settings["max_iterations"]) == ("mask-predict", "confidence", 5, 10, 10)
    assert settings["paper_decoding"] is True
    assert make_ranker("mask-predict", tiny_mlm, RankerSettings(mask_predict=SMALL)).settings()["paper_decoding"] \
        is False
    assert make_ranker("mask-average", tiny_mlm).settings()["method"] == "mask-average"


def test_ranks_are_the_decoded_order_of_pool_entities_and_the_rest_unranked(tiny_mlm):
    """An independent decode (the prober, raw strings, no candidate mapping) gives the expected ranks."""
    raw = MaskPredictProber(tiny_mlm, replace(SMALL, to_candidates=False))
    queries = QuerySet(ids=["0", "1", "2"], relations=[""] * 3, texts=INPUTS, gold=[[] for _ in INPUTS],
                       candidates=["unused"], name="inputs")
    decoded = raw.decode(queries)
    words = [text for answers in decoded for text, _ in answers[:3] if "#" not in text]
    pool = ["wheeze", "cough", *dict.fromkeys(words), "heartburn"]
    ranker = MaskPredictRanker(tiny_mlm, SMALL)
    ranks = ranker.rank(INPUTS, pool)
    for i, answers in enumerate(decoded):
        score = {text: value for text, value in answers}
        found = [name for name in pool if name in score]
        assert found, "each input decodes at least one pool entity"
        order = sorted(found, key=lambda name: (-score[name], pool.index(name)))
        expected = [order.index(name) + 1 if name in score else len(pool) + 1 for name in pool]
        assert ranks[i].tolist() == expected
    assert (ranks == len(pool) + 1).any()  # entities decoding never returned share the rank past the last


def test_an_entity_never_decoded_has_no_rank_change():
    """Two inputs where O_t is decoded at neither: its rank change is 0 ("ranking-unchanged"), whatever
    other entities decoding returns; pool order would have made one up."""
    scores = np.array([[-np.inf, -1.0, -np.inf, -np.inf], [-np.inf, -1.0, -0.5, -np.inf]])
    ranks = ranks_from_scores(scores, unranked=True)
    assert ranks.tolist() == [[5, 1, 5, 5], [5, 2, 1, 5]]
    row = {"id": "s", "center_id": "t", "correct_ids": ["t", "a"], "added_entities": ["t", "a"],
           "added_is_correct": [True, True], "triple_id": "x", "relation": "r", "source": "ehr",
           "context_type": "real", "negative": False}
    (record,) = sequence_records(row, ranks, {"t": 0, "b": 1, "a": 2, "c": 3})
    assert record["target_rank_before"] == record["target_rank_after"] == 5
    assert ranks_from_scores(scores)[:, 0].tolist() == [2, 3]  # the old rule: a change made up from pool order


def test_medlama_ucm_defaults_to_the_papers_decoding_and_records_mask_average_when_chosen(sets, tiny_mlm, tmp_path):
    small = ["--sets", str(sets), "--model", str(tiny_mlm), "--sources", "pmc", "--context-types", "real",
             "--no-negative", "--limit", "1", "--quiet"]
    # the paper's decoding but for fewer masks, to keep the tiny run short; every other setting as given by default
    assert main(["ucm", *small, "--max-masks", "2", "--max-iterations", "10", "--out", str(tmp_path / "a")]) == 0
    (model,) = json.loads((tmp_path / "a" / "results.json").read_text())["models"]
    assert model["settings"]["method"] == "mask-predict"
    assert (model["settings"]["decoding"], model["settings"]["beam_size"], model["settings"]["max_masks"]) == \
        ("confidence", 5, 2)
    assert model["settings"]["paper_decoding"] is False  # fewer masks than BioLAMA's: said so
    assert main(["ucm", *small, "--method", "mask-average", "--out", str(tmp_path / "b")]) == 0
    (chosen,) = json.loads((tmp_path / "b" / "results.json").read_text())["models"]
    assert chosen["settings"]["method"] == "mask-average"


def test_biolama_preset_is_the_rankers_default():
    assert RankerSettings().mask_predict == PRESETS["biolama"]
