"""The ownership record of an output folder (:data:`OWNER_NAME`): which command wrote it, what it wrote and,
when recorded, every file's size and SHA-256 (:mod:`medlama.core.integrity`). Read here; written by
:func:`medlama.core.atomic.write_owner`."""

from __future__ import annotations

import json
from pathlib import Path

#: The hidden ownership record every output written with a ``kind`` holds.
OWNER_NAME = ".medlama-output.json"


def owner_record(folder: str | Path) -> dict | None:
    """The ownership record of ``folder`` (``kind``, ``entries`` and, when recorded, ``files``), or None when
    unreadable."""
    try:
        record = json.loads((Path(folder) / OWNER_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def owner_kind(folder: str | Path) -> str | None:
    """The ``kind`` recorded in ``folder``, or None when it has no readable ownership record."""
    kind = (owner_record(folder) or {}).get("kind")
    return kind if isinstance(kind, str) and kind else None
