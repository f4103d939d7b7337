"""``medlama build context-variance --on-bad-record {error,skip}``: a MIMIC file with an
unterminated quote stops the build naming its file and line, or with ``skip`` the build completes, leaves the
record out and says how many were left out."""

from __future__ import annotations

import json

import pytest
from cv_inputs import write_corpora, write_medlama_folder

from medlama.cli import main
from medlama.datasets.context_variance import CorpusSpec, with_inputs
from medlama.core.errors import MedlamaInputError


def broken_notes(tmp_path):
    """The tiny NOTEEVENTS.csv with note 2's TEXT quote never closed: it swallows the row of note 3."""
    notes, _ = write_corpora(tmp_path / "corpora")
    lines = notes.read_text(encoding="utf-8").splitlines(keepends=True)
    assert lines[2].startswith("2,") and lines[2].endswith('dyspnea."\n')
    lines[2] = lines[2].replace('dyspnea."\n', "dyspnea.\n")  # the quote opened, never closed
    notes.write_text("".join(lines), encoding="utf-8")
    return notes


def test_unterminated_quote_error_names_file_and_line_then_skip_completes(tmp_path, capsys):
    notes = broken_notes(tmp_path)
    base = ["build", "context-variance", "--medlama", str(write_medlama_folder(tmp_path / "medlama")),
            "--mimic", str(notes), "--index-dir", str(tmp_path / "idx"), "--json"]
    assert main([*base, "--out", str(tmp_path / "strict")]) == 2
    err = capsys.readouterr().err
    assert f"{notes}, line 3 (record 2)" in err and "Traceback" not in err
    assert not (tmp_path / "strict").exists()

    assert main([*base, "--on-bad-record", "skip", "--out", str(tmp_path / "lenient")]) == 0
    captured = capsys.readouterr()
    assert f"medlama: note: {notes}: left out 1 bad record(s) (on_bad_record=skip): {notes}, line 3 (record 2)" \
        in captured.err
    report = json.loads(captured.out)
    assert [s["documents"] for s in report["sources"]] == [3]  # notes 1, 3, 4 (99 is flagged ISERROR)
    from datasets import load_dataset

    rows = load_dataset(str(tmp_path / "lenient"), "ehr_real", split="test")
    assert rows.num_rows and "2" not in rows["doc_id"]  # note 2 left out
    assert not any("2150-01-01" in text for inputs in rows.with_transform(with_inputs)[:]["inputs"]
                for text in inputs)  # no raw CSV row in a context

    # The strict build does not reuse the index the lenient one built: it still stops at the record.
    assert main([*base, "--out", str(tmp_path / "strict")]) == 2
    assert f"{notes}, line 3 (record 2)" in capsys.readouterr().err


def test_on_bad_record_is_a_checked_corpus_setting():
    spec = CorpusSpec.make("n.csv", "mimic", on_bad_record="skip")
    assert spec.reader_options() == {"on_bad_record": "skip"}
    assert CorpusSpec.make("n.csv", "mimic").reader_options() == {}  # the default keeps earlier fingerprints
    assert CorpusSpec.make("a.xml", "pmc", on_bad_record="skip").reader_options() == {}  # MIMIC only
    with pytest.raises(MedlamaInputError, match="on_bad_record"):
        CorpusSpec.make("n.csv", "mimic", on_bad_record="ignore")
