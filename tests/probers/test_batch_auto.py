"""``--batch-size auto``: the largest batch that fits, halved on out-of-memory (accelerate's
``find_executable_batch_size``), recorded beside ``"auto"``; the predictions are those of a fixed batch size.
The out-of-memory error is simulated: the tiny GPT-2's forward raises CUDA's whenever it gets more than
``FITS`` rows."""

from __future__ import annotations

import json

import pytest
from transformers import GPT2LMHeadModel

from medlama.cli import main

import cv_inputs  # tests/helpers (pytest pythonpath): a MedLAMA-shaped folder of 6 queries, 2 relations
from tiny_causal import save_causal  # tests/helpers: tiny causal LMs with locally trained tokenizers
from out_of_memory import limit_rows  # tests/helpers

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread (tests/conftest.py)

FITS = 5  # rows per forward pass that "fit in memory"


def test_auto_batch_size_backs_off_on_out_of_memory(tmp_path, monkeypatch, capsys):
    model = save_causal(tmp_path / "gpt2", "gpt2")
    folder = cv_inputs.write_probe_folder(tmp_path / "queries")
    flags = ["probe", "--data", str(folder), "--config", "full", "--model", str(model), "--method",
             "causal-likelihood", "--no-kv-cache"]
    # the batch size auto settles on below: the same batches, so the same scores to the last digit (another
    # batch size may change a score's last digits, as the README says)
    assert main([*flags, "--batch-size", "4", "--out", str(tmp_path / "fixed")]) == 0

    rows = limit_rows(monkeypatch, GPT2LMHeadModel, FITS)
    assert main([*flags, "--batch-size", "auto", "--out", str(tmp_path / "auto")]) == 0
    (result,) = json.loads((tmp_path / "auto" / "results.json").read_text())
    # 256 (8 x the default 32), 128, ..., 8: a batch of 14 candidates, then 8 rows: out of memory; 4 fits
    assert result["settings"]["batch_size"] == "auto" and result["settings"]["resolved_batch_size"] == 4
    assert max(rows) > FITS and rows[-1] <= FITS
    assert (tmp_path / "auto" / "predictions.jsonl").read_bytes() == \
        (tmp_path / "fixed" / "predictions.jsonl").read_bytes()

    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main([*flags, "--batch-size", "big", "--out", str(tmp_path / "o")])
    assert exited.value.code == 2
    assert "'big' is not a number or 'auto'" in capsys.readouterr().err


def test_batch_size_auto_in_the_python_api(make_tiny_bert, tmp_path):
    import medlama

    folder = cv_inputs.write_probe_folder(tmp_path / "queries")
    encoder = make_tiny_bert("auto-bert")
    auto = medlama.probe(encoder, folder, config="full", settings={"batch_size": "auto"})
    fixed = medlama.probe(encoder, folder, config="full", settings={"batch_size": 2})
    assert auto.settings["batch_size"] == "auto" and auto.settings["resolved_batch_size"] == 8 * 128
    assert auto.predictions == fixed.predictions
