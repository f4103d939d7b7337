"""The user's path for a refused command: ``python -m medlama ...`` in a fresh interpreter (:func:`medlama`), or
the same command line through the CLI's ``main`` in this process (:func:`medlama_here`), and the one
``medlama: error:`` line it must end with (exit status 2, no traceback)."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import traceback
import warnings
from pathlib import Path


def medlama(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``python -P -m medlama ARGS`` (``-P``: a folder named ``medlama`` in ``cwd`` never shadows the package)."""
    return subprocess.run([sys.executable, "-P", "-m", "medlama", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


def medlama_here(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``medlama ARGS`` as ``python -m medlama`` runs it (``sys.exit(medlama.cli.main(ARGS))``), in this process:
    its stdout, its stderr (Python's warnings shown there as a fresh interpreter shows them, an uncaught
    exception as its traceback) and its exit status, as :func:`medlama` returns them. For a command whose refusal
    is the point: a new interpreter would spend seconds importing what this one has imported already
    (``tests/faults/test_refusals_in_process.py`` checks that both give the same lines and status). A test that
    needs a process of its own (a kill, its environment, import order, ``-P``) uses :func:`medlama`."""
    from medlama.cli import main  # the CLI as the test process has imported it (tests/conftest.py)

    _libraries_log_to_the_real_stderr()
    out, err = io.StringIO(), io.StringIO()
    with contextlib.ExitStack() as stack:
        stack.callback(setattr, sys, "unraisablehook", sys.unraisablehook)  # a stopped run's CLI replaces it
        if cwd is not None:
            stack.callback(os.chdir, os.getcwd())  # contextlib.chdir is Python 3.11's
            os.chdir(cwd)
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(contextlib.redirect_stderr(err))
        stack.enter_context(warnings.catch_warnings())
        warnings.resetwarnings()  # a fresh interpreter's filters (python -W unset), not pytest's
        for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
            warnings.simplefilter("ignore", category)
        warnings.showwarning = lambda message, category, filename, lineno, file=None, line=None: err.write(
            warnings.formatwarning(message, category, filename, lineno, line))
        try:
            status = main([str(arg) for arg in args])
        except SystemExit as exit:  # argparse's usage errors and --help end the process
            code = exit.code
            status = code if isinstance(code, int) else 0 if code is None else 1
            if not isinstance(code, int) and code is not None:
                err.write(f"{code}\n")
        except Exception:  # noqa: BLE001 - what the interpreter prints of an uncaught exception, and its status
            err.write(traceback.format_exc())
            status = 1
    return subprocess.CompletedProcess(["medlama", *map(str, args)], status, out.getvalue(), err.getvalue())


def _libraries_log_to_the_real_stderr() -> None:
    """transformers' and datasets' log handlers take ``sys.stderr`` as it is when they are first made: made inside
    :func:`medlama_here`, they would write every later warning of this test process into that call's buffer."""
    from datasets.utils import logging as datasets_logging  # both load with the command anyway
    from transformers.utils import logging as transformers_logging  # (see the docstring)

    datasets_logging.get_logger("datasets")
    transformers_logging.get_logger("transformers")


def error_line(result: subprocess.CompletedProcess, *, alone: bool = False) -> str:
    """The one ``medlama: error:`` line of a refused command (exit status 2, no traceback); ``alone``: and
    nothing else on stderr."""
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("medlama: error:")]
    assert len(lines) == 1, result.stderr
    assert not alone or result.stderr.strip().splitlines() == lines, result.stderr
    return lines[0]


def error_here(*args: str | Path, cwd: Path | None = None) -> str:
    """The one ``medlama: error:`` line of ``medlama ARGS`` run in this process (:func:`medlama_here`)."""
    return error_line(medlama_here(*args, cwd=cwd))


def refused_in(cwd: Path, *words: str) -> str:
    """The error line of ``medlama WORDS`` run in ``cwd`` (in this process: :func:`medlama_here`), which it must
    leave as it was."""
    before = sorted(p.name for p in cwd.iterdir())
    line = error_here(*words, cwd=cwd)
    assert sorted(p.name for p in cwd.iterdir()) == before
    return line
