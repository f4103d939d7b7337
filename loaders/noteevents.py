"""The records of a MIMIC notes CSV, read strictly (used by :mod:`medlama.loaders.corpora`): MIMIC-III
``NOTEEVENTS.csv`` (``ROW_ID, SUBJECT_ID, HADM_ID, CHARTDATE, ...``) and MIMIC-IV-Note ``discharge.csv`` /
``radiology.csv`` (``note_id, subject_id, hadm_id, note_type, note_seq, charttime, ...``).

A CSV that is slightly wrong still parses: an unterminated quote makes one note's TEXT swallow the next
notes (raw rows such as ``3,102,202,2150-01-01,,,Discharge summary,...`` end up inside context text),
and a stray quote or an extra field is taken as data. :class:`NoteRecords` finds these cases:

* a line inside a quoted field that looks like the start of a note record (the leading columns of either
  version in their formats, :data:`LEADING`; checked when the header starts with four of them, as the
  MIMIC files' headers do): the field swallowed record boundaries;
* the end of the file inside a quoted field (a quote never closed);
* a quote inside an unquoted field, or text after a closing quote (a stray quote);
* a record with more or fewer fields than the header; an empty note id, or one not in its version's
  format (:data:`ID_COLUMNS`: a whole number for ROW_ID, ``<subject>-<type>-<seq>`` for note_id).

Each is a :class:`BadRecord` naming where the record starts (physical line; notes span lines), its
number (the header is none) and, where known, the line where reading stopped. With ``skip`` the bad
record is left out and reading goes on: after a swallowing field, from the line that starts the
swallowed record (so only the broken record is lost); after a broken quote, from the next line that
starts a record. :attr:`NoteRecords.skipped` holds what was left out.
"""

from __future__ import annotations

import bisect
import csv
import itertools
import re
from collections.abc import Iterator
from typing import TextIO

#: The formats of the leading columns of each MIMIC version's notes, as a record's first line shows them
#: (values may be quoted; names upper-cased). HADM_ID may be empty or written as a float (``167853.0``) by
#: some exports; MIMIC-IV radiology notes may have no hadm_id or storetime.
_TIME = r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}"
LEADING = {
    "MIMIC-III": {
        "ROW_ID": r"\d+",
        "SUBJECT_ID": r"\d+",
        "HADM_ID": r"(?:\d+(?:\.0)?)?",
        "CHARTDATE": r"\d{4}-\d{2}-\d{2}(?: 00:00:00)?",
        "CHARTTIME": rf"(?:{_TIME})?",
        "STORETIME": rf"(?:{_TIME})?",
    },
    "MIMIC-IV": {
        "NOTE_ID": r"\d+-[A-Z]{2}-\d+",
        "SUBJECT_ID": r"\d+",
        "HADM_ID": r"(?:\d+(?:\.0)?)?",
        "NOTE_TYPE": r"[A-Z]{2}",
        "NOTE_SEQ": r"\d+",
        "CHARTTIME": rf"(?:{_TIME})?",
        "STORETIME": rf"(?:{_TIME})?",
    },
}
#: The note id column of each version, the form of its values, and that form in words (for errors).
ID_COLUMNS = {
    "ROW_ID": (re.compile(r"[0-9]+"), "a whole number (MIMIC-III's ROW_ID is)"),
    "NOTE_ID": (re.compile(r"[0-9]+-[A-Z]{2}-[0-9]+"),
                "in MIMIC-IV's form <subject_id>-<note type>-<sequence>, e.g. 10000032-DS-21"),
}
#: One record as RFC 4180 has it: quoted fields with doubled quotes inside, unquoted fields without any.
_FIELD = r'(?:"[^"]*(?:""[^"]*)*"|[^",\r\n]*)'
_RECORD = re.compile(rf"{_FIELD}(?:,{_FIELD})*")


def column_names(header: list[str]) -> list[str]:
    """A header's names as the readers compare them: stripped, without a byte-order mark, upper-cased."""
    return [name.strip().strip("\ufeff").upper() for name in header]


def id_column(header: list[str]) -> str | None:
    """The note id column of a notes header (``ROW_ID`` or ``NOTE_ID``), or None."""
    names = column_names(header)
    return next((name for name in ID_COLUMNS if name in names), None)


def record_start(header: list[str]) -> re.Pattern[str] | None:
    """A pattern matching a newline and a line that starts a record of a file with ``header``, or None when the header
    does not start with four leading columns of a MIMIC version (the check would be too weak)."""
    names = column_names(header)
    for leading in LEADING.values():
        if names[:4] != list(leading)[:4]:
            continue
        shapes = []
        for name in names:
            if name not in leading:
                break
            shapes.append(f'"?{leading[name]}"?')
        # "\n" first, not "^" with MULTILINE: a literal start lets the search skip from line to line.
        return re.compile("\n" + ",".join(shapes) + ",")
    return None


class BadRecord(Exception):
    """A record that cannot be read as one note: where it starts (``line``), its number (``record``),
    what is wrong, and, for a record that swallowed others, the line where the next one starts
    (``resume``)."""

    def __init__(self, message: str, line: int, record: int, *, field: str | None = None,
                 stopped: int | None = None, resume: int | None = None) -> None:
        super().__init__(message)
        self.message, self.line, self.record, self.field = message, line, record, field
        self.stopped, self.resume = stopped, resume


