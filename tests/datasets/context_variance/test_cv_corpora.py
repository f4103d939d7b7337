"""Streaming corpus readers (loaders/corpora.py) on small notes and articles written here."""

from __future__ import annotations

import csv
import gzip
import json
import os

import pytest
from datasets import IterableDataset

from medlama.core.errors import MedlamaInputError
from medlama.loaders import corpora, mimic_notes
from medlama.loaders.corpora import (
    corpus_fingerprint,
    detect_format,
    load_corpus,
    parse_jats,
    read_jsonl,
    read_pmc_articles,
    read_text,
)
from medlama.loaders.mimic_notes import MIMIC_COLUMNS, read_mimic_notes

NOTE_1 = ('Admission Date: [**2100-1-1**]\nHPI: nasal polyp with discolored nasal discharge, "postnasal drip"'
          ',\nand heartburn.\n')
NOTES = [
    # ROW_ID, SUBJECT_ID, HADM_ID, CHARTDATE, CHARTTIME, STORETIME, CATEGORY, DESCRIPTION, CGID, ISERROR, TEXT
    ["174", "22532", "167853", "2151-08-04", "", "", "Discharge summary", "Report", "", "", NOTE_1],
    ["175", "13702", "", "2118-06-14", "", "", "Nursing", "Generic", "18765", "1", "charted in error"],
    ["176", "13702", "107527", "2118-06-14", "2118-06-14 10:00:00", "", "Radiology", "CHEST (PA & LAT)", "", "",
     "x" * 200_000],  # longer than the csv module's default field limit
]


def write_notes(path, rows=NOTES, header=MIMIC_COLUMNS, compress=False):
    opener = gzip.open if compress else open
    with opener(path, "wt", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, quoting=csv.QUOTE_MINIMAL)
        writer.writerow(header)
        writer.writerows(rows)
    return path


@pytest.mark.parametrize("name, compress", [("NOTEEVENTS.csv", False), ("NOTEEVENTS.csv.gz", True)])
def test_mimic_notes_stream(tmp_path, name, compress):
    path = write_notes(tmp_path / name, compress=compress)
    corpus = read_mimic_notes(path)
    assert isinstance(corpus, IterableDataset)
    records = list(corpus)
    assert [r["doc_id"] for r in records] == ["174", "176"]  # the ISERROR note is skipped
    assert records[0]["text"] == NOTE_1  # quoted newlines and quotes survive
    assert records[0]["category"] == "Discharge summary" and records[0]["hadm_id"] == "167853"
    assert records[0]["subject_id"] == "22532" and records[0]["source"] == str(path)
    assert len(records[1]["text"]) == 200_000
    with_errors = [r["doc_id"] for r in read_mimic_notes(path, include_errors=True)]
    assert with_errors == ["174", "175", "176"]
    radiology = [r["doc_id"] for r in read_mimic_notes(path, categories=["radiology", "NURSING"])]
    assert radiology == ["176"]


def test_mimic_lower_case_header_and_subset_columns(tmp_path):
    path = write_notes(tmp_path / "notes.csv", rows=[["9", "text nine"]], header=["row_id", "text"])
    (record,) = list(read_mimic_notes(path))
    assert record["doc_id"] == "9" and record["text"] == "text nine" and record["category"] == ""


def test_mimic_missing_column_names_file_and_field(tmp_path):
    path = write_notes(tmp_path / "NOTEEVENTS.csv", rows=[], header=[c for c in MIMIC_COLUMNS if c != "TEXT"])
    with pytest.raises(MedlamaInputError) as error:
        read_mimic_notes(path)  # reported before any record is read
    assert str(path) in str(error.value) and error.value.field == "TEXT" and error.value.row == 1


