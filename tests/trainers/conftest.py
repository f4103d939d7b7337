"""Fixtures of the tiny rewiring runs (tests/helpers/tiny_rewire.py): the tiny BERT and its corpus."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiny_rewire import LINES, make_tiny_bert  # tests/helpers


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory) -> Path:
    return make_tiny_bert(tmp_path_factory.mktemp("models") / "tiny-bert")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "sentences.txt"
    path.write_text("".join(line + "\n" for line in LINES), encoding="utf-8")
    return path
