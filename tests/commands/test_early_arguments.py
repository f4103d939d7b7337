"""Every command refuses a bad argument before its long work: before torch, transformers or datasets are
imported, and so before any data is read or model loaded (each case runs ``medlama`` in a fresh interpreter)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from medlama.core.defaults import default_model_path

#: Runs ``medlama ARGS`` and says which heavy libraries the run imported.
SCRIPT = """
import sys
from medlama.cli import main
status = main(sys.argv[1:])
print("status", status, "imported", sorted(m for m in ("torch", "transformers", "datasets", "sentence_transformers")
                                           if m in sys.modules))
"""

CASES = [
    (["rewire", "--corpus", "{corpus}", "--out", "{out}", "--steps", "0"], "setting 'steps' must be at least 1, got 0"),
    (["rewire", "--corpus", "{corpus}", "--out", "{out}", "--dropout", "1.0"],
     "setting 'dropout' must be below 1, got 1.0"),
    (["rewire", "--corpus", "{corpus}", "--out", "{out}", "--batch-size", "1"],
     "setting 'batch_size' must be at least 2, got 1"),
    (["rewire", "--corpus", "{corpus}", "--out", "{out}", "--eval-steps", "5", "--eval-relations", "may_treet"],
     "unknown relation(s) 'may_treet' (did you mean 'may_treat'?)"),
    (["probe", "--ks", "0", "--out", "{out}"], "every ks value must be >= 1, got [0]"),
    (["probe", "--relations", "may_treet", "--out", "{out}"],
     "unknown relation(s) 'may_treet' (did you mean 'may_treat'?); known: associated_morphology_of"),
    (["probe", "--batch-size", "0", "--out", "{out}"], "batch size must be >= 1, got 0"),
    (["recipe", "--corpus", "{corpus}", "--steps", "0", "--out", "{out}"], "setting 'steps' must be at least 1, got 0"),
    (["ucm", "--sets", "{sets}", "--ks", "0", "--out", "{out}"], "setting 'ks' must be at least 1, got 0"),
    (["compare", "{sets}", "{sets}", "--level", "1.5"], "setting 'level' must be at most 0.999, got 1.5"),
    (["compare", "{sets}", "{sets}", "--plot", "{out}.pdf"], "{out}.pdf: the plot is written as PNG"),
    (["export", "lm-eval", "--data", "{sets}", "--out", "{out}", "--max-gen-toks", "0"],
     "setting 'max_gen_toks' must be at least 1, got 0"),
    # paths a command would otherwise find missing only after importing torch, reading data or loading a model
    (["rewire", "--corpus", "{missing}", "--out", "{out}"], "{missing}: corpus file not found"),
    (["rewire", "--corpus", "{corpus}", "--out", "{out}", "--model", "{missing}"],
     "{missing}: model path does not exist"),
    (["recipe", "--corpus", "{corpus}", "--model", "{missing}", "--out", "{out}"], "{missing}: model path does not exist"),
    (["ucm", "--sets", "{sets}", "--model", "{bundled}", "{missing}", "--out", "{out}"],
     "{missing}: model path does not exist"),
    (["compare", "{missing}", "{sets}"], "{missing}: not a folder"),
    (["push-results", "{missing}", "me/results", "--dry-run", "{out}"], "{missing}: not a folder"),
    (["export", "lm-eval", "--data", "{missing}", "--out", "{out}"], "{missing}: no such dataset folder"),
    (["annotate", "export", "{missing}", "--out", "{out}"], "{missing}: not a folder"),
    (["annotate", "export", "{sets}", "--out", "{out}", "--k", "11"], "setting 'k' must be at most 10, got 11"),
    (["annotate", "score", "{sets}", "--sheet", "{sets}", "{corpus}", "--plot", "{out}.pdf"],
     "{out}.pdf: the plot is written as PNG"),
]
#: Cases that may import torch (to look into a model folder), but must not read data or load a model first.
LATER_CASES = [
    (["probe", "--model", "{sets}", "--checkpoints", "--out", "{out}"], "{sets}: no checkpoint-N folders to probe"),
]


@pytest.mark.parametrize("argv, message", CASES,
                         ids=[" ".join([a[0], *(w for w in a[1:] if w.startswith("--") and w not in
                                                 ("--corpus", "--out", "--sets"))]) + (" path" if "{missing}" in m else "")
                             for a, m in CASES])
def test_a_bad_argument_is_refused_before_heavy_imports(argv, message, tmp_path):
    assert run_refused(argv, message, tmp_path) == "status 2 imported []"


@pytest.mark.parametrize("argv, message", LATER_CASES)
def test_a_bad_argument_is_refused_before_any_data_or_model(argv, message, tmp_path):
    """With no release to build MedLAMA from, a command that read the data first would fail on that instead."""
    assert run_refused(argv, message, tmp_path).startswith("status 2")


def run_refused(argv: list[str], message: str, tmp_path) -> str:
    """Run ``medlama ARGV`` in a fresh interpreter; assert it is refused with ``message`` and wrote nothing;
    return its report of the status and the heavy libraries it imported."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("aspirin may treat a headache in adults\n", encoding="utf-8")
    (tmp_path / "sets").mkdir()  # as much of a context-variance folder as the commands read before the models
    (tmp_path / "sets" / "build_info.json").write_text('{"dataset": "context-variance"}', encoding="utf-8")
    paths = {"corpus": corpus, "out": tmp_path / "out", "sets": tmp_path / "sets", "missing": tmp_path / "missing",
             "bundled": default_model_path()}
    words = [word.format(**paths) for word in argv]
    message = message.format(**paths)
    # No release and an empty cache: a command that read its data before checking would fail on them instead.
    env = {**os.environ, "MEDLAMA_CACHE": str(tmp_path / "cache"), "MEDLAMA_SOURCE": str(tmp_path / "no-release"),
           "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", SCRIPT, *words], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=600)
    assert f"medlama: error: {message}" in done.stderr, done.stderr
    assert not (tmp_path / "out").exists()
    return done.stdout.strip()
