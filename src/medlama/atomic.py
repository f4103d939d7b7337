"""Atomic writes: an interrupted build or run leaves the previous output intact."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from medlama.errors import MedlamaInputError


def check_replaceable(target: str | Path, *, marker: str) -> None:
    """Raise :class:`MedlamaInputError` unless ``target`` may be replaced by a new output.

    It may if it does not exist, is an empty folder, or holds ``marker`` (a path relative to it), the
    file every output of the caller contains: then it is an earlier output of the same kind. Anything
    else is someone else's folder (``--out .``, ``--out ~/project``), which replacing would delete.
    """
    target = Path(target).resolve()  # named in full: "--out ." would otherwise be reported as "."
    if not target.exists():
        return
    if not target.is_dir():
        raise MedlamaInputError("the output path exists and is not a folder; choose a new or empty folder "
                                "(nothing was changed)", file=target)
    if any(target.iterdir()) and not (target / marker).is_file():
        raise MedlamaInputError(f"the output folder is not empty and is not an earlier output of this command "
                                f"(it has no {marker}); choose a new or empty folder (nothing was changed)",
                                file=target)


@contextlib.contextmanager
def atomic_directory(target: str | Path, *, marker: str) -> Iterator[Path]:
    """Yield an empty staging folder that replaces ``target`` only if the block finishes.

    ``marker``: the file (relative path) every output of the caller contains. An existing ``target`` is
    replaced only if it is empty or holds ``marker`` (:func:`check_replaceable`); otherwise
    :class:`MedlamaInputError` is raised on entry, before the block does any work and before anything
    is written. The staging folder sits beside ``target`` (same file system, so the swap is a rename).
    On an exception, or a kill, ``target`` is untouched; a stale staging folder from a killed run is
    hidden (``.name.tmp-*``) and removed by the next successful run.
    """
    target = Path(target).resolve()
    check_replaceable(target, marker=marker)
    target.parent.mkdir(parents=True, exist_ok=True)
    for stale in target.parent.glob(f".{target.name}.tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        yield staging
        # Again: the block may have run for an hour, and someone may have put files there meanwhile.
        check_replaceable(target, marker=marker)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    backup = target.parent / f".{target.name}.tmp-old-{os.getpid()}"
    if target.exists():
        os.replace(target, backup)
    os.replace(staging, target)
    shutil.rmtree(backup, ignore_errors=True)


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
