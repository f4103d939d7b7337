"""``medlama.ucm`` checks its arguments as ``medlama ucm`` does, before the output is claimed or any model loads:
the sets folder, the method, every model path and the device."""

from __future__ import annotations

import re

import pytest

import medlama
from medlama.core.defaults import default_model_path
from medlama.core.errors import MedlamaInputError
from medlama.ucm_eval import rankers


@pytest.fixture
def sets(tmp_path, monkeypatch):
    """As much of a context-variance folder as is read before the models; any model load fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded before the arguments were checked")

    monkeypatch.setattr(rankers, "make_ranker", refuse)
    folder = tmp_path / "sets"
    folder.mkdir()
    (folder / "build_info.json").write_text('{"dataset": "context-variance"}', encoding="utf-8")
    return folder


def test_bad_arguments_are_refused_before_any_model_loads(sets, tmp_path):
    missing = tmp_path / "missing"
    cases = [({"model": [default_model_path(), missing]}, f"{missing}: model path does not exist"),
             ({"device": "banana"}, "device 'banana' is not a device; give cpu, cuda, cuda:N or mps"),
             ({"method": "mlmx"}, "unknown ranker 'mlmx'")]
    for arguments, message in cases:
        with pytest.raises(MedlamaInputError, match=re.escape(message)):
            medlama.ucm(str(sets), out=tmp_path / "out", **arguments)
        assert not (tmp_path / "out").exists()
    with pytest.raises(MedlamaInputError, match="not a context-variance folder"):
        medlama.ucm(str(tmp_path), device="banana")
