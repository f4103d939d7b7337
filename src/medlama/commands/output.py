"""Flags and helpers shared by the commands that score models (``probe``, ``ucm``, ``recipe``): where the
results go and how they are shown (``--out``, ``--overwrite``, ``--json``, ``--quiet``), where the models
run (``--device``) and quick checks on fewer queries (``--limit``).

* Outputs are checked before any work: a ``--out`` that is a file, someone else's folder, or the output of
  another command is refused at once, and so is a rerun into the folder of a finished run unless
  ``--overwrite`` is given (the folder is then replaced whole when the new run finishes; an interrupted
  run leaves the earlier one as it was). The folder's lock (:func:`medlama.core.atomic.lock_directory`) is
  held from that check to the end, so two runs never write one folder.
* ``--json``: stdout carries the run's ``results.json`` and nothing else; tables and notes go to stderr.
  ``--quiet``: no tables or notes (warnings and errors still go to stderr); with ``--json``, only the JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from medlama.commands.flags import add_settings_flags
from medlama.core.errors import MedlamaInputError
from medlama.core.models import DEVICE_PATTERN, DEVICE_WORDS
from medlama.core.models import check_device as check_model_device
from medlama.core.settings import Checked, setting
from medlama.runs.outputs import RESULTS_FILE
from medlama.core.atomic import check_finished
from medlama.core.atomic import claimed_output as claimed
from medlama.core.atomic import OWNER_NAME, check_replaceable


def device_word(word: str) -> str:
    """argparse type of ``--device``: ``cpu``, ``cuda``, ``cuda:N`` or ``mps``."""
    if not DEVICE_PATTERN.match(word):
        raise argparse.ArgumentTypeError(f"{word!r} is not a device; give {DEVICE_WORDS}")
    return word


def limit_word(word: str) -> int:
    """argparse type of ``--limit``: an integer >= 1."""
    try:
        value = int(word)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{word!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


OVERWRITE_HELP = (f"replace the results of an earlier run in OUT; without it, a rerun into a folder that holds "
                  f"{RESULTS_FILE} is refused before any work (default: refuse)")


@dataclass(frozen=True)
class OutputSettings(Checked):
    """Where a scoring command's results go, how they are shown, where the models run, how many queries."""

    out: Path = setting(Path("out"), help="folder for the results")
    overwrite: bool = setting(False, switch=True, show_default=False, help=OVERWRITE_HELP)
    json: bool = setting(False, switch=True, show_default=False,
                         help=f"print {RESULTS_FILE} on stdout and nothing else (tables and notes go to stderr)")
    quiet: bool = setting(False, short="-q", switch=True, show_default=False,
                          help="no tables or notes, only warnings and errors (results are still written to OUT)")
    device: str | None = setting(None, parse=device_word, metavar="DEVICE",
                                 show_default="cuda when there is one, else cpu",
                                 help="where the models run: cpu, cuda, cuda:N or mps")
    limit: int | None = setting(None, min=1, parse=limit_word, metavar="N", show_default="all",
                                help="only the first N queries, for a quick check; the scores are not the benchmark's")


def add_output_arguments(parser: argparse.ArgumentParser, *, default_out: Path, writes: str,
                         limit: str | None = None, overwrite: str = OVERWRITE_HELP, device: str = "the models") -> None:
    """The flags of :class:`OutputSettings` in one group, each in the namespace (default or given): ``--out``
    (``default_out``, a folder for ``writes``), ``--overwrite`` (help ``overwrite``), ``--json``, ``--quiet``,
    ``--device`` (where ``device`` run) and, with ``limit`` (the help of what it limits), ``--limit``."""
    helps = {"out": lambda text: f"folder for {writes}", "overwrite": lambda text: overwrite,
             "device": lambda text: text.replace("the models", device, 1),
             "limit": lambda text: text.replace("only the first N queries", limit or "", 1)}
    add_settings_flags(parser, OutputSettings, title="run and output", defaults=OutputSettings(out=default_out),
                       exclude=() if limit else ("limit",), helps=helps, filled=True)


def check_device(device: str | None) -> None:
    """Refuse, before any work, a device this machine does not have (:func:`medlama.core.models.check_device`)."""
    check_model_device(device, name="--device")


def check_output(out: Path, *, kind: str, overwrite: bool, reads: list = ()) -> None:
    """Refuse ``out`` if another command's (or no command's) files are there, or a finished run's without
    ``overwrite``, or if it is (or holds) the current directory or something in ``reads``, what the run
    reads; see :func:`medlama.core.atomic.check_finished`."""
    check_finished(out, marker=RESULTS_FILE, kind=kind, overwrite=overwrite, reads=reads)


def claimed_output(out: Path, *, kind: str, overwrite: bool, reads: list = ()):
    """Hold ``out``'s lock for the block, after :func:`check_output` (so before any work):
    :func:`medlama.core.atomic.claimed_output` with the commands' marker, ``results.json``."""
    return claimed(out, marker=RESULTS_FILE, kind=kind, overwrite=overwrite, reads=reads)


def check_folder_output(out: Path, *, kind: str, overwrite: bool) -> None:
    """:func:`check_output` for a command that writes into ``out`` as it goes (``recipe``'s rewired models, so
    that an interrupted run resumes there): ``out`` must be new, empty, or written by ``kind``."""
    check_replaceable(out, marker=OWNER_NAME, kind=kind)
    if (Path(out) / RESULTS_FILE).is_file() and not overwrite:
        raise MedlamaInputError("the output folder holds the results of a finished run; give --overwrite to replace "
                                "them, or choose another --out (nothing was changed)", file=Path(out).resolve())


def check_plot_file(plot: Path | None, *, overwrite: bool) -> None:
    """Refuse, before any work, a ``--plot FILE`` that is no PNG, an existing file (unless ``overwrite``) or a
    folder, or whose folder does not exist."""
    if plot is None:
        return
    if plot.suffix.lower() != ".png":
        raise MedlamaInputError("the plot is written as PNG: give a FILE ending in .png", file=plot)
    if plot.is_dir() or (plot.exists() and not overwrite):
        raise MedlamaInputError("exists; give --overwrite to replace it, or another file", file=plot)
    if not plot.parent.is_dir():
        raise MedlamaInputError("its folder does not exist", file=plot)


@contextlib.contextmanager
def human_output(args: argparse.Namespace) -> Iterator[None]:
    """Send what the block prints on stdout to stderr (``--json``) or nowhere (``--quiet``)."""
    if getattr(args, "quiet", False):
        with open(os.devnull, "w", encoding="utf-8") as sink, contextlib.redirect_stdout(sink):
            yield
    elif getattr(args, "json", False):
        with contextlib.redirect_stdout(sys.stderr):
            yield
    else:
        yield


def print_results(path: Path) -> None:
    """``--json``: the results file, as written, on stdout."""
    sys.stdout.write(Path(path).read_text(encoding="utf-8"))
    sys.stdout.flush()
