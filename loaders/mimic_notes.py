"""MIMIC notes: the MIMIC-III / MIMIC-IV-Note CSV reader (:func:`read_mimic_notes`) and the signature that tells
MIMIC notes read by a generic reader (:func:`mimic_signature`).

The CSV is read strictly (:mod:`medlama.loaders.noteevents`); the reader follows the contract every corpus reader
shares (:mod:`medlama.loaders.corpus_files`); :func:`medlama.loaders.corpora.load_corpus` dispatches to it
(format ``mimic``).
"""

from __future__ import annotations

import csv
import json
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from medlama.core.errors import MedlamaInputError
from medlama.loaders.corpus_files import (DUPLICATE_HINTS, CorpusFile, Located, _dataset, _error_at, _features,
                                          _files, _open_text, _place, _unique_ids)
from medlama.loaders.noteevents import BadRecord, NoteRecords, column_names, id_column

#: Columns of MIMIC-III NOTEEVENTS.csv, in file order.
MIMIC_COLUMNS = ("ROW_ID", "SUBJECT_ID", "HADM_ID", "CHARTDATE", "CHARTTIME", "STORETIME", "CATEGORY",
                 "DESCRIPTION", "CGID", "ISERROR", "TEXT")
#: Columns of MIMIC-IV-Note's ``discharge.csv`` and ``radiology.csv``, in file order (lower case there).
MIMIC_IV_COLUMNS = ("note_id", "subject_id", "hadm_id", "note_type", "note_seq", "charttime", "storetime", "text")
MIMIC_REQUIRED = ("ROW_ID", "TEXT")
#: Metadata kept from a note besides ``doc_id`` (ROW_ID / note_id) and ``text`` (TEXT).
MIMIC_METADATA = ("SUBJECT_ID", "HADM_ID", "CHARTDATE", "CATEGORY", "DESCRIPTION")
#: MIMIC-IV's note types as MIMIC-III names the category (``--categories "Discharge summary"`` reads both).
MIMIC_IV_CATEGORIES = {"DS": "Discharge summary", "RR": "Radiology", "AR": "Radiology"}
#: What a MIMIC reader does with a record the CSV does not hold cleanly: stop with an error, or leave it out.
ON_BAD_RECORD = ("error", "skip")
#: How many left-out records the note on stderr lists.
REPORTED_BAD_RECORDS = 5
_CSV_FIELD_LIMIT = 2**31 - 1


# ------------------------------------------------------------------------------ MIMIC signatures
#: Columns (upper-cased) that MIMIC notes have and other corpora hardly do: two of them in a CSV header or in a
#: JSON record's keys are MIMIC's signature (a converter that keeps the id and the patient keeps two).
MIMIC_MARKERS = frozenset({"ROW_ID", "NOTE_ID", "SUBJECT_ID", "HADM_ID", "CHARTDATE", "NOTE_TYPE", "NOTE_SEQ",
                           "CGID", "ISERROR"})
#: A MIMIC-IV-Note id (``10000032-DS-21``): as a record's id it is a signature on its own.
MIMIC_IV_NOTE_ID = re.compile(r"[0-9]+-(?:DS|RR|AR)-[0-9]+")
#: Records of each JSON Lines file that :func:`mimic_signature` looks at (a converted file is uniform).
SIGNATURE_RECORDS = 100


def mimic_signature(paths: str | Path | Iterable[str | Path], format: str, *, id_field: str | None = None,
                    **_options) -> str | None:
    """What shows that the files of a corpus read as ``format`` are MIMIC notes, or None.

    ``mimic``: the reader is MIMIC's own (always MIMIC). ``text``: a first line that is a CSV header with two
    :data:`MIMIC_MARKERS` (a notes CSV read as text). ``jsonl``: one of the first :data:`SIGNATURE_RECORDS`
    records of a file with two :data:`MIMIC_MARKERS` among its keys, or a MIMIC-IV note id as its id. A file
    that cannot be read is passed over here: the reader reports it.
    """
    if format == "mimic":
        return "read by the MIMIC notes reader"
    if format not in ("jsonl", "text"):
        return None
    for file, _ in _files(paths, format):
        try:
            with _open_text(file) as handle:
                found = (_csv_header_signature(handle.readline()) if format == "text"
                         else _jsonl_signature(handle, id_field))
        except (OSError, UnicodeDecodeError, EOFError, csv.Error):
            continue
        if found:
            return f"{found} in {Path(file).name}"
    return None


