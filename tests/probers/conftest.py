"""Fixtures of the prober tests that drive ``medlama probe`` on a tiny causal LM: the model and the 6-query
MedLAMA-shaped folder (2 relations) with its ``full`` candidate set."""

from __future__ import annotations

from pathlib import Path

import pytest

import cv_inputs  # tests/helpers (pytest pythonpath): a MedLAMA-shaped folder of 6 queries
from tiny_causal import save_causal  # tests/helpers: tiny causal LMs with locally trained tokenizers


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory) -> Path:
    return save_causal(tmp_path_factory.mktemp("cli-tiny-gpt2"), "gpt2")


@pytest.fixture(scope="module")
def medlama_tiny(tmp_path_factory) -> Path:
    """The 6-query MedLAMA-shaped folder of ``cv_inputs`` with its ``full`` candidate set (heads and answers)."""
    return cv_inputs.write_probe_folder(tmp_path_factory.mktemp("cli-medlama") / "medlama")
