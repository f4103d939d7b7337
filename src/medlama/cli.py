"""The ``medlama`` command. Each subcommand lives in ``medlama.commands.<name>`` and registers itself.

A command module exposes ``register(subparsers)``, which adds its parser and sets ``func`` to a
function taking the parsed arguments and returning an exit status. Heavy imports (torch, datasets)
happen inside those functions so that ``medlama --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from medlama import __version__
from medlama.errors import MedlamaInputError

#: Subcommand modules, in the order ``medlama --help`` lists them.
COMMAND_MODULES = (
    "medlama.commands.recipe",
    "medlama.commands.build",
    "medlama.commands.probe",
    "medlama.commands.rewire",
    "medlama.commands.publish",
    "medlama.commands.ucm",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="medlama", description="Probe what pre-trained language models know about biomedicine.")
    parser.add_argument("--version", action="version", version=f"medlama {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    for command in _commands(parser):
        command.add_argument("--progress", action=argparse.BooleanOptionalAction, default=argparse.SUPPRESS,
                             help="progress bars on stderr (default: only when stderr is a terminal and "
                                  "TQDM_DISABLE is not set)")
    return parser


def _commands(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """The parsers that run something (``probe``, ``build medlama``...): those without subcommands."""
    found = []
    for action in parser._actions:  # noqa: SLF001 - argparse has no public walk over subparsers
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for child in dict.fromkeys(action.choices.values()):
                found += _commands(child) or [child]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from medlama.progress import showing

    show = vars(args).get("progress")
    if show is None and vars(args).get("quiet"):
        show = False
    try:
        with showing(show):
            return int(args.func(args) or 0)
    except MedlamaInputError as error:
        print(f"medlama: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("medlama: interrupted; earlier outputs are left as they were", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
