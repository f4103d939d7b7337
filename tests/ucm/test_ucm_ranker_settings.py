"""The rankers' settings are ``medlama.ucm``'s as they are ``medlama ucm``'s: the same names, checks and defaults
(the paper's decoding), read by one function (:func:`medlama.ucm_eval.evaluation.settings_by_name`) for the one
run (:func:`medlama.ucm_eval.evaluation.run`)."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest

import medlama
from medlama.cli import main
from medlama.core.errors import MedlamaInputError
from medlama.probers.mask_predict import PRESETS
from medlama.ucm_eval import rankers
from medlama.ucm_eval.evaluation import settings_by_name

SMALL = ["--sources", "pmc", "--context-types", "real", "--no-negative", "--limit", "1"]


def test_the_api_and_the_command_record_and_score_a_non_default_decoding_alike(sets, tiny_mlm, tmp_path, capsys):
    """Two masks, beam 3, a batch of 2: not the paper's decoding, asked by flag and by keyword."""
    assert main(["ucm", "--sets", str(sets), "--model", str(tiny_mlm), "--method", "mask-predict", *SMALL,
                 "--max-masks", "2", "--beam-size", "3", "--batch-size", "2", "--quiet",
                 "--out", str(tmp_path / "cli")]) == 0
    capsys.readouterr()
    result = medlama.ucm(sets, tiny_mlm, method="mask-predict", sources=["pmc"], context_types=["real"],
                         negative=False, limit=1, max_masks=2, beam_size=3, batch_size=2, out=tmp_path / "api")
    (cli,) = json.loads((tmp_path / "cli" / "results.json").read_text())["models"]
    (api,) = json.loads((tmp_path / "api" / "results.json").read_text())["models"]
    assert (cli["settings"]["max_masks"], cli["settings"]["beam_size"], cli["settings"]["batch_size"]) == (2, 3, 2)
    assert cli["settings"]["paper_decoding"] is False
    assert api["settings"] == cli["settings"] == result.settings
    for key in ("target", "negative", "accuracy", "intervals", "by_context", "num_records", "num_sequences"):
        assert api[key] == cli[key], key
    assert result.target == cli["target"] and result.accuracy == cli["accuracy"]


def refused_by_the_command(words: list[str], capsys) -> str:
    assert main(["ucm", *words]) == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


@pytest.mark.parametrize("flags, keywords, message", [
    (["--max-masks", "0"], {"max_masks": 0}, "max masks must be >= 1, got 0"),
    (["--max-masks", "4", "--max-iterations", "2"], {"max_masks": 4, "max_iterations": 2},
     "max iterations (2) must be >= max masks (4)"),
    (["--query-max-length", "0"], {"query_max_length": 0}, "setting 'query_max_length' must be at least 1, got 0"),
    (["--max-tokens", "0"], {"max_tokens": 0}, "max tokens must be >= 1, got 0"),
    (["--batch-size", "0"], {"batch_size": 0}, "batch size must be >= 1, got 0"),
])
def test_a_bad_ranker_setting_is_refused_by_the_api_with_the_commands_message(flags, keywords, message, sets,
                                                                              tmp_path, capsys, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded before the ranker settings were checked")

    monkeypatch.setattr(rankers, "make_ranker", refuse)
    said = refused_by_the_command(["--sets", str(sets), *flags, "--out", str(tmp_path / "cli")], capsys)
    assert said.startswith("medlama: error: ") and message in said
    with pytest.raises(MedlamaInputError) as refused:
        medlama.ucm(sets, out=tmp_path / "api", **keywords)
    assert f"medlama: error: {refused.value}" == said
    assert not (tmp_path / "cli").exists() and not (tmp_path / "api").exists()


def test_the_api_takes_no_ranker_setting_the_command_has_no_flag_for(sets, capsys):
    """Learned prompts, few-shot examples and a misspelt name: refused by name, the nearest one suggested."""
    for name, value in (("prompts", "learned.jsonl"), ("few_shot", 2), ("name_max_length", 10)):
        with pytest.raises(MedlamaInputError, match=re.escape(f"unknown ucm setting(s): '{name}'")):
            medlama.ucm(sets, **{name: value})
    with pytest.raises(MedlamaInputError, match=re.escape("'max_mask' (did you mean 'max_masks'?)")):
        medlama.ucm(sets, max_mask=3)


def test_the_defaults_are_the_papers_decoding_from_one_table():
    scored, chosen = settings_by_name({})
    assert chosen == rankers.DEFAULTS and chosen.mask_predict == PRESETS["biolama"]
    # a batch size is every ranker's; a method's own setting only its own
    _, chosen = settings_by_name({"batch_size": 3, "max_masks": 2, "distance": "cosine"})
    assert {chosen.of(m).batch_size for m in rankers.METHODS} == {3}
    assert chosen.mask_predict == replace(PRESETS["biolama"], max_masks=2, batch_size=3)
    assert chosen.retrieval.distance == "cosine" and chosen.mask_average.max_tokens is None
