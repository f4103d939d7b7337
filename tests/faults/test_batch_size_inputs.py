"""A bad ``--batch-size`` to every command that offers it for inputs per forward pass (``probe``, ``ucm``,
``recipe``, ``sweep``: one flag, :class:`medlama.core.batching.BatchSizeFlag`), run as a user runs them
(``python -m medlama``): the same check and the same message everywhere, exit status 2, no traceback, nothing
written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

COMMANDS = {"probe": ["probe", "--data", "nowhere"], "ucm": ["ucm", "--sets", "nowhere"],
            "recipe": ["recipe", "--corpus", "corpus.txt"], "sweep": ["sweep", "--corpus", "corpus.txt"]}


def refused(cwd: Path, words: list[str]) -> str:
    """The stderr of a refused command, checked: exit status 2, no traceback, nothing written."""
    before = sorted(p.name for p in cwd.iterdir())
    run = subprocess.run([sys.executable, "-P", "-m", "medlama", *words], capture_output=True, text=True, cwd=cwd,
                         timeout=300)
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    assert sorted(p.name for p in cwd.iterdir()) == before
    return run.stderr


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_bad_batch_size_is_refused_alike_by(command, tmp_path):
    (tmp_path / "corpus.txt").write_text("the patients were treated with aspirin for pain \n" * 20, encoding="utf-8")
    words = [*COMMANDS[command], "--out", "out"]
    err = refused(tmp_path, [*words, "--batch-size", "0"])
    assert err.splitlines()[-1] == "medlama: error: batch size must be >= 1, got 0"
    err = refused(tmp_path, [*words, "--batch-size", "big"])
    assert err.splitlines()[-1] == f"medlama {command}: error: argument --batch-size: 'big' is not a number or 'auto'"