class _Lines:
    """The file's lines for :mod:`csv`, keeping the raw lines of the record being read; lines can be
    given back (read again) and skipped up to the next record start."""

    def __init__(self, handle: TextIO, start: re.Pattern[str] | None) -> None:
        self._read, self._start = handle.__next__, start
        self._pending: list[str] = []
        self.raw: list[str] = []
        self._keep = self.raw.append
        self.line = 0  # physical lines read
        self.resync = False

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> str:
        if self._pending or self.resync:
            return self._next_slowly()
        line = self._read()  # the common case, once per line of a 4 GB file: kept short
        self.line += 1
        self._keep(line)
        return line

    def _next_slowly(self) -> str:
        while True:
            line = self._pending.pop() if self._pending else self._read()
            self.line += 1
            if self.resync and self._start is not None and not self._start.match("\n" + line):
                continue  # the rest of a broken record
            self.resync = False
            self._keep(line)
            return line

    def give_back(self, lines: list[str]) -> None:
        self._pending.extend(reversed(lines))
        self.line -= len(lines)

    def take(self) -> list[str]:
        raw, self.raw = self.raw, []
        self._keep = self.raw.append
        return raw


class NoteRecords:
    """Iterate over the records (lists of fields) of an open MIMIC notes file, header first read here.

    Yields ``(fields, line, number)``. Raises :class:`BadRecord` at the first bad record, or, with
    ``skip``, leaves it out and appends it to :attr:`skipped`. :attr:`start` and :attr:`number` say
    where the record being read starts (for errors the caller raises, e.g. a decoding error).
    """

    def __init__(self, handle: TextIO, *, skip: bool = False) -> None:
        self._handle, self._skip = handle, skip
        self.skipped: list[BadRecord] = []
        self.start = 1
        self.number = 0
        self.header: list[str] = []

    def __iter__(self) -> Iterator[tuple[list[str], int, int]]:
        header_reader = csv.reader(self._handle, strict=True)
        self.header = next(header_reader, [])
        starts = record_start(self.header)
        lines = _Lines(self._handle, starts)
        lines.line = header_reader.line_num
        reader = csv.reader(lines, strict=True)
        id_name = id_column(self.header)
        row_id = column_names(self.header).index(id_name) if id_name is not None else None
        while True:
            self.start = lines.line + 1
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as error:
                self.number += 1
                raw = lines.take()
                message = ("end of file inside a quoted field: a quote is never closed"
                           if "unexpected end of data" in str(error) else f"malformed CSV: {error}")
                problem = (self._swallowed(raw, starts, f" (then {message}, line {lines.line})")
                           or BadRecord(message, self.start, self.number, stopped=lines.line))
                self._bad(problem, raw, lines)
                continue
            raw = lines.take()
            if not row:
                continue  # a blank line is no record
            self.number += 1
            problem = self._check(row, raw, starts, row_id, id_name)
            if problem is None:
                yield row, self.start, self.number
            else:
                self._bad(problem, raw, lines)

    def _bad(self, problem: BadRecord, raw: list[str], lines: _Lines) -> None:
        if not self._skip:
            raise problem
        self.skipped.append(problem)
        if problem.resume is not None:  # read the swallowed records again
            lines.give_back(raw[problem.resume - problem.line:])
        elif problem.stopped is not None:  # a broken quote: go on at the next record start
            lines.resync = True

    def _swallowed(self, raw: list[str], starts: re.Pattern[str] | None, then: str = "") -> BadRecord | None:
        """A bad record when a line after the record's first one (so inside quotes) starts a record."""
        if starts is None or len(raw) < 2:
            return None
        found = starts.search("".join(raw), len(raw[0]) - 1)  # one search over the lines after the first
        if found is None:
            return None
        at = bisect.bisect_right(list(itertools.accumulate(map(len, raw))), found.start() + 1)  # after the "\n"
        return BadRecord(
            f"line {self.start + at} inside this record looks like the start of another record "
            f"({raw[at][:40].rstrip()!r}...): a quote in this record is never closed, so it swallowed the records "
            f"after it{then}", self.start, self.number, resume=self.start + at)

    def _check(self, row: list[str], raw: list[str], starts: re.Pattern[str] | None,
               row_id: int | None, id_name: str | None) -> BadRecord | None:
        swallowed = self._swallowed(raw, starts)
        if swallowed is not None:
            return swallowed
        width = len(self.header)
        if len(row) != width:
            return BadRecord(f"{len(row)} fields where the header has {width}", self.start, self.number)
        if row_id is not None and id_name is not None:
            value = row[row_id].strip()
            if not value:
                return BadRecord(f"empty {id_name}", self.start, self.number, field=id_name)
            form, described = ID_COLUMNS[id_name]
            if not form.fullmatch(value):
                return BadRecord(f"{id_name} {value[:40]!r} is not {described}; is a field before it broken?",
                                 self.start, self.number, field=id_name)
        if not _RECORD.fullmatch("".join(raw).rstrip("\r\n")):
            return BadRecord("a stray quote: a quote inside an unquoted field (a field holding quotes must be "
                             'quoted, with each quote inside doubled: "say ""hi""")', self.start, self.number)
        return None
