"""``medlama build <dataset> --out DIR``: build a probing dataset as a Hugging Face dataset folder.

One sub-command per declared dataset (:func:`medlama.datasets.registry.declarations`): its flags are made from
the declaration's settings class (plus ``--json``) and it runs the declaration's build, or, for a command line
one settings class cannot make (``context-variance``: ``hand_made``), this package's module ``build_<name>`` adds
it (:func:`hand_made_module`)."""

from __future__ import annotations

import argparse
import importlib

from medlama.commands.flags import add_settings_flags, given_settings
from medlama.core.settings import settings_from
from medlama.datasets.registry import declarations, declared


def register(subparsers) -> None:
    parser = subparsers.add_parser("build", help="build a probing dataset folder (Parquet + dataset card)")
    builders = parser.add_subparsers(dest="dataset", required=True, metavar="DATASET")
    for declaration in declarations():
        command = declaration.build
        if command.hand_made:  # this package's own module makes its command line
            importlib.import_module(hand_made_module(declaration.name)).register(builders, declaration)
            continue
        builder = builders.add_parser(declaration.name, help=command.help, description=command.description)
        add_settings_flags(builder, command.settings)
        builder.add_argument("--json", action="store_true", help="print the statistics and report as JSON")
        builder.set_defaults(func=run_build)


def hand_made_module(name: str) -> str:
    """The module of this package that makes ``medlama build <name>``'s hand-made command line."""
    return f"medlama.commands.build_{name.replace('-', '_')}"


def run_build(args: argparse.Namespace) -> int:
    """The flags as the declaration's settings (checked before anything is read), then its build."""
    command = declared(args.dataset).build
    return command.run(settings_from(command.settings, given_settings(args, command.settings)), args.json)
