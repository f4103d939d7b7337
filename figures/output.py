"""How a figure is written and what it is read from: one PNG and one JSON of the figure's data, side by side,
each written atomically, the JSON with its provenance; and the record files of runs, read with a clear error.

The JSON beside ``NAME.png`` is ``NAME.json``: ``figure`` (which of the paper's figures), ``caption`` (what is
drawn and how every spread was computed), ``data`` (every number drawn), ``sources`` (each input file's name and
SHA-256, and the data and models its own provenance names) and ``provenance`` (versions, the figure's settings,
command line, date; :func:`medlama.core.provenance.provenance`).
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from medlama.core.checksums import sha256_of
from medlama.core.errors import MedlamaInputError
from medlama.core.provenance import provenance
from medlama.runs.outputs import write_results
from medlama.runs.plots import save_figure

#: The spread drawn around a mean over repeated runs (corpora or seeds), as the record names it.
STD_METHOD = ("sample standard deviation (n - 1) over the rewiring corpora; where there is one value (one corpus, "
              "the un-rewired model), the micro acc@k's 95% percentile-bootstrap interval over queries")


def read_record(path: str | Path, *, what: str) -> Any:
    """The JSON of ``path`` (``what``: the file a figure needs, for the message), or one clear error."""
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise MedlamaInputError(f"no {path.name}: give {what}", file=path) from None
    except IsADirectoryError:
        raise MedlamaInputError(f"a folder, not {path.name}: give {what}", file=path) from None
    except (OSError, ValueError) as error:
        raise MedlamaInputError(f"cannot read it as JSON: {error}", file=path) from None


def source_record(path: str | Path, record: Any = None) -> dict:
    """An input of a figure: its file name, SHA-256 and (from its own provenance) the data it was probed on."""
    path = Path(path)
    entry: dict = {"file": f"{path.parent.name}/{path.name}", "sha256": sha256_of(path)}
    block = record.get("provenance") if isinstance(record, dict) else None
    if isinstance(block, dict):
        entry["data"] = block.get("data")
        entry["command"] = block.get("command")
    return entry


def check_png(path: Path, *, overwrite: bool) -> None:
    """Refuse, before any work, an output that is not a ``.png`` in an existing folder, or a figure already
    there (unless ``overwrite``); its JSON beside it counts too."""
    if path.suffix.lower() != ".png":
        raise MedlamaInputError("a figure is written as PNG: give a FILE ending in .png", file=path)
    if not path.parent.is_dir():
        raise MedlamaInputError("its folder does not exist", file=path)
    for existing in (path, path.with_suffix(".json")):
        if existing.is_dir() or (existing.exists() and not overwrite):
            raise MedlamaInputError("exists; give --overwrite to replace the figure, or another --out", file=existing)


def subplots(rows: int, columns: int, *, width: float, height: float, **options):
    """A matplotlib figure of ``rows`` x ``columns`` axes (an array, always two-dimensional), drawn off screen."""
    import matplotlib  # matplotlib only when a figure is drawn

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # matplotlib only when a figure is drawn

    return plt.subplots(rows, columns, figsize=(width, height), squeeze=False, **options)


def write_figure(fig, png: str | Path, *, figure: str, title: str, caption: str, data: Mapping[str, Any],
                 sources: Sequence[dict], settings: Mapping[str, Any], argv: Sequence[str] | None = None
                 ) -> tuple[Path, Path]:
    """Write ``fig`` (titled ``title``) to ``png`` and its data to the ``.json`` beside it, both atomically (the
    JSON last, so a JSON present means its PNG is complete). Returns ``(png, json)``."""
    png = Path(png)
    fits = int(fig.get_figwidth() * 14)  # characters of a 9-point line across the figure
    fig.suptitle("\n".join(textwrap.fill(line, fits) for line in title.split("\n")), fontsize=9)
    save_figure(fig, png)
    record = {"figure": figure, "caption": caption, "png": png.name, "data": data, "sources": list(sources),
              "provenance": provenance(settings=dict(settings), models=[], argv=argv)}
    return png, write_results(png.with_suffix(".json"), record)
