"""The MIMIC NOTEEVENTS reader on broken CSV: hand-written files, plain and gzip."""

from __future__ import annotations

import gzip

import pytest

from medlama.errors import MedlamaInputError
from medlama.loaders.corpora import MIMIC_COLUMNS, load_corpus, read_mimic_notes

HEADER = ",".join(MIMIC_COLUMNS)


def note(row_id: int, text: str, *, quoted: bool = True) -> str:
    """A NOTEEVENTS line as MIMIC writes it: ``text`` quoted, quotes inside doubled; or, with ``quoted=False``,
    as given (for broken lines)."""
    body = '"' + text.replace('"', '""') + '"' if quoted else text
    return f"{row_id},{100 + row_id},{200 + row_id},2150-01-01,,,Discharge summary,Report,,,{body}\n"


CLEAN = [
    note(1, 'Admission Date: [**2150-1-1**]\nHPI: "postnasal drip", heartburn.\nLabs: 1,2,3\n'),
    note(2, "note two, on one line"),
    note(3, "note three\n2150-01-01 follow-up\n"),
    note(4, "note four"),
]
TEXTS = {"1": 'Admission Date: [**2150-1-1**]\nHPI: "postnasal drip", heartburn.\nLabs: 1,2,3\n',
         "2": "note two, on one line", "3": "note three\n2150-01-01 follow-up\n", "4": "note four"}


def write(path, lines, compress):
    text = HEADER + "\n" + "".join(lines)
    if compress:
        path = path.with_name(path.name + ".gz")
        with gzip.open(path, "wt", encoding="utf-8", newline="") as handle:
            handle.write(text)
    else:
        path.write_text(text, encoding="utf-8", newline="")
    return path


@pytest.fixture(params=[False, True], ids=["plain", "gzip"])
def compress(request):
    return request.param


def read(path, **options):
    return {record["doc_id"]: record["text"] for record in read_mimic_notes(path, **options)}


def test_clean_file_reads_every_note_whole(tmp_path, compress, capsys):
    # Quotes, commas and a "Labs: 1,2,3" line inside a note are text, not record boundaries.
    path = write(tmp_path / "NOTEEVENTS.csv", CLEAN, compress)
    assert read(path) == TEXTS
    assert read(path, on_bad_record="skip") == TEXTS
    assert capsys.readouterr().err == ""  # nothing left out, nothing reported


# Each case: the lines (note 3 broken, or note 2 swallowing note 3), the message, the record's line and
# number, and the notes the skipping reader still gives.
BROKEN = {
    # Note 2's quote is never closed: its TEXT swallows the raw row of note 3 (the campaign's case).
    "unterminated quote": (
        [CLEAN[0], note(2, '"note two, cut off', quoted=False), CLEAN[2], CLEAN[3]],
        r"line 6 \(record 2\): line 7 inside this record looks like the start of another record "
        r"\('3,103,203,2150-01-01.*a quote in this record is never closed",
        6, 2, ["1", "3", "4"]),
    "end of file inside a quote": (
        [*CLEAN[:3], note(4, '"note four, never closed\n', quoted=False)],
        r"line 10 \(record 4\): end of file inside a quoted field: a quote is never closed",
        10, 4, ["1", "2", "3"]),
    "stray quote in an unquoted field": (
        [*CLEAN[:2], note(3, 'note "three" here', quoted=False), CLEAN[3]],
        r"line 7 \(record 3\): a stray quote: a quote inside an unquoted field",
        7, 3, ["1", "2", "4"]),
    "text after a closing quote": (
        [*CLEAN[:2], note(3, '"note" three', quoted=False), CLEAN[3]],
        r"line 7 \(record 3\): malformed CSV: ',' expected after '\"'",
        7, 3, ["1", "2", "4"]),
    "extra field": (
        [*CLEAN[:2], note(3, '"note three",extra', quoted=False), CLEAN[3]],
        r"line 7 \(record 3\): 12 fields where the header has 11",
        7, 3, ["1", "2", "4"]),
    "ROW_ID not a number": (
        [*CLEAN[:2], "x" + note(3, "note three"), CLEAN[3]],
        r"line 7 \(record 3\), field 'ROW_ID': ROW_ID 'x3' is not a whole number",
        7, 3, ["1", "2", "4"]),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_bad_record_stops_the_reading_with_file_line_and_record(tmp_path, compress, case):
    lines, message, line, number, _ = BROKEN[case]
    path = write(tmp_path / "NOTEEVENTS.csv", lines, compress)
    with pytest.raises(MedlamaInputError, match=message) as error:
        list(read_mimic_notes(path))
    assert str(error.value).startswith(f"{path}, line {line} (record {number})")
    assert (error.value.file, error.value.row) == (str(path), line)


@pytest.mark.parametrize("case", list(BROKEN))
def test_bad_record_skipped_counted_and_reported(tmp_path, compress, case, capsys):
    lines, message, line, number, kept = BROKEN[case]
    path = write(tmp_path / "NOTEEVENTS.csv", lines, compress)
    notes = read(path, on_bad_record="skip")
    assert sorted(notes) == kept
    assert all(notes[doc_id] == TEXTS[doc_id] for doc_id in kept)  # the swallowed note 3 is read whole again
    err = capsys.readouterr().err
    assert err.startswith(f"medlama: note: {path}: left out 1 bad record(s) (on_bad_record=skip): "
                          f"{path}, line {line} (record {number}): ")
    assert err.count("\n") == 1


def test_skip_report_lists_the_first_five_and_counts_the_rest(tmp_path, capsys):
    lines = [CLEAN[0]] + [note(i, f'"note {i}",extra', quoted=False) for i in range(2, 10)] + [note(10, "ten")]
    path = write(tmp_path / "NOTEEVENTS.csv", lines, compress=False)
    assert sorted(read(path, on_bad_record="skip")) == ["1", "10"]
    err = capsys.readouterr().err
    assert "left out 8 bad record(s)" in err and err.count("12 fields where the header has 11") == 5
    assert "(record 6)" in err and "(record 7)" not in err and err.rstrip().endswith("; and 3 more")


def test_on_bad_record_option_checked_and_passed_by_load_corpus(tmp_path):
    path = write(tmp_path / "NOTEEVENTS.csv", BROKEN["extra field"][0], compress=False)
    with pytest.raises(MedlamaInputError, match=r"on_bad_record must be one of \['error', 'skip'\], not 'ignore'"):
        read_mimic_notes(path, on_bad_record="ignore")
    assert sorted(r["doc_id"] for r in load_corpus(path, "mimic", on_bad_record="skip")) == ["1", "2", "4"]
    with pytest.raises(MedlamaInputError, match="12 fields"):
        list(load_corpus(path, "mimic"))
