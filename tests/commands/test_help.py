"""``--help`` of every command: each default shown, the method choices listed, one vocabulary for ``--preset``
and ``--batch-size``; and ``python -m medlama`` runs the command."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from medlama.cli import _commands, build_parser
from medlama.core.batching import BATCH_SIZE_HELP
from medlama.probers.registry import METHODS
from medlama.ucm_eval.rankers import METHODS as UCM_METHODS

FLAGLESS = (argparse._HelpAction, argparse._VersionAction, argparse._StoreTrueAction,  # noqa: SLF001
            argparse._StoreFalseAction, argparse._StoreConstAction)  # noqa: SLF001


def commands() -> dict[str, argparse.ArgumentParser]:
    return {parser.prog.removeprefix("medlama "): parser for parser in _commands(build_parser())}


def flag_help(parser: argparse.ArgumentParser, flag: str) -> str:
    return " ".join(parser._option_string_actions[flag].help.split())  # noqa: SLF001


def test_every_command_is_found():
    assert set(commands()) >= {"probe", "ucm", "recipe", "rewire", "build medlama", "build biolama",
                               "build context-variance", "push-dataset", "push-model", "push-results", "compare"}


@pytest.mark.parametrize("name", sorted(commands()))
def test_every_option_with_a_default_shows_it(name):
    parser = commands()[name]
    missing = []
    for action in parser._actions:  # noqa: SLF001
        if (not action.option_strings or isinstance(action, FLAGLESS) or action.required
                or action.help == argparse.SUPPRESS):
            continue
        if "default" not in (action.help or "").lower():
            missing.append(f"{action.option_strings[0]} (default {action.default!r})")
    assert not missing, f"medlama {name}: options whose help does not show the default: {missing}"
    parser.format_help()  # every help text formats (a stray % would raise here)


def test_method_choices_are_listed():
    probe, ucm = (" ".join(commands()[name].format_help().split()) for name in ("probe", "ucm"))
    for method in METHODS:
        assert method in flag_help(commands()["probe"], "--method")
    for method in (*UCM_METHODS, "auto"):
        assert method in flag_help(commands()["ucm"], "--method")
    assert "--method {" in ucm or "METHOD" in ucm


def test_preset_and_batch_size_mean_one_thing_each():
    parsers = commands()
    for name in ("probe", "recipe", "rewire"):
        assert "a named bundle of" in flag_help(parsers[name], "--preset"), name
    assert "a named bundle of the rewiring's settings" in flag_help(parsers["recipe"], "--rewire-preset")
    for name in ("probe", "ucm", "recipe", "sweep"):  # one flag (BatchSizeFlag), auto included
        assert flag_help(parsers[name], "--batch-size").startswith(BATCH_SIZE_HELP), name
    rewire = flag_help(parsers["rewire"], "--batch-size")
    assert rewire.startswith("pairs per optimiser step") and "not inputs per forward pass" in rewire
    assert "pairs per optimiser step" in flag_help(parsers["recipe"], "--rewire-batch-size")


@pytest.mark.parametrize("name", ["probe", "ucm", "recipe"])
def test_scoring_commands_share_the_run_and_output_flags(name):
    parser = commands()[name]
    for flag in ("--out", "--overwrite", "--json", "--quiet", "--device", "--limit", "--progress", "--no-progress"):
        assert flag in parser._option_string_actions, (name, flag)  # noqa: SLF001


def test_python_dash_m_medlama_runs_the_command():
    done = subprocess.run([sys.executable, "-m", "medlama", "--version"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("medlama ")
    done = subprocess.run([sys.executable, "-m", "medlama", "probe", "--help"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and "--overwrite" in done.stdout and "--limit" in done.stdout
    done = subprocess.run([sys.executable, "-m", "medlama", "probe", "--device", "tpu"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and "'tpu' is not a device" in done.stderr
