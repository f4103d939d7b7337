"""``medlama export FORMAT``: write a benchmark in the layout another harness reads.

Each format lives in its own command module (listed in :data:`FORMAT_MODULES`), which exposes
``register(subparsers)`` adding its parser under ``medlama export``.
"""

from __future__ import annotations

import importlib
import importlib.util

#: One module per exported format, in the order ``medlama export --help`` lists them.
FORMAT_MODULES = (
    "medlama.commands.export_lm_eval",
    "medlama.commands.export_mteb",
)


def register(subparsers) -> None:
    parser = subparsers.add_parser("export", help="write a benchmark for another evaluation harness",
                                   description="Write a benchmark in the layout another evaluation harness reads.")
    formats = parser.add_subparsers(dest="format", required=True, metavar="FORMAT")
    for name in FORMAT_MODULES:
        if importlib.util.find_spec(name) is not None:  # a format whose module is not in this tree is not offered
            importlib.import_module(name).register(formats)
