"""``medlama recipe --batch-size auto`` and ``medlama sweep --batch-size auto``: the probe's ``--batch-size`` (one
flag, a number or ``auto``) reaches their retrieval probes, which resolve ``auto`` as ``medlama probe`` does
(:func:`medlama.runs.model_probe.probe_model`): the predictions of a fixed batch size, ``"auto"`` recorded beside
the size it resolved to."""

from __future__ import annotations

import pytest

from medlama.cli import main
from medlama.probers.query_set import QuerySet
from medlama.probers.retrieval import RetrievalSettings
from medlama.runs.model_probe import probe_model

pytestmark = pytest.mark.usefixtures("one_thread")


class Stop(Exception):
    """Raised by the stand-in workflows once they have seen the probe settings."""


@pytest.fixture
def seen(monkeypatch):
    import medlama.figures.sweep as sweep
    import medlama.recipe.workflow as workflow

    settings = []

    def stand_in(*args, **kwargs):
        settings.append(kwargs["probe_settings"])
        raise Stop

    monkeypatch.setattr(workflow, "rewire_then_probe", stand_in)
    monkeypatch.setattr(sweep, "run_sweep", stand_in)
    for command in ("recipe", "sweep"):
        monkeypatch.setattr(f"medlama.commands.{command}.load_queries", lambda args: None)
    return settings


@pytest.mark.parametrize("command", ["recipe", "sweep"])
def test_batch_size_auto_reaches_the_probe_of(command, seen, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the patients were treated with aspirin for pain \n" * 20, encoding="utf-8")
    with pytest.raises(Stop):
        main([command, "--corpus", str(corpus), "--batch-size", "auto", "--out", str(tmp_path / "out")])
    assert seen[-1] == RetrievalSettings(batch_size="auto")


def test_probe_model_resolves_auto_to_the_predictions_of_a_fixed_size(make_tiny_bert):
    encoder = make_tiny_bert("model-probe-encoder")
    names = ["aspirin", "heparin", "insulin", "warfarin", "codeine"]
    queries = QuerySet(ids=["q0", "q1", "q2"], relations=["r", "r", "s"], name="tiny", candidates=names,
                       texts=["pain is treated by [Y] .", "[Y] thins the blood .", "diabetes needs [Y] ."],
                       gold=[["aspirin"], ["heparin"], ["insulin"]])
    fixed = probe_model("retrieval", encoder, RetrievalSettings(batch_size=2), queries, label="enc", top_k=5,
                        ks=(1, 5))
    auto = probe_model("retrieval", encoder, RetrievalSettings(batch_size="auto"), queries, label="enc",
                       top_k=5, ks=(1, 5))
    assert fixed.settings["batch_size"] == 2 and "resolved_batch_size" not in fixed.settings
    # nothing runs out of memory on the CPU: the first size tried, 8 x retrieval's default 128
    assert auto.settings["batch_size"] == "auto" and auto.settings["resolved_batch_size"] == 8 * 128
    assert auto.predictions == fixed.predictions and auto.metrics == fixed.metrics
