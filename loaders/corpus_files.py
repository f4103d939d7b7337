"""The contract the corpus readers of :mod:`medlama.loaders.corpora` share: which files a path names, their
labels, unique document ids, errors naming file, line and record, and the streaming dataset they return
(see that module's docstring for the rules).
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from medlama.core.errors import MedlamaInputError

FORMATS = ("mimic", "pmc", "jsonl", "text")
PMC_SUFFIXES = (".xml", ".nxml", ".txt")
JSONL_SUFFIXES = (".jsonl", ".json", ".jsonl.gz", ".json.gz")
TEXT_SUFFIXES = (".txt", ".txt.gz")
MIMIC_SUFFIXES = (".csv", ".csv.gz")
#: Extensionless files a text-corpus folder may hold that are no corpus text: checksum lists and the
#: usual documentation files (case-insensitive).
NOT_TEXT = re.compile(r"^(?:(?:md5|sha\d*|b2|check)sums?|readme|licen[cs]e|copying|notice|authors|changelog|"
                      r"changes)$", re.IGNORECASE)
#: A corpus file and its label (see the module docstring), as the record generators receive them.
CorpusFile = tuple[str, str]
#: What a repeated document id of each format most likely means, said in its error.
DUPLICATE_HINTS = {"mimic": "a note id repeats: is a notes file read twice?",
                   "pmc": "the same article is read twice: remove one copy",
                   "jsonl": "give every record its own id, or none: a record without one is <file>:<line>",
                   "text": "files differing only in their extension"}


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
    if _is_gzip(path):
        return gzip.open(path, "rt", encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


def undecodable(path: str, error: UnicodeDecodeError) -> MedlamaInputError:
    """The error for a file that is not UTF-8, naming the line of its first bad byte. The text reader decodes
    blocks ahead of the lines it yields, so where it stood says nothing: the file is read again as bytes, a line
    at a time, to find it."""
    opener = gzip.open if _is_gzip(path) else open
    with opener(path, "rb") as raw:
        for number, line in enumerate(raw, 1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as bad:
                return MedlamaInputError(f"not UTF-8: byte 0x{line[bad.start]:02x} at byte {bad.start + 1} of the "
                                         f"line ({bad.reason})", file=path, row=number)
    return MedlamaInputError(f"not UTF-8: {error}", file=path)


def _is_gzip(path: str) -> bool:
    with open(path, "rb") as probe:
        return probe.read(2) == b"\x1f\x8b"


def _features(extra: Iterable[str] = ()):
    from datasets import Features, Value  # datasets loads when a reader is made, not with the file helpers

    return Features({name: Value("string") for name in ("doc_id", "text", *extra, "source")})


def _dataset(generator, files: list[CorpusFile], features, **kwargs):
    from datasets import IterableDataset  # as in _features: not loaded by the index pipeline's readers

    # A tuple, not a list: datasets would shard a list, calling the generator once per file, and the
    # duplicate-id check must see the whole corpus.
    return IterableDataset.from_generator(generator, gen_kwargs={"files": tuple(files), **kwargs}, features=features)
