"""``ProbeCallback`` in a ``transformers.Trainer`` and a ``SentenceTransformerTrainer``: each probe's outputs equal
``medlama probe`` of the checkpoint the trainer saved at that step (mask-predict on a tiny BERT masked LM,
causal-likelihood on a tiny GPT-2, retrieval on a tiny sentence-transformers encoder), the metrics reach the
trainer's log and its reporters, and the training's losses are the same with and without the callback, even
when the probe draws random numbers."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from datasets import Dataset
from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer, SentenceTransformerTrainingArguments
from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
from transformers import (AutoModelForCausalLM, AutoModelForMaskedLM, AutoTokenizer, DataCollatorForLanguageModeling,
                          Trainer, TrainerCallback, TrainingArguments)

import cv_inputs  # tests/helpers: the 6-query MedLAMA-shaped folder
from medlama.cli import main
from medlama.core.errors import MedlamaInputError
from medlama.integrations import ProbeCallback, probe_callback
from probe_outputs import predictions  # tests/helpers: per-query rows of predictions.jsonl
from tiny_causal import SENTENCES, save_causal  # tests/helpers: tiny causal LMs

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread (tests/conftest.py)

TEXTS = [sentence.replace(" .", ".") for sentence in SENTENCES]


@pytest.fixture(scope="module")
def medlama_tiny(tmp_path_factory) -> Path:
    return cv_inputs.write_probe_folder(tmp_path_factory.mktemp("callback-medlama") / "medlama")


def _arguments(out: Path, **overrides):
    settings = dict(output_dir=str(out), max_steps=2, per_device_train_batch_size=4, learning_rate=5e-3,
                    logging_steps=1, save_strategy="steps", save_steps=1, report_to=[], use_cpu=True, seed=0,
                    data_seed=0, disable_tqdm=True)
    return TrainingArguments(**{**settings, **overrides})


def _token_dataset(tokenizer):
    return Dataset.from_dict({"text": TEXTS}).map(lambda row: tokenizer(row["text"]), remove_columns=["text"])


class Reporter(TrainerCallback):
    """A stand-in for wandb / TensorBoard: what the trainer's ``on_log`` handed to its reporters."""

    def __init__(self):
        self.logged = []

    def on_log(self, args, state, control, logs=None, **kwargs):
        self.logged.append({**(logs or {}), "step": state.global_step})


def _probed_checkpoint(checkpoint: Path, out: Path, medlama: Path, *flags: str) -> Path:
    assert main(["probe", "--data", str(medlama), "--config", "full", "--model", str(checkpoint), *flags,
                 "--out", str(out)]) == 0
    return out


def _same_outputs(callback_folder: Path, probe_folder: Path) -> list[dict]:
    """``results.json``'s scores and every query's predictions (names and scores) are the same in both."""
    (ours,), (theirs,) = (json.loads((folder / "results.json").read_text()) for folder in (callback_folder,
                                                                                               probe_folder))
    assert ours["metrics"] == theirs["metrics"]
    assert ours["per_relation"] == theirs["per_relation"]
    assert ours["data"] == theirs["data"] and ours["settings"]["method"] == theirs["settings"]["method"]
    rows = predictions(callback_folder)
    keep = ("id", "predictions", "scores", "gold_rank", "gold_score", "input")
    assert [{k: row.get(k) for k in keep} for row in rows] == \
        [{k: row.get(k) for k in keep} for row in predictions(probe_folder)]
    assert all(row["run"] == ours["label"] for row in rows)
    return rows


