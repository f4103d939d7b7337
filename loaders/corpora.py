"""Streaming readers of the corpora contexts are retrieved from.

Every reader returns a :class:`datasets.IterableDataset` (``IterableDataset.from_generator``, one shard
per file) whose records hold at least ``doc_id``, ``text`` and ``source`` (the file they come from), so
a corpus larger than memory is read one record at a time. Bad input stops the iteration with a
:class:`~medlama.errors.MedlamaInputError` naming the file, and the row (line) and field where known.
Missing columns of a MIMIC file are reported before anything is read.

* :func:`read_mimic_notes`: MIMIC-III ``NOTEEVENTS.csv`` or ``.csv.gz`` (ROW_ID, SUBJECT_ID, HADM_ID,
  CHARTDATE, CHARTTIME, STORETIME, CATEGORY, DESCRIPTION, CGID, ISERROR, TEXT). ``ROW_ID`` and ``TEXT``
  are required, the other columns are carried along when present; notes flagged ``ISERROR`` are
  skipped unless asked for.
* :func:`read_pmc_articles`: PMC open-access articles as JATS XML (``.xml``/``.nxml``: title, abstract
  and body paragraphs) or plain text (``.txt``, one article per file).
* :func:`read_jsonl`: JSON Lines (``.jsonl``/``.json``, optionally ``.gz``) with a configurable text field.
* :func:`read_text`: plain text, one document per line or per file.

:func:`load_corpus` dispatches on a format name; :func:`corpus_fingerprint` identifies a corpus (its
files' paths, sizes and modification times, and the reader options) so that an index built from it
can be reused (:class:`medlama.datasets.context_variance.index.CorpusIndex`).
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator
from pathlib import Path

from medlama.errors import MedlamaInputError

#: Columns of MIMIC-III NOTEEVENTS.csv, in file order.
MIMIC_COLUMNS = ("ROW_ID", "SUBJECT_ID", "HADM_ID", "CHARTDATE", "CHARTTIME", "STORETIME", "CATEGORY",
                 "DESCRIPTION", "CGID", "ISERROR", "TEXT")
MIMIC_REQUIRED = ("ROW_ID", "TEXT")
#: Metadata kept from a note besides ``doc_id`` (ROW_ID) and ``text`` (TEXT).
MIMIC_METADATA = ("SUBJECT_ID", "HADM_ID", "CHARTDATE", "CATEGORY", "DESCRIPTION")

FORMATS = ("mimic", "pmc", "jsonl", "text")
PMC_SUFFIXES = (".xml", ".nxml", ".txt")
JSONL_SUFFIXES = (".jsonl", ".json", ".jsonl.gz", ".json.gz")
TEXT_SUFFIXES = (".txt", ".txt.gz")
_CSV_FIELD_LIMIT = 2**31 - 1


# ------------------------------------------------------------------------------------------ files
def _expand(paths: str | Path | Iterable[str | Path], suffixes: tuple[str, ...], what: str) -> list[str]:
    """Files named directly, plus the files with ``suffixes`` under named folders (sorted, recursive)."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    files: list[str] = []
    for path in map(Path, paths):
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and p.name.lower().endswith(suffixes)
                           and not p.name.startswith("."))
            if not found:
                raise MedlamaInputError(f"no {what} files ({', '.join(suffixes)}) in this folder", file=path)
            files.extend(str(p) for p in found)
        elif path.is_file():
            files.append(str(path))
        else:
            raise MedlamaInputError(f"no such {what} file or folder", file=path)
    if not files:
        raise MedlamaInputError(f"no {what} files given")
    return files


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


def _dataset(generator, files: list[str], features, **kwargs):
    from datasets import IterableDataset

    return IterableDataset.from_generator(generator, gen_kwargs={"files": files, **kwargs}, features=features)


