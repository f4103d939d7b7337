"""``benchmarks/optiprompt.py`` times what ``medlama optiprompt`` runs: its dev decodings are counted apart from
the training steps by standing in for the trainer's own ``dev_accuracy`` (one decoding before the first epoch and
one after each), so the whole relation's seconds split into training and dev decoding. Speed is not asserted."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

pytestmark = pytest.mark.usefixtures("one_thread")  # a tiny model: one thread (tests/conftest.py)


def test_the_dev_decodings_are_timed_apart_from_training(monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))  # the script adds a finder for this checkout
    import optiprompt  # benchmarks/optiprompt.py, a script

    from medlama.trainers.optiprompt import trainer

    real = trainer.dev_accuracy
    assert optiprompt.main(["--size", "small", "--epochs", "2", "--train", "16", "--dev", "3", "--max-masks", "2",
                            "--device", "cpu", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert trainer.dev_accuracy is real  # put back
    assert (record["epochs"], record["steps"], record["dev_queries"]) == (2, 2, 3)
    assert record["dev_decodings"] == 3  # before the first epoch, and after each
    assert record["dev_decoding_seconds"] > 0
    assert record["whole_seconds"] == pytest.approx(record["training_seconds"] + record["dev_decoding_seconds"],
                                                    abs=2e-3)
