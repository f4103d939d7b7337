"""Streaming corpus readers (loaders/corpora.py) on small notes and articles written here."""

from __future__ import annotations

import csv
import gzip
import json
import os

import pytest
from datasets import IterableDataset

from medlama.errors import MedlamaInputError
from medlama.loaders.corpora import (
    MIMIC_COLUMNS,
    corpus_fingerprint,
    detect_format,
    load_corpus,
    parse_jats,
    read_jsonl,
    read_mimic_notes,
    read_pmc_articles,
    read_text,
)

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
    with pytest.raises(MedlamaInputError, match="3 fields where the header has 11") as error:
        list(read_mimic_notes(path))
    assert error.value.file == str(path) and error.value.row == 2
    with pytest.raises(MedlamaInputError, match="no such"):
        read_mimic_notes(tmp_path / "absent.csv")


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
    assert [r["doc_id"] for r in records] == ["PMC6543210", "article2"]
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


def test_streaming_does_not_read_ahead(tmp_path):
    """A corpus is consumed record by record: the first record comes before a later bad line is read."""
    path = tmp_path / "big.jsonl"
    path.write_text(json.dumps({"text": "good"}) + "\n" + "not json\n", encoding="utf-8")
    iterator = iter(read_jsonl(path))
    assert next(iterator)["text"] == "good"
    with pytest.raises(MedlamaInputError):
        next(iterator)


def test_load_corpus_detect_format_and_fingerprint(tmp_path):
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
    assert first != corpus_fingerprint(path, "mimic")
