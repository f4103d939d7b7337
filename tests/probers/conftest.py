"""Fixtures of the probe tests that run tiny causal LMs on a tiny MedLAMA folder."""

from __future__ import annotations

from pathlib import Path

import pytest

import cv_inputs  # tests/helpers: a MedLAMA-shaped folder of 6 queries
from tiny_causal import save_causal  # tests/helpers: tiny causal LMs with locally trained tokenizers


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory) -> Path:
    """A tiny GPT-2 and its tokenizer, saved once per test module."""
    return save_causal(tmp_path_factory.mktemp("tiny-gpt2"), "gpt2")


@pytest.fixture(scope="module")
def medlama_tiny(tmp_path_factory) -> Path:
    """The 6-query MedLAMA-shaped folder of ``cv_inputs`` with its ``full`` candidate set (heads and answers)."""
    return cv_inputs.add_full_pool(cv_inputs.write_medlama_folder(tmp_path_factory.mktemp("medlama") / "medlama"))
