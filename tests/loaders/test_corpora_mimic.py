"""The MIMIC notes reader (MIMIC-III NOTEEVENTS.csv, MIMIC-IV-Note discharge.csv / radiology.csv) on clean and broken
CSV: hand-written files, plain and gzip."""

from __future__ import annotations

import gzip

import pytest

from medlama.core.errors import MedlamaInputError
from medlama.loaders.corpora import load_corpus
from medlama.loaders.mimic_notes import MIMIC_COLUMNS, MIMIC_IV_COLUMNS, mimic_signature, read_mimic_notes

HEADER = ",".join(MIMIC_COLUMNS)


def note(row_id: int, text: str, *, quoted: bool = True) -> str:
    """A NOTEEVENTS line as MIMIC writes it: ``text`` quoted, quotes inside doubled; or, with ``quoted=False``,
    as given (for broken lines)."""
    return f"{row_id},{100 + row_id},{200 + row_id},2150-01-01,,,Discharge summary,Report,,,{csv_text(text, quoted)}\n"


def csv_text(text: str, quoted: bool = True) -> str:
    """The TEXT field as MIMIC's CSV files write it: quoted, quotes inside doubled (``quoted=False``: as given)."""
    return '"' + text.replace('"', '""') + '"' if quoted else text


#: {ROW_ID: text} of a clean NOTEEVENTS file, and its lines.
TEXTS = {"1": 'Admission Date: [**2150-1-1**]\nHPI: "postnasal drip", heartburn.\nLabs: 1,2,3\n',
         "2": "note two, on one line", "3": "note three\n2150-01-01 follow-up\n", "4": "note four"}
CLEAN = [note(int(row_id), text) for row_id, text in TEXTS.items()]


def write(path, lines, compress, header=HEADER):
    text = header + "\n" + "".join(lines)
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


# ------------------------------------------------------------------ MIMIC-IV-Note (discharge.csv, radiology.csv)

IV_HEADER = ",".join(MIMIC_IV_COLUMNS)


def note_iv(seq: int, text: str, *, kind: str = "DS", quoted: bool = True, hadm: str = "20000001") -> str:
    """A MIMIC-IV-Note line as discharge.csv / radiology.csv write it (note_id ``<subject>-<type>-<seq>``)."""
    return (f"10000032-{kind}-{seq},10000032,{hadm},{kind},{seq},2180-05-06 00:00:00,2180-05-07 10:15:00,"
            f"{csv_text(text, quoted)}\n")


#: {note_id: text} of a clean discharge.csv, and its lines.
TEXTS_IV = {"10000032-DS-21": 'Name: ___\nChief Complaint: "worsening" dyspnea, cough\n2180-05-06 follow-up\n',
            "10000032-DS-22": "second discharge note", "10000032-DS-23": "third note"}
CLEAN_IV = [note_iv(int(note_id.rsplit("-", 1)[1]), text) for note_id, text in TEXTS_IV.items()]


def write_iv(path, lines, compress):
    return write(path, lines, compress, header=IV_HEADER)


def test_mimic_iv_discharge_notes_read_with_their_note_ids(tmp_path, compress):
    path = write_iv(tmp_path / "discharge.csv", CLEAN_IV, compress)
    records = list(read_mimic_notes(path))
    assert {r["doc_id"]: r["text"] for r in records} == TEXTS_IV
    assert records[0]["subject_id"] == "10000032" and records[0]["hadm_id"] == "20000001"
    assert records[0]["chartdate"] == "2180-05-06" and records[0]["category"] == "Discharge summary"
    assert sorted(r["doc_id"] for r in load_corpus(path, "mimic")) == sorted(TEXTS_IV)


