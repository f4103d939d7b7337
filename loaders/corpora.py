"""Streaming readers of the corpora contexts are retrieved from.

Every reader returns a :class:`datasets.IterableDataset` (``IterableDataset.from_generator``) whose
records hold at least ``doc_id``, ``text`` and ``source`` (the file they come from), so a corpus larger
than memory is read one record at a time. Bad input stops the iteration with a
:class:`~medlama.errors.MedlamaInputError` naming the file, and the row (line) and field where known.
Missing columns of a MIMIC file are reported before anything is read.

Document ids are unique within a corpus, because the context-variance sets name their rows after them.
Ids the reader makes up (a plain-text line, a file without an id of its own) are built from the file's
*label*: its path relative to the folder that was named (``sub/notes.txt``), or its name when the file
itself was named; a file named twice (directly and through its folder) is read once. Ids the data gives
(MIMIC ``ROW_ID``, a JATS PMC id, a JSON Lines id field) are kept as they are. A repeated id stops the
reading with an error naming both places; the check keeps the ids read so far in memory (about 90 bytes
each: ~170 MB for the 2.08 M notes of MIMIC-III), so a corpus is read as one stream (one shard), not
one shard per file. Plain-text lines need no such set: their ids (``<label>:<line>``) are unique once
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

One module although long: the four readers share one contract (file discovery, labels, unique ids, errors
that name file, line and record, the fingerprint), and splitting them would scatter that contract; the
strict NOTEEVENTS CSV parsing, which is self-contained, lives in :mod:`medlama.loaders.noteevents`.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
import os
import re
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from medlama.errors import MedlamaInputError
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

FORMATS = ("mimic", "pmc", "jsonl", "text")
PMC_SUFFIXES = (".xml", ".nxml", ".txt")
JSONL_SUFFIXES = (".jsonl", ".json", ".jsonl.gz", ".json.gz")
TEXT_SUFFIXES = (".txt", ".txt.gz")
MIMIC_SUFFIXES = (".csv", ".csv.gz")
#: Extensionless files a text-corpus folder may hold that are no corpus text: checksum lists and the
#: usual documentation files (case-insensitive).
NOT_TEXT = re.compile(r"^(?:(?:md5|sha\d*|b2|check)sums?|readme|licen[cs]e|copying|notice|authors|changelog|"
                      r"changes)$", re.IGNORECASE)
#: Part of every corpus fingerprint: raised whenever the records read from the same files change (ids,
#: the files a folder gives), so that indexes built by an earlier version are rebuilt, not reused.
READER_VERSION = 3
_CSV_FIELD_LIMIT = 2**31 - 1
#: A corpus file and its label (see the module docstring), as the record generators receive them.
CorpusFile = tuple[str, str]


# ------------------------------------------------------------------------------------------ files
def _wanted(path: Path, suffixes: tuple[str, ...], extensionless: bool) -> bool:
    """Whether a file found in a named folder is read: hidden files never, else by its extension."""
    name = path.name
    if name.startswith(".") or not path.is_file():
        return False
    if name.lower().endswith(suffixes):
        return True
    return extensionless and "." not in name and not NOT_TEXT.match(name)


def _expand(paths: str | Path | Iterable[str | Path], suffixes: tuple[str, ...], what: str, *,
            extensionless: bool = False, unique_labels: bool = False) -> list[CorpusFile]:
    """(file, label) of the files named directly, plus those with ``suffixes`` (and, with ``extensionless``,
    those without an extension) under named folders, sorted and recursive; each file once.

    The label is the path relative to the named folder, or the name of a named file. With
    ``unique_labels`` (readers whose ids are all built from labels) two files with the same label are
    refused; the other readers catch a resulting repeated id as they read.
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    files: list[CorpusFile] = []
    read: set[Path] = set()
    labels: dict[str, str] = {}

    def add(file: Path, label: str) -> None:
        resolved = file.resolve()
        if resolved in read:
            return  # named directly and through its folder (or twice): read once
        if unique_labels and label in labels:
            raise MedlamaInputError(f"{labels[label]} and {file} are both read as {label!r}, which would give "
                                    "their documents the same ids; read them as separate corpora, or name "
                                    "their common folder instead", file=file)
        read.add(resolved)
        labels[label] = str(file)
        files.append((str(file), label))

    for path in map(Path, paths):
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if _wanted(p, suffixes, extensionless))
            if not found:
                looked = ", ".join(f"*{suffix}" for suffix in suffixes)
                if extensionless:
                    looked += " and files without an extension"
                raise MedlamaInputError(
                    f"no {what} files in this folder (looked for {looked}; hidden files skipped); name the files "
                    "themselves instead: a file named directly is read whatever its extension (with `medlama build "
                    "context-variance`, repeat --corpus NAME:FORMAT:FILE once per file)", file=path)
            for file in found:
                add(file, file.relative_to(path).as_posix())
        elif path.is_file():
            add(path, path.name)
        else:
            raise MedlamaInputError(f"no such {what} file or folder", file=path)
    if not files:
        raise MedlamaInputError(f"no {what} files given")
    return files


