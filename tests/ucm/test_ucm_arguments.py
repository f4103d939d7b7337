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


def test_models_are_labelled_by_the_probes_rule(tmp_path):
    """One label rule for probe and ucm: same-named folders are told apart by their parents, a label given twice
    is refused, the bundled encoder is `bundled`."""
    from medlama.ucm_eval.evaluation import FLAGS, UcmModels, _models_and_labels

    a, b = tmp_path / "a" / "model", tmp_path / "b" / "model"
    assert _models_and_labels(UcmModels(model=(str(a), str(b))), FLAGS)[1] == ["a/model", "b/model"]
    assert _models_and_labels(UcmModels(), FLAGS)[1] == ["bundled"]
    with pytest.raises(MedlamaInputError, match="--label 'x' given more than once"):
        _models_and_labels(UcmModels(model=(str(a), str(b)), label=("x", "x")), FLAGS)
    with pytest.raises(MedlamaInputError, match="1 --label values for 2 --model values"):
        _models_and_labels(UcmModels(model=(str(a), str(b)), label=("x",)), FLAGS)
