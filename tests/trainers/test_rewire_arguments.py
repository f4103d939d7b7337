"""``medlama.rewire`` checks its arguments as ``medlama rewire`` does, before any model loads: the settings, the
corpus files and the model path."""

from __future__ import annotations

import re

import pytest

import medlama
from medlama.core.errors import MedlamaInputError
from medlama.trainers import trainer


def test_bad_arguments_are_refused_before_any_model_loads(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded before the arguments were checked")

    monkeypatch.setattr(trainer, "build_rewire_model", refuse)
    corpus, missing = tmp_path / "corpus.txt", tmp_path / "missing"
    corpus.write_text("aspirin may treat a headache in adults\n" * 4, encoding="utf-8")
    cases = [((corpus,), {"steps": 0}, "setting 'steps' must be at least 1, got 0"),
             ((corpus,), {"dropout": 1.0}, "setting 'dropout' must be below 1, got 1.0"),
             ((missing,), {}, f"{missing}: corpus file not found"),
             (([corpus, tmp_path],), {}, f"{tmp_path}: is a folder"),
             ((corpus, tmp_path / "out", missing), {}, f"{missing}: model path does not exist")]
    for arguments, settings, message in cases:
        if len(arguments) == 1:
            arguments = (*arguments, tmp_path / "out")
        with pytest.raises(MedlamaInputError, match=re.escape(message)):
            medlama.rewire(*arguments, **settings)
        assert not (tmp_path / "out").exists()


def test_a_rewire_config_cannot_be_changed_after_its_checks():
    """A field set after construction would skip the checks made as the config is built (steps=0 here)."""
    import dataclasses

    from medlama.trainers.config import RewireConfig

    config = RewireConfig.preset("demo")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.steps = 0
    with pytest.raises(MedlamaInputError, match="setting 'steps' must be at least 1"):
        dataclasses.replace(config, steps=0)
    assert dataclasses.replace(config, skip_short_lines=True).skip_short_lines