def test_masked_lm_probed_at_each_evaluation_equals_probe_of_its_checkpoints(make_tiny_bert, medlama_tiny,
                                                                             tmp_path):
    folder = make_tiny_bert("callback-mlm", mlm=True)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForMaskedLM.from_pretrained(folder)
    data = _token_dataset(tokenizer)
    out = tmp_path / "run"
    trainer = Trainer(model=model, args=_arguments(out, eval_strategy="steps", eval_steps=1),
                      train_dataset=data, eval_dataset=data.select(range(4)), processing_class=tokenizer,
                      data_collator=DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.3))
    reporter = Reporter()
    trainer.add_callback(reporter)
    callback = ProbeCallback(data=medlama_tiny, config="full", method="mask-predict", limit=None, trainer=trainer)
    trainer.add_callback(callback)
    trainer.train()

    assert sorted(callback.results) == [1, 2]
    logged = [entry for entry in trainer.state.log_history if "medlama/acc@1" in entry]
    assert [entry["step"] for entry in logged] == [1, 2]
    assert [entry["step"] for entry in reporter.logged if "medlama/acc@10" in entry] == [1, 2]
    steps = []
    for entry in logged:
        step = entry["step"]
        result = callback.results[step]
        assert entry["medlama/acc@1"] == result.acc(1) and entry["medlama/acc@10"] == result.acc(10)
        assert entry["medlama/macro_acc@10"] == result.acc(10, "macro")
        probed = _probed_checkpoint(out / f"checkpoint-{step}", tmp_path / f"probe-{step}", medlama_tiny,
                                    "--method", "mask-predict")
        steps.append(_same_outputs(out / "medlama-probe" / f"step-{step}", probed))
    assert [row["scores"] for row in steps[0]] != [row["scores"] for row in steps[1]]  # the model being trained


def test_causal_lm_probed_every_step_equals_probe_of_its_checkpoints(medlama_tiny, tmp_path):
    folder = save_causal(tmp_path / "gpt2", "gpt2")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.pad_token = tokenizer.eos_token  # for the collator; the checkpoints save it
    model = AutoModelForCausalLM.from_pretrained(folder)
    out = tmp_path / "run"
    callback = ProbeCallback(data=medlama_tiny, config="full", method="causal-likelihood", every=1, at_start=True,
                             limit=2, out=tmp_path / "probes")
    trainer = Trainer(model=model, args=_arguments(out), train_dataset=_token_dataset(tokenizer),
                      processing_class=tokenizer, data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False),
                      callbacks=[callback])
    trainer.train()

    assert sorted(callback.results) == [0, 1, 2]
    assert [e["step"] for e in trainer.state.log_history if "medlama/acc@10" in e] == [0, 1, 2]  # no trainer=
    for step in (1, 2):
        probed = _probed_checkpoint(out / f"checkpoint-{step}", tmp_path / f"probe-{step}", medlama_tiny,
                                    "--method", "causal-likelihood", "--limit", "2")
        _same_outputs(tmp_path / "probes" / f"step-{step}", probed)
    assert callback.results[0].predictions != callback.results[2].predictions or \
        callback.results[0].ranking.scores != callback.results[2].ranking.scores


def test_sentence_transformer_trainer_retrieval_equals_probe_of_its_checkpoints(make_tiny_bert, medlama_tiny,
                                                                                 tmp_path):
    model = SentenceTransformer(str(make_tiny_bert("callback-st")), device="cpu")
    pairs = Dataset.from_dict({"anchor": TEXTS[:8], "positive": TEXTS[4:12]})
    out = tmp_path / "run"
    args = SentenceTransformerTrainingArguments(output_dir=str(out), max_steps=2, per_device_train_batch_size=4,
                                                learning_rate=5e-3, save_strategy="steps", save_steps=1,
                                                logging_steps=1, report_to=[], use_cpu=True, seed=0)
    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=pairs,
                                         loss=MultipleNegativesRankingLoss(model))
    callback = ProbeCallback(data=medlama_tiny, config="full", every=1, limit=None, trainer=trainer)
    trainer.add_callback(callback)
    trainer.train()

    assert isinstance(trainer, Trainer) and sorted(callback.results) == [1, 2]  # one callback serves both
    assert [e["step"] for e in trainer.state.log_history if "medlama/acc@10" in e] == [1, 2]
    for step in (1, 2):
        probed = _probed_checkpoint(out / f"checkpoint-{step}", tmp_path / f"probe-{step}", medlama_tiny)
        _same_outputs(out / "medlama-probe" / f"step-{step}", probed)


