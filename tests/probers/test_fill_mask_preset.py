"""The paper's table 3 single-token fill-mask baseline (Petroni et al. 2019) as a named preset of mask-predict:
``medlama probe --method mask-predict --preset fill-mask`` predicts the 10 most probable vocabulary tokens at
one mask, recorded as that preset; checked against a hand computation with the model itself."""

from __future__ import annotations

import json

import pytest
import torch

from medlama.cli import main
from medlama.probers.mask_predict import PRESETS, MaskPredictSettings, approach_of, preset_of
from medlama.runs.queries import load_medlama_queries

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread (tests/conftest.py)

RELATION = "associated_morphology_of"


@pytest.fixture(scope="module")
def tiny_mlm(make_tiny_bert):
    return make_tiny_bert("fill-mask-tiny-mlm", mlm=True)


def _mask_predict(medlama_dir, tiny_mlm, out, *flags: str) -> dict:
    """``medlama probe --method mask-predict`` of the tiny MLM on one relation; its one run's record."""
    assert main(["probe", "--data", str(medlama_dir), "--relations", RELATION, "--model", str(tiny_mlm),
                 "--method", "mask-predict", *flags, "--quiet", "--out", str(out)]) == 0
    (result,) = json.loads((out / "results.json").read_text())
    return result


def test_fill_mask_preset_predicts_the_ten_best_single_tokens(medlama_dir, tiny_mlm, tmp_path):
    from transformers import AutoTokenizer, BertForMaskedLM

    out = tmp_path / "probe"
    result = _mask_predict(medlama_dir, tiny_mlm, out, "--limit", "4", "--preset", "fill-mask", "--raw-predictions")
    settings = result["settings"]
    assert (settings["preset"], settings["max_masks"], settings["beam_size"]) == ("fill-mask", 1, 10)
    assert settings["approach"].startswith("fill-mask (one token")
    rows = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    queries = load_medlama_queries(medlama_dir, "hard", relations=[RELATION])
    texts = dict(zip(queries.ids, queries.texts))
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_mlm))
    model = BertForMaskedLM.from_pretrained(str(tiny_mlm)).eval()
    special = torch.tensor(tokenizer.all_special_ids)
    assert len(rows) == 4
    for row in rows:  # by hand: one [MASK], log-softmax over the vocabulary, special tokens never predicted
        encoded = tokenizer(texts[row["id"]].replace("[Y]", tokenizer.mask_token), return_tensors="pt")
        at = encoded["input_ids"][0].tolist().index(tokenizer.mask_token_id)
        with torch.no_grad():
            scores = model(**encoded).logits[0, at].log_softmax(-1)
        scores[special] = -float("inf")
        best = scores.topk(10)
        assert row["predictions"] == [tokenizer.decode([i]).replace(" ", "") for i in best.indices.tolist()]
        assert row["scores"] == pytest.approx(best.values.tolist(), abs=1e-5)


def test_presets_are_recorded_by_name_and_approach():
    assert preset_of(PRESETS["fill-mask"]) == "fill-mask"
    assert preset_of(MaskPredictSettings(max_masks=10, init="confidence", batch_size=3)) == "biolama"
    assert preset_of(MaskPredictSettings(max_masks=3)) is None
    assert approach_of(PRESETS["biolama"]).startswith("X-FACTR multi-token decoding (confidence")


def test_allowing_train_overlap_keeps_the_preset(medlama_dir, tiny_mlm, tmp_path):
    """Permission to probe learned prompts on their training facts changes no decoding: the run stays ``biolama``."""
    result = _mask_predict(medlama_dir, tiny_mlm, tmp_path / "probe", "--limit", "1", "--preset", "biolama",
                           "--allow-train-overlap")
    assert result["settings"]["preset"] == "biolama"
    assert preset_of(MaskPredictSettings(max_masks=10, init="confidence", allow_train_overlap=True)) == "biolama"


def test_ucm_offers_no_train_overlap_flag(tmp_path, capsys):
    """UCM's ranker asks no learned prompts: the flag is not offered, so it cannot be given and ignored."""
    with pytest.raises(SystemExit) as exit_:
        main(["ucm", "--sets", str(tmp_path), "--allow-train-overlap", "--out", str(tmp_path / "out")])
    assert exit_.value.code == 2
    assert "unrecognized arguments: --allow-train-overlap" in capsys.readouterr().err