def test_mimic_iv_radiology_notes_and_categories(tmp_path):
    radiology = write_iv(tmp_path / "radiology.csv", [note_iv(14, "CHEST X-RAY: no effusion", kind="RR", hadm=""),
                                                      note_iv(15, "addendum", kind="AR", hadm="")], compress=False)
    discharge = write_iv(tmp_path / "discharge.csv", CLEAN_IV, compress=False)
    both = [radiology, discharge]
    assert [r["doc_id"] for r in read_mimic_notes(both, categories=["radiology"])] == ["10000032-RR-14",
                                                                                      "10000032-AR-15"]
    assert [r["doc_id"] for r in read_mimic_notes(both, categories=["ds"])] == sorted(TEXTS_IV)
    assert [r["doc_id"] for r in read_mimic_notes(both, categories=["Discharge summary", "AR"])] == [
        "10000032-AR-15", *sorted(TEXTS_IV)]


BROKEN_IV = {
    "unterminated quote": (
        [CLEAN_IV[0], note_iv(22, '"second, cut off', quoted=False), CLEAN_IV[2]],
        r"line 6 \(record 2\): line 7 inside this record looks like the start of another record "
        r"\('10000032-DS-23,10000032.*a quote in this record is never closed",
        ["10000032-DS-21", "10000032-DS-23"]),
    "extra field": (
        [CLEAN_IV[0], note_iv(22, '"second",extra', quoted=False), CLEAN_IV[2]],
        r"line 6 \(record 2\): 9 fields where the header has 8",
        ["10000032-DS-21", "10000032-DS-23"]),
    "note_id not in MIMIC-IV's form": (
        [CLEAN_IV[0], "x" + note_iv(22, "second"), CLEAN_IV[2]],
        r"line 6 \(record 2\), field 'NOTE_ID': NOTE_ID 'x10000032-DS-22' is not in MIMIC-IV's form",
        ["10000032-DS-21", "10000032-DS-23"]),
}


@pytest.mark.parametrize("case", list(BROKEN_IV))
def test_mimic_iv_bad_record_stops_or_is_skipped(tmp_path, compress, case, capsys):
    lines, message, kept = BROKEN_IV[case]
    path = write_iv(tmp_path / "discharge.csv", lines, compress)
    with pytest.raises(MedlamaInputError, match=message):
        list(read_mimic_notes(path))
    notes = {r["doc_id"]: r["text"] for r in read_mimic_notes(path, on_bad_record="skip")}
    assert sorted(notes) == kept and all(notes[doc_id] == TEXTS_IV[doc_id] for doc_id in kept)
    assert "left out 1 bad record(s)" in capsys.readouterr().err


def test_mimic_iv_header_without_text_is_refused_before_reading(tmp_path):
    path = tmp_path / "discharge.csv"
    path.write_text(",".join(c for c in MIMIC_IV_COLUMNS if c != "text") + "\n", encoding="utf-8")
    with pytest.raises(MedlamaInputError, match=r"missing column\(s\) TEXT .*MIMIC-IV-Note's discharge.csv") as error:
        read_mimic_notes(path)
    assert error.value.field == "TEXT" and error.value.row == 1


def test_mimic_signature_follows_the_text_whatever_the_reader(tmp_path):
    iii = write(tmp_path / "NOTEEVENTS.csv", CLEAN, compress=True)  # a MIMIC-III CSV read as plain text
    assert mimic_signature(iii, "text") == ("a CSV header with CGID, CHARTDATE, HADM_ID, ISERROR, ROW_ID, "
                                            "SUBJECT_ID in NOTEEVENTS.csv.gz")
    assert mimic_signature(iii, "mimic") == "read by the MIMIC notes reader"
    renamed = tmp_path / "notes.jsonl"  # only the id and the text kept, but the ids are MIMIC-IV note ids
    renamed.write_text('\n{"id": "10000032-DS-21", "text": "a note"}\n', encoding="utf-8")
    assert mimic_signature(renamed, "jsonl") == "MIMIC-IV note ids (id '10000032-DS-21') in notes.jsonl"
    plain = tmp_path / "pubmed.jsonl"
    plain.write_text('{"id": "PMID1", "text": "aspirin", "subject": "cardiology"}\n', encoding="utf-8")
    (tmp_path / "sentences.txt").write_text("row_id is a word here, subject too\n", encoding="utf-8")
    assert mimic_signature(plain, "jsonl") is None and mimic_signature(tmp_path / "sentences.txt", "text") is None
    assert mimic_signature(tmp_path / "sentences.txt", "pmc") is None