def _files(paths: str | Path | Iterable[str | Path], format: str) -> list[CorpusFile]:
    """The (file, label) pairs a reader of ``format`` reads for ``paths``."""
    if format == "mimic":
        return _expand(paths, MIMIC_SUFFIXES, "MIMIC notes CSV")
    if format == "pmc":
        return _expand(paths, PMC_SUFFIXES, "PMC article")
    if format == "jsonl":
        return _expand(paths, JSONL_SUFFIXES, "JSON Lines")
    if format == "text":
        return _expand(paths, TEXT_SUFFIXES, "text", extensionless=True, unique_labels=True)
    raise MedlamaInputError(f"unknown corpus format {format!r}; choose from {list(FORMATS)}", field="format")


def _without_suffix(label: str) -> str:
    """A label without its file extension(s) (``.gz`` and one more): ``sub/a.txt.gz`` -> ``sub/a``."""
    folder, _, name = label.rpartition("/")
    name = name[:-3] if name.lower().endswith(".gz") else name
    name = name.rsplit(".", 1)[0] if "." in name[1:] else name
    return f"{folder}/{name}" if folder else name


def _place(file: str, line: int | None = None, record: int | None = None) -> str:
    """Where a record is, for messages: ``FILE``, ``FILE, line 3`` or ``FILE, line 3 (record 2)``."""
    where = file if line is None else f"{file}, line {line}"
    return where if record is None else f"{where} (record {record})"


def _error_at(message: str, file: str, line: int | None = None, record: int | None = None,
              field: str | None = None) -> MedlamaInputError:
    """A :class:`MedlamaInputError` that says ``line N (record M)`` where ``MedlamaInputError`` would say
    ``row N``; ``row`` still holds the line, as for the other readers."""
    where = _place(file, line, record) + (f", field {field!r}" if field else "")
    error = MedlamaInputError(f"{where}: {message}")
    error.file, error.row, error.field = file, line, field
    return error


#: A record with where it starts: (record, line or None, record number or None).
Located = tuple[dict, int | None, int | None]


def _unique_ids(located: Callable[[], Iterator[Located]], hint: str) -> Iterator[dict]:
    """The records of ``located()``, stopping at the first document id read before.

    Only the ids are kept; the first place of a repeated id is found by reading again (error path only).
    """
    seen: set[str] = set()
    for record, line, number in located():
        doc_id = record["doc_id"]
        if doc_id in seen:
            first = next(_place(r["source"], first_line, first_number) for r, first_line, first_number in located()
                         if r["doc_id"] == doc_id)
            raise _error_at(f"document id {doc_id!r} was already read at {first}; document ids must be unique "
                            f"within a corpus ({hint})", record["source"], line, number)
        seen.add(doc_id)
        yield record


def _open_text(path: str):
    """A text handle on ``path``, gunzipped when it starts with the gzip magic bytes."""
    with open(path, "rb") as probe:
        magic = probe.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rt", encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


def _features(extra: Iterable[str] = ()):
    from datasets import Features, Value

    return Features({name: Value("string") for name in ("doc_id", "text", *extra, "source")})


def _dataset(generator, files: list[CorpusFile], features, **kwargs):
    from datasets import IterableDataset

    # A tuple, not a list: datasets would shard a list, calling the generator once per file, and the
    # duplicate-id check must see the whole corpus.
    return IterableDataset.from_generator(generator, gen_kwargs={"files": tuple(files), **kwargs}, features=features)


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
    yield from _unique_ids(lambda: _mimic_located(files, categories, include_errors, skip),
                           "a note id repeats: is a notes file read twice?")


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
    yield from _unique_ids(lambda: _pmc_located(files), "the same article is read twice: remove one copy")


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


