"""The user's path for a refused command: ``python -m medlama ...`` in a fresh interpreter, and the one
``medlama: error:`` line it must end with (exit status 2, no traceback)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def medlama(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``python -P -m medlama ARGS`` (``-P``: a folder named ``medlama`` in ``cwd`` never shadows the package)."""
    return subprocess.run([sys.executable, "-P", "-m", "medlama", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


def error_line(result: subprocess.CompletedProcess, *, alone: bool = False) -> str:
    """The one ``medlama: error:`` line of a refused command (exit status 2, no traceback); ``alone``: and
    nothing else on stderr."""
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("medlama: error:")]
    assert len(lines) == 1, result.stderr
    assert not alone or result.stderr.strip().splitlines() == lines, result.stderr
    return lines[0]


def refused_in(cwd: Path, *words: str) -> str:
    """The error line of ``medlama WORDS`` run in ``cwd``, which it must leave as it was."""
    before = sorted(p.name for p in cwd.iterdir())
    line = error_line(medlama(*words, cwd=cwd))
    assert sorted(p.name for p in cwd.iterdir()) == before
    return line
