"""The ``medlama`` command. Each subcommand lives in ``medlama.commands.<name>`` and registers itself.

A command module exposes ``register(subparsers)``, which adds its parser and sets ``func`` to a
function taking the parsed arguments and returning an exit status. Heavy imports (torch, datasets)
happen inside those functions so that ``medlama --help`` stays fast.

:func:`main` is the one place that turns what stops a run into a one-line ``medlama: error:`` and an exit
status: bad input (2), a file system that refuses a write or read (2: full disk, read-only, permissions;
the path and the cause named), Ctrl-C (130) and SIGTERM (143: a timeout, ``scancel``, ``docker stop``).
Both signals unwind the run, so a staging folder is removed and earlier outputs are left as they were.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import re
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from medlama import __version__
from medlama.core.errors import MedlamaInputError
from medlama.core.progress import showing
import gc

#: Subcommand modules, in the order ``medlama --help`` lists them.
COMMAND_MODULES = (
    "medlama.commands.recipe",
    "medlama.commands.sweep",
    "medlama.commands.figure",
    "medlama.commands.build",
    "medlama.commands.probe",
    "medlama.commands.compare",
    "medlama.commands.consistency",
    "medlama.commands.frequency",
    "medlama.commands.report",
    "medlama.commands.annotate",
    "medlama.commands.rewire",
    "medlama.commands.optiprompt",
    "medlama.commands.publish",
    "medlama.commands.ucm",
    "medlama.commands.export",
    "medlama.commands.list",
)


class CommandParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` that keeps the subcommand groups it makes (:attr:`subcommands`), so that the CLI
    walks its commands through public members only. Its subcommands' parsers are of this class too (argparse
    makes them of the parent's class)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.subcommands: list[Any] = []  # what add_subparsers returned: each one's .choices are its parsers

    def add_subparsers(self, **kwargs: Any) -> Any:
        action = super().add_subparsers(**kwargs)
        self.subcommands.append(action)
        return action


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
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


def _commands(parser: CommandParser) -> list[CommandParser]:
    """The parsers that run something (``probe``, ``build medlama``...): those without subcommands."""
    found = []
    for action in parser.subcommands:
        for child in dict.fromkeys(action.choices.values()):
            found += _commands(child) or [child]
    return found


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the run is so that it unwinds as on Ctrl-C (staging folders removed)."""


def _terminate(signum: int, frame: object) -> None:
    raise Terminated()


@contextlib.contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    """SIGTERM raises :class:`Terminated` for the block (only the main thread may set a handler)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# A staging folder's path, ".NAME.tmp-...": named as the output it was to become.
_STAGING = re.compile(r"^\.(?P<name>.+)\.tmp-")


def os_error_text(error: OSError, out: object = None) -> str:
    """``error`` in one line naming the path and the cause (``out``: the run's ``--out``, named where the
    error carries no path, as a failed write to an open file does)."""
    reason = error.strerror or (os.strerror(error.errno) if error.errno else str(error) or type(error).__name__)
    path = error.filename if error.filename is not None else out
    if path is None:
        return f"{reason}; earlier outputs are left as they were"
    path = Path(os.fsdecode(path))
    for parent in (path, *path.parents):
        match = _STAGING.match(parent.name)
        if match:  # a file of the new output, still in its staging folder: name the output
            return (f"{parent.parent / match['name']}: could not write the new output ({reason}, at {path}); the "
                    "previous output is left as it was")
    second = f" (and {os.fsdecode(error.filename2)})" if error.filename2 is not None else ""
    return f"{path}{second}: {reason}; earlier outputs are left as they were"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)

    show = vars(args).get("progress")
    if show is None and vars(args).get("quiet"):
        show = False
    try:
        with _sigterm_unwinds(), showing(show):
            return int(args.func(args) or 0)
    except MedlamaInputError as error:
        print(f"medlama: error: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # a full disk, a read-only file system, a permission: the path and the cause
        print(f"medlama: error: {os_error_text(error, vars(args).get('out'))}", file=sys.stderr)
        return 2
    except Terminated:
        _quiet_abandoned_writers()
        print("medlama: terminated (SIGTERM); earlier outputs are left as they were", file=sys.stderr)
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        _quiet_abandoned_writers()
        print("medlama: interrupted; earlier outputs are left as they were", file=sys.stderr)
        return 130


def _quiet_abandoned_writers() -> None:
    """Let the writers an interrupted run abandoned go without a word.

    A writer cut off mid-file (pyarrow's ``ParquetWriter`` under ``datasets``) tries to finish its file when
    it is collected, after its handle is closed and its staging folder removed, and Python prints that
    failure ("Exception ignored in ... write to closed file") after medlama's last line. Its file is gone
    with the staging folder, so nothing is lost: the writers are collected now, quietly, and any collected
    at exit stay quiet too.
    """
    sys.unraisablehook = lambda unraisable: None
    gc.collect()


if __name__ == "__main__":
    sys.exit(main())
