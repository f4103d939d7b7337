"""Fixtures of the UCM tests: tiny models (one with an MLM head, one without) on one thread, and tiny
context-variance sets built from the corpora and MedLAMA folder of ``tests/helpers/cv_inputs.py``."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True, scope="module")
def _one_thread(one_thread):
    """Every UCM test module runs its tiny models on one thread (the ``one_thread`` fixture)."""
    yield


@pytest.fixture(scope="module")
def tiny_mlm(make_tiny_bert) -> Path:
    """A 2-layer BERT with an MLM head and the bundled model's vocabulary."""
    return make_tiny_bert("cv-tiny-mlm", mlm=True)


@pytest.fixture(scope="module")
def tiny_encoder(make_tiny_bert) -> Path:
    """The same architecture without the MLM head (as `medlama rewire` saves encoders)."""
    return make_tiny_bert("cv-tiny-encoder", seed=1)
