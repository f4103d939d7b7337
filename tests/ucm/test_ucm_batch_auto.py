"""``medlama ucm --batch-size auto``: the one ``--batch-size`` of ``medlama probe`` (a number or ``auto``), resolved
as the probe resolves it: each ranker made at 8 times its default batch size and made again at half the size on
out-of-memory; results record ``"auto"`` beside the size it resolved to, and the ranks are those of that fixed
size. The out-of-memory error is simulated: the tiny encoder's forward raises CUDA's above ``FITS`` rows."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from transformers import BertModel

from medlama.cli import main
from out_of_memory import limit_rows  # tests/helpers

FITS = 3  # rows per forward pass that "fit in memory"
SCORES = ("target", "negative", "accuracy", "num_records")


def _flags(sets, model, out) -> list[str]:
    return ["ucm", "--sets", str(sets), "--model", str(model), "--method", "retrieval", "--limit", "1",
            "--out", str(out)]


def test_python_dash_m_medlama_ucm_takes_batch_size_auto(sets, tiny_encoder, tmp_path):
    done = subprocess.run([sys.executable, "-P", "-m", "medlama", *_flags(sets, tiny_encoder, tmp_path / "auto"),
                           "--batch-size", "auto", "--quiet"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    (model,) = json.loads((tmp_path / "auto" / "results.json").read_text())["models"]
    # nothing runs out of memory on the CPU: the first size tried, 8 x the retrieval ranker's default 64
    assert model["settings"]["batch_size"] == "auto" and model["settings"]["resolved_batch_size"] == 8 * 64


def test_ucm_auto_backs_off_on_out_of_memory_to_the_ranks_of_a_fixed_size(sets, tiny_encoder, tmp_path,
                                                                           monkeypatch):
    assert main([*_flags(sets, tiny_encoder, tmp_path / "fixed"), "--batch-size", "2"]) == 0
    rows = limit_rows(monkeypatch, BertModel, FITS)
    assert main([*_flags(sets, tiny_encoder, tmp_path / "auto"), "--batch-size", "auto"]) == 0
    (fixed,) = json.loads((tmp_path / "fixed" / "results.json").read_text())["models"]
    (auto,) = json.loads((tmp_path / "auto" / "results.json").read_text())["models"]
    assert max(rows) > FITS and rows[-1] <= FITS
    # 512, 256, ..., 4: out of memory; 2 fits (the pool's names and the inputs come in batches of more than 3)
    assert auto["settings"]["batch_size"] == "auto" and auto["settings"]["resolved_batch_size"] == 2
    assert {key: auto[key] for key in SCORES} == {key: fixed[key] for key in SCORES}


@pytest.mark.parametrize("word, message", [
    ("big", "argument --batch-size: 'big' is not a number or 'auto'"),
    ("2.5", "argument --batch-size: '2.5' is not a number or 'auto'"),
])
def test_ucm_reads_batch_size_as_probe_does(word, message, sets, tiny_encoder, tmp_path, capsys):
    for command in (["probe", "--out", str(tmp_path / "p")], _flags(sets, tiny_encoder, tmp_path / "u")):
        with pytest.raises(SystemExit) as exited:
            main([*command, "--batch-size", word])
        assert exited.value.code == 2 and message in capsys.readouterr().err
