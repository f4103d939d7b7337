"""Running the ``>>>`` examples of a metric's card or docstring, as a reader would, from the repository root."""

from __future__ import annotations

import doctest
from pathlib import Path

import evaluate

REPO = Path(__file__).resolve().parents[2]


def run_doctest(text: str, name: str, monkeypatch, cache_dir) -> tuple[doctest.TestResults, str]:
    """Run the ``>>>`` examples in ``text`` from the repository root; return (results, report)."""
    monkeypatch.chdir(REPO)
    monkeypatch.setattr(evaluate.config, "HF_METRICS_CACHE", cache_dir)
    test = doctest.DocTestParser().get_doctest(text, {"evaluate": evaluate}, name, None, 0)
    report: list[str] = []
    results = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE).run(test, out=report.append)
    return results, "".join(report)