def test_mimic_short_row_and_missing_file(tmp_path):
    path = tmp_path / "NOTEEVENTS.csv"
    path.write_text(",".join(MIMIC_COLUMNS) + "\n1,2,3\n", encoding="utf-8")
    with pytest.raises(MedlamaInputError, match=r"NOTEEVENTS\.csv, line 2 \(record 1\): 3 fields where the header "
                                                r"has 11") as error:
        list(read_mimic_notes(path))
    assert error.value.file == str(path) and error.value.row == 2
    with pytest.raises(MedlamaInputError, match="no such"):
        read_mimic_notes(tmp_path / "absent.csv")


def test_mimic_errors_give_the_line_and_the_record(tmp_path):
    """Notes span several lines: the line a record starts on is not its number."""
    rows = [NOTES[0], ["180", "1", "", "", "", "", "Nursing", "", "", "", "one\ntwo\nthree"]]
    path = write_notes(tmp_path / "NOTEEVENTS.csv", rows=rows)  # header 1, note 174: lines 2-5, note 180: 6-8
    with open(path, "a", encoding="utf-8") as handle:
        handle.write("\n" + ",".join([" "] * len(MIMIC_COLUMNS)) + "\n")  # a blank line is no record
    with pytest.raises(MedlamaInputError, match=r"line 10 \(record 3\), field 'ROW_ID': empty ROW_ID") as error:
        list(read_mimic_notes(path))
    assert (error.value.row, error.value.field) == (10, "ROW_ID")
    short = tmp_path / "short.csv"
    short.write_text(path.read_text(encoding="utf-8").rsplit("\n\n", 1)[0] + '\n182,"a\nb",x\n', encoding="utf-8")
    with pytest.raises(MedlamaInputError, match=r"short\.csv, line 9 \(record 3\): 3 fields where the header has 11"):
        list(read_mimic_notes(short))


def test_mimic_malformed_csv_gives_where_the_record_starts_and_reading_stopped(tmp_path, monkeypatch):
    monkeypatch.setattr(mimic_notes, "_CSV_FIELD_LIMIT", 15)  # the one csv.Error the default dialect raises
    rows = [["1", "", "", "", "", "", "", "", "", "", "short"],
            ["2", "", "", "", "", "", "", "", "", "", "line one\nline two\nline three"]]
    path = write_notes(tmp_path / "NOTEEVENTS.csv", rows=rows)
    with pytest.raises(MedlamaInputError, match=r"NOTEEVENTS\.csv, line 3 \(record 2\): malformed CSV: field larger "
                                                r"than field limit \(15\) \(reading stopped at line 4\)") as error:
        list(read_mimic_notes(path))
    assert error.value.row == 3


JATS = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE article PUBLIC "-//NLM//DTD JATS (Z39.96) Journal Archiving and Interchange DTD v1.2 20190208//EN"
  "JATS-archivearticle1.dtd">
<article xmlns:xlink="http://www.w3.org/1999/xlink" xmlns:mml="http://www.w3.org/1998/Math/MathML"
         article-type="research-article">
  <front>
    <journal-meta><journal-title-group><journal-title>Rhinology</journal-title></journal-title-group></journal-meta>
    <article-meta>
      <article-id pub-id-type="pmid">31234567</article-id>
      <article-id pub-id-type="pmc">6543210</article-id>
      <title-group><article-title>Symptoms of <italic>nasal polyps</italic></article-title></title-group>
      <abstract><sec><title>Background</title><p>Nasal polyps cause nasal stuffiness.</p></sec>
        <sec><title>Results</title><p>Postnasal drip &amp; anosmia were common&#8212;see <xref ref-type="bibr"
        rid="b1">1</xref>.</p></sec></abstract>
    </article-meta>
  </front>
  <body>
    <sec><title>Introduction</title>
      <p>Discolored nasal discharge is frequent.<list><list-item><p>runny nose</p></list-item></list></p>
      <p>Area <inline-formula><mml:math><mml:mi>x</mml:mi></mml:math></inline-formula> was measured.</p>
      <fig id="f1"><caption><p>Figure caption text.</p></caption></fig>
    </sec>
  </body>
  <back><ref-list><ref id="b1"><mixed-citation>Ref text.</mixed-citation></ref></ref-list></back>
