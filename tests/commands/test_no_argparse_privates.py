"""The CLI uses argparse through its public members only: no ``parser._option_string_actions`` edited after the
fact, no ``argparse._SubParsersAction``, no walk over ``parser._actions`` (a flag's help is written when it is
made, from the settings dataclasses; the commands are found through :class:`medlama.cli.CommandParser`). Any
``x._name`` on another object than ``self`` or ``cls`` in ``src/medlama`` (the CLI and its commands) fails."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CLI = Path(__file__).resolve().parents[2] / "src" / "medlama"


def private_uses(source: str) -> list[str]:
    """``line: x._name`` for each private attribute read on an object other than ``self`` / ``cls``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute):
            continue
        name = node.attr
        if not name.startswith("_") or (name.startswith("__") and name.endswith("__")):
            continue
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            continue
        found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


@pytest.mark.parametrize("path", sorted(CLI.rglob("*.py")), ids=lambda path: str(path.relative_to(CLI)))
def test_no_private_attribute_of_argparse_or_another_object(path):
    assert private_uses(path.read_text(encoding="utf-8")) == [], path


def test_a_private_use_is_found():
    source = ("import argparse\n"
              "def f(parser, group: argparse._ArgumentGroup):\n"
              "    parser._option_string_actions['--batch-size'].help = 'x'\n"
              "    return [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]\n"
              "class C:\n"
              "    def g(self):\n"
              "        return self._own, type(self).__name__\n")
    assert private_uses(source) == ["2: argparse._ArgumentGroup", "3: parser._option_string_actions",
                                    "4: parser._actions", "4: argparse._SubParsersAction"]
