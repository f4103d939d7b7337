"""Each metric module loaded once per test module, both ways a user loads it: through the toolkit
(``medlama.metrics.load``) and by its folder's path (``evaluate.load("metrics/NAME")``)."""

from __future__ import annotations

from pathlib import Path

import evaluate
import pytest

import medlama.metrics

METRICS_DIR = Path(__file__).resolve().parents[2] / "metrics"


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    """Where evaluate keeps its per-computation data: a fresh folder, not the user's cache."""
    return str(tmp_path_factory.mktemp("metric_cache"))


def _loaded(name: str):
    """The two module-scoped fixtures of metric ``name``: through the toolkit, and by path (evaluate.load is not
    free, so each loads once)."""

    @pytest.fixture(scope="module")
    def through_toolkit(cache_dir):
        return medlama.metrics.load(name, keep_in_memory=True, cache_dir=cache_dir)

    @pytest.fixture(scope="module")
    def by_path(cache_dir):
        return evaluate.load(str(METRICS_DIR / name), keep_in_memory=True, cache_dir=cache_dir)

    return through_toolkit, by_path


acc, acc_by_path = _loaded("acc_at_k")
ucm, ucm_by_path = _loaded("ucm")