def _markers(names: Iterable[object]) -> list[str]:
    return sorted({str(name).strip().strip("\ufeff").upper() for name in names} & MIMIC_MARKERS)


def _csv_header_signature(line: str) -> str | None:
    found = _markers(next(csv.reader([line]), []))
    return f"a CSV header with {', '.join(found)}" if len(found) >= 2 else None


def _jsonl_signature(handle, id_field: str | None) -> str | None:
    seen = 0
    for line in handle:
        if not line.strip():
            continue
        seen += 1
        if seen > SIGNATURE_RECORDS:
            return None
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        found = _markers(record)
        if len(found) >= 2:
            return f"records with {', '.join(found)}"
        for key in (id_field, "doc_id", "id"):
            value = record.get(key) if key else None
            if isinstance(value, str) and MIMIC_IV_NOTE_ID.fullmatch(value.strip()):
                return f"MIMIC-IV note ids ({key} {value.strip()!r})"
    return None


# ------------------------------------------------------------------------------------------ MIMIC
def _mimic_header(file: str) -> dict[str, int]:
    """Column positions by upper-cased name; raises when the note id (ROW_ID or note_id) or the text is missing."""
    try:
        with _open_text(file) as handle:
            header = next(csv.reader(handle), None)
    except (OSError, UnicodeDecodeError, csv.Error, EOFError) as error:
        raise MedlamaInputError(f"cannot read the CSV header: {error}", file=file) from None
    if not header:
        raise MedlamaInputError("empty file: a MIMIC notes CSV needs a header row", file=file, row=1)
    positions = {name: i for i, name in enumerate(column_names(header))}
    missing = [name for name in MIMIC_REQUIRED if name not in positions]
    if "NOTE_ID" in positions:  # MIMIC-IV: note_id is the id
        missing.remove("ROW_ID")
    if missing:
        raise MedlamaInputError(
            f"missing column(s) {', '.join(missing)} (MIMIC-III's NOTEEVENTS.csv has {', '.join(MIMIC_COLUMNS)}; "
            f"MIMIC-IV-Note's discharge.csv and radiology.csv have {', '.join(MIMIC_IV_COLUMNS)}); found "
            f"{', '.join(header)}", file=file, row=1, field=missing[0])
    return positions


def read_mimic_notes(paths: str | Path | Iterable[str | Path], *, categories: Iterable[str] | None = None,
                     include_errors: bool = False, on_bad_record: str = "error"):
    """MIMIC-III or MIMIC-IV notes: ``doc_id`` (ROW_ID / note_id), ``text`` (TEXT / text) and the
    :data:`MIMIC_METADATA` columns (lower-cased names; empty when the file lacks them). For MIMIC-IV,
    ``chartdate`` is the date of ``charttime``, ``category`` the note type as MIMIC-III names it
    (:data:`MIMIC_IV_CATEGORIES`: ``DS`` is ``Discharge summary``) and ``description`` is empty.

    ``categories`` keeps only notes of these categories (case-insensitive, e.g. ``["Discharge summary"]``;
    for MIMIC-IV the note type's code, ``DS``, works too);
    notes with ``ISERROR`` set are skipped unless ``include_errors``.

    A record the CSV does not hold cleanly (an unterminated or stray quote, a field that swallowed the
    records after it, too many or too few fields, a note id not in its version's form: see
    :mod:`medlama.loaders.noteevents`) stops the reading with an error naming the file, the line the
    record starts on and its number (``on_bad_record="error"``), or is left out (``"skip"``); then each
    file with bad records gets one note on stderr when it has been read: how many were left out and
    where the first :data:`REPORTED_BAD_RECORDS` are.
    """
    if on_bad_record not in ON_BAD_RECORD:
        raise MedlamaInputError(f"on_bad_record must be one of {list(ON_BAD_RECORD)}, not {on_bad_record!r}",
                                field="on_bad_record")
    files = _files(paths, "mimic")
    for file, _ in files:
        _mimic_header(file)  # missing columns are reported now, not at the first read
    # A tuple, not a list: datasets would shard over a list (see _dataset).
    wanted = None if categories is None else tuple(sorted({c.strip().lower() for c in categories}))
    return _dataset(_mimic_records, files, _features(name.lower() for name in MIMIC_METADATA),
                    categories=wanted, include_errors=include_errors, skip=on_bad_record == "skip")


