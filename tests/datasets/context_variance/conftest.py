"""Fixtures of the context-variance dataset tests: the tiny inputs written once for this folder's tests, and the folder
``medlama build context-variance`` builds from them."""

from __future__ import annotations

from pathlib import Path

import pytest

from medlama.cli import main

from cv_inputs import write_corpora, write_medlama_folder


@pytest.fixture(scope="package")
def medlama_folder(tmp_path_factory) -> Path:
    return write_medlama_folder(tmp_path_factory.mktemp("tiny-medlama") / "medlama")


@pytest.fixture(scope="package")
def corpora(tmp_path_factory) -> tuple[Path, Path]:
    return write_corpora(tmp_path_factory.mktemp("corpora"))


@pytest.fixture(scope="package")
def built(tmp_path_factory, medlama_folder, corpora) -> tuple[Path, Path]:
    """The sets built by the CLI from the MIMIC notes and the PMC article: ``(folder, index root)``."""
    root = tmp_path_factory.mktemp("cv-built")
    notes, pmc = corpora
    status = main(["build", "context-variance", "--medlama", str(medlama_folder), "--config", "full",
                   "--mimic", str(notes), "--pmc", str(pmc), "--out", str(root / "sets"),
                   "--index-dir", str(root / "indexes")])
    assert status == 0
    return root / "sets", root / "indexes"
