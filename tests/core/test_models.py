"""``medlama.core.models``: resolving a model argument, reading its config, quiet loading, the device."""

from __future__ import annotations

import json
import logging

import pytest

from medlama.core.defaults import default_model_path
from medlama.core.errors import MedlamaInputError
from medlama.core.models import pick_device, quiet_transformers, read_config, resolve_model


def test_resolve_model(tmp_path):
    assert resolve_model(None) == str(default_model_path())
    st = tmp_path / "st-model"
    (st / "0_Transformer").mkdir(parents=True)
    (st / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "0_Transformer", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    assert resolve_model(st) == str(st / "0_Transformer")
    assert resolve_model(tmp_path) == str(tmp_path)
    assert resolve_model("bert-base-uncased") == "bert-base-uncased"  # a Hub id: left to transformers
    for missing in (tmp_path / "nope", "./nope", "../models/x/y"):
        with pytest.raises(MedlamaInputError, match=r"model path does not exist \(and it is not a Hub id either\)"):
            resolve_model(missing)


def test_read_config_and_helpers(tmp_path):
    assert read_config(default_model_path()).model_type == "bert"
    with pytest.raises(MedlamaInputError, match="not a model folder: no config.json"):
        read_config(tmp_path)
    from transformers.utils import logging as hf_logging

    before = hf_logging.get_verbosity()
    with quiet_transformers():
        assert hf_logging.get_verbosity() == logging.ERROR
    assert hf_logging.get_verbosity() == before
    assert pick_device("cpu").type == "cpu"


def test_probe_names_a_missing_model_path(tmp_path, capsys):
    from medlama.cli import main

    assert main(["probe", "--data", str(tmp_path), "--model", str(tmp_path / "missing"), "--out",
                 str(tmp_path / "o")]) == 2
    assert "model path does not exist (and it is not a Hub id either)" in capsys.readouterr().err
