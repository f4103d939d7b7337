"""``medlama rewire`` with its output piped: no trainer bar, and no log printed as a Python dict on stdout among
the human output (transformers' ``PrinterCallback``); medlama's plain progress line on stderr instead, as its
other long loops print it off a terminal, and nothing with ``--no-progress``."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def rewire_piped(tiny_bert, corpus, out, *extra: str, interval: str = "0") -> subprocess.CompletedProcess:
    """``python -m medlama rewire`` of the tiny BERT, stdout and stderr pipes (never a terminal)."""
    env = {**os.environ, "MEDLAMA_LOG_INTERVAL": interval}
    env.pop("TQDM_DISABLE", None)
    return subprocess.run([sys.executable, "-P", "-m", "medlama", "rewire", "--corpus", str(corpus), "--out", str(out),
                           "--model", str(tiny_bert), "--steps", "3", "--batch-size", "4", "--max-length", "32",
                           "--logging-steps", "1", *extra], capture_output=True, text=True, env=env, timeout=600)


def test_piped_rewire_prints_no_log_dicts_and_plain_progress_lines(tiny_bert, corpus, tmp_path):
    run = rewire_piped(tiny_bert, corpus, tmp_path / "rewired")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "{'loss'" not in run.stdout and "'loss':" not in run.stdout + run.stderr, run.stdout
    assert "\r" not in run.stderr  # no bar redrawn
    lines = [line for line in run.stderr.splitlines() if line.startswith("medlama: rewiring:")]
    assert lines and lines[-1].startswith("medlama: rewiring: 3/3 steps"), run.stderr[-3000:]
    # the losses are still kept: every logged step's loss is in the trainer state
    state = json.loads(next((tmp_path / "rewired" / "checkpoints").glob("checkpoint-3/trainer_state.json")).read_text())
    assert [entry["step"] for entry in state["log_history"] if "loss" in entry] == [1, 2, 3]


def test_no_progress_asks_for_silence(tiny_bert, corpus, tmp_path):
    run = rewire_piped(tiny_bert, corpus, tmp_path / "rewired", "--no-progress")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "medlama: rewiring:" not in run.stderr and "'loss':" not in run.stdout
