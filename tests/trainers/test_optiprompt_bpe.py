"""OptiPrompt's manual init on a byte-level BPE (RoBERTa-style) model: with no training, the learned prompts
decode exactly what the manual prompts decode (every name, every score to the last bit), templates glued to
their punctuation included; and what each query fed the model is what ``predictions.jsonl`` logs."""

from __future__ import annotations

import json

import pytest

import medlama
from medlama.cli import main

pytestmark = pytest.mark.usefixtures("one_thread")

DECODING = {"max_masks": 2}


@pytest.fixture(scope="module")
def glued(tmp_path_factory, one_thread):
    from tiny_roberta import build_glued_folder, save_tiny_roberta  # tests/helpers (pytest pythonpath)

    root = tmp_path_factory.mktemp("glued")
    return save_tiny_roberta(root / "model"), build_glued_folder(root)


def command(model, data, out, *more):
    return ["probe", "--dataset", "biolama", "--data", str(data), "--method", "mask-predict", "--model", str(model),
            "--preset", "biolama", "--max-masks", "2", "--out", str(out), *more]


def predictions(out):
    return [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]


def test_no_training_decodes_exactly_the_manual_prompts_on_a_byte_level_bpe(glued, tmp_path):
    model, data = glued
    trained = medlama.optiprompt(model, data, tmp_path / "prompts", epochs=0, batch_size=4, decoding=DECODING)
    assert main(command(model, data, tmp_path / "manual")) == 0
    assert main(command(model, data, tmp_path / "learned", "--prompts", str(tmp_path / "prompts"))) == 0
    manual, learned = predictions(tmp_path / "manual"), predictions(tmp_path / "learned")
    assert len(manual) == 8 and [row["id"] for row in learned] == [row["id"] for row in manual]
    for one, other in zip(manual, learned):
        assert other["predictions"] == one["predictions"]
        assert other["scores"] == one["scores"]  # to the last bit
    templates = {name: rel["template"] for name, rel in trained.record["relations"].items()}
    # "'s" and "." as the manual query reads them, glued ("'s", "."), not spaced ("Ġ'", "s", "Ġ.")
    assert templates == {"wikidata_P1": "[X] [V1] [Y] [V2]", "wikidata_P2": "[X] [V1] [V2] [V3] [Y] [V4]"}


def test_the_logged_input_is_the_learned_template_fed(glued, tmp_path):
    """A learned-prompt run logs its learned template with the [Vi] markers, subject and mask (random init too),
    so that the report shows what was decoded, not the manual prompt."""
    model, data = glued
    for init in ("manual", "random"):
        medlama.optiprompt(model, data, tmp_path / init, epochs=0, init=init, prompt_tokens=2, batch_size=4,
                           decoding=DECODING)
        assert main(command(model, data, tmp_path / f"run-{init}", "--prompts", str(tmp_path / init))) == 0
        inputs = {row["relation"]: row["input"] for row in predictions(tmp_path / f"run-{init}")}
        if init == "manual":
            assert inputs["wikidata_P1"].endswith(" [V1] <mask> [V2]")
            assert inputs["wikidata_P2"].endswith(" [V1] [V2] [V3] <mask> [V4]")
        else:
            assert all(text.endswith(" [V1] [V2] <mask> .") for text in inputs.values())
        assert not any("causes" in text or "colour" in text for text in inputs.values())
    manual = command(model, data, tmp_path / "plain")
    assert main(manual) == 0
    assert all(row["input"].endswith(("causes <mask>.", "colour is <mask>."))
               for row in predictions(tmp_path / "plain"))
