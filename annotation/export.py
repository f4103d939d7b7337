"""``medlama annotate export``: a blind rating sheet of probe runs, as files for raters.

:func:`export_sheet` reads the runs (``medlama probe`` or ``medlama recipe`` output folders; several runs must
be of the same queries, as ``medlama compare`` checks), samples queries (:func:`~medlama.annotation.sheet.
sample_queries`), pools the runs' top-k (:func:`~medlama.annotation.sheet.build_sheet`) and writes, atomically,
into a folder of its own:

* ``annotate.html``: the rating page (:mod:`medlama.annotation.page`);
* ``sheet.csv``: one row per prediction, ``item``, ``query_id``, ``relation``, ``query``, ``prediction``, an empty
  ``rating``, an empty ``comment`` and the ``sheet`` id, for spreadsheet users; RFC 4180 CSV (CRLF between
  rows, a cell holding a comma, quote, CR or LF quoted), so a name holding a line break stays in its cell.
  Wherever a spreadsheet could start reading a formula (a cell's start, and each line of a cell, for a reader
  that splits at a line break) a text starting with ``=``, ``+``, ``-``, ``@``, a tab or a CR is written after a
  ``'``; so is one starting with ``'`` itself, so that the reader (:func:`cell_text`, used by
  :mod:`medlama.annotation.ratings`) takes exactly one ``'`` off there and gets every text back exactly;
* ``label_studio_tasks.json`` and ``label_studio_config.xml`` (:mod:`medlama.annotation.label_studio`);
* ``manifest.json``: the sheet (its id, queries and predictions shown), the sample (seed, relations, per
  relation counts), each run's identity (its folder's name and the SHA-256 of its ``results.json`` and
  ``predictions.jsonl``) and provenance. It holds no gold answer and no run's ranks: scoring reads them from the
  runs again, after checking their files' SHA-256.
"""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from medlama.annotation import label_studio
from medlama.annotation.design import STRATEGIES, stratified_probabilities, uncertainty_sample
from medlama.annotation.page import page_html
from medlama.annotation.sheet import (CSV_SHEET, FORMAT, FORMAT_KEY, LEVELS, LS_CONFIG, LS_TASKS, MANIFEST, PAGE,
                                      Sheet, build_sheet, sample_queries)
from medlama.core.atomic import claimed_output, staged_directory
from medlama.core.atomic_files import atomic_write_text
from medlama.core.errors import MedlamaInputError
from medlama.core.provenance import provenance
from medlama.core.settings import Checked, did_you_mean, setting
from medlama.analysis.comparison import input_record
from medlama.analysis.runs import check_comparable, load_runs
from medlama.runs.outputs import KEEP_PREDICTIONS

#: The owner recorded in a sheet's folder.
KIND = "annotate export"
#: How each design draws the sheet's queries, as the manifest records it.
SAMPLING = {
    "stratified": "stratified by relation: relations in a seeded order, one query each per round (drawn without "
                  "replacement) until the sample is full; predictions pooled over the runs' top k, deduplicated, "
                  "shuffled with the seed",
    "uncertainty": "by the first run's uncertainty (one minus its top prediction's softmax share of its kept "
                   "scores): inclusion probabilities half uniform, half proportional to it, capped at 1, drawn by "
                   "systematic sampling in a seeded order; predictions pooled and shuffled as for stratified",
}
#: The columns of ``sheet.csv``.
CSV_COLUMNS = ("item", "query_id", "relation", "query", "prediction", "rating", "comment", "sheet")
#: What a spreadsheet reads as the start of a formula.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


@dataclass(frozen=True)
class ExportSettings(Checked):
    """Which queries and predictions a sheet shows."""

    queries: int = setting(15, min=1, metavar="N", help="queries to sample (stratified by relation)")
    seed: int = setting(0, min=0, help="seed of the sample and of the blind order of the predictions")
    k: int = setting(10, min=1, max=KEEP_PREDICTIONS, help="top predictions of each run to pool per query")
    relations: tuple[str, ...] | None = setting(None, metavar="RELATION", show_default="all",
                                                help="sample only these relations")
    strategy: str = setting("stratified", choices=STRATEGIES,
                            help="which queries to rate: stratified (equal numbers per relation) or uncertainty (more "
                                 "of those the model is least sure of, each with its recorded probability)")
    overwrite: bool = setting(False, switch=True, show_default="refuse",
                              help="replace an earlier sheet in --out (its raters' ratings then no longer fit)")


#: The guard put before a line of a cell that a spreadsheet could run (and before one starting with itself).
GUARD = "'"
#: A line of a cell starts after one of these.
_LINE_BREAKS = "\r\n"


