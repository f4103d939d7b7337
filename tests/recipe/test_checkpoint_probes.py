"""Every checkpoint of a rewired model probed in one place (:func:`medlama.runs.model_probe.probe_checkpoints`),
which ``medlama recipe --probe-checkpoints`` and ``medlama sweep`` both call: in step order (step 10 after step 2),
each the probe of that checkpoint by hand, labelled ``name@step``."""

from __future__ import annotations

import shutil

from medlama.probers.query_set import QuerySet
from medlama.probers.retrieval import RetrievalSettings
from medlama.runs.model_probe import probe_checkpoints, probe_model


def test_each_checkpoint_is_probed_in_step_order_as_by_hand(make_tiny_bert, tmp_path):
    rewired = tmp_path / "rewired"
    for step, seed in ((10, 1), (2, 2)):  # different weights per step, written out of order
        shutil.copytree(make_tiny_bert(f"checkpoint-probe-{seed}", seed=seed),
                        rewired / "checkpoints" / f"checkpoint-{step}")
    names = ["aspirin", "heparin", "insulin", "warfarin"]
    queries = QuerySet(ids=["q0", "q1"], relations=["r", "s"], name="tiny", candidates=names,
                       texts=["pain is treated by [Y] .", "[Y] thins the blood ."], gold=[["aspirin"], ["heparin"]])
    settings = RetrievalSettings(batch_size=2)
    told = []
    steps = probe_checkpoints(rewired, settings, queries, name="corpus.txt", progress=told.append)
    assert list(steps) == [2, 10]
    assert told == ["probing corpus.txt at step 2", "probing corpus.txt at step 10"]
    for step, result in steps.items():
        by_hand = probe_model("retrieval", rewired / "checkpoints" / f"checkpoint-{step}", settings, queries,
                              label=f"corpus.txt@{step}")
        assert result.label == f"corpus.txt@{step}"
        assert result.predictions == by_hand.predictions and result.metrics == by_hand.metrics