def _mimic_error(message: str, file: str, line: int, record: int, field: str | None = None,
                 stopped: int | None = None) -> MedlamaInputError:
    """An error at a CSV record. Notes hold newlines, so the physical line where a record starts and
    the record's number (the header is not a record) differ: the message gives both."""
    if stopped is not None and stopped != line:
        message += f" (reading stopped at line {stopped})"
    return _error_at(message, file, line, record, field)


def _mimic_records(files: tuple[CorpusFile, ...], categories: tuple[str, ...] | None,
                   include_errors: bool, skip: bool = False) -> Iterator[dict]:
    yield from _unique_ids(lambda: _mimic_located(files, categories, include_errors, skip), DUPLICATE_HINTS["mimic"])


def _report_skipped(file: str, skipped: list[BadRecord]) -> None:
    shown = "; ".join(f"{_place(file, bad.line, bad.record)}: {bad.message}" for bad in skipped[:REPORTED_BAD_RECORDS])
    more = f"; and {len(skipped) - REPORTED_BAD_RECORDS} more" if len(skipped) > REPORTED_BAD_RECORDS else ""
    print(f"medlama: note: {file}: left out {len(skipped)} bad record(s) (on_bad_record=skip): {shown}{more}",
          file=sys.stderr)


def _mimic_located(files: tuple[CorpusFile, ...], categories: tuple[str, ...] | None,
                   include_errors: bool, skip: bool = False) -> Iterator[Located]:
    csv.field_size_limit(_CSV_FIELD_LIMIT)  # notes run to tens of thousands of characters
    wanted = None if categories is None else set(categories)
    for file, _ in files:
        positions = _mimic_header(file)
        row_id, text_at = positions[id_column(list(positions))], positions["TEXT"]
        error_at = positions.get("ISERROR")
        note_type = positions.get("NOTE_TYPE") if "NOTE_ID" in positions else None
        category_at = positions.get("CATEGORY") if note_type is None else note_type
        metadata = [(name.lower(), positions.get(name)) for name in MIMIC_METADATA]
        if note_type is not None:  # MIMIC-IV: the date of charttime; no description; the type named as in III
            metadata = [("subject_id", positions.get("SUBJECT_ID")), ("hadm_id", positions.get("HADM_ID"))]
            chart_at = positions.get("CHARTTIME")
        with _open_text(file) as handle:
            records = NoteRecords(handle, skip=skip)
            try:
                for row, line, number in records:
                    if not include_errors and error_at is not None and row[error_at].strip() not in ("", "0"):
                        continue
                    category = row[category_at].strip() if category_at is not None else ""
                    if note_type is not None:
                        category = MIMIC_IV_CATEGORIES.get(category, category)
                    if wanted is not None and category.lower() not in wanted and (
                            note_type is None or row[note_type].strip().lower() not in wanted):
                        continue
                    record = {"doc_id": row[row_id].strip(), "text": row[text_at]}
                    for name, at in metadata:
                        record[name] = row[at] if at is not None else ""
                    if note_type is not None:
                        record["chartdate"] = row[chart_at].strip()[:10] if chart_at is not None else ""
                        record["category"], record["description"] = category, ""
                    record["source"] = file
                    yield record, line, number
            except BadRecord as bad:
                raise _mimic_error(bad.message, file, bad.line, bad.record, bad.field, bad.stopped) from None
            except UnicodeDecodeError as error:
                raise _mimic_error(f"not UTF-8 at or after this record: {error}", file, records.start,
                                   records.number + 1) from None
            except (OSError, EOFError) as error:  # a truncated .gz
                raise _mimic_error(f"cannot read: {error}", file, records.start, records.number + 1) from None
        if records.skipped:
            _report_skipped(file, records.skipped)
