"""Kept fault cases of how a probe names its data and how many predictions it keeps: each runs the user's command
(``python -m medlama probe ...``, or the user's Python call) with the bad input and checks the one
``medlama: error:`` line (no traceback) or the error naming the argument, before any model loads or data is read.

* ``probe --top-k 0`` / ``--top-k many``: refused by the parser, naming the flag.
* ``medlama.probe(data=42)``: refused when the data is named (:meth:`QuerySource.of`), before the model is looked
  for; a loaded Dataset named as BioLAMA, a QuerySet asked for another candidate rule, and data given twice
  (``QuerySource(data=..., loaded=...)``) likewise; ``top_k=0`` names the setting.
* ``ProbeCallback(data=42)``: refused when the callback is made, before any training.
* a resumed probe that would rank deeper than its shards (``--top-k 20`` over a 10-deep run): one line naming
  ``top_k``, nothing ranked (its shards kept for the rerun with the first run's settings).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import cv_inputs  # tests/helpers (pytest pythonpath)
from medlama.core.errors import MedlamaInputError
from medlama.probers.query_set import QuerySet
from medlama.runs.queries import QuerySource
from refusals import medlama_here  # tests/helpers: the CLI's main, in this process

pytestmark = pytest.mark.slow


def medlama(*args: str | Path) -> subprocess.CompletedProcess:
    """``medlama ARGS`` through the CLI's main in this process (tests/helpers/refusals.py; offline, as
    tests/conftest.py sets the environment)."""
    return medlama_here(*args)


def one_error(run: subprocess.CompletedProcess) -> str:
    assert run.returncode == 2, run.stderr[-3000:]
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    return run.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("word, message", [("0", "argument --top-k: must be >= 1, got 0"),
                                           ("many", "argument --top-k: 'many' is not an integer")])
def test_probe_refuses_a_top_k_that_is_no_count(tmp_path, word, message):
    line = one_error(medlama("probe", "--data", tmp_path / "never-read", "--top-k", word, "--out", tmp_path / "o"))
    assert line.endswith(message) and "error:" in line
    assert not (tmp_path / "o").exists()


QUERIES = QuerySet(ids=["q1"], relations=["may_treat"], texts=["fever may be treated by [Y] ."], gold=[["aspirin"]],
                   candidates=["aspirin", "ibuprofen"], name="two")


@pytest.mark.parametrize("call, message", [
    (lambda medlama: medlama.probe("no/such-model-anywhere", data=42),
     "data must be a built folder, a Hub dataset id, a Dataset/DatasetDict or a QuerySet, not int"),
    (lambda medlama: medlama.probe(data=QUERIES, candidates="relation"),
     "a QuerySet carries its own candidate pool (rule 'evaluated')"),
    (lambda medlama: medlama.probe(data=QUERIES, top_k=0), "setting 'top_k' must be at least 1, got 0"),
    (lambda medlama: QuerySource(data=Path("folder"), loaded=QUERIES), "give the queries once"),
])
def test_the_python_api_refuses_bad_data_before_any_work(call, message, monkeypatch):
    import medlama
    import medlama.probers.registry as registry

    def never(*args, **kwargs):  # no model may load before the refusal
        raise AssertionError("a prober was made")

    monkeypatch.setattr(registry, "make_prober", never)
    with pytest.raises(MedlamaInputError) as refused:
        call(medlama)
    assert message in str(refused.value)


def test_a_loaded_dataset_is_not_read_as_biolama(tmp_path):
    from datasets import Dataset

    rows = Dataset.from_dict({"id": ["q1"], "relation": ["may_treat"], "head_name": ["fever"],
                              "question": ["fever may be treated by [Y] ."], "answer_names": [["aspirin"]]})
    with pytest.raises(MedlamaInputError, match="a loaded Dataset is read as MedLAMA queries"):
        QuerySource.of(rows, dataset="biolama")


def test_probe_callback_refuses_bad_data_when_made():
    from medlama.integrations import ProbeCallback

    with pytest.raises(MedlamaInputError, match="data must be a built folder"):
        ProbeCallback(data=42, every=1)


def test_a_resume_that_would_rank_deeper_is_one_line_naming_top_k(tmp_path):
    """The work folder a killed 10-deep run leaves (made here by a run stopped by SIGINT in its second shard),
    then ``--top-k 20``: refused in one line; the rerun as first asked continues."""
    from tiny_causal import save_causal

    data = cv_inputs.write_probe_folder(tmp_path / "medlama")
    gpt2 = save_causal(tmp_path / "gpt2", "gpt2")
    out = tmp_path / "out"
    flags = ["probe", "--data", data, "--config", "full", "--model", gpt2, "--method", "causal-likelihood",
             "--out", out]
    script = f"""
import sys
from medlama.cli import main
from medlama.probers.causal.prober import CausalLikelihoodProber
rank, calls = CausalLikelihoodProber.rank_scored, []
def killed(prober, queries, top_k=10, **options):
    calls.append(1)
    if len(calls) == 2:
        raise KeyboardInterrupt
    return rank(prober, queries, top_k=top_k, **options)
CausalLikelihoodProber.rank_scored = killed
sys.exit(main({[str(flag) for flag in flags]!r}))
"""
    stopped = subprocess.run([sys.executable, "-P", "-c", script], capture_output=True, text=True, timeout=600,
                             env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    assert stopped.returncode == 130, stopped.stderr[-3000:]
    line = one_error(medlama(*flags, "--top-k", "20"))
    assert line.startswith("medlama: error: ") and "top_k: 10 then, 20 now" in line and "--overwrite" in line
    rerun = medlama(*flags)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "1 of 2 shards already done" in rerun.stderr
    assert json.loads((out / "results.json").read_text())[0]["settings"]["ranked_top_k"] == 10