def corpus_fingerprint(paths: str | Path | Iterable[str | Path], format: str, **options) -> str:
    """A hash of the corpus files (absolute path, size, modification time) and the reader options."""
    suffixes = {"mimic": (".csv", ".csv.gz"), "pmc": PMC_SUFFIXES, "jsonl": JSONL_SUFFIXES,
                "text": TEXT_SUFFIXES}.get(format)
    if suffixes is None:
        raise MedlamaInputError(f"unknown corpus format {format!r}; choose from {list(FORMATS)}", field="format")
    digest = hashlib.sha256(json.dumps([format, sorted(options.items(), key=str)], default=str).encode())
    for file in _expand(paths, suffixes, format):
        stat = os.stat(file)
        digest.update(json.dumps([os.path.abspath(file), stat.st_size, stat.st_mtime_ns]).encode())
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
    """Column positions by upper-cased name; raises when a required column is missing."""
    try:
        with _open_text(file) as handle:
            header = next(csv.reader(handle), None)
    except (OSError, UnicodeDecodeError, csv.Error, EOFError) as error:
        raise MedlamaInputError(f"cannot read the CSV header: {error}", file=file) from None
    if not header:
        raise MedlamaInputError("empty file: a NOTEEVENTS CSV needs a header row", file=file, row=1)
    positions = {name.strip().strip("\ufeff").upper(): i for i, name in enumerate(header)}
    missing = [name for name in MIMIC_REQUIRED if name not in positions]
    if missing:
        raise MedlamaInputError(
            f"missing column(s) {', '.join(missing)} (NOTEEVENTS.csv has {', '.join(MIMIC_COLUMNS)}); "
            f"found {', '.join(header)}", file=file, row=1, field=missing[0])
    return positions


def read_mimic_notes(paths: str | Path | Iterable[str | Path], *, categories: Iterable[str] | None = None,
                     include_errors: bool = False):
    """MIMIC-III notes: ``doc_id`` (ROW_ID), ``text`` (TEXT) and the :data:`MIMIC_METADATA` columns
    (lower-cased names; empty when the file lacks them).

    ``categories`` keeps only notes of these categories (case-insensitive, e.g. ``["Discharge summary"]``);
    notes with ``ISERROR`` set are skipped unless ``include_errors``.
    """
    files = _expand(paths, (".csv", ".csv.gz"), "NOTEEVENTS CSV")
    for file in files:
        _mimic_header(file)  # missing columns are reported now, not at the first read
    # A tuple, not a list: lists in gen_kwargs are what datasets shards over (the files).
    wanted = None if categories is None else tuple(sorted({c.strip().lower() for c in categories}))
    return _dataset(_mimic_records, files, _features(name.lower() for name in MIMIC_METADATA),
                    categories=wanted, include_errors=include_errors)


def _mimic_records(files: list[str], categories: tuple[str, ...] | None, include_errors: bool) -> Iterator[dict]:
    csv.field_size_limit(_CSV_FIELD_LIMIT)  # notes run to tens of thousands of characters
    wanted = None if categories is None else set(categories)
    for file in files:
        positions = _mimic_header(file)
        width = max(positions.values()) + 1
        row_id, text_at = positions["ROW_ID"], positions["TEXT"]
        error_at, category_at = positions.get("ISERROR"), positions.get("CATEGORY")
        metadata = [(name.lower(), positions.get(name)) for name in MIMIC_METADATA]
        with _open_text(file) as handle:
            reader = csv.reader(handle)
            try:
                next(reader)
                for row in reader:
                    if not row:
                        continue
                    if len(row) < width:
                        raise MedlamaInputError(f"{len(row)} fields where the header has {width}",
                                                file=file, row=reader.line_num)
                    if not row[row_id].strip():
                        raise MedlamaInputError("empty ROW_ID", file=file, row=reader.line_num, field="ROW_ID")
                    if not include_errors and error_at is not None and row[error_at].strip() not in ("", "0"):
                        continue
                    if wanted is not None and (category_at is None
                                               or row[category_at].strip().lower() not in wanted):
                        continue
                    record = {"doc_id": row[row_id].strip(), "text": row[text_at]}
                    for name, at in metadata:
                        record[name] = row[at] if at is not None else ""
                    record["source"] = file
                    yield record
            except csv.Error as error:
                raise MedlamaInputError(f"malformed CSV: {error}", file=file, row=reader.line_num) from None
            except UnicodeDecodeError as error:
                raise MedlamaInputError(f"not UTF-8: {error}", file=file, row=reader.line_num) from None
            except (OSError, EOFError) as error:  # a truncated .gz
                raise MedlamaInputError(f"cannot read: {error}", file=file, row=reader.line_num) from None


