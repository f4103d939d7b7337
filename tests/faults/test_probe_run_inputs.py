"""Kept fault cases of the probe run, the training callback and BioLAMA builds: each runs the user's command
(``python -m medlama ...``, or the user's training script for ``ProbeCallback``) in a subprocess with the bad
input, and checks the one ``medlama: error:`` line (no traceback), that no work was done before it, and that
nothing was left that refuses the corrected command.

* ``probe --model A B`` with a ``B`` its method cannot probe: refused before ``A`` is ranked; the corrected
  command into the same ``--out`` then runs.
* ``ProbeCallback`` with a method that does not fit the model: ``trainer.train()`` refused before step 1.
* ``build biolama`` of a release with a record whose labels all normalise to nothing (``.``): file, row, field.
* ``build biolama`` of a release with every triple in test: a test-only folder (recorded), which ``optiprompt``
  refuses in one line.
* ``build biolama`` of a local archive: its SHA-256 recorded with ``digest_source`` ``supplied``.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import cv_inputs  # tests/helpers (pytest pythonpath)
from refusals import medlama_here  # tests/helpers: the CLI's main, in this process
from tiny_causal import save_causal

pytestmark = pytest.mark.slow

HELPERS = Path(__file__).resolve().parents[1] / "helpers"


def medlama(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``medlama ARGS`` through the CLI's main in this process (tests/helpers/refusals.py; offline, as
    tests/conftest.py sets the environment)."""
    return medlama_here(*args, cwd=cwd)


def one_error(run: subprocess.CompletedProcess) -> str:
    assert run.returncode == 2, run.stderr[-3000:]
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    line = run.stderr.strip().splitlines()[-1]
    assert line.startswith("medlama: error: ")
    return line


def test_probe_refuses_a_model_that_does_not_fit_before_ranking_any(tmp_path, make_tiny_bert):
    data = cv_inputs.write_probe_folder(tmp_path / "medlama")
    gpt2, other = save_causal(tmp_path / "gpt2", "gpt2"), save_causal(tmp_path / "gpt2-b", "gpt2", seed=1)
    bert = make_tiny_bert("faults-bert", mlm=True)
    out = tmp_path / "out"
    flags = ["probe", "--data", data, "--config", "full", "--method", "causal-likelihood", "--out", out]
    line = one_error(medlama(*flags, "--model", gpt2, bert))
    assert str(bert) in line and "encoder-only" in line
    assert not out.exists() and not (tmp_path / ".out.work").exists()  # nothing ranked, nothing kept
    fixed = medlama(*flags, "--model", gpt2, other)
    assert fixed.returncode == 0, fixed.stderr[-3000:]
    assert len(json.loads((out / "results.json").read_text())) == 2


def test_probe_callback_refuses_a_method_that_does_not_fit_before_step_one(tmp_path, make_tiny_bert):
    data = cv_inputs.write_probe_folder(tmp_path / "medlama")
    bert = make_tiny_bert("faults-callback", mlm=True)
    script = f"""
from datasets import Dataset
from transformers import AutoModelForMaskedLM, AutoTokenizer, DataCollatorForLanguageModeling, Trainer, TrainingArguments
from medlama.integrations import ProbeCallback
tok = AutoTokenizer.from_pretrained({str(bert)!r})
rows = Dataset.from_dict({{"text": ["aspirin may treat fever."] * 8}}).map(lambda r: tok(r["text"]), remove_columns=["text"])
args = TrainingArguments(output_dir={str(tmp_path / "run")!r}, max_steps=2000, per_device_train_batch_size=4,
                         report_to=[], use_cpu=True, save_strategy="no", disable_tqdm=True)
callback = ProbeCallback(data={str(data)!r}, config="full", method="causal-likelihood", every=1000)
trainer = Trainer(model=AutoModelForMaskedLM.from_pretrained({str(bert)!r}), args=args, train_dataset=rows,
                  processing_class=tok, callbacks=[callback], data_collator=DataCollatorForLanguageModeling(tok))
try:
    trainer.train()
except Exception as error:
    print(f"medlama: error: {{error}}", flush=True)
print("steps", trainer.state.global_step)
"""
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                         env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    lines = run.stdout.strip().splitlines()
    assert lines[-1] == "steps 0", run.stdout + run.stderr[-3000:]
    assert lines[-2].startswith("medlama: error: ") and "encoder-only" in lines[-2]


def _release(biolama_fx, root: Path) -> Path:
    biolama_fx.write_release(root)
    return root


def _first_record_labels(path: Path, label: str) -> None:
    """The first record of ``path`` with every object label and alias ``label``."""
    lines = path.read_text().splitlines()
    record = json.loads(lines[0])
    record["obj_labels"] = [label for _ in record["obj_labels"]]
    record["obj_aliases"] = [[label] * len(group) for group in record["obj_aliases"]]
    lines[0] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")


def test_build_biolama_refuses_a_record_whose_labels_all_normalise_to_nothing(biolama_fx, tmp_path):
    release = _release(biolama_fx, tmp_path / "release")
    bad = release / "data" / "ctd" / "triples_processed" / "CD1" / "dev.jsonl"
    _first_record_labels(bad, ".")
    line = one_error(medlama("build", "biolama", "--source", release, "--out", tmp_path / "out"))
    assert line.startswith(f"medlama: error: {bad}, row 1, field 'obj_labels': object labels ['.'")
    assert "(and aliases) are all nothing once normalised" in line
    assert not (tmp_path / "out").exists()


def test_build_biolama_of_a_test_only_release_is_a_recorded_test_only_folder(biolama_fx, tmp_path, make_tiny_bert):
    release = _release(biolama_fx, tmp_path / "release")
    for folder in (release / "data").glob("*/triples_processed/*"):
        for split in ("train", "dev"):
            (folder / "test.jsonl").write_text((folder / "test.jsonl").read_text()
                                               + (folder / f"{split}.jsonl").read_text())
            (folder / f"{split}.jsonl").write_text("")
    out = tmp_path / "out"
    run = medlama("build", "biolama", "--source", release, "--out", out)
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr[-3000:]
    assert json.loads((out / "build_info.json").read_text())["report"]["empty_splits"] == ["train", "dev"]
    line = one_error(medlama("optiprompt", "--model", make_tiny_bert("faults-optiprompt", mlm=True), "--data", out,
                             "--out", tmp_path / "prompts"))
    assert "has no 'train' split" in line


def test_build_biolama_records_the_supplied_archive_digest(biolama_fx, tmp_path):
    release = _release(biolama_fx, tmp_path / "release")
    archive = biolama_fx.write_archive(tmp_path / "data.tar.gz", release / "data")
    run = medlama("build", "biolama", "--source", archive, "--out", tmp_path / "out")
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads((tmp_path / "out" / "build_info.json").read_text())["report"]
    assert report["digest_source"] == "supplied"
    assert report["archive_sha256"] == hashlib.sha256(archive.read_bytes()).hexdigest()