def spreadsheet_cell(text: str) -> str:
    """``text`` as a spreadsheet keeps it as text (module docstring): :data:`GUARD` before every line of it
    that starts with a formula character or with the guard itself; :func:`cell_text` reverses it exactly."""
    out, line_start = [], True
    for char in text:
        if line_start and (char in FORMULA_STARTS or char == GUARD):
            out.append(GUARD)
        out.append(char)
        line_start = char in _LINE_BREAKS
    return "".join(out)


def cell_text(cell: str) -> str:
    """The text :func:`spreadsheet_cell` wrote as ``cell``: one :data:`GUARD` taken off the start of each of its
    lines that has one. A guard a spreadsheet dropped on saving leaves the formula-like text as it was."""
    out, line_start, guarded = [], True, False
    for char in cell:
        if line_start and not guarded and char == GUARD:
            guarded = True
            continue
        out.append(char)
        line_start, guarded = char in _LINE_BREAKS, False
    return "".join(out)


def sheet_csv(sheet: Sheet) -> str:
    """``sheet.csv``'s text (module docstring)."""
    buffer = io.StringIO()
    # RFC 4180's row end: the csv module then quotes a cell holding a CR (with "\n" alone it does not, and a
    # spreadsheet would start a new row, and a formula, at the CR)
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    for item, query, prediction in sheet.items():
        writer.writerow([item, *(spreadsheet_cell(t) for t in (query.id, query.relation, query.text, prediction)),
                         "", "", sheet.id])
    return buffer.getvalue()


def _relations(available: Sequence[str], chosen: tuple[str, ...] | None) -> list[str]:
    names = sorted(set(available))
    if chosen is None:
        return names
    for name in chosen:
        if name not in names:
            raise MedlamaInputError(f"the runs have no relation {did_you_mean(name, names)}")
    return sorted(set(chosen))


def export_sheet(folders: Sequence[str | Path], out: str | Path, settings: ExportSettings = ExportSettings(), *,
                 argv: Sequence[str] | None = None) -> dict:
    """Write the sheet of the runs in ``folders`` to ``out`` (module docstring); returns the manifest."""
    out = Path(out)
    hint = "give --overwrite (overwrite=True) to replace it, or choose another --out"
    with claimed_output(out, marker=MANIFEST, kind=KIND, overwrite=settings.overwrite, hint=hint, reads=folders):
        runs = load_runs(folders, at_least=1, purpose="a rating sheet")
        if len(runs) > 1:
            check_comparable(runs)  # pooled predictions of one query must be of the same query
        first = runs[0]
        relations = _relations(first.relations, settings.relations)
        eligible = [i for i, r in enumerate(first.relations) if r in relations]
        if settings.queries > len(eligible):
            raise MedlamaInputError(f"--queries {settings.queries} but the runs have {len(eligible)} queries"
                                    + (f" of the relations {', '.join(relations)}" if settings.relations else ""))
        if settings.strategy == "uncertainty":
            picked, inclusion = uncertainty_sample(first, eligible, settings.queries, settings.seed)
        else:
            picked = [eligible[i] for i in sample_queries([first.relations[i] for i in eligible], settings.queries,
                                                           settings.seed)]
            inclusion = stratified_probabilities({i: first.relations[i] for i in eligible}, picked)
        sheet = build_sheet(runs, picked, settings.k, settings.seed)
        manifest = {
            FORMAT_KEY: FORMAT, "sheet": sheet.id, "k": sheet.k, "levels": {str(k): v for k, v in LEVELS.items()},
            "items": len(sheet.items()),
            "sampling": {"method": SAMPLING[settings.strategy], "strategy": settings.strategy,
                         # what `annotate estimate` weighs the rated queries by: the queries drawn from, and each
                         # sheet query's chance of being drawn (in the sheet's order)
                         "population": len(eligible), "inclusion": [inclusion[i] for i in picked],
                         "seed": settings.seed, "queries": settings.queries, "relations": relations,
                         "per_relation": dict(sorted(Counter(q.relation for q in sheet.queries).items()))},
            "runs": [input_record(run) for run in runs],
            "queries": sheet.to_json(),
            "settings": {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(settings).items()},
            "provenance": provenance(argv=argv),
        }
        with staged_directory(out, marker=MANIFEST, kind=KIND) as staging:
            atomic_write_text(staging / PAGE, page_html(sheet, f"Rate the predictions ({sheet.id[:12]})"))
            atomic_write_text(staging / CSV_SHEET, sheet_csv(sheet))
            atomic_write_text(staging / LS_TASKS, json.dumps(label_studio.tasks(sheet), indent=1, ensure_ascii=False))
            atomic_write_text(staging / LS_CONFIG, label_studio.CONFIG)
            atomic_write_text(staging / MANIFEST, json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    return manifest
