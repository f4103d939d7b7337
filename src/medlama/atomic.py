"""Atomic writes: an interrupted build or run leaves the previous output intact."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def atomic_directory(target: str | Path) -> Iterator[Path]:
    """Yield an empty staging folder that replaces ``target`` only if the block finishes.

    The staging folder sits beside ``target`` (same file system, so the swap is a rename). On an
    exception, or a kill, ``target`` is untouched; a stale staging folder from a killed run is
    hidden (``.name.tmp-*``) and removed by the next successful run.
    """
    target = Path(target).resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    for stale in target.parent.glob(f".{target.name}.tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        yield staging
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
