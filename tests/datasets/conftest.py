"""Fixtures shared by the dataset builders' tests: a BioLAMA-like fixture release, written once per module, and a
writable copy of it per test (a test may damage its copy)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def pristine(biolama_fx, tmp_path_factory) -> Path:
    """The fixture release (the folder holding ``data/``), written once per test module; never modified."""
    root = tmp_path_factory.mktemp("pristine")
    biolama_fx.write_release(root)
    return root


@pytest.fixture
def copy(tmp_path, pristine) -> Path:
    """A writable copy of the fixture release (the folder holding ``data/``)."""
    target = tmp_path / "release"
    shutil.copytree(pristine, target)
    return target
