"""``ProbeCallback`` refuses, at ``on_train_begin``, what its first probe would refuse ``every`` steps later: a
method that does not fit the model's kind, a missing tokenizer, an output folder that cannot take the probes.
Each error is raised by ``trainer.train()`` before any optimizer step: no step is lost to it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from datasets import Dataset
from transformers import AutoModelForMaskedLM, AutoTokenizer, DataCollatorForLanguageModeling, Trainer, \
    TrainingArguments

import cv_inputs  # tests/helpers: the 6-query MedLAMA-shaped folder
from medlama.core.errors import MedlamaInputError
from medlama.integrations import ProbeCallback
from tiny_causal import SENTENCES  # tests/helpers

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread (tests/conftest.py)


@pytest.fixture(scope="module")
def medlama_tiny(tmp_path_factory) -> Path:
    return cv_inputs.write_probe_folder(tmp_path_factory.mktemp("callback-checks") / "medlama")


@pytest.fixture(scope="module")
def bert(make_tiny_bert) -> Path:
    return make_tiny_bert("callback-checks-mlm", mlm=True)


def trainer_with(bert: Path, out: Path, callback: ProbeCallback, *, tokenizer: bool = True) -> tuple[Trainer, list]:
    """A 3-step masked-LM training with ``callback`` (``every=1000``: its first probe far away), and the list
    its optimizer's steps are counted in."""
    tok = AutoTokenizer.from_pretrained(bert)
    data = Dataset.from_dict({"text": [s.replace(" .", ".") for s in SENTENCES]}).map(
        lambda row: tok(row["text"]), remove_columns=["text"])
    args = TrainingArguments(output_dir=str(out), max_steps=3, per_device_train_batch_size=4, report_to=[],
                             use_cpu=True, save_strategy="no", disable_tqdm=True)
    trainer = Trainer(model=AutoModelForMaskedLM.from_pretrained(bert), args=args, train_dataset=data,
                      processing_class=tok if tokenizer else None, callbacks=[callback],
                      data_collator=DataCollatorForLanguageModeling(tok, mlm_probability=0.3))
    steps: list[int] = []
    trainer.create_optimizer()
    trainer.optimizer.register_step_post_hook(lambda *_: steps.append(1))
    return trainer, steps


def refused_before_step_one(trainer: Trainer, steps: list, match: str) -> None:
    before = {name: tensor.clone() for name, tensor in trainer.model.state_dict().items()}
    with pytest.raises(MedlamaInputError, match=match):
        trainer.train()
    assert steps == [] and trainer.state.global_step == 0
    assert all(torch.equal(before[name], tensor) for name, tensor in trainer.model.state_dict().items())


def test_a_method_that_does_not_fit_the_model_is_refused_before_the_first_step(bert, medlama_tiny, tmp_path):
    callback = ProbeCallback(data=medlama_tiny, config="full", method="causal-likelihood", every=1000)
    trainer, steps = trainer_with(bert, tmp_path / "run", callback)
    refused_before_step_one(trainer, steps, "encoder-only")


def test_a_missing_tokenizer_is_refused_before_the_first_step(bert, medlama_tiny, tmp_path):
    callback = ProbeCallback(data=medlama_tiny, config="full", method="mask-average", every=1000)
    trainer, steps = trainer_with(bert, tmp_path / "run", callback, tokenizer=False)
    refused_before_step_one(trainer, steps, "needs its tokenizer")


def test_an_output_folder_that_cannot_take_the_probes_is_refused_before_the_first_step(bert, medlama_tiny,
                                                                                      tmp_path):
    (tmp_path / "a-file").write_text("not a folder\n")
    callback = ProbeCallback(data=medlama_tiny, config="full", method="mask-average", every=1000,
                             out=tmp_path / "a-file")
    trainer, steps = trainer_with(bert, tmp_path / "run", callback)
    refused_before_step_one(trainer, steps, "is a file")

    theirs = tmp_path / "probes" / "step-1000"  # a folder of someone else's files where a probe would write
    theirs.mkdir(parents=True)
    (theirs / "notes.txt").write_text("mine\n")
    callback = ProbeCallback(data=medlama_tiny, config="full", method="mask-average", every=1000,
                             out=tmp_path / "probes")
    trainer, steps = trainer_with(bert, tmp_path / "run2", callback)
    refused_before_step_one(trainer, steps, "step-1000: the output folder is not empty and is not an earlier output")
    assert (theirs / "notes.txt").read_text() == "mine\n"


def test_a_callback_that_fits_trains_and_probes_as_before(bert, medlama_tiny, tmp_path):
    callback = ProbeCallback(data=medlama_tiny, config="full", method="mask-average", every=3, limit=2)
    trainer, steps = trainer_with(bert, tmp_path / "run", callback)
    trainer.train()
    assert len(steps) == 3 and sorted(callback.results) == [3]
    assert trainer.model.training  # the check gave every module its mode back


def test_queries_the_metric_cannot_score_are_refused_when_the_callback_is_made(biolama_fx, tmp_path, monkeypatch):
    """A BioLAMA folder built before the build refused labels that normalise to nothing: the callback refuses
    it when it is made, before any training, not at its first probe."""
    from medlama.datasets import biolama as builder
    from medlama.datasets.biolama_folder import write_biolama

    biolama_fx.write_release(tmp_path / "release")
    path = tmp_path / "release" / "data" / "umls" / "triples_processed" / "UR44" / "test.jsonl"
    lines = path.read_text().splitlines()
    record = json.loads(lines[1])  # one object: "." is the query's only gold answer
    record["obj_labels"], record["obj_aliases"] = ["."], [[]]
    lines[1] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")
    with monkeypatch.context() as patched:
        patched.setattr(builder, "matchable_answers",  # a folder built before the build refused such records
                        lambda record: (builder.gold_answers(record.obj_labels, record.obj_aliases), []))
        write_biolama(tmp_path / "old", tmp_path / "release", progress=False)
    with pytest.raises(MedlamaInputError, match=r"no gold answer left under --match normalized: \['\.'\]"):
        ProbeCallback(data=tmp_path / "old", dataset="biolama", method="mask-average", every=10)
    ProbeCallback(data=tmp_path / "old", dataset="biolama", method="mask-average", every=10, match="exact")