def _losses(folder, out: Path, callbacks) -> list[float]:
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForMaskedLM.from_pretrained(folder)  # dropout 0.1: the losses depend on torch's generator
    trainer = Trainer(model=model, args=_arguments(out, max_steps=3, save_strategy="no"),
                      train_dataset=_token_dataset(tokenizer), processing_class=tokenizer, callbacks=callbacks,
                      data_collator=DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.3))
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert len(losses) == 3
    return losses


def test_training_losses_are_the_same_with_and_without_the_callback(make_tiny_bert, medlama_tiny, tmp_path,
                                                                     monkeypatch):
    folder = make_tiny_bert("callback-losses", mlm=True)
    plain = _losses(folder, tmp_path / "plain", [])

    class Draws(TrainerCallback):  # the control: a callback that draws random numbers changes the losses
        def on_step_end(self, args, state, control, **kwargs):
            torch.rand(3)

    assert _losses(folder, tmp_path / "draws", [Draws()]) != plain
    real = probe_callback.run_probe

    def drawing(source, probed, *more):  # a probe that draws from every generator, of the model in eval mode
        assert not any(module.training for module in probed.models[0].modules())
        random.random(), np.random.rand(), torch.rand(3)
        return real(source, probed, *more)

    monkeypatch.setattr(probe_callback, "run_probe", drawing)
    callback = ProbeCallback(data=medlama_tiny, config="full", method="mask-average", every=1,
                                            write=False)
    assert _losses(folder, tmp_path / "probed", [callback]) == plain
    assert sorted(callback.results) == [1, 2, 3]
    assert not (tmp_path / "probed" / probe_callback.FOLDER).exists()  # write=False: logged only


def test_a_model_in_memory_is_probed_as_its_folder(make_tiny_bert, medlama_tiny):
    """``medlama.probe`` of a loaded masked LM (with its tokenizer) is the probe of its folder; a model left in
    training mode, or without its tokenizer, is refused with the reason. The callback's own ``probe`` gives every
    module its mode back."""
    import medlama

    folder = make_tiny_bert("callback-loaded", mlm=True)
    tokenizer, model = AutoTokenizer.from_pretrained(folder), AutoModelForMaskedLM.from_pretrained(folder)
    common = dict(data=medlama_tiny, config="full", method="mask-average")
    loaded = medlama.probe(model.eval(), tokenizer=tokenizer, **common)
    saved = medlama.probe(folder, **common)
    assert loaded.predictions == saved.predictions and loaded.ranking.scores == saved.ranking.scores
    with pytest.raises(MedlamaInputError, match="needs its tokenizer"):
        medlama.probe(model, **common)
    with pytest.raises(MedlamaInputError, match="training mode"):
        medlama.probe(model.train(), tokenizer=tokenizer, **common)
    with pytest.raises(MedlamaInputError, match="causal"):
        medlama.probe(model.eval(), tokenizer=tokenizer, **{**common, "method": "causal-likelihood"})
    model.train()
    model.bert.embeddings.eval()  # a module its owner keeps in eval mode
    result = ProbeCallback(**common, limit=None).probe(model, tokenizer)  # in eval mode while it probes
    assert result.predictions == saved.predictions
    assert model.training and model.cls.training and not model.bert.embeddings.training  # each its own mode back