# -------------------------------------------------------------------------------------------- PMC
def read_pmc_articles(paths: str | Path | Iterable[str | Path]):
    """PMC articles: ``doc_id`` (the PMC id, else the file name), ``title``, ``text`` (title, abstract
    and body paragraphs, one per line).

    Folders are searched for ``.xml``, ``.nxml`` (JATS) and ``.txt`` (plain text, title = first line).
    """
    files = _expand(paths, PMC_SUFFIXES, "PMC article")
    return _dataset(_pmc_records, files, _features(["title"]))


def _pmc_records(files: list[str]) -> Iterator[dict]:
    for file in files:
        if file.lower().endswith(".txt"):
            try:
                text = Path(file).read_text(encoding="utf-8")
            except UnicodeDecodeError as error:
                raise MedlamaInputError(f"not UTF-8: {error}", file=file) from None
            title = next((line.strip() for line in text.splitlines() if line.strip()), "")
            yield {"doc_id": Path(file).stem, "text": text, "title": title, "source": file}
        else:
            yield {**parse_jats(Path(file).read_bytes(), file=file), "source": file}


_ENTITY_DECLARATION = re.compile(rb"<!ENTITY", re.IGNORECASE)
#: Inline elements whose text is not running prose of a paragraph.
_SKIPPED = {"table-wrap", "fig", "disp-formula", "inline-formula", "tex-math", "math"}
#: Block elements that may sit inside a paragraph: their text is set off by spaces.
_BLOCKS = {"p", "list", "list-item", "disp-quote", "title", "boxed-text", "def-list", "def-item", "term", "def"}


def parse_jats(data: bytes, *, file: str | Path | None = None) -> dict[str, str]:
    """``doc_id``, ``title`` and ``text`` of one JATS article (bytes of its XML).

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
        doc_id = Path(str(file)).stem if file is not None else ""
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
    given), else the record's ``doc_id`` or ``id``, else ``<file name>:<line>``. Blank lines are skipped.
    """
    files = _expand(paths, JSONL_SUFFIXES, "JSON Lines")
    return _dataset(_jsonl_records, files, _features(), text_field=text_field, id_field=id_field)


def _jsonl_records(files: list[str], text_field: str, id_field: str | None) -> Iterator[dict]:
    for file in files:
        stem = Path(file).name
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
                    yield {"doc_id": f"{stem}:{line_number}" if doc_id in (None, "") else str(doc_id),
                           "text": text, "source": file}
            except UnicodeDecodeError as error:
                raise MedlamaInputError(f"not UTF-8: {error}", file=file, row=line_number + 1) from None
            except (OSError, EOFError) as error:
                raise MedlamaInputError(f"cannot read: {error}", file=file, row=line_number + 1) from None


# ------------------------------------------------------------------------------------------- text
def read_text(paths: str | Path | Iterable[str | Path], *, per: str = "line"):
    """Plain text: one document per non-blank line (``per="line"``, ``doc_id = <file name>:<line>``) or
    per file (``per="file"``, ``doc_id`` = file name without suffix). Folders are searched for ``.txt``.
    """
    if per not in ("line", "file"):
        raise MedlamaInputError(f"per must be 'line' or 'file', not {per!r}", field="per")
    files = _expand(paths, TEXT_SUFFIXES, "text")
    return _dataset(_text_records, files, _features(), per=per)


def _text_records(files: list[str], per: str) -> Iterator[dict]:
    for file in files:
        name = Path(file).name
        with _open_text(file) as handle:
            line_number = 0
            try:
                if per == "file":
                    stem = name[:-3] if name.lower().endswith(".gz") else name
                    yield {"doc_id": stem.rsplit(".", 1)[0], "text": handle.read(), "source": file}
                    continue
                for line_number, line in enumerate(handle, 1):
                    line = line.rstrip("\r\n")
                    if line.strip():
                        yield {"doc_id": f"{name}:{line_number}", "text": line, "source": file}
            except UnicodeDecodeError as error:
                raise MedlamaInputError(f"not UTF-8: {error}", file=file, row=line_number + 1) from None
            except (OSError, EOFError) as error:
                raise MedlamaInputError(f"cannot read: {error}", file=file, row=line_number + 1) from None