</article>
"""


def test_pmc_jats_and_plain_text(tmp_path):
    folder = tmp_path / "pmc"
    (folder / "sub").mkdir(parents=True)
    (folder / "PMC6543210.nxml").write_text(JATS, encoding="utf-8")
    (folder / "sub" / "article2.txt").write_text("A plain title\n\nBody about heartburn.\n", encoding="utf-8")
    records = list(read_pmc_articles(folder))
    # an article without a PMC id is named after its path in the folder read
    assert [r["doc_id"] for r in records] == ["PMC6543210", "sub/article2"]
    assert [r["doc_id"] for r in read_pmc_articles(folder / "sub" / "article2.txt")] == ["article2"]
    xml = records[0]
    assert xml["title"] == "Symptoms of nasal polyps"
    assert xml["text"].split("\n") == [
        "Symptoms of nasal polyps",
        "Nasal polyps cause nasal stuffiness.",
        "Postnasal drip & anosmia were common\u2014see 1.",
        "Discolored nasal discharge is frequent. runny nose",
        "Area was measured.",
    ]
    assert "Ref text" not in xml["text"] and "caption" not in xml["text"]
    assert records[1]["title"] == "A plain title" and "heartburn" in records[1]["text"]


def test_pmc_bad_xml_names_the_file(tmp_path):
    bad = tmp_path / "broken.xml"
    bad.write_text("<article><front>\n<p>unclosed</front></article>", encoding="utf-8")
    with pytest.raises(MedlamaInputError, match="bad XML") as error:
        list(read_pmc_articles(bad))
    assert error.value.file == str(bad) and error.value.row == 2


def test_pmc_entity_declarations_are_refused(tmp_path):
    bomb = ('<?xml version="1.0"?><!DOCTYPE article [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]>'
            "<article><body><p>&b;</p></body></article>")
    with pytest.raises(MedlamaInputError, match="entity declarations"):
        parse_jats(bomb.encode(), file="bomb.xml")
    external = ('<?xml version="1.0"?><!DOCTYPE article [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
                "<article><body><p>&x;</p></body></article>")
    with pytest.raises(MedlamaInputError, match="entity declarations"):
        parse_jats(external.encode(), file="xxe.xml")
    assert parse_jats(b"<article><body><p>ok</p></body></article>", file="x/plain.xml") == {
        "doc_id": "plain", "title": "", "text": "ok"}


def test_jsonl_text_field_ids_and_errors(tmp_path):
    path = tmp_path / "notes.jsonl"
    lines = [{"note_id": "n1", "body": "first"}, {"note_id": "n2", "body": "second", "other": 1}]
    path.write_text("\n".join(json.dumps(r) for r in lines) + "\n\n", encoding="utf-8")
    records = list(read_jsonl(path, text_field="body", id_field="note_id"))
    assert [(r["doc_id"], r["text"]) for r in records] == [("n1", "first"), ("n2", "second")]
    assert [r["doc_id"] for r in read_jsonl(path, text_field="body")] == ["notes.jsonl:1", "notes.jsonl:2"]
    gz = tmp_path / "more.jsonl.gz"
    with gzip.open(gz, "wt", encoding="utf-8") as handle:
        handle.write(json.dumps({"id": 7, "text": "zipped"}) + "\n")
    assert [(r["doc_id"], r["text"]) for r in read_jsonl(gz)] == [("7", "zipped")]
    with pytest.raises(MedlamaInputError, match="text field missing") as error:
        list(read_jsonl(path))
    assert error.value.row == 1 and error.value.field == "text" and error.value.file == str(path)
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"text": "ok"}\n{"text": \n', encoding="utf-8")
    with pytest.raises(MedlamaInputError, match="bad JSON") as error:
        list(read_jsonl(broken))
    assert error.value.row == 2


def test_text_per_line_and_per_file(tmp_path):
    (tmp_path / "a.txt").write_text("first doc\n\nsecond doc\r\n", encoding="utf-8")
    (tmp_path / "b.txt").write_text("whole\nfile\n", encoding="utf-8")
    per_line = list(read_text(tmp_path))
    assert [(r["doc_id"], r["text"]) for r in per_line] == [
        ("a.txt:1", "first doc"), ("a.txt:3", "second doc"), ("b.txt:1", "whole"), ("b.txt:2", "file")]
    per_file = list(read_text(tmp_path, per="file"))
    assert [(r["doc_id"], r["text"]) for r in per_file] == [("a", "first doc\n\nsecond doc\r\n"),
                                                            ("b", "whole\nfile\n")]
    with pytest.raises(MedlamaInputError, match="per must be"):
        read_text(tmp_path, per="page")
    (tmp_path / "empty").mkdir()
    with pytest.raises(MedlamaInputError, match="no text files"):
        read_text(tmp_path / "empty")


def test_duplicate_document_ids_name_both_places(tmp_path):
    # PMC: the same article in two folders
    for copy in ("a", "b"):
        (tmp_path / "pmc" / copy).mkdir(parents=True)
        (tmp_path / "pmc" / copy / f"PMC6543210-{copy}.nxml").write_text(JATS, encoding="utf-8")
    first, second = (str(tmp_path / "pmc" / c / f"PMC6543210-{c}.nxml") for c in ("a", "b"))
    with pytest.raises(MedlamaInputError, match="the same article is read twice") as error:
        list(read_pmc_articles(tmp_path / "pmc"))
    assert str(error.value).startswith(f"{second}: document id 'PMC6543210' was already read at {first};")
    assert error.value.file == second
    # JSON Lines: an id given in two files
    (tmp_path / "j").mkdir()
    (tmp_path / "j" / "a.jsonl").write_text('{"id": "n1", "text": "x"}\n{"id": "n2", "text": "y"}\n')
    (tmp_path / "j" / "b.jsonl").write_text('\n{"id": "n2", "text": "z"}\n')
    with pytest.raises(MedlamaInputError, match=r"b\.jsonl, line 2: document id 'n2' was already read at .*a\.jsonl, "
                                                r"line 2; document ids must be unique") as error:
        list(read_jsonl(tmp_path / "j"))
    assert error.value.row == 2
    # MIMIC: a ROW_ID given twice
    notes = write_notes(tmp_path / "NOTEEVENTS.csv", rows=[NOTES[0], NOTES[2], NOTES[0]])
    with pytest.raises(MedlamaInputError, match=r"line 7 \(record 3\): document id '174' was already read at .*"
                                                r"NOTEEVENTS\.csv, line 2 \(record 1\)"):
        list(read_mimic_notes(notes))
    # text, one document per file: a.txt and a.txt.gz would both be 'a'
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "a.txt").write_text("one")
    with gzip.open(tmp_path / "t" / "a.txt.gz", "wt", encoding="utf-8") as handle:
        handle.write("two")
    with pytest.raises(MedlamaInputError, match=r"a\.txt\.gz: .*document id 'a' was already read at .*a\.txt;"):
        list(read_text(tmp_path / "t", per="file"))
    assert [r["doc_id"] for r in read_text(tmp_path / "t")] == ["a.txt:1", "a.txt.gz:1"]  # per line: distinct


def test_made_up_ids_follow_the_path_and_files_are_read_once(tmp_path):
    for folder in ("x", "y"):
        (tmp_path / folder / "sub").mkdir(parents=True)
        (tmp_path / folder / "sub" / "notes.txt").write_text(f"in {folder}\n")
    # ids from the path below the folder named, so two sub-folders' notes.txt differ
    records = list(read_text(tmp_path))
    assert [r["doc_id"] for r in records] == ["x/sub/notes.txt:1", "y/sub/notes.txt:1"]
    assert [r["doc_id"] for r in read_text(tmp_path, per="file")] == ["x/sub/notes", "y/sub/notes"]
    assert [r["doc_id"] for r in read_jsonl(_jsonl_without_ids(tmp_path / "x"))] == ["rows.jsonl:1"]
    # a file named directly and through its folder is read once
    again = list(read_text([tmp_path / "x", tmp_path / "x" / "sub" / "notes.txt"]))
    assert [r["doc_id"] for r in again] == ["sub/notes.txt:1"]
    # two folders that each hold sub/notes.txt would give the same ids: refused before reading
    with pytest.raises(MedlamaInputError, match=r"sub/notes\.txt and .*y/sub/notes\.txt are both read as "
                                                r"'sub/notes\.txt'"):
        read_text([tmp_path / "x", tmp_path / "y"])
    with pytest.raises(MedlamaInputError, match="are both read as 'notes.txt'"):
        corpus_fingerprint([tmp_path / "x" / "sub" / "notes.txt", tmp_path / "y" / "sub" / "notes.txt"], "text")
    # readers with ids of the data's own do not mind same-named files ...
    notes = [write_notes(tmp_path / d / "NOTEEVENTS.csv", rows=[row]) for d, row in (("x", NOTES[0]), ("y", NOTES[2]))]
    assert [r["doc_id"] for r in read_mimic_notes(notes)] == ["174", "176"]
    # ... and catch made-up ids that meet as they read
    _jsonl_without_ids(tmp_path / "y")
    with pytest.raises(MedlamaInputError, match=r"y/rows\.jsonl, line 1: document id 'rows\.jsonl:1' was already read "
                                                r"at .*x/rows\.jsonl, line 1;"):
        list(read_jsonl([tmp_path / "x" / "rows.jsonl", tmp_path / "y" / "rows.jsonl"]))


def _jsonl_without_ids(folder):
    path = folder / "rows.jsonl"
    path.write_text('{"text": "no id"}\n', encoding="utf-8")
    return path


def test_text_folder_reads_extensionless_files(tmp_path):
    """A folder laid out like elicit_corpora: sentence files without an extension beside a checksum list."""
    folder = tmp_path / "corpora"
    folder.mkdir()
    (folder / "pubmed_sents_0").write_text("first sentence\nsecond sentence\n")
    (folder / "pubmed_sents_1").write_text("third sentence\n")
    (folder / "wiki_sents.txt").write_text("a wiki sentence\n")
    (folder / "SHA256SUMS").write_text("0" * 64 + "  pubmed_sents_0\n")
    (folder / "README").write_text("about these files\n")
    (folder / ".hidden").write_text("not read\n")
    (folder / "counts.tsv").write_text("not read\n")
    records = list(read_text(folder))
    assert [(r["doc_id"], r["text"]) for r in records] == [
        ("pubmed_sents_0:1", "first sentence"), ("pubmed_sents_0:2", "second sentence"),
        ("pubmed_sents_1:1", "third sentence"), ("wiki_sents.txt:1", "a wiki sentence")]
    # a file named directly is read whatever its extension (or lack of one)
    assert [r["doc_id"] for r in read_text(folder / "counts.tsv")] == ["counts.tsv:1"]
    assert [r["doc_id"] for r in read_text([folder / "pubmed_sents_1", folder / "SHA256SUMS"])] == [
        "pubmed_sents_1:1", "SHA256SUMS:1"]
    # a folder with nothing to read says what was looked for and how to name files
    other = tmp_path / "other"
    other.mkdir()
    (other / "sentences.tsv").write_text("x\n")
    (other / "MD5SUMS").write_text("x\n")
    with pytest.raises(MedlamaInputError, match=r"other: no text files in this folder \(looked for \*\.txt, "
                                                r"\*\.txt\.gz and files without an extension; hidden files "
                                                r"skipped\); name the files themselves instead: a file named directly "
                                                r"is read whatever its extension \(with `medlama build "
                                                r"context-variance`, repeat --corpus NAME:FORMAT:FILE once per file\)"):
        read_text(other)
    with pytest.raises(MedlamaInputError, match=r"no JSON Lines files in this folder \(looked for \*\.jsonl, \*\.json, "
                                                r"\*\.jsonl\.gz, \*\.json\.gz; hidden"):
        read_jsonl(other)


def test_elicit_corpora_folder_is_read(elicit_corpora):
    first = next(iter(read_text(elicit_corpora)))
    assert first["doc_id"] == "pubmed_sents_no_punkt_10k_0:1" and first["text"].startswith("conclusions")


def test_streaming_does_not_read_ahead(tmp_path):
    """A corpus is consumed record by record: the first record comes before a later bad line is read."""
    path = tmp_path / "big.jsonl"
    path.write_text(json.dumps({"text": "good"}) + "\n" + "not json\n", encoding="utf-8")
    iterator = iter(read_jsonl(path))
    assert next(iterator)["text"] == "good"
    with pytest.raises(MedlamaInputError):
        next(iterator)


def test_load_corpus_detect_format_and_fingerprint(tmp_path, monkeypatch):
    path = write_notes(tmp_path / "NOTEEVENTS.csv")
    assert detect_format(path) == "mimic" and detect_format("x.nxml") == "pmc" and detect_format("a.jsonl.gz") == "jsonl"
    with pytest.raises(MedlamaInputError, match="cannot tell"):
        detect_format("notes.txt")
    assert [r["doc_id"] for r in load_corpus(path)] == ["174", "176"]
    assert [r["doc_id"] for r in load_corpus(path, "mimic", include_errors=True)] == ["174", "175", "176"]
    with pytest.raises(MedlamaInputError, match="unknown corpus format"):
        load_corpus(path, "docx")
    first = corpus_fingerprint(path, "mimic")
    assert first == corpus_fingerprint(path, "mimic")
    assert first != corpus_fingerprint(path, "mimic", include_errors=True)
    stat = os.stat(path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert first == corpus_fingerprint(path, "mimic")  # touched, the same bytes: the same corpus
    data = path.read_bytes()
    path.write_bytes(data.replace(b"174", b"999", 1))  # edited in place: same size, its time put back
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert os.stat(path).st_size == stat.st_size and first != corpus_fingerprint(path, "mimic")
    # an index built by a reader giving other ids is not reused
    second = corpus_fingerprint(path, "mimic")
    monkeypatch.setattr(corpora, "READER_VERSION", corpora.READER_VERSION + 1)
    assert corpus_fingerprint(path, "mimic") != second


@pytest.mark.parametrize("compressed", [False, True])
def test_a_bad_byte_is_named_at_its_own_line(tmp_path, compressed):
    """The reader decodes blocks ahead of the lines it yields: the error still names the line holding the bad
    byte (here line 1256, far past the block the reader stood in), never the start of a read block."""
    lines = [f"sentence {i} about the liver and metformin, long enough to fill blocks." for i in range(1, 3001)]
    data = "\n".join(lines).encode("utf-8")
    at = data.index(b"sentence 1256 ") + len("sentence 1256 ")
    data = data[:at] + b"\xff" + data[at + 1:]
    path = tmp_path / ("notes.txt.gz" if compressed else "notes.txt")
    path.write_bytes(gzip.compress(data) if compressed else data)
    with pytest.raises(MedlamaInputError) as error:
        list(read_text(path))
    assert str(error.value) == f"{path}, row 1256: not UTF-8: byte 0xff at byte 15 of the line (invalid start byte)"
    jsonl = jsonl_of(path)
    with pytest.raises(MedlamaInputError) as error:
        list(read_jsonl(jsonl))
    assert str(error.value) == f"{jsonl}, row 1256: not UTF-8: byte 0xff at byte 25 of the line (invalid start byte)"


def jsonl_of(path):
    """The same lines as JSON lines (``{"text": "<line>"}``), compressed as ``path`` is."""
    jsonl = path.with_name("rows" + "".join(path.suffixes).replace(".txt", ".jsonl"))
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    body = b"\n".join(b'{"text": "' + line + b'"}' for line in raw.split(b"\n"))
    jsonl.write_bytes(gzip.compress(body) if path.suffix == ".gz" else body)
    return jsonl
