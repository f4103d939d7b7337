"""Whether progress bars are shown: on a terminal only, unless asked for, and never against ``TQDM_DISABLE``.

* :func:`enabled` is what medlama's own bars ask (``tqdm(..., disable=not enabled())``): the choice made
  with :func:`showing` (``medlama ... --progress`` / ``--no-progress``) when there is one, else off when
  ``TQDM_DISABLE`` is set to a true value, else on exactly when stderr is a terminal (or a notebook's). Piped
  output and CI logs thus carry no carriage returns or ``it/s`` lines; the Python API (``medlama.probe``, ...)
  follows the same rule as the command.
* :func:`showing` applies the choice for a block (the ``medlama`` command wraps each run in it) to the
  libraries' own bars too: ``datasets``, ``huggingface_hub`` and ``transformers`` bars are switched off
  or on, and every other tqdm bar that does not say otherwise (sentence-transformers' "Computing widget
  examples", say) gets the choice as its default; everything is put back afterwards.

* :func:`bar` is medlama's own progress over a long loop: a tqdm bar when bars are shown; else, when the
  output is merely not a terminal (a log, a pipe) and nobody asked for silence, a plain line on stderr every
  :data:`LOG_INTERVAL` seconds (``MEDLAMA_LOG_INTERVAL``; ``medlama: candidates: 64/137 batches (1.1/s)``), so that a slow run
  in a log never looks hung; nothing with ``--no-progress`` or ``TQDM_DISABLE``.

``TQDM_DISABLE`` is read here at each call, since tqdm itself reads it only once, when it is imported: the
block sets it for a tqdm imported later (and child processes), and gives an already imported tqdm the same
default ``disable`` the variable would have given it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import time
import warnings
from collections.abc import Iterator
from tqdm import std

_TRUE = ("1", "true", "yes", "on")
#: The choice of the innermost :func:`showing` block: True, False, or None (decide by the terminal).
_choice: bool | None = None
#: Whether the innermost :func:`showing` block was asked for silence (``--no-progress``, or ``TQDM_DISABLE`` set
#: before it), not merely off a terminal; None outside any block (then ``TQDM_DISABLE`` decides).
_silent: bool | None = None


def env_disabled() -> bool:
    """Whether ``TQDM_DISABLE`` asks for no bars."""
    return os.environ.get("TQDM_DISABLE", "").strip().lower() in _TRUE


def enabled() -> bool:
    """Whether a progress bar should be shown now (see the module docstring)."""
    if _choice is not None:
        return _choice
    if env_disabled():
        return False
    stream = sys.stderr
    if stream is not None and type(stream).__module__.startswith("ipykernel"):
        return True  # a notebook shows bars as widgets: interactive, though its stream is no terminal
    return bool(stream is not None and hasattr(stream, "isatty") and stream.isatty())


def _library_switches() -> list[tuple[object, object, object]]:
    """``(is_enabled, enable, disable)`` for the bar switches of the libraries already imported."""
    switches = []
    if "datasets" in sys.modules:
        # datasets loads when this runs, not when the CLI parses its flags
        from datasets.utils import logging as datasets_logging

        switches.append((datasets_logging.is_progress_bar_enabled, datasets_logging.enable_progress_bar,
                         datasets_logging.disable_progress_bar))
    if "huggingface_hub" in sys.modules:
        # huggingface_hub loads when this runs, not when the CLI parses its flags
        from huggingface_hub import utils as hub_utils

        switches.append((lambda: not hub_utils.are_progress_bars_disabled(), hub_utils.enable_progress_bars,
                         hub_utils.disable_progress_bars))
    if "transformers" in sys.modules:
        # transformers loads when this runs, not when the CLI parses its flags
        from transformers.utils import logging as transformers_logging

        switches.append((transformers_logging.is_progress_bar_enabled, transformers_logging.enable_progress_bar,
                         transformers_logging.disable_progress_bar))
    return switches


# Read when each library is first imported (after the block starts, say), so set for the block too.
_ENV = ("TQDM_DISABLE", "HF_DATASETS_DISABLE_PROGRESS_BARS", "HF_HUB_DISABLE_PROGRESS_BARS")


@contextlib.contextmanager
def showing(show: bool | None = None) -> Iterator[bool]:
    """Show progress bars in the block if ``show`` (None: as :func:`enabled` decides); yields the outcome."""
    global _choice, _silent
    previous_choice, previous_silent, previous_env = _choice, _silent, {name: os.environ.get(name) for name in _ENV}
    # silence asked for, before this block sets TQDM_DISABLE for the libraries' bars: off a terminal the bars go,
    # but a log still gets its plain lines (:func:`bar`)
    # (an enclosing block's own TQDM_DISABLE is no user's: its silence is inherited as it was decided)
    silent = show is False or (show is None and (env_disabled() if _silent is None else _silent))
    on = enabled() if show is None else bool(show)
    switches = _library_switches()
    previous_states = [is_enabled() for is_enabled, _, _ in switches]
    _choice, _silent = on, silent
    if not on:
        for name in _ENV:
            os.environ[name] = "1"
    _switch([enable if on else disable for _, enable, disable in switches])
    put_back = _tqdm_default(disable=not on)
    try:
        yield on
    finally:
        _choice, _silent = previous_choice, previous_silent
        put_back()
        for name, value in previous_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        _switch([enable if state else disable for (_, enable, disable), state in zip(switches, previous_states)])


def _tqdm_default(*, disable: bool):
    """Make ``disable`` the default of tqdm's bars, as ``TQDM_DISABLE`` does at import; returns the undo."""
    if "tqdm" not in sys.modules:
        return lambda: None  # the environment variable set for the block does it when tqdm is imported

    original = std.tqdm.__dict__["__init__"]  # a partialmethod when tqdm read TQDM_* variables at import
    func, args, keywords = ((original.func, original.args, original.keywords)
                            if isinstance(original, functools.partialmethod) else (original, (), {}))
    std.tqdm.__init__ = functools.partialmethod(func, *args, **{**keywords, "disable": disable})
    return lambda: setattr(std.tqdm, "__init__", original)


