"""Terminal output: tables with rich. One helper so every command's tables look alike."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[object]], *,
                caption: str | None = None) -> None:
    """Print ``rows`` under ``columns``; numbers are right-aligned, floats shown as given."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, caption=caption, show_lines=False)
    for index, column in enumerate(columns):
        # First column: labels, never cut; the others: figures, right-aligned.
        table.add_column(column, justify="left" if index == 0 else "right", no_wrap=index == 0)
    for row in rows:
        table.add_row(*(f"{cell:,}" if isinstance(cell, int) and not isinstance(cell, bool) else str(cell)
                        for cell in row))
    # Off a terminal (CI logs, pipes) rich assumes 80 columns and would cut relation names.
    console = Console() if sys.stdout.isatty() else Console(width=200)
    console.print(table)
