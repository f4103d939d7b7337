"""The rewiring configuration is defined once: checks, unknown names, flags (old spellings included), the
recorded command line and the resume-compatibility rule all come from RewireConfig's fields."""

from __future__ import annotations

import dataclasses
import json
import shlex
from pathlib import Path

import pytest

from medlama.cli import build_parser, main
from medlama.commands.rewire import config_from_args
from medlama.core.errors import MedlamaInputError
from medlama.core.checkpoints import list_checkpoints
from medlama.trainers.checkpoints import check_resume_compatible
from medlama.trainers.config import MUST_MATCH_ON_RESUME, PRESETS, RewireConfig
from medlama.trainers.trainer import command_line


def parse(*words: str):
    return build_parser().parse_args(["rewire", "--corpus", "c.txt", "--out", "o", *words])


def test_unknown_setting_is_named_with_the_nearest_one():
    with pytest.raises(MedlamaInputError, match=r"unknown rewire setting\(s\): 'learning_rat' \(did you mean "
                                                r"'learning_rate'\?\)"):
        RewireConfig.preset("paper", learning_rat=1e-4)


@pytest.mark.parametrize(("values", "message"), [
    ({"steps": 0}, "setting 'steps' must be at least 1, got 0"),
    ({"steps": 2.5}, "setting 'steps' must be an integer, got 2.5"),
    ({"seed": -1}, "setting 'seed' must be at least 0, got -1"),
    ({"learning_rate": -1e-5}, "learning rate must be a positive number, got -1e-05"),
    ({"dropout": 1.0}, "setting 'dropout' must be below 1, got 1.0"),
    ({"mask_ratio": 1.5}, "setting 'mask_ratio' must be at most 1, got 1.5"),
    ({"batch_sampler": "shuffled"}, "setting 'batch_sampler' must be one of 'no_duplicates', 'random'"),
    ({"precision": "fp8"}, "setting 'precision' must be one of 'auto', 'fp32', 'fp16', 'bf16'"),
    ({"skip_short_lines": "yes"}, "setting 'skip_short_lines' must be true or false"),
])
def test_bad_values_are_refused_when_the_config_is_made(values, message):
    with pytest.raises(MedlamaInputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        RewireConfig(**values)
    with pytest.raises(MedlamaInputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        dataclasses.replace(PRESETS["demo"], **values)


def test_must_match_on_resume_comes_from_the_field_metadata():
    # the list that was written by hand before, now derived: everything but the may-change settings
    assert set(MUST_MATCH_ON_RESUME) == {
        "model", "batch_size", "learning_rate", "weight_decay", "warmup_steps", "max_length", "temperature",
        "mask_ratio", "layer", "dropout", "seed", "max_sentences", "skip_short_lines", "batch_sampler", "mask_token"}


def test_resume_refuses_each_changed_must_match_setting_and_allows_the_others(tmp_path):
    config = RewireConfig.preset("demo", model="m")
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "rewire_config.json").write_text(json.dumps({"config": config.to_dict(),
                                                                             "corpus": []}))
    changed = {"model": "other", "batch_size": 16, "learning_rate": 1e-4, "weight_decay": 0.0, "warmup_steps": 3,
               "max_length": 32, "temperature": 0.05, "mask_ratio": 0.4, "layer": 2, "dropout": None, "seed": 1,
               "max_sentences": None, "skip_short_lines": True, "batch_sampler": "random", "mask_token": "[UNK]"}
    assert set(changed) == set(MUST_MATCH_ON_RESUME)
    for name, value in changed.items():
        with pytest.raises(MedlamaInputError, match=rf"holds checkpoints of a different run \({name}: "):
            check_resume_compatible(tmp_path, dataclasses.replace(config, **{name: value}), [])
    check_resume_compatible(tmp_path, dataclasses.replace(config, steps=500, save_steps=7, precision="fp32",
                                                          logging_steps=1), [])


def test_old_flag_spellings_still_work():
    args = parse("--lr", "3e-5", "--tau", "0.05", "--keep-model-dropout", "--max-sentences", "0", "--no-resume",
                 "--json", "--skip-short-lines", "--preset", "demo")
    config = config_from_args(args)
    assert (config.learning_rate, config.temperature, config.dropout, config.max_sentences) == (3e-5, 0.05, None,
                                                                                                 None)
    assert config.skip_short_lines and config.steps == PRESETS["demo"].steps and args.no_resume and args.json
    assert config_from_args(parse("--resume-from", "o/checkpoints/checkpoint-2")) == PRESETS["paper"]
    assert parse("--resume-from", "x").resume_from == Path("x")
    assert config_from_args(parse("--dropout", "none")).dropout is None
    assert config_from_args(parse("--max-sentences", "7")).max_sentences == 7
    with pytest.raises(SystemExit):
        parse("--dropout", "0.2", "--keep-model-dropout")


def test_bad_flag_values_are_clear_errors(capsys):
    assert main(["rewire", "--corpus", "c.txt", "--out", "o", "--batch-size", "1"]) == 2
    assert "medlama: error: setting 'batch_size' must be at least 2, got 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse("--steps", "many")
    assert "'many' is not an integer" in capsys.readouterr().err


@pytest.mark.parametrize("config", [
    PRESETS["paper"],
    RewireConfig.preset("demo", model="/models/my encoder", layer=3, max_sentences=None, dropout=None,
                        skip_short_lines=True, precision="bf16", mask_token="[UNK]", batch_sampler="random",
                        logging_steps=1, learning_rate=3e-5, temperature=0.03),
    RewireConfig(),
])
def test_recorded_command_line_parses_back_to_the_same_config(config):
    line = command_line(["a corpus.txt", "b.txt"], Path("out dir"), config)
    words = shlex.split(line)
    assert words[:2] == ["medlama", "rewire"]
    args = build_parser().parse_args(words[1:])
    assert config_from_args(args) == config
    assert args.corpus == [Path("a corpus.txt"), Path("b.txt")] and args.out == Path("out dir")
    assert command_line(object(), Path("o"), config) is None  # a Dataset corpus has no command line


def test_list_checkpoints_finds_loadable_checkpoints_anywhere_below(tmp_path):
    def checkpoint(path: Path, weights: bool = True) -> Path:
        path.mkdir(parents=True)
        (path / "config.json").write_text("{}")
        if weights:
            (path / "model.safetensors").write_bytes(b"")
        return path

    out = tmp_path / "rewired"
    ten = checkpoint(out / "checkpoints" / "checkpoint-10")
    two = checkpoint(out / "checkpoints" / "checkpoint-2")
    checkpoint(out / "checkpoints" / "checkpoint-4", weights=False)  # not loadable
    checkpoint(out / "checkpoints" / "checkpoint-6.incomplete-20250101-000000")  # set aside
    checkpoint(out / "checkpoints" / ".checkpoint-8.staging" / "checkpoint-8")  # a save in progress
    (out / "checkpoints" / "checkpoint-12").write_text("a file")
    assert list_checkpoints(out) == [two, ten]
    assert list_checkpoints(out / "checkpoints") == [two, ten]
    assert list_checkpoints(ten) == [ten]
    other = checkpoint(tmp_path / "rewired-1" / "checkpoints" / "checkpoint-2")
    assert list_checkpoints(tmp_path) == sorted([two, other], key=str) + [ten]  # by step, then path
    assert list_checkpoints(tmp_path / "missing") == []
