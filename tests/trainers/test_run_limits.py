"""A rewiring trains exactly its steps and only finite weights: a finished output is left as it is, fewer steps
than trained is refused, a run killed before its final folder is finished from its last checkpoint, a
diverged training stops with an error and writes no model; the record names the preset run and counts the
masks cut off by the max length."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest
import torch

from medlama.cli import main
from medlama.commands.rewire import config_from_args
from medlama.core.errors import MedlamaInputError
from medlama.trainers.guards import TrainingDivergedError
from medlama.trainers.trainer import rewire
from tiny_rewire import LINES, sha256, tiny_config  # tests/helpers

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def finished(tmp_path_factory, tiny_bert, corpus):
    out = tmp_path_factory.mktemp("limits") / "rewired"
    return out, rewire(corpus, out, tiny_config(tiny_bert), disable_tqdm=True)


def snapshot(out: Path) -> dict[str, str]:
    return {str(p.relative_to(out)): sha256(p) for p in sorted(out.rglob("*")) if p.is_file()}


def test_a_finished_run_is_left_as_it_is(finished, tiny_bert, corpus, tmp_path, capsys):
    out = tmp_path / "copy"
    shutil.copytree(finished[0], out)
    before = snapshot(out)
    again = rewire(corpus, out, tiny_config(tiny_bert), disable_tqdm=True)
    assert "already holds this run's final model, trained for 4 steps" in capsys.readouterr().err
    assert (again.already_trained, again.global_step, again.steps_this_run) == (True, 4, 0)
    assert again.record == finished[1].record and [p.name for p in again.checkpoints] == ["checkpoint-2",
                                                                                          "checkpoint-4"]
    assert snapshot(out) == before  # not a byte changed: no fifth step, no new checkpoint


def test_fewer_steps_than_trained_is_an_error_that_changes_nothing(finished, tiny_bert, corpus, tmp_path,
                                                                   capsys):
    out = tmp_path / "copy"
    shutil.copytree(finished[0], out)
    before = snapshot(out)
    with pytest.raises(MedlamaInputError, match=r"checkpoint-4 has already been trained for 4 steps, more than "
                                                r"the 3 asked for; .* Ask for --steps 4 \(keeps it\)"):
        rewire(corpus, out, tiny_config(tiny_bert, steps=3), disable_tqdm=True)
    assert snapshot(out) == before
    assert main(["rewire", "--corpus", str(corpus), "--out", str(out), "--model", str(tiny_bert), "--steps", "2",
                 "--save-steps", "2", "--batch-size", "8", "--max-length", "24", "--layer", "2"]) == 2
    assert "more than the 2 asked for" in capsys.readouterr().err and snapshot(out) == before


def test_a_run_killed_before_its_final_folder_is_finished_without_training(finished, tiny_bert, corpus,
                                                                           tmp_path):
    from safetensors.torch import load_file
    from transformers import TrainerCallback

    class KillAtEnd(TrainerCallback):
        def on_train_end(self, args, state, control, **kwargs):
            raise KeyboardInterrupt

    out = tmp_path / "killed"
    with pytest.raises(KeyboardInterrupt):
        rewire(corpus, out, tiny_config(tiny_bert), callbacks=[KillAtEnd()], disable_tqdm=True)
    assert (out / "checkpoints" / "checkpoint-4").is_dir() and not (out / "model.safetensors").exists()
    result = rewire(corpus, out, tiny_config(tiny_bert), disable_tqdm=True)
    assert (result.global_step, result.steps_this_run, result.resumed_from) == (4, 0, "checkpoint-4")
    assert not (out / "checkpoints" / "checkpoint-5").exists()
    assert json.loads((out / "rewire_config.json").read_text())["training"]["global_step"] == 4
    uninterrupted = load_file(finished[0] / "model.safetensors")
    final = load_file(out / "model.safetensors")
    assert final.keys() == uninterrupted.keys()
    for name, tensor in final.items():
        assert torch.equal(tensor, uninterrupted[name]), name


def test_a_diverged_training_stops_and_writes_no_model(tiny_bert, corpus, tmp_path, capsys):
    out = tmp_path / "diverged"
    with pytest.raises(TrainingDivergedError, match=r"training diverged at step 2: the model's weights are no "
                                                    r"longer finite numbers .*learning rate 1e\+06"):
        rewire(corpus, out, tiny_config(tiny_bert, learning_rate=1e6), disable_tqdm=True)
    assert not (out / "model.safetensors").exists() and not list((out / "checkpoints").glob("checkpoint-*"))
    status = main(["rewire", "--corpus", str(corpus), "--out", str(tmp_path / "cli"), "--model", str(tiny_bert),
                   "--steps", "2", "--batch-size", "8", "--max-length", "24", "--lr", "1e6"])
    assert status == 2 and "medlama: error: training diverged at step 2" in capsys.readouterr().err
    assert not (tmp_path / "cli" / "model.safetensors").exists()


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "Infinity"])
def test_non_finite_settings_are_refused_before_any_work(value, tmp_path, capsys):
    assert main(["rewire", "--corpus", str(tmp_path / "missing.txt"), "--out", str(tmp_path / "o"),
                 f"--lr={value}"]) == 2
    err = capsys.readouterr().err
    assert "setting 'learning_rate' must be a finite number" in err and not (tmp_path / "o").exists()
    assert main(["rewire", "--corpus", "c", "--out", str(tmp_path / "o"), f"--tau={value}"]) == 2
    assert "setting 'temperature' must be a finite number" in capsys.readouterr().err


def test_the_record_names_the_preset_that_was_run(tiny_bert, corpus, tmp_path):
    from medlama.cli import build_parser

    out = tmp_path / "demo"
    status = main(["rewire", "--corpus", str(corpus), "--out", str(out), "--preset", "demo", "--model",
                   str(tiny_bert), "--steps", "1", "--batch-size", "8", "--max-length", "24", "--layer", "2"])
    assert status == 0
    record = json.loads((out / "rewire_config.json").read_text())
    words = shlex.split(record["command"])
    assert words[-2:] == ["--preset", "demo"] and record["preset"] == "demo"
    assert "--lr" not in words and "--save-steps" not in words  # the demo preset's own values need no flag
    args = build_parser().parse_args(words[1:])
    assert config_from_args(args).to_dict() == record["config"]


def test_masks_cut_off_by_the_max_length_are_counted_and_reported(tiny_bert, corpus, tmp_path, capsys):
    from transformers import AutoTokenizer

    out = tmp_path / "short"
    assert main(["rewire", "--corpus", str(corpus), "--out", str(out), "--model", str(tiny_bert), "--steps", "1",
                 "--batch-size", "8", "--max-length", "10", "--layer", "2"]) == 0
    printed = capsys.readouterr().out
    record = json.loads((out / "rewire_config.json").read_text())
    # by hand: the mask's position among the word pieces, after [CLS], must leave room for [SEP]
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_bert))
    from medlama.trainers.cloze import build_cloze_dataset

    queries = build_cloze_dataset(corpus, mask_token="[MASK]", seed=33)  # the run's pairs (same rule and seed)
    expected = sum(1 + tokenizer.tokenize(q).index("[MASK]") >= 10 - 1 for q in queries.dataset["query"])
    assert 0 < expected < len(LINES)
    assert record["cloze"]["mask_truncated"] == expected and record["cloze"]["max_length"] == 10
    assert (f"masks cut off: {expected:,} of {len(LINES)} queries ({100 * expected / len(LINES):.1f}%) lose their "
            "mask token at --max-length 10") in printed
    card = (out / "README.md").read_text()
    assert f"{expected} queries lose their mask token beyond the max length of 10 tokens" in card


def test_the_real_corpus_loses_a_few_masks_at_48_tokens(elicit_corpora):
    from transformers import AutoTokenizer

    from medlama.core.defaults import default_model_path
    from medlama.trainers.cloze import build_cloze_dataset, count_masks_cut

    tokenizer = AutoTokenizer.from_pretrained(str(default_model_path()))
    build = build_cloze_dataset(elicit_corpora / "pubmed_sents_no_punkt_10k_0", skip_short_lines=True)
    queries = build.dataset["query"]
    import logging

    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logging.getLogger("transformers").addHandler(handler)
    try:
        tokenizer.model_max_length = 64  # so that some queries are longer than the model reads
        counted = count_masks_cut(queries, tokenizer, 48, "[MASK]")
    finally:
        logging.getLogger("transformers").removeHandler(handler)
    by_position = sum(1 + tokenizer.tokenize(q).index("[MASK]") >= 47 for q in queries)
    assert counted == by_position
    # what is counted and reported here, transformers does not also warn about ("Token indices sequence length")
    assert not [r for r in records if "sequence length is longer" in r.getMessage()]
    assert 0.035 < counted / len(queries) < 0.04  # the 3.7% the presets' note gives
