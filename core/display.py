"""Terminal output: tables with rich. One helper so every command's tables look alike."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[object]], *,
                caption: str | None = None) -> None:
    """Print ``rows`` under ``columns``; numbers are right-aligned, floats shown as given."""
    # rich loads when a table prints, not when the CLI parses its flags
    from rich.table import Table

    table = Table(title=title, caption=caption, show_lines=False)
    for index, column in enumerate(columns):
        # First column: labels, never cut; the others: figures, right-aligned.
        table.add_column(column, justify="left" if index == 0 else "right", no_wrap=index == 0)
    for row in rows:
        table.add_row(*(f"{cell:,}" if isinstance(cell, int) and not isinstance(cell, bool) else str(cell)
                        for cell in row))
    console().print(table)


#: The width of piped output (a file or a log has none): wide enough that no table is ever cut or wrapped.
PIPED_WIDTH = 10_000


def console():
    """The rich console every table prints to: the terminal's width on a terminal; off one (CI logs, pipes, a
    file) no width at all, where rich would assume 80 columns and cut relation names and descriptions."""
    # rich loads when a table prints, not when the CLI parses its flags
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=PIPED_WIDTH)


def markdown_table(columns: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """``rows`` under ``columns`` as a GitHub-flavoured Markdown table (``|`` in a cell escaped)."""
    def cell(value: object) -> str:
        return str(value).replace("|", "\\|")

    lines = ["| " + " | ".join(map(cell, columns)) + " |",
             "|" + "|".join([":---"] + ["---:"] * (len(columns) - 1)) + "|"]
    lines += ["| " + " | ".join(map(cell, row)) + " |" for row in rows]
    return "\n".join(lines) + "\n"


#: LaTeX's special characters in text, and what stands for each.
_LATEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
          "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "±": r"$\pm$",
          "Δ": r"$\Delta$"}


def latex_escape(text: object) -> str:
    """``text`` with LaTeX's special characters escaped."""
    return "".join(_LATEX.get(char, char) for char in str(text))


def latex_table(columns: Sequence[str], rows: Sequence[Sequence[object]], *, caption: str | None = None) -> str:
    """``rows`` under ``columns`` as a LaTeX ``table`` with a ``booktabs`` ``tabular`` (needs
    ``\\usepackage{booktabs}``), every cell escaped."""
    lines = [r"\begin{table}[t]", r"\centering", r"\begin{tabular}{l" + "r" * (len(columns) - 1) + "}", r"\toprule",
             " & ".join(map(latex_escape, columns)) + r" \\", r"\midrule"]
    lines += [" & ".join(map(latex_escape, row)) + r" \\" for row in rows]
    lines += [r"\bottomrule", r"\end{tabular}"]
    if caption:
        lines.append(r"\caption{" + latex_escape(caption) + "}")
    lines.append(r"\end{table}")
    return "\n".join(lines) + "\n"