def test_causal_and_seq2seq_models_in_memory_are_probed_as_their_folders(medlama_tiny, tmp_path):
    """The other loaders of a model in memory: a causal LM (its tokenizer left without the pad token the probe
    gives a copy) and a sequence-to-sequence LM, each probed as its saved folder is."""
    import medlama
    from transformers import T5Config, T5ForConditionalGeneration, T5Tokenizer

    gpt2 = save_causal(tmp_path / "gpt2", "gpt2")
    tokenizer = AutoTokenizer.from_pretrained(gpt2)
    common = dict(data=medlama_tiny, config="full", method="causal-likelihood")
    loaded = medlama.probe(AutoModelForCausalLM.from_pretrained(gpt2).eval(), tokenizer=tokenizer, **common)
    saved = medlama.probe(gpt2, **common)
    assert loaded.predictions == saved.predictions and loaded.ranking.scores == saved.ranking.scores
    assert tokenizer.pad_token is None
    with pytest.raises(MedlamaInputError, match="give dtype 'fp32'"):
        medlama.probe(AutoModelForCausalLM.from_pretrained(gpt2).eval(), tokenizer=tokenizer, **common,
                      settings={"dtype": "bf16"})

    pieces = ["<pad>", "</s>", "<unk>", *(f"▁{word}" for word in ("asthma", "may", "treat", "cough", "fever", "have",
                                                                  "finding", "influenza", "."))]
    t5_tokenizer = T5Tokenizer(vocab=[(piece, -float(i)) for i, piece in enumerate(pieces)], extra_ids=3)
    torch.manual_seed(0)
    t5 = T5ForConditionalGeneration(T5Config(vocab_size=len(t5_tokenizer), d_model=16, d_ff=32, num_layers=1,
                                             num_heads=2, d_kv=8, decoder_start_token_id=0, pad_token_id=0,
                                             eos_token_id=1))
    t5.save_pretrained(tmp_path / "t5")
    t5_tokenizer.save_pretrained(tmp_path / "t5")
    common = dict(data=medlama_tiny, config="full", method="generative", settings={"max_answer_tokens": 4})
    loaded = medlama.probe(t5.eval(), tokenizer=t5_tokenizer, **common, top_k=3)
    assert loaded.predictions == medlama.probe(tmp_path / "t5", **common, top_k=3).predictions


def test_arguments_are_checked_before_training(medlama_tiny):
    with pytest.raises(MedlamaInputError, match="unknown probing method"):
        ProbeCallback(data=medlama_tiny, config="full", method="mask-guess")
    with pytest.raises(MedlamaInputError, match="every must be"):
        ProbeCallback(data=medlama_tiny, config="full", every=0)
    with pytest.raises(MedlamaInputError, match="limit"):
        ProbeCallback(data=medlama_tiny, config="full", limit=0)
    with pytest.raises(MedlamaInputError, match="relation"):
        ProbeCallback(data=medlama_tiny, config="full", relations=["may_treet"])
    with pytest.raises(MedlamaInputError, match="beam"):
        ProbeCallback(data=medlama_tiny, config="full", method="mask-predict", settings={"beam_size": 0})


def test_a_training_with_no_evaluation_is_refused_without_every(make_tiny_bert, medlama_tiny, tmp_path):
    """The trainers evaluate nowhere by default: a callback waiting for evaluations would never probe, so the
    training is refused before its first step, saying what to set."""
    folder = make_tiny_bert("callback-no-eval", mlm=True)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    trainer = Trainer(model=AutoModelForMaskedLM.from_pretrained(folder), args=_arguments(tmp_path / "run"),
                      train_dataset=_token_dataset(tokenizer), processing_class=tokenizer,
                      data_collator=DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.3))
    trainer.add_callback(ProbeCallback(data=medlama_tiny, config="full", method="mask-average"))
    with pytest.raises(MedlamaInputError, match="eval_strategy 'no'.*every=N"):
        trainer.train()
    assert trainer.state.global_step == 0


def test_a_multiple_choice_config_is_probed_against_its_choices(medlama_dir):
    """The callback reads a ``*_mc`` config once, and each probe reads those queries as they are (their own
    choices as pools), as ``medlama probe --config hard_mc`` reads them."""
    from medlama.runs.queries import load_medlama_queries, load_queries

    callback = ProbeCallback(medlama_dir, config="hard_mc", relations=["associated_morphology_of"], limit=3,
                             write=False)
    expected = load_medlama_queries(medlama_dir, "hard_mc", relations=["associated_morphology_of"])
    read = load_queries(callback.source)
    assert read.rule == expected.rule == "choices" and len(read) == 3
    assert (read.ids, read.choices) == (expected.ids[:3], expected.choices[:3])
