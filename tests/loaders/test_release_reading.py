"""Reading the MedLAMA release: bytes that are not UTF-8, duplicated rows and files the release does not have
are reported with the file and row, never read silently."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest

from medlama.cli import main
from medlama.datasets.medlama import build_medlama
from medlama.core.errors import MedlamaInputError
from medlama.loaders import medlama_release as release


@pytest.fixture
def copy(medlama_source, tmp_path) -> Path:
    """A writable copy of the release."""
    target = tmp_path / "medlama"
    shutil.copytree(medlama_source, target)
    return target


def test_a_byte_that_is_not_utf8_names_file_row_and_offset(copy):
    path = copy / "2021AA" / "may_treat_1000.csv"
    lines = path.read_bytes().split(b"\n")
    offset = sum(len(line) + 1 for line in lines[:5]) + 3  # line 6 = data row 5, its fourth byte
    lines[5] = lines[5][:3] + b"\xe9" + lines[5][4:]
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(MedlamaInputError) as error:
        release.read_relation_file(path, "may_treat")
    assert str(error.value).startswith(f"{path}, row 5: not UTF-8: byte 0xe9 at byte offset {offset} (line 6)")
    assert (error.value.file, error.value.row) == (path, 5)


def test_a_byte_that_is_not_utf8_in_the_header_or_prompts(copy, tmp_path, capsys):
    prompts = copy / "prompts.csv"
    prompts.write_bytes(prompts.read_bytes().replace(b"pid", b"p\xffd", 1))
    with pytest.raises(MedlamaInputError, match=r"prompts.csv, field 'header': not UTF-8: byte 0xff at byte offset 1"):
        release.read_prompts(prompts)
    assert main(["build", "medlama", "--out", str(tmp_path / "out"), "--source", str(copy), "--no-verify"]) == 2
    assert "prompts.csv, field 'header': not UTF-8" in capsys.readouterr().err


def test_a_duplicated_row_is_a_duplicate_query(copy):
    path = copy / "2021AA" / "may_treat_1000.csv"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines.insert(700, lines[12])  # data row 12 again, as row 700
    path.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(MedlamaInputError, match=r"may_treat_1000.csv, row 700, field 'head_cui': duplicate query: "
                                                r"head \S+ '.+' is also row 12 \(rows 12 and 700 of this file"):
        release.read_relation_file(path, "may_treat")
    with pytest.raises(MedlamaInputError, match="row 700, field 'head_cui': duplicate query"):
        build_medlama(copy, verify_checksums=False, progress=False)


def test_the_released_files_have_no_duplicate_query(medlama_source):
    for relation in release.RELATIONS:  # the rule above rejects nothing of the real release
        found = release.MedlamaRelease(medlama_source, verified=False)
        assert len(release.read_relation_file(found.full_file(relation), relation)) == 1000


def test_an_unexpected_file_is_warned_about_and_reported(copy, medlama_source):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the release itself (with its notes beside the data) warns of nothing
        with release.open_release(medlama_source) as found:
            assert found.unexpected_files == ()
    shutil.copy(copy / "2021AA" / "may_treat_1000.csv", copy / "2021AA" / "may_cure_1000.csv")
    (copy / "2021AA" / ".DS_Store").write_bytes(b"")
    (copy / "NOTES.md").write_text("my notes")
    with pytest.warns(UserWarning, match=r"1 file\(s\) that the MedLAMA release .* does not have are left out: "
                                         r"2021AA/may_cure_1000.csv"):
        with release.open_release(copy) as found:  # checksums of the release's own files still verified
            assert found.verified and found.unexpected_files == ("2021AA/may_cure_1000.csv",)
    with pytest.warns(UserWarning, match="may_cure_1000.csv"):
        build = build_medlama(copy, progress=False)
    assert build.report.unexpected_files == ["2021AA/may_cure_1000.csv"]


def test_an_empty_corpus_names_its_file(tmp_path):
    from medlama.trainers.cloze import build_cloze_dataset

    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(MedlamaInputError, match=f"^{empty}: the corpus is empty: it has no lines"):
        build_cloze_dataset(empty)
