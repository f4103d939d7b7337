"""Kept fault cases of resuming a ``medlama probe --templates FILE --out OUT`` that was killed after its first
template: a rerun whose templates are not the ones the kept shards were ranked with must be refused with one
``medlama: error:`` line naming the template that differs and how to start over, before anything is ranked
(``medlama.probe`` writes no output folder, so it has nothing to resume); the same command continues. Each
rerun is the user's command (``python -m medlama probe ...`` in a subprocess).

* another template file (a template reworded);
* the same file edited in place (its templates reordered);
* the plain probe (no ``--templates``) into the same ``--out``;
* the release set instead of the file.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import cv_inputs  # tests/helpers (pytest pythonpath): the 6-query MedLAMA-shaped folder
from medlama.cli import main
from medlama.probers.retrieval import RetrievalProber

from shard_calls import RankCalls, shard_files  # tests/helpers

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_thread")]
FINDING, TREAT = cv_inputs.FINDING, cv_inputs.TREAT
TEMPLATES = {FINDING: ["[X] may have finding [Y] .", "[X] shows [Y] ."],
             TREAT: ["[X] may treat [Y] .", "[X] treats [Y] ."]}


def write(path, templates):
    path.write_text("relation,template\n" + "".join(f"{r},{t}\n" for r, ts in templates.items() for t in ts),
                    encoding="utf-8")
    return path


def medlama_cli(*args) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.run([sys.executable, "-P", "-m", "medlama", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=600)


def reworded(tmp_path, file):
    templates = {FINDING: TEMPLATES[FINDING], TREAT: [TEMPLATES[TREAT][0], "[X] cures [Y] ."]}
    return write(tmp_path / "reworded.csv", templates), [
        "data.templates.T2.per_relation.may_treat: '[X] treats [Y] .' then, '[X] cures [Y] .' now"]


def edited(tmp_path, file):
    write(file, {r: ts[::-1] for r, ts in TEMPLATES.items()})
    return file, ["data.templates.T1.per_relation", "data.templates.T1.sha256"]


def plain(tmp_path, file):
    return None, ["other settings", "data.templates"]


def release(tmp_path, file):
    return "release", ["data.templates.T1", "other settings"]


@pytest.mark.parametrize("change", [reworded, edited, plain, release])
def test_a_resumed_templates_probe_with_other_templates_is_refused(make_tiny_bert, tmp_path, monkeypatch, change):
    data = cv_inputs.write_probe_folder(tmp_path / "medlama")
    model = make_tiny_bert("template-resume")
    file, out = write(tmp_path / "t.csv", TEMPLATES), tmp_path / "out"
    flags = ["probe", "--data", data, "--config", "full", "--model", model, "--out", out]
    RankCalls(monkeypatch, RetrievalProber, stop_at=2)  # killed in the second template
    assert main([*map(str, flags), "--templates", str(file)]) == 130 and len(shard_files(out)) == 1

    other, expected = change(tmp_path, file)
    run = medlama_cli(*flags, *(["--templates", other] if other is not None else []))
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr[-3000:]
    line = lines[-1]
    assert line.startswith("medlama: error: ") and "--overwrite" in line, line
    assert all(part in line for part in expected), line
    assert len(shard_files(out)) == 1 and not out.exists()  # nothing ranked, the shards kept

    if change is not edited:  # the run's own command still continues it
        run = medlama_cli(*flags, "--templates", file)
        assert run.returncode == 0 and "1 of 2 shards already done" in run.stderr, run.stderr[-3000:]
