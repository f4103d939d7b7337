"""Streaming readers of the corpora contexts are retrieved from.

Every reader returns a :class:`datasets.IterableDataset` (``IterableDataset.from_generator``) whose
records hold at least ``doc_id``, ``text`` and ``source`` (the file they come from), so a corpus larger
than memory is read one record at a time. Bad input stops the iteration with a
:class:`~medlama.core.errors.MedlamaInputError` naming the file, and the row (line) and field where known.
Missing columns of a MIMIC file are reported before anything is read.

Document ids are unique within a corpus, because the context-variance sets name their rows after them.
Ids the reader makes up (a plain-text line, a file without an id of its own) are built from the file's
*label*: its path relative to the folder that was named (``sub/notes.txt``), or its name when the file
itself was named; a file named twice (directly and through its folder) is read once. Ids the data gives
(MIMIC ``ROW_ID``, a JATS PMC id, a JSON Lines id field) are kept as they are. A repeated id stops the
reading with an error naming both places; the check keeps the ids read so far in memory (about 90 bytes
each: ~170 MB for the 2.08 M notes of MIMIC-III), so a streaming corpus is read as one stream (one shard),
not one shard per file. The context-variance index pipeline reads file by file in parallel instead
(:func:`corpus_files` and :func:`located_records`: the same records and places, no check) and checks the
ids of all files after reading, with the same error. Plain-text lines need no such set: their ids (``<label>:<line>``) are unique once
the labels are, and two text files with the same label are refused before anything is read.

Folders are searched recursively for the format's file extensions; hidden files are skipped. A file
named directly is read whatever its extension.

* :func:`read_mimic_notes`: MIMIC notes, ``.csv`` or ``.csv.gz``: MIMIC-III ``NOTEEVENTS.csv`` (ROW_ID,
  SUBJECT_ID, HADM_ID, CHARTDATE, CHARTTIME, STORETIME, CATEGORY, DESCRIPTION, CGID, ISERROR, TEXT) or
  MIMIC-IV-Note ``discharge.csv`` / ``radiology.csv`` (note_id, subject_id, hadm_id, note_type, note_seq,
  charttime, storetime, text). The id (``ROW_ID`` / ``note_id``) and the text are required, the other
  columns are carried along when present; notes flagged ``ISERROR`` (III) are skipped unless asked for.
  The CSV is read strictly (:mod:`medlama.loaders.noteevents`): a broken record stops the reading, or is
  left out and reported with ``on_bad_record="skip"``.
* :func:`read_pmc_articles`: PMC open-access articles as JATS XML (``.xml``/``.nxml``: title, abstract
  and body paragraphs) or plain text (``.txt``, one article per file).
* :func:`read_jsonl`: JSON Lines (``.jsonl``/``.json``, optionally ``.gz``) with a configurable text field.
* :func:`read_text`: plain text, one document per line or per file (folders: ``*.txt``, ``*.txt.gz`` and
  files without an extension, such as ``pubmed_sents_0``, except checksum lists like ``SHA256SUMS`` and
  ``README`` / ``LICENSE``).

:func:`load_corpus` dispatches on a format name; :func:`corpus_fingerprint` identifies a corpus (its
files' paths, sizes and modification times, the reader options and :data:`READER_VERSION`) so that an
index built from it can be reused (:class:`medlama.datasets.context_variance.index.CorpusIndex`).

:func:`mimic_signature` tells whether files read by a generic reader (JSON Lines, plain text) are MIMIC notes
all the same (MIMIC's columns in a record or a CSV header, MIMIC-IV note ids), so that their licence follows
the text whatever reader brought it in (:mod:`medlama.datasets.licences`).

The readers share one contract (file discovery, labels, unique ids, errors that name file, line and record:
:mod:`medlama.loaders.corpus_files`); the self-contained parts live beside: the strict MIMIC CSV parsing
(:mod:`medlama.loaders.noteevents`) and the JATS parser (:mod:`medlama.loaders.jats`).
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from medlama.core.errors import MedlamaInputError
from medlama.loaders.corpus_files import (  # noqa: F401  (FORMATS and the suffixes are this module's API too)
    FORMATS,
    PMC_SUFFIXES,
    JSONL_SUFFIXES,
    TEXT_SUFFIXES,
    MIMIC_SUFFIXES,
    NOT_TEXT,
    CorpusFile,
    Located,
    _dataset,
    _error_at,
    _features,
    _files,
    _open_text,
    _place,
    _unique_ids,
    _without_suffix,
)
from medlama.loaders.jats import parse_jats  # noqa: F401  (read_pmc_articles' parser, importable here)
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

#: Part of every corpus fingerprint: raised whenever the records read from the same files change (ids,
#: the files a folder gives), so that indexes built by an earlier version are rebuilt, not reused.
READER_VERSION = 3
_CSV_FIELD_LIMIT = 2**31 - 1
#: What a repeated document id of each format most likely means, said in its error.
DUPLICATE_HINTS = {"mimic": "a note id repeats: is a notes file read twice?",
                   "pmc": "the same article is read twice: remove one copy",
                   "jsonl": "give every record its own id, or none: a record without one is <file>:<line>",
                   "text": "files differing only in their extension"}

#: The options each format's reader takes (:func:`load_corpus`'s keyword arguments).
READER_OPTIONS = {"mimic": {"categories", "include_errors", "on_bad_record"}, "pmc": set(),
                  "jsonl": {"text_field", "id_field"}, "text": {"per"}}


def corpus_files(paths: str | Path | Iterable[str | Path], format: str, **options) -> list[CorpusFile]:
    """The (file, label) pairs a corpus of ``format`` is read from, in reading order, checked as its reader
    checks them before reading (MIMIC: the header's columns; the options' names and values)."""
    unknown = sorted(set(options) - READER_OPTIONS.get(format, set()))
    if unknown:
        raise MedlamaInputError(f"unknown {format} reader option(s) {unknown}; the reader takes "
                                f"{sorted(READER_OPTIONS.get(format, ()))}", field=unknown[0])
    if format == "mimic":
        on_bad_record = options.get("on_bad_record", "error")
        if on_bad_record not in ON_BAD_RECORD:
            raise MedlamaInputError(f"on_bad_record must be one of {list(ON_BAD_RECORD)}, not {on_bad_record!r}",
                                    field="on_bad_record")
    if format == "text" and options.get("per", "line") not in ("line", "file"):
        raise MedlamaInputError(f"per must be 'line' or 'file', not {options['per']!r}", field="per")
    files = _files(paths, format)
    if format == "mimic":
        for file, _ in files:
            _mimic_header(file)
    return files


def located_records(files: Iterable[CorpusFile], format: str, **options) -> Iterator[Located]:
    """The records of ``files`` (a shard of :func:`corpus_files`) with where each starts (line, record
    number), as ``format``'s reader reads them but without its duplicate-id check: a reader of one shard
    cannot see the others, so the index pipeline checks the ids of all shards after reading
    (:mod:`medlama.datasets.context_variance.index_engine`), naming both places as the reader would."""
    files = tuple(files)
    if format == "mimic":
        categories = options.get("categories")
        wanted = None if categories is None else tuple(sorted({c.strip().lower() for c in categories}))
        return _mimic_located(files, wanted, bool(options.get("include_errors", False)),
                              options.get("on_bad_record", "error") == "skip")
    if format == "pmc":
        return _pmc_located(files)
    if format == "jsonl":
        return _jsonl_located(files, options.get("text_field", "text"), options.get("id_field"))
    if format == "text":
        return _text_located(files, options.get("per", "line"))
    raise MedlamaInputError(f"unknown corpus format {format!r}; choose from {list(FORMATS)}", field="format")


def corpus_fingerprint(paths: str | Path | Iterable[str | Path], format: str, **options) -> str:
    """A hash of the corpus files (absolute path, label, size, modification time), the reader options and
    :data:`READER_VERSION`."""
    files = _files(paths, format)
    digest = hashlib.sha256(json.dumps([READER_VERSION, format, sorted(options.items(), key=str)],
                                       default=str).encode())
    for file, label in files:
        stat = os.stat(file)
        digest.update(json.dumps([os.path.abspath(file), label, stat.st_size, stat.st_mtime_ns]).encode())
    return digest.hexdigest()


def detect_format(path: str | Path) -> str:
    """``mimic`` for ``*.csv[.gz]``, ``pmc`` for ``*.xml``/``*.nxml``, ``jsonl`` for ``*.jsonl``/``*.json[.gz]``.

    Plain text is ambiguous (a PMC article per file, or a document per line); name the format then.
    """
    name = Path(path).name.lower()
    if name.endswith((".csv", ".csv.gz")):
        return "mimic"
    if name.endswith((".xml", ".nxml")):
        return "pmc"
    if name.endswith(JSONL_SUFFIXES):
        return "jsonl"
    raise MedlamaInputError("cannot tell the corpus format from the file name; give it (mimic, pmc, jsonl, "
                            "text)", file=path, field="format")


def load_corpus(paths: str | Path | Iterable[str | Path], format: str | None = None, **options):
    """The streaming corpus of ``paths`` read as ``format`` (:data:`FORMATS`; guessed when ``None``)."""
    if format is None:
        first = next(iter([paths] if isinstance(paths, (str, Path)) else paths), None)
        if first is None:
            raise MedlamaInputError("no corpus files given")
        format = detect_format(first)
    readers = {"mimic": read_mimic_notes, "pmc": read_pmc_articles, "jsonl": read_jsonl, "text": read_text}
    if format not in readers:
        raise MedlamaInputError(f"unknown corpus format {format!r}; choose from {list(FORMATS)}", field="format")
    return readers[format](paths, **options)


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


# -------------------------------------------------------------------------------------------- PMC
def read_pmc_articles(paths: str | Path | Iterable[str | Path]):
    """PMC articles: ``doc_id`` (the PMC id, else the file's label without extension, e.g. ``sub/article``),
    ``title``, ``text`` (title, abstract and body paragraphs, one per line).

    Folders are searched for ``.xml``, ``.nxml`` (JATS) and ``.txt`` (plain text, title = first line).
    """
    files = _files(paths, "pmc")
    return _dataset(_pmc_records, files, _features(["title"]))


def _pmc_records(files: tuple[CorpusFile, ...]) -> Iterator[dict]:
    yield from _unique_ids(lambda: _pmc_located(files), DUPLICATE_HINTS["pmc"])


def _pmc_located(files: tuple[CorpusFile, ...]) -> Iterator[Located]:
    for file, label in files:
        if file.lower().endswith(".txt"):
            try:
                text = Path(file).read_text(encoding="utf-8")
            except UnicodeDecodeError as error:
                raise MedlamaInputError(f"not UTF-8: {error}", file=file) from None
            title = next((line.strip() for line in text.splitlines() if line.strip()), "")
            record = {"doc_id": _without_suffix(label), "text": text, "title": title, "source": file}
        else:
            record = {**parse_jats(Path(file).read_bytes(), file=file, default_id=_without_suffix(label)),
                      "source": file}
        yield record, None, None


# ------------------------------------------------------------------------------------------ JSONL
def read_jsonl(paths: str | Path | Iterable[str | Path], *, text_field: str = "text", id_field: str | None = None):
    """JSON Lines records: ``text`` from ``text_field``; ``doc_id`` from ``id_field`` (required when
    given), else the record's ``doc_id`` or ``id``, else ``<file label>:<line>``. Blank lines are skipped.
    An id given twice (in one file or two) is an error.
    """
    files = _files(paths, "jsonl")
    return _dataset(_jsonl_records, files, _features(), text_field=text_field, id_field=id_field)


def _jsonl_records(files: tuple[CorpusFile, ...], text_field: str, id_field: str | None) -> Iterator[dict]:
    yield from _unique_ids(lambda: _jsonl_located(files, text_field, id_field), DUPLICATE_HINTS["jsonl"])


def _jsonl_located(files: tuple[CorpusFile, ...], text_field: str, id_field: str | None) -> Iterator[Located]:
    for file, label in files:
        with _open_text(file) as handle:
            line_number = 0
            try:
                for line_number, line in enumerate(handle, 1):
                    if not line.strip():
                        continue
                    try:
                        record = json.loads(line)
                    except json.JSONDecodeError as error:
                        raise MedlamaInputError(f"bad JSON: {error.msg}", file=file, row=line_number) from None
                    if not isinstance(record, dict):
                        raise MedlamaInputError("a JSON Lines record must be an object", file=file,
                                                row=line_number)
                    text = record.get(text_field)
                    if not isinstance(text, str):
                        problem = "missing" if text_field not in record else f"not a string ({type(text).__name__})"
                        raise MedlamaInputError(f"text field {problem}", file=file, row=line_number,
                                                field=text_field)
                    if id_field is not None:
                        if record.get(id_field) in (None, ""):
                            raise MedlamaInputError("id field missing", file=file, row=line_number, field=id_field)
                        doc_id = record[id_field]
                    else:
                        doc_id = record.get("doc_id", record.get("id"))
                    yield ({"doc_id": f"{label}:{line_number}" if doc_id in (None, "") else str(doc_id),
                            "text": text, "source": file}, line_number, None)
            except UnicodeDecodeError as error:
                raise MedlamaInputError(f"not UTF-8: {error}", file=file, row=line_number + 1) from None
            except (OSError, EOFError) as error:
                raise MedlamaInputError(f"cannot read: {error}", file=file, row=line_number + 1) from None


# ------------------------------------------------------------------------------------------- text
def read_text(paths: str | Path | Iterable[str | Path], *, per: str = "line"):
    """Plain text: one document per non-blank line (``per="line"``, ``doc_id = <file label>:<line>``) or
    per file (``per="file"``, ``doc_id`` = file label without extension). Folders are searched for
    ``.txt``, ``.txt.gz`` and files without an extension (not checksum lists, README or LICENSE files:
    :data:`NOT_TEXT`); a file named directly is read whatever its name.

    Per line, the ids are unique by construction (labels are), so no set of ids is kept; per file,
    ``a.txt`` and ``a.txt.gz`` (or ``a``) would both be ``a``, which is checked.
    """
    if per not in ("line", "file"):
        raise MedlamaInputError(f"per must be 'line' or 'file', not {per!r}", field="per")
    files = _files(paths, "text")
    return _dataset(_text_records, files, _features(), per=per)


def _text_records(files: tuple[CorpusFile, ...], per: str) -> Iterator[dict]:
    if per == "file":
        yield from _unique_ids(lambda: _text_located(files, per), DUPLICATE_HINTS["text"])
    else:
        yield from (record for record, _, _ in _text_located(files, per))


def _text_located(files: tuple[CorpusFile, ...], per: str) -> Iterator[Located]:
    for file, label in files:
        with _open_text(file) as handle:
            line_number = 0
            try:
                if per == "file":
                    yield {"doc_id": _without_suffix(label), "text": handle.read(), "source": file}, None, None
                    continue
                for line_number, line in enumerate(handle, 1):
                    line = line.rstrip("\r\n")
                    if line.strip():
                        yield {"doc_id": f"{label}:{line_number}", "text": line, "source": file}, line_number, None
            except UnicodeDecodeError as error:
                raise MedlamaInputError(f"not UTF-8: {error}", file=file, row=line_number + 1) from None
            except (OSError, EOFError) as error:
                raise MedlamaInputError(f"cannot read: {error}", file=file, row=line_number + 1) from None
