"""Reading a JSON-lines file the one way: each non-blank line a JSON value, a line that is not JSON refused by
its file and line number (never a traceback)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from medlama.core.errors import MedlamaInputError


def json_lines(lines: Iterable[str], file: str | Path) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` of each non-blank line of ``lines`` (the text of ``file``, named in errors)."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except ValueError as error:
            raise MedlamaInputError(f"not JSON: {error}", file=file, row=number) from None
