"""The acc@k and UCM metrics as ``evaluate`` modules, one folder each with its script and card.

Each folder loads on its own with ``evaluate.load("metrics/<name>")``; the toolkit computes every score
through these same scripts (``load``), so there is one implementation.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path

METRICS_DIR = Path(__file__).resolve().parent


def metric_path(name: str) -> Path:
    """Folder of the metric module ``name`` (``acc_at_k`` or ``ucm``)."""
    path = METRICS_DIR / name
    if not (path / f"{name}.py").is_file():
        known = sorted(p.name for p in METRICS_DIR.iterdir() if (p / f"{p.name}.py").is_file())
        raise ValueError(f"unknown metric {name!r}; known: {known}")
    return path


def load(name: str, **kwargs):
    """``evaluate.load`` of the bundled metric module ``name``, offline."""
    # evaluate loads when this runs, not when the CLI parses its flags
    import evaluate

    return evaluate.load(str(metric_path(name)), **kwargs)


@functools.cache
def answer_normalizer() -> Callable[[str], str]:
    """The acc@k metric's own ``normalized`` matching key (its module's ``normalize_answer``, loaded once): one
    rule wherever medlama compares answer names as ``--match normalized`` scores them."""
    return sys.modules[type(load("acc_at_k")).__module__].normalize_answer
