"""Checks every push's dry run must pass (push-dataset, push-model, push-metric)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from medlama.core.errors import MedlamaInputError


def assert_busy_dry_run_refused(push: Callable[..., object], tmp_path: Path) -> None:
    """``push(dry_run=FOLDER)`` into a folder holding a user's file is refused, and the file stays as it was."""
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "mine.txt").write_text("keep")
    with pytest.raises(MedlamaInputError, match="busy: the dry-run folder exists and is not an earlier dry run"):
        push(dry_run=busy)
    assert [p.name for p in busy.iterdir()] == ["mine.txt"] and (busy / "mine.txt").read_text() == "keep"