_ENTITY_DECLARATION = re.compile(rb"<!ENTITY", re.IGNORECASE)
#: Inline elements whose text is not running prose of a paragraph.
_SKIPPED = {"table-wrap", "fig", "disp-formula", "inline-formula", "tex-math", "math"}
#: Block elements that may sit inside a paragraph: their text is set off by spaces.
_BLOCKS = {"p", "list", "list-item", "disp-quote", "title", "boxed-text", "def-list", "def-item", "term", "def"}


def parse_jats(data: bytes, *, file: str | Path | None = None, default_id: str | None = None) -> dict[str, str]:
    """``doc_id``, ``title`` and ``text`` of one JATS article (bytes of its XML).

    ``doc_id`` is the article's PMC id, else ``default_id``, else the file name without extension.

    Parsing is safe without defusedxml: a document declaring entities (``<!ENTITY``, the way to
    billion-laughs expansion and external entities) is refused, and the standard library's expat
    parser never fetches external DTDs.
    """
    if _ENTITY_DECLARATION.search(data):
        raise MedlamaInputError("XML entity declarations are not accepted (unsafe XML)", file=file)
    try:
        root = ET.fromstring(data)
    except ET.ParseError as error:
        line = error.position[0] if getattr(error, "position", None) else None
        raise MedlamaInputError(f"bad XML: {error}", file=file, row=line) from None
    if _local(root.tag) != "article":
        found = next((el for el in root.iter() if _local(el.tag) == "article"), None)
        if found is None:
            raise MedlamaInputError(f"not a JATS article (root element <{_local(root.tag)}>)", file=file)
        root = found
    meta = next((el for el in root.iter() if _local(el.tag) == "article-meta"), None)
    doc_id = None
    title = ""
    abstract: list[str] = []
    if meta is not None:
        ids = {el.get("pub-id-type"): _clean("".join(el.itertext()))
               for el in meta if _local(el.tag) == "article-id"}
        pmc = ids.get("pmc") or ids.get("pmcid")
        if pmc:
            doc_id = pmc if pmc.upper().startswith("PMC") else f"PMC{pmc}"
        title_el = next((el for el in meta.iter() if _local(el.tag) == "article-title"), None)
        title = _clean("".join(title_el.itertext())) if title_el is not None else ""
        for el in meta.iter():
            if _local(el.tag) == "abstract":
                abstract.extend(_paragraphs(el))
    body = next((el for el in root if _local(el.tag) == "body"), None)
    paragraphs = [title] if title else []
    paragraphs += abstract + (_paragraphs(body) if body is not None else [])
    if doc_id is None:
        doc_id = default_id if default_id is not None else Path(str(file)).stem if file is not None else ""
    return {"doc_id": doc_id, "title": title, "text": "\n".join(p for p in paragraphs if p)}


def _local(tag) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _clean(text: str) -> str:
    return " ".join(text.split())


def _paragraphs(element: ET.Element) -> list[str]:
    """Outermost ``<p>`` elements under ``element`` (a nested ``<p>`` is part of its parent's text)."""
    found: list[str] = []

    def walk(el: ET.Element) -> None:
        for child in el:
            name = _local(child.tag)
            if name in _SKIPPED:
                continue
            if name == "p":
                found.append(_clean("".join(_text(child))))
            else:
                walk(child)

    walk(element)
    return found


def _text(element: ET.Element) -> Iterator[str]:
    """``itertext`` without the skipped elements (formulas, tables, figures)."""
    if element.text:
        yield element.text
    for child in element:
        name = _local(child.tag)
        if name not in _SKIPPED:
            block = name in _BLOCKS
            if block:
                yield " "
            yield from _text(child)
            if block:
                yield " "
        if child.tail:
            yield child.tail


# ------------------------------------------------------------------------------------------ JSONL
def read_jsonl(paths: str | Path | Iterable[str | Path], *, text_field: str = "text", id_field: str | None = None):
    """JSON Lines records: ``text`` from ``text_field``; ``doc_id`` from ``id_field`` (required when
    given), else the record's ``doc_id`` or ``id``, else ``<file label>:<line>``. Blank lines are skipped.
    An id given twice (in one file or two) is an error.
    """
    files = _files(paths, "jsonl")
    return _dataset(_jsonl_records, files, _features(), text_field=text_field, id_field=id_field)


def _jsonl_records(files: tuple[CorpusFile, ...], text_field: str, id_field: str | None) -> Iterator[dict]:
    yield from _unique_ids(lambda: _jsonl_located(files, text_field, id_field),
                           "give every record its own id, or none: a record without one is <file>:<line>")


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
        yield from _unique_ids(lambda: _text_located(files, per), "files differing only in their extension")
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
