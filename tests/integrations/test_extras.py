"""An optional extra that is not installed is a message naming the extra to install, not a bare
``ModuleNotFoundError``: ``medlama.mteb_task`` without MTEB, and :func:`medlama.core.extras.require` itself."""

from __future__ import annotations

import sys

import pytest

import medlama
from medlama.core.errors import MedlamaInputError
from medlama.core.extras import require


def test_require_names_the_extra_of_a_missing_module(monkeypatch):
    assert require("json", "none") is sys.modules["json"]
    monkeypatch.setitem(sys.modules, "some_extra_module", None)  # an import of it fails as if not installed
    with pytest.raises(MedlamaInputError, match=r'the thing needs the \'extra\' extra: pip install "medlama\[extra\]"'):
        require("some_extra_module", "extra", what="the thing")


def test_mteb_task_without_mteb_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "mteb", None)
    monkeypatch.delitem(sys.modules, "medlama.integrations.mteb.task", raising=False)
    with pytest.raises(MedlamaInputError, match=r'pip install "medlama\[mteb\]"'):
        medlama.mteb_task(data=None)
    monkeypatch.delitem(sys.modules, "medlama.integrations.mteb.task", raising=False)  # not kept half-imported
