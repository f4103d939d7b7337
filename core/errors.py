"""The one error type users see for bad input."""

from __future__ import annotations

from pathlib import Path


class MedlamaInputError(ValueError):
    """Bad input (a file, a row, a field or an argument), described so a user can fix it.

    The ``medlama`` command prints the message without a traceback and exits with status 2.
    """

    def __init__(self, message: str, *, file: str | Path | None = None, row: int | None = None,
                 field: str | None = None) -> None:
        where = []
        if file is not None:
            where.append(str(file))
        if row is not None:
            where.append(f"row {row}")
        if field is not None:
            where.append(f"field {field!r}")
        self.file, self.row, self.field = file, row, field
        super().__init__(f"{', '.join(where)}: {message}" if where else message)
