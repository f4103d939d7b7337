"""Rewiring end to end on tiny BERT models (built here, loaded like a user's checkpoint): model building and
its errors, checkpoints every N steps, the final folder under both loaders, the card, resuming, bad input."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import torch

from medlama.cli import main
from medlama.core.errors import MedlamaInputError
from medlama.trainers.checkpoints import choose_resume_checkpoint, inspect_checkpoint
from medlama.trainers.config import RewireConfig
from medlama.trainers.model import BUNDLED_MODEL_NAME, build_rewire_model
from medlama.trainers.trainer import rewire
from medlama.trainers.model_card import update_model_card_scores
from tiny_rewire import LINES, make_tiny_bert, sha256, tiny_config  # tests/helpers


class StopAt:
    """A trainer callback that simulates a kill (Ctrl-C) at the end of a given step."""

    def __init__(self, step: int) -> None:
        from transformers import TrainerCallback

        stop_step = step

        class _Stop(TrainerCallback):
            def on_step_end(self, args, state, control, **kwargs):
                if state.global_step == stop_step:
                    raise KeyboardInterrupt

        self.callback = _Stop()


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, tiny_bert, corpus):
    out = tmp_path_factory.mktemp("runs") / "rewired"
    result = rewire(corpus, out, tiny_config(tiny_bert), disable_tqdm=True)
    return out, result


# ------------------------------------------------------------------------------------------ the model

def test_model_keeps_the_chosen_layers_with_cls_pooling_and_dropout(tiny_bert):
    model, info = build_rewire_model(tiny_bert, layer=2, dropout=0.1, max_length=24)
    assert (info.layers_total, info.layers_used, info.mask_token) == (3, 2, "[MASK]")
    transformer = model[0].model
    assert transformer.config.num_hidden_layers == 2 and len(transformer.encoder.layer) == 2
    assert transformer.config.hidden_dropout_prob == 0.1 and transformer.config.attention_probs_dropout_prob == 0.1
    assert model[1].pooling_mode == "cls" and model.max_seq_length == 24
    kept, _ = build_rewire_model(tiny_bert, dropout=None)
    assert kept[0].model.config.hidden_dropout_prob == 0.3 and len(kept[0].model.encoder.layer) == 3


def test_a_sentence_transformers_folder_gets_cls_pooling(tiny_bert, tmp_path):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    transformer = Transformer(str(tiny_bert))
    SentenceTransformer(modules=[transformer, Pooling(32, pooling_mode="mean")]).save(str(tmp_path / "st"))
    model, info = build_rewire_model(tmp_path / "st")
    assert model[1].pooling_mode == "cls" and info.layers_total == 3


def test_bundled_model_is_the_default():
    model, info = build_rewire_model(None, layer=3)
    assert info.name == BUNDLED_MODEL_NAME and (info.layers_total, info.layers_used) == (6, 3)
    assert model[1].pooling_mode == "cls" and info.mask_token == "[MASK]"
    assert model.model_card_data.base_model == BUNDLED_MODEL_NAME


def test_not_an_encoder_and_bad_folders_are_clear_errors(tmp_path, tiny_bert):
    from transformers import GPT2Config, T5Config

    missing = tmp_path / "nope"
    with pytest.raises(MedlamaInputError, match=r"nope: model path does not exist \(and it is not a Hub id either\)"):
        build_rewire_model(missing)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(MedlamaInputError, match="empty: not a Hugging Face model folder: it has no config.json"):
        build_rewire_model(empty)
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "config.json").write_text("{this is not json", encoding="utf-8")
    with pytest.raises(MedlamaInputError, match="garbage: cannot read the model configuration"):
        build_rewire_model(garbage)
    no_weights = tmp_path / "no-weights"
    shutil.copytree(tiny_bert, no_weights)
    (no_weights / "model.safetensors").unlink()
    with pytest.raises(MedlamaInputError, match="no-weights: no model weights: expected one of model.safetensors"):
        build_rewire_model(no_weights)
    GPT2Config(n_layer=1, n_embd=16, n_head=2).save_pretrained(tmp_path / "gpt2")
    with pytest.raises(MedlamaInputError, match=r"gpt2: not an encoder: 'gpt2' .* is a decoder"):
        build_rewire_model(tmp_path / "gpt2")
    T5Config(num_layers=1, d_model=16).save_pretrained(tmp_path / "t5")
    with pytest.raises(MedlamaInputError, match="t5: not an encoder: 't5' is an encoder-decoder model"):
        build_rewire_model(tmp_path / "t5")
    a_file = tmp_path / "weights.bin"
    a_file.write_bytes(b"0")
    with pytest.raises(MedlamaInputError, match="a model is a folder"):
        build_rewire_model(a_file)


def test_layer_out_of_range(tiny_bert):
    for layer in (0, 4):
        with pytest.raises(MedlamaInputError, match=rf"tiny-bert: layer {layer} is out of range: this model has 3 "
                                                    r"transformer layers, so the layer must be between 1 and 3"):
            build_rewire_model(tiny_bert, layer=layer)


def test_tokenizer_without_mask_token(tmp_path):
    folder = make_tiny_bert(tmp_path / "no-mask", mask_token=False)
    with pytest.raises(MedlamaInputError, match="no-mask: the tokenizer has no mask token"):
        build_rewire_model(folder)
    _, info = build_rewire_model(folder, mask_token="[UNK]")
    assert info.mask_token == "[UNK]"


def test_settings_are_checked():
    with pytest.raises(MedlamaInputError, match="setting 'batch_size' must be at least 2"):
        RewireConfig(batch_size=1).validate()
    with pytest.raises(MedlamaInputError, match="temperature must be a positive number, got 0"):
        RewireConfig(temperature=0).validate()
    with pytest.raises(MedlamaInputError, match="unknown preset 'fast'"):
        RewireConfig.preset("fast")
    assert RewireConfig.preset("paper") == RewireConfig(max_sentences=10_000)
    paper = RewireConfig.preset("paper")
    assert (paper.batch_size, paper.learning_rate, paper.weight_decay, paper.max_length, paper.temperature,
            paper.mask_ratio, paper.seed, paper.steps, paper.save_steps) == (192, 2e-5, 0.01, 48, 0.04, 0.5, 33,
                                                                            200, 50)


# ---------------------------------------------------------------------------------------- a full run

def test_run_writes_checkpoints_and_a_final_model_for_both_loaders(finished_run, corpus):
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel, AutoTokenizer

    out, result = finished_run
    assert (result.global_step, result.steps_this_run, result.resumed_from) == (4, 4, None)
    assert [p.name for p in result.checkpoints] == ["checkpoint-2", "checkpoint-4"]
    for checkpoint in result.checkpoints:
        assert inspect_checkpoint(checkpoint).complete
        state = json.loads((checkpoint / "trainer_state.json").read_text())
        assert state["global_step"] == int(checkpoint.name.split("-")[1])
    assert result.pairs_per_second > 0

    st_model = SentenceTransformer(str(out))
    assert st_model[1].pooling_mode == "cls"
    hf_model = AutoModel.from_pretrained(out).eval()
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert hf_model.config.num_hidden_layers == 2
    texts = ["the gene [MASK] ", "cells with cancer"]
    expected = st_model.encode(texts, convert_to_tensor=True)
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        cls = hf_model(**batch).last_hidden_state[:, 0]
    torch.testing.assert_close(cls, expected, atol=1e-5, rtol=1e-4)
    # a checkpoint is a loadable model too (the performance-over-steps curve probes each)
    SentenceTransformer(str(result.checkpoints[0]))


def test_card_and_run_record(finished_run, corpus, tiny_bert):
    out, _ = finished_run
    record = json.loads((out / "rewire_config.json").read_text())
    assert record["config"]["steps"] == 4 and record["config"]["temperature"] == 0.04
    assert record["base_model"] == {"name": str(tiny_bert), "path": str(tiny_bert), "layers_total": 3,
                                    "layers_used": 2, "dropout_keys": ["hidden_dropout_prob",
                                                                       "attention_probs_dropout_prob"]}
    assert record["corpus"][0]["sha256"] == sha256(corpus) and record["corpus"][0]["lines"] == 96
    assert record["training"]["global_step"] == 4 and record["training"]["checkpoints"] == ["checkpoint-2",
                                                                                          "checkpoint-4"]
    assert record["command"].startswith(f"medlama rewire --corpus {corpus} --out {out} --model {tiny_bert}")
    card = (out / "README.md").read_text()
    assert card.startswith("---\n")
    for expected in (f"# Contrastive-Probe rewiring of `{tiny_bert}`", "| Transformer layers | first 2 of 3",
                     f"`sentences.txt` (96 lines, sha256 `{sha256(corpus)}`)", "| Steps | 4 of 4 |",
                     "`checkpoints/checkpoint-2`, `checkpoints/checkpoint-4` (every 2 steps)",
                     "| Batch size | 8 pairs (16 texts; 1 device(s)) |", "temperature 0.04 (scale 25)",
                     "| Learning rate / weight decay | 2e-05 / 0.01", "| Seed | 33 |", "## Probing scores",
                     "Not measured yet", "loss:ClozeInfoNCELoss"):
        assert expected in card, expected


def test_probing_scores_are_added_to_the_card(finished_run, tmp_path):
    out, _ = finished_run
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    update_model_card_scores(copy, {"hard": {"acc@1": 4.49, "acc@10": 21.74}}, source="MedLAMA hard set")
    card = (copy / "README.md").read_text()
    assert "| hard acc@1 | 4.49 |" in card and "| hard acc@10 | 21.74 |" in card and "Not measured yet" not in card
    update_model_card_scores(copy, {"full acc@1": 5.71})
    card = (copy / "README.md").read_text()
    assert "| full acc@1 | 5.71 |" in card and "hard acc@1" not in card and card.count("## Probing scores") == 1
    assert json.loads((copy / "probing_scores.json").read_text())["scores"] == {"full acc@1": 5.71}
    with pytest.raises(MedlamaInputError, match="score 'acc' is not a finite number: nan"):
        update_model_card_scores(copy, {"acc": float("nan")})
    with pytest.raises(MedlamaInputError, match="no README.md: not a model folder written by medlama rewire"):
        update_model_card_scores(tmp_path, {"acc": 1})


# ------------------------------------------------------------------------------------- interruptions

def test_interrupted_runs_resume_and_keep_the_previous_final_model(tmp_path, tiny_bert, corpus, finished_run):
    out = tmp_path / "rewired"
    with pytest.raises(KeyboardInterrupt):
        rewire(corpus, out, tiny_config(tiny_bert), callbacks=[StopAt(3).callback], disable_tqdm=True)
    assert not (out / "model.safetensors").exists()  # no final model from an unfinished run
    assert choose_resume_checkpoint(out).name == "checkpoint-2"

    resumed = rewire(corpus, out, tiny_config(tiny_bert), disable_tqdm=True)
    assert (resumed.resumed_from, resumed.steps_this_run, resumed.global_step) == ("checkpoint-2", 2, 4)
    assert [p.name for p in resumed.checkpoints] == ["checkpoint-2", "checkpoint-4"]
    state = json.loads((out / "checkpoints" / "checkpoint-4" / "trainer_state.json").read_text())
    assert [h["step"] for h in state["log_history"] if "loss" in h] == [1, 2, 3, 4]
    # same seed, same batches, restored RNG: the resumed model is the uninterrupted one
    from safetensors.torch import load_file

    uninterrupted = load_file(finished_run[0] / "model.safetensors")
    for name, tensor in load_file(out / "model.safetensors").items():
        torch.testing.assert_close(tensor, uninterrupted[name], atol=1e-6, rtol=1e-5)

    # more steps, killed again: the step-4 final model and its checkpoints are untouched
    final_hash = sha256(out / "model.safetensors")
    with pytest.raises(KeyboardInterrupt):
        rewire(corpus, out, tiny_config(tiny_bert, steps=6), callbacks=[StopAt(5).callback], disable_tqdm=True)
    assert sha256(out / "model.safetensors") == final_hash
    assert json.loads((out / "rewire_config.json").read_text())["training"]["global_step"] == 4
    assert not (out / "checkpoints" / "checkpoint-6").exists()
    longer = rewire(corpus, out, tiny_config(tiny_bert, steps=6), disable_tqdm=True)
    assert (longer.resumed_from, longer.global_step) == ("checkpoint-4", 6)
    assert [p.name for p in longer.checkpoints] == ["checkpoint-2", "checkpoint-4", "checkpoint-6"]
    assert sha256(out / "model.safetensors") != final_hash
    assert not list(tmp_path.glob(".rewired.tmp-*"))


@pytest.mark.parametrize(("damage", "missing"), [
    (lambda c: (c / "trainer_state.json").unlink(), "missing trainer_state.json"),
    (lambda c: (c / "optimizer.pt").unlink(), "missing optimizer.pt"),
    (lambda c: (c / "model.safetensors").unlink(), "missing model weights (model.safetensors)"),
    (lambda c: (c / "trainer_state.json").write_text('{"global_st'), "its trainer_state.json is truncated or corrupt"),
])
def test_half_written_checkpoint_is_set_aside_and_the_run_resumes(finished_run, tmp_path, tiny_bert, corpus, capsys,
                                                                  damage, missing):
    """An incomplete newest checkpoint does not block the documented auto-resume."""
    out = tmp_path / "rewired"
    shutil.copytree(finished_run[0], out)
    damage(out / "checkpoints" / "checkpoint-4")
    damaged = sorted(p.relative_to(out / "checkpoints" / "checkpoint-4")
                     for p in (out / "checkpoints" / "checkpoint-4").rglob("*"))
    result = rewire(corpus, out, tiny_config(tiny_bert), disable_tqdm=True)
    message = capsys.readouterr().err
    assert f"{out}/checkpoints/checkpoint-4 is incomplete ({missing}" in message
    assert "nothing deleted" in message and "resuming from checkpoint-2, the last complete checkpoint" in message
    assert (result.resumed_from, result.global_step) == ("checkpoint-2", 4)
    assert inspect_checkpoint(out / "checkpoints" / "checkpoint-4").complete
    [aside] = (out / "checkpoints").glob("checkpoint-4.incomplete-*")  # kept, as it was
    assert sorted(p.relative_to(aside) for p in aside.rglob("*")) == damaged
    from safetensors.torch import load_file

    uninterrupted = load_file(finished_run[0] / "model.safetensors")
    for name, tensor in load_file(out / "model.safetensors").items():
        torch.testing.assert_close(tensor, uninterrupted[name], atol=1e-6, rtol=1e-5)


def test_explicit_resume_needs_a_complete_checkpoint(finished_run, tmp_path, tiny_bert, corpus):
    out = tmp_path / "rewired"
    shutil.copytree(finished_run[0], out)
    (out / "checkpoints" / "checkpoint-2" / "optimizer.pt").unlink()
    with pytest.raises(MedlamaInputError, match=rf"cannot resume: {out}/checkpoints/checkpoint-2 is incomplete "
                                                r"\(missing optimizer.pt\)"):
        rewire(corpus, out, tiny_config(tiny_bert), resume=out / "checkpoints" / "checkpoint-2", disable_tqdm=True)


def test_a_save_killed_midway_leaves_no_checkpoint_and_the_rerun_completes(tmp_path, tiny_bert, corpus,
                                                                           finished_run, monkeypatch):
    """Checkpoints are written into a hidden staging folder and renamed: a kill during a save leaves the
    previous checkpoints as the newest, and the same command resumes from them."""
    from transformers import Trainer

    out = tmp_path / "rewired"
    real_save_rng = Trainer._save_rng_state

    def killed_at_step_4(self, output_dir):
        if self.state.global_step == 4:
            raise KeyboardInterrupt  # after the model and optimizer, before the RNG and trainer state
        return real_save_rng(self, output_dir)

    monkeypatch.setattr(Trainer, "_save_rng_state", killed_at_step_4)
    with pytest.raises(KeyboardInterrupt):
        rewire(corpus, out, tiny_config(tiny_bert), disable_tqdm=True)
    monkeypatch.undo()
    assert not (out / "checkpoints" / "checkpoint-4").exists()
    assert (out / "checkpoints" / ".checkpoint-4.staging" / "checkpoint-4" / "optimizer.pt").is_file()
    assert choose_resume_checkpoint(out).name == "checkpoint-2"
    result = rewire(corpus, out, tiny_config(tiny_bert), disable_tqdm=True)
    assert (result.resumed_from, result.global_step) == ("checkpoint-2", 4)
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["checkpoint-2", "checkpoint-4",
                                                                       "rewire_config.json"]
    from safetensors.torch import load_file

    uninterrupted = load_file(finished_run[0] / "checkpoints" / "checkpoint-4" / "model.safetensors")
    for name, tensor in load_file(out / "checkpoints" / "checkpoint-4" / "model.safetensors").items():
        torch.testing.assert_close(tensor, uninterrupted[name], atol=1e-6, rtol=1e-5)


def test_a_different_run_into_the_same_folder_is_refused(finished_run, tiny_bert, corpus, tmp_path):
    out, _ = finished_run
    with pytest.raises(MedlamaInputError, match=r"holds checkpoints of a different run \(learning_rate: 2e-05 then, "
                                                r"5e-05 now\)"):
        rewire(corpus, out, tiny_config(tiny_bert, learning_rate=5e-5), disable_tqdm=True)
    with pytest.raises(MedlamaInputError, match=r"holds 2 checkpoint\(s\) of an earlier run; to start over, write to "
                                                r"another output folder or remove them yourself"):
        rewire(corpus, out, tiny_config(tiny_bert), resume=False, disable_tqdm=True)
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    with pytest.raises(MedlamaInputError, match="mine: the output folder exists and is not a medlama rewire output"):
        rewire(corpus, other, tiny_config(tiny_bert), disable_tqdm=True)
    assert (other / "notes.txt").read_text() == "keep me"


def cpu_bf16_autocast() -> bool:
    """Whether this torch runs bf16 autocast on the CPU and can be asked about it from a hook
    (``torch.get_autocast_dtype`` and ``torch.is_autocast_enabled(device)``: torch >= 2.4)."""
    if not hasattr(torch, "get_autocast_dtype"):
        return False
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.bfloat16 and torch.is_autocast_enabled("cpu")
    except (RuntimeError, TypeError):
        return False


@pytest.mark.skipif(not cpu_bf16_autocast(), reason="this torch has no CPU bf16 autocast to check "
                                                     "(torch.get_autocast_dtype needs torch >= 2.4)")
def test_bf16_on_cpu_trains_under_autocast_and_saves_a_loadable_model(tiny_bert, corpus, tmp_path, monkeypatch):
    from sentence_transformers import SentenceTransformer
    from transformers import TrainerCallback

    # The CPU path, also on a machine with CUDA: the trainer and the loader see no GPU.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    seen = []

    class WatchALayer(TrainerCallback):
        def on_train_begin(self, args, state, control, model=None, **kwargs):
            layer = model[0].model.encoder.layer[0].attention.self.query
            layer.register_forward_hook(lambda module, inputs, output: seen.append(
                (torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"), output.dtype)))

    out = tmp_path / "bf16"
    result = rewire(corpus, out, tiny_config(tiny_bert, precision="bf16", steps=2, save_steps=2),
                    callbacks=[WatchALayer()], disable_tqdm=True)
    assert seen and all(item == (True, torch.bfloat16, torch.bfloat16) for item in seen)
    assert result.record["training"]["precision"] == "bf16" and result.global_step == 2
    from safetensors.torch import load_file

    assert {t.dtype for t in load_file(out / "model.safetensors").values()} == {torch.float32}  # master weights
    assert SentenceTransformer(str(out)).encode(["the gene [MASK] "]).shape == (1, 32)
    with pytest.raises(MedlamaInputError, match="fp16 mixed precision needs a CUDA GPU; use --precision fp32 or bf16"):
        rewire(corpus, tmp_path / "fp16", tiny_config(tiny_bert, precision="fp16"), disable_tqdm=True)
    assert not (tmp_path / "fp16").exists()


def test_bad_corpus_errors_before_training(tiny_bert, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(MedlamaInputError, match="the corpus is empty"):
        rewire(empty, tmp_path / "out", tiny_config(tiny_bert))
    short = tmp_path / "short.txt"
    short.write_text(LINES[0] + "\nresults \n" + LINES[1] + "\n")
    with pytest.raises(MedlamaInputError, match=r"short.txt: line 2 is too short to mask \('results '\)"):
        rewire(short, tmp_path / "out", tiny_config(tiny_bert))
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------------------- the CLI

def test_cli_rewire_and_its_errors(tiny_bert, corpus, tmp_path, capsys):
    out = tmp_path / "cli-out"
    assert main(["rewire", "--corpus", str(corpus), "--out", str(out), "--model", str(tiny_bert), "--preset", "demo",
                 "--steps", "2", "--save-steps", "1", "--batch-size", "4", "--max-length", "16"]) == 0
    printed, said = capsys.readouterr()
    assert f"rewired {tiny_bert} (layers 3/3) -> {out}" in printed
    # on the CPU the run says what it is sized for, then how long the rest takes at the first step's rate
    assert "medlama: note: rewiring on the CPU: 2 steps of 4 pairs (preset demo)" in said
    assert re.search(r"medlama: note: training on the CPU at \d+\.\d s a step \(4 pairs\): the 1 step left takes "
                     r"about \d+ s\n", said) and "--preset demo is the CPU-sized run" not in said
    assert "checkpoints: checkpoint-1, checkpoint-2" in printed
    record = json.loads((out / "rewire_config.json").read_text())
    assert (record["config"]["batch_size"], record["config"]["max_length"], record["config"]["steps"]) == (4, 16, 2)

    assert main(["rewire", "--corpus", str(corpus), "--out", str(tmp_path / "x"), "--model", str(tiny_bert),
                 "--layer", "7"]) == 2
    assert "medlama: error: " in capsys.readouterr().err
    short = tmp_path / "short.txt"
    short.write_text(LINES[0] + "\nresults \n")
    assert main(["rewire", "--corpus", str(short), "--out", str(tmp_path / "y"), "--model", str(tiny_bert)]) == 2
    assert "line 2 is too short to mask" in capsys.readouterr().err


@pytest.mark.slow
def test_short_run_on_the_bundled_model(elicit_corpora, tmp_path):
    from sentence_transformers import SentenceTransformer

    config = RewireConfig.preset("demo", steps=2, save_steps=2, batch_size=8, max_length=32, max_sentences=64,
                                 skip_short_lines=True)
    result = rewire(elicit_corpora / "pubmed_sents_no_punkt_10k_3", tmp_path / "minilm", config, disable_tqdm=True)
    assert result.global_step == 2 and result.record["base_model"]["name"] == BUNDLED_MODEL_NAME
    assert SentenceTransformer(str(tmp_path / "minilm")).encode(["a [MASK] "]).shape == (1, 384)


def test_the_cpu_pace_note_points_a_gpu_sized_run_to_the_cpu_preset():
    from medlama.trainers.pace import duration, pace_note

    paper = RewireConfig.preset("paper")
    note = pace_note(paper, "paper", 30.0, 200)
    assert note == ("medlama: note: training on the CPU at 30.0 s a step (192 pairs): the 200 steps left take about "
                    "1 h 40 min; --preset demo is the CPU-sized run (50 steps of 32 pairs, about 4 min here)")
    assert "--preset demo" not in pace_note(RewireConfig.preset("demo"), "demo", 1.5, 50)
    assert (duration(40), duration(420), duration(7500)) == ("40 s", "7 min", "2 h 05 min")
