"""Settings defined once: checks, unknown names, flags and the recorded command line from the fields."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest

from medlama.commands.flags import add_settings_flags, given_settings
from medlama.core.errors import MedlamaInputError
from medlama.core.settings import as_dict, check, differences, setting, settings_from, to_flags


@dataclass(frozen=True)
class Example:
    batch_size: int = setting(128, help="texts per forward pass", min=1)
    pooling: Literal["cls", "mean"] = setting("cls", help="pooling")
    layer: int | None = setting(None, help="hidden layer")
    rescore: bool = setting(False, help="rescore")
    ks: tuple[int, ...] = setting((1, 5, 10), help="cut-offs", min=1)
    rate: float = setting(2e-5, help="rate in %", min=0, max=1)
    bound: float = setting(float("inf"), help="a cap that may be infinite", nonfinite=True)

    def __post_init__(self) -> None:
        check(self)


@pytest.mark.parametrize("values, message", [
    ({"batch_size": 0}, "'batch_size' must be at least 1, got 0"),
    ({"batch_size": True}, "'batch_size' must be an integer"),
    ({"pooling": "max"}, "'pooling' must be one of 'cls', 'mean', got 'max'"),
    ({"rate": float("nan")}, "not NaN"),
    ({"rate": float("inf")}, "setting 'rate' must be a finite number, got inf"),
    ({"bound": float("nan")}, "setting 'bound' must be a finite number (not NaN), got nan"),
    ({"rate": 2.0}, "at most 1"),
    ({"ks": (1, 0)}, "'ks' must be at least 1, got 0"),
    ({"ks": "1"}, "'ks' must be a list"),
    ({"batchsize": 3}, "'batchsize' (did you mean 'batch_size'?)"),
])
def test_bad_settings_are_named(values, message):
    with pytest.raises(MedlamaInputError) as error:
        settings_from(Example, values)
    assert message in str(error.value)


def test_only_a_setting_that_says_so_may_be_infinite():
    assert settings_from(Example, {"bound": float("-inf")}).bound == float("-inf")
    with pytest.raises(MedlamaInputError, match="'rate' must be a finite number, got -inf"):
        settings_from(Example, {"rate": float("-inf")})


def test_none_means_not_given_unless_the_field_is_optional():
    settings = settings_from(Example, {"batch_size": None, "layer": None})
    assert settings.batch_size == 128 and settings.layer is None
    assert settings_from(Example, {"layer": 3}, base=settings).layer == 3


def test_flags_parse_back_to_the_same_settings(capsys):
    parser = argparse.ArgumentParser()
    add_settings_flags(parser, Example)
    args = parser.parse_args(["--batch-size", "4", "--pooling", "mean", "--rescore", "--ks", "1", "3", "--layer", "2"])
    given = given_settings(args, Example)
    assert given == {"batch_size": 4, "pooling": "mean", "rescore": True, "ks": (1, 3), "layer": 2}
    settings = settings_from(Example, given)
    flags = to_flags(settings)
    assert flags == ["--batch-size", "4", "--pooling", "mean", "--layer", "2", "--rescore", "--ks", "1", "3"]
    assert settings_from(Example, given_settings(parser.parse_args(flags), Example)) == settings
    assert to_flags(Example()) == []
    assert differences(Example(), settings, ["batch_size", "rate"]) == [("batch_size", 128, 4)]
    assert as_dict(settings)["ks"] == [1, 3]


def test_help_shows_every_default_and_bad_flag_values_are_refused(capsys):
    parser = argparse.ArgumentParser()
    add_settings_flags(parser, Example)
    help_text = parser.format_help()
    for shown in ("(default: 128)", "(default: cls)", "(default: none)", "(default: 1 5 10)", "rate in %"):
        assert shown in help_text
    with pytest.raises(SystemExit):
        parser.parse_args(["--batch-size", "x"])
    assert "'x' is not an integer" in capsys.readouterr().err


@dataclass(frozen=True, kw_only=True)
class Run:
    corpus: tuple[Path, ...] = setting(parse=Path, metavar="FILE", help="sentence files")
    verify: bool = setting(True, flag="--no-verify", switch=True, show_default=False, help="skip the check")
    quiet: bool = setting(False, short="-q", switch=True, show_default=False, help="say nothing")
    source: str | None = setting(None, parse=str, show_default="$SOURCE, else download", help="the release")

    def __post_init__(self) -> None:
        check(self)


def test_switches_short_spellings_own_parsers_and_required_flags(capsys):
    parser = argparse.ArgumentParser()
    add_settings_flags(parser, Run)
    help_text = " ".join(parser.format_help().split())
    for shown in ("--corpus FILE [FILE ...]", "--no-verify skip the check", "--quiet, -q say nothing",
                  "the release (default: $SOURCE, else download)"):
        assert shown in help_text
    assert "--no-no-verify" not in help_text and "--verify" not in help_text
    args = parser.parse_args(["--corpus", "a", "b", "--no-verify", "-q", "--source", "none"])
    settings = settings_from(Run, given_settings(args, Run))
    assert settings == Run(corpus=(Path("a"), Path("b")), verify=False, quiet=True, source="none")
    assert to_flags(settings, relative_to=Run(corpus=settings.corpus)) == ["--no-verify", "--quiet", "--source",
                                                                          "none"]
    with pytest.raises(SystemExit):
        parser.parse_args(["--no-verify"])
    assert "the following arguments are required: --corpus" in capsys.readouterr().err


def test_filled_flags_put_every_default_in_the_namespace():
    parser = argparse.ArgumentParser()
    add_settings_flags(parser, Run, only=("verify", "quiet", "source"), defaults=Run(corpus=(), source="x"),
                       filled=True)
    assert vars(parser.parse_args([])) == {"verify": True, "quiet": False, "source": "x"}
    assert vars(parser.parse_args(["--no-verify"]))["verify"] is False