def _switch(calls) -> None:
    with warnings.catch_warnings():  # huggingface_hub warns when its environment variable overrides the call
        warnings.simplefilter("ignore")
        for call in calls:
            call()


#: Seconds between two plain progress lines in a log (:func:`bar` off a terminal); ``MEDLAMA_LOG_INTERVAL``
#: replaces it.
LOG_INTERVAL = 60.0


def log_interval() -> float:
    """:data:`LOG_INTERVAL`, or ``MEDLAMA_LOG_INTERVAL`` when set to a number of seconds."""
    try:
        return float(os.environ["MEDLAMA_LOG_INTERVAL"])
    except (KeyError, ValueError):
        return LOG_INTERVAL


def bar(iterable=None, *, total: int | None = None, desc: str | None = None, unit: str = "it", leave: bool = True):
    """Progress over ``iterable`` (or ``total`` steps, counted by ``update``): a tqdm bar when :func:`enabled`;
    off a terminal, unless silence was asked for (``--no-progress``, ``TQDM_DISABLE``), a plain line on stderr
    every :data:`LOG_INTERVAL` seconds; nothing without a ``desc``."""
    if desc is not None and enabled():
        from tqdm.auto import tqdm  # tqdm loads when a bar is drawn

        return tqdm(iterable, total=total, desc=desc, unit=unit, leave=leave)
    quiet = desc is None or (env_disabled() if _silent is None else _silent)
    return _LogLines(iterable, total=total, desc=desc, unit=unit, quiet=quiet)


class _LogLines:
    """The part of tqdm's interface medlama's loops use (iteration, ``update``, ``close``), writing a plain line
    every :data:`LOG_INTERVAL` seconds instead of redrawing a bar."""

    def __init__(self, iterable, *, total: int | None, desc: str | None, unit: str, quiet: bool) -> None:
        self.iterable, self.desc, self.unit, self.quiet = iterable, desc, unit, quiet
        if total is None and iterable is not None and hasattr(iterable, "__len__"):
            total = len(iterable)
        self.total, self.n = total, 0
        self._start = self._said = time.monotonic()
        self.interval = log_interval()

    def __iter__(self):
        for item in self.iterable:
            yield item
            self.update(1)

    def update(self, n: int = 1) -> None:
        self.n += n
        now = time.monotonic()
        if not self.quiet and now - self._said >= self.interval:
            self._said = now
            rate = self.n / max(now - self._start, 1e-9)
            of = f"/{self.total:,}" if self.total is not None else ""
            units = self.unit + ("es" if self.unit.endswith(("s", "ch", "sh", "x")) else "s")
            print(f"medlama: {self.desc}: {self.n:,}{of} {units} ({rate:.1f}/s)", file=sys.stderr, flush=True)

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
