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

* :func:`~medlama.loaders.mimic_notes.read_mimic_notes`: MIMIC notes, ``.csv`` or ``.csv.gz``: MIMIC-III ``NOTEEVENTS.csv`` (ROW_ID,
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
index built from it can be reused (:class:`medlama.datasets.context_variance.index.corpus_index.CorpusIndex`).

:func:`~medlama.loaders.mimic_notes.mimic_signature` tells whether files read by a generic reader (JSON Lines, plain text) are MIMIC notes
all the same (MIMIC's columns in a record or a CSV header, MIMIC-IV note ids), so that their licence follows
the text whatever reader brought it in (:mod:`medlama.datasets.licences`).

The readers share one contract (file discovery, labels, unique ids, errors that name file, line and record:
:mod:`medlama.loaders.corpus_files`); the self-contained parts live beside: the MIMIC notes reader and
signature (:mod:`medlama.loaders.mimic_notes`), its strict CSV parsing (:mod:`medlama.loaders.noteevents`)
and the JATS parser (:mod:`medlama.loaders.jats`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import xxhash

from medlama.core.errors import MedlamaInputError
from medlama.loaders.corpus_files import (  # noqa: F401  (FORMATS and the suffixes are this module's API too)
    FORMATS,
    PMC_SUFFIXES,
    JSONL_SUFFIXES,
    TEXT_SUFFIXES,
    MIMIC_SUFFIXES,
    NOT_TEXT,
    DUPLICATE_HINTS,
    CorpusFile,
    Located,
    _dataset,
    _features,
    _files,
    _open_text,
    _unique_ids,
    _without_suffix,
    undecodable,
)
from medlama.loaders.jats import parse_jats  # noqa: F401  (read_pmc_articles' parser, importable here)
from medlama.loaders.mimic_notes import ON_BAD_RECORD, _mimic_header, _mimic_located, read_mimic_notes

#: Part of every corpus fingerprint: raised whenever the records read from the same files change (ids,
#: the files a folder gives), so that indexes built by an earlier version are rebuilt, not reused.
READER_VERSION = 3
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
    (:mod:`medlama.datasets.context_variance.index.pipeline`), naming both places as the reader would."""
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
    """A hash of the corpus files (absolute path, label, size and the hash of their bytes,
    :func:`content_digest`), the reader options and :data:`READER_VERSION`. A file edited in place keeps
    neither its fingerprint nor the index built from it, even with its size and modification time put back
    (``cp -p``, ``rsync -t``, ``tar x``)."""
    files = _files(paths, format)
    digest = hashlib.sha256(json.dumps([READER_VERSION, format, sorted(options.items(), key=str)],
                                       default=str).encode())
    for file, label in files:
        digest.update(json.dumps([os.path.abspath(file), label, os.stat(file).st_size,
                                  content_digest(file)]).encode())
    return digest.hexdigest()


def content_digest(path: str | Path) -> str:
    """The xxHash3-128 of a file's bytes (memory-bandwidth fast: a few seconds for all of MIMIC-III's notes,
    nothing beside matching them), read once per version of the file in a process: its path, inode, size,
    modification time and status-change time (which every write, and every ``utime`` putting a modification
    time back, moves on)."""
    stat = os.stat(path)
    return _content_digest(os.path.abspath(path), stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


@functools.lru_cache(maxsize=256)
def _content_digest(path: str, _inode: int, _size: int, _mtime_ns: int, _ctime_ns: int) -> str:
    digest = xxhash.xxh3_128()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 23), b""):
            digest.update(block)
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
                raise undecodable(file, error) from None
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
                raise undecodable(file, error) from None
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
                raise undecodable(file, error) from None
            except (OSError, EOFError) as error:
                raise MedlamaInputError(f"cannot read: {error}", file=file, row=line_number + 1) from None
