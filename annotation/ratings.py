"""One rater's ratings of a sheet, read from the file they sent back and checked against the sheet.

Three formats, told apart by the file: the rating page's export (``.json``, an object marked
``medlama_annotation``), the filled ``sheet.csv`` (``.csv``; a spreadsheet's byte-order mark is fine), or Label
Studio's JSON export (``.json``, a list of tasks; full or JSON-MIN). A rating is one of the levels 1-5: an
integer (a JSON number with no fraction, or a cell or string of digits alone: ``4.5`` or ``2-3`` is refused,
not read as 4 or 2), or in a Label Studio export the choice the labeling config offers, ``5: Perfectly answers
the query`` (the level's number and its words, as written).

Refused, each naming the file and, where there is one, the query and prediction: ratings of another sheet (its
id differs), a query and prediction that are not on the sheet, one rated twice, a rating that is not a level,
and any prediction of the sheet left unrated. The rater's name is the page's ``rater`` field, else the file's
name without its extension; it names rows of the scores, so the one label rule
(:func:`medlama.core.models.check_label`) holds for it.
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medlama.annotation import label_studio
from medlama.annotation.export import CSV_COLUMNS, cell_text
from medlama.annotation.page import EXPORT_FORMAT, EXPORT_KEY
from medlama.annotation.sheet import LEVELS, Sheet
from medlama.core.checksums import sha256_of
from medlama.core.errors import MedlamaInputError
from medlama.core.models import check_label

#: A rating written as text: digits alone (spaces around them allowed).
_DIGITS = re.compile(r"\s*(\d+)\s*")


@dataclass(frozen=True)
class RaterRatings:
    """One rater's ``ratings`` (``{(query id, prediction): level}``), the ``file`` and its ``format``."""

    rater: str
    file: Path
    format: str
    ratings: dict[tuple[str, str], int]

    def record(self) -> dict:
        return {"rater": self.rater, "file": self.file.name, "format": self.format, "sha256": sha256_of(self.file)}


def _level(value: Any, where: str, pair: tuple[str, str], file: Path, *, choices: bool = False) -> int | None:
    """The level ``value`` gives (``None``: not rated), or the error naming the query and prediction;
    ``choices``: a Label Studio export's, where the config's choice text gives its level too."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    level = None
    if isinstance(value, bool):
        level = None
    elif isinstance(value, int):
        level = value
    elif isinstance(value, float) and value.is_integer():
        level = int(value)
    elif isinstance(value, str) and (found := _DIGITS.fullmatch(value)):
        level = int(found.group(1))
    elif isinstance(value, str) and choices:
        level = next((lvl for lvl in LEVELS if value.strip() == label_studio.choice_value(lvl)), None)
    if level not in LEVELS:
        offered = f" or a labeling config's choice ({label_studio.choice_value(max(LEVELS))!r}, ...)" if choices else ""
        raise MedlamaInputError(f"{where}: query {pair[0]!r}, prediction {pair[1]!r} is rated {value!r}, not one of "
                                f"the levels {min(LEVELS)}-{max(LEVELS)} (a whole number{offered})", file=file)
    return level


def _csv_entries(file: Path) -> list[tuple[str, dict, Any]]:
    try:
        with open(file, encoding="utf-8-sig", newline="") as handle:
            reader = csv.DictReader(handle)
            missing = [c for c in ("query_id", "prediction", "rating", "sheet") if c not in (reader.fieldnames or ())]
            if missing:
                raise MedlamaInputError(f"no column {', '.join(map(repr, missing))} (the columns of the sheet.csv "
                                        f"written: {', '.join(CSV_COLUMNS)}; columns found: "
                                        f"{', '.join(reader.fieldnames or ()) or 'none'})", file=file)
            return [(f"row {number}", {key: cell_text(row.get(key) or "") for key in ("query_id", "prediction",
                                                                                     "sheet")}, row.get("rating"))
                    for number, row in enumerate(reader, start=2)]
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise MedlamaInputError(f"cannot read the CSV: {error}", file=file) from None


def _json_entries(file: Path) -> tuple[str, str | None, list[tuple[str, dict, Any]]]:
    try:
        payload = json.loads(file.read_text(encoding="utf-8-sig"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise MedlamaInputError(f"cannot read the JSON: {error}", file=file) from None
    if isinstance(payload, list):
        return "label-studio", None, label_studio.entries(payload, file)
    if not isinstance(payload, dict) or payload.get(EXPORT_KEY) != EXPORT_FORMAT or not isinstance(
            payload.get("ratings"), list):
        raise MedlamaInputError("neither the rating page's export (an object with medlama_annotation and ratings) "
                                "nor a Label Studio export (a list of tasks)", file=file)
    rater = payload.get("rater") if isinstance(payload.get("rater"), str) else None
    out = []
    for number, entry in enumerate(payload["ratings"], start=1):
        if not isinstance(entry, dict):
            raise MedlamaInputError(f"rating {number} is not a JSON object", file=file)
        out.append((f"rating {number}", {**entry, "sheet": payload.get("sheet")}, entry.get("rating")))
    return "page", rater, out


def read_ratings(file: str | Path, sheet: Sheet) -> RaterRatings:
    """One rater's ratings of ``sheet`` from ``file`` (module docstring)."""
    file = Path(file)
    if not file.is_file():
        raise MedlamaInputError("no such ratings file", file=file)
    if file.suffix.lower() == ".csv":
        kind, rater, entries = "csv", None, _csv_entries(file)
    elif file.suffix.lower() == ".json":
        kind, rater, entries = _json_entries(file)
    else:
        raise MedlamaInputError("give the rating page's .json export, the filled sheet .csv or Label Studio's "
                                ".json export", file=file)
    on_sheet = {(query.id, prediction) for _, query, prediction in sheet.items()}
    ratings: dict[tuple[str, str], int] = {}
    for where, data, value in entries:
        if str(data.get("sheet")) != sheet.id:
            raise MedlamaInputError(f"{where} rates sheet {str(data.get('sheet'))[:12]!r}, not this sheet "
                                    f"({sheet.id[:12]}): these are ratings of another sheet", file=file)
        pair = (str(data.get("query_id")), str(data.get("prediction")))
        if pair not in on_sheet:
            raise MedlamaInputError(f"{where}: query {pair[0]!r}, prediction {pair[1]!r} is not on the sheet", file=file)
        level = _level(value, f"{where}, column 'rating'" if kind == "csv" else where, pair, file,
                       choices=kind == "label-studio")
        if level is None:
            continue
        if pair in ratings:
            raise MedlamaInputError(f"{where}: query {pair[0]!r}, prediction {pair[1]!r} is rated twice", file=file)
        ratings[pair] = level
    unrated = [(item, pair) for item, query, prediction in sheet.items()
               if (pair := (query.id, prediction)) not in ratings]
    if unrated:
        named = "; ".join(f"item {item}: query {q!r}, prediction {p!r}" for item, (q, p) in unrated[:3])
        raise MedlamaInputError(f"{len(unrated)} of the sheet's {len(on_sheet)} predictions are not rated ({named}"
                                f"{'; ...' if len(unrated) > 3 else ''}); rate every one", file=file)
    name = rater.strip() if rater and rater.strip() else file.stem
    return RaterRatings(check_label(name, what="the rater's name", file=file), file, kind, ratings)
