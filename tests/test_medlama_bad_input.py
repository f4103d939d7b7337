"""Bad input to the MedLAMA builder: clear errors naming file, row and field; earlier builds kept."""

from __future__ import annotations

import csv
import shutil
import tarfile

import pytest

from medlama.cli import main
from medlama.datasets.medlama import build_medlama, write_medlama
from medlama.errors import MedlamaInputError
from medlama.loaders import medlama_release as release


@pytest.fixture
def copy(tmp_path, medlama_source):
    """A writable copy of the release."""
    target = tmp_path / "release"
    shutil.copytree(medlama_source, target)
    return target


def rewrite(path, edit):
    """Rewrite a CSV through ``edit(header, rows)``, which changes them in place."""
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    edit(rows[0], rows[1:])
    with open(path, "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)


def set_cell(path, row, column, value):
    def edit(header, rows):
        rows[row - 1][header.index(column)] = value
    rewrite(path, edit)


@pytest.fixture
def earlier_build(tmp_path):
    out = tmp_path / "out" / "medlama"
    out.mkdir(parents=True)
    (out / "README.md").write_text("earlier build")
    return out


def assert_intact(out):
    assert (out / "README.md").read_text() == "earlier build"
    assert [p.name for p in out.parent.iterdir()] == ["medlama"]  # no staging folder left behind


def test_missing_file(copy, earlier_build):
    (copy / "2021AA" / "may_treat_1000.csv").unlink()
    with pytest.raises(MedlamaInputError, match=r"may_treat_1000\.csv: missing file"):
        write_medlama(earlier_build, copy, progress=False)
    with pytest.raises(MedlamaInputError, match=r"may_treat_1000\.csv: missing file"):
        write_medlama(earlier_build, copy, verify_checksums=False, progress=False)
    assert_intact(earlier_build)


def test_renamed_column(copy, earlier_build):
    rewrite(copy / "2021AA" / "may_prevent_1000.csv", lambda header, rows: header.__setitem__(5, "tail_name"))
    with pytest.raises(MedlamaInputError) as error:
        write_medlama(earlier_build, copy, verify_checksums=False, progress=False)
    message = str(error.value)
    assert "may_prevent_1000.csv" in message
    assert "missing column(s) ['tail_names']" in message and "unexpected column(s) ['tail_name']" in message
    assert_intact(earlier_build)


def test_empty_answer_list(copy, earlier_build):
    path = copy / "2021AA" / "may_treat_1000.csv"
    set_cell(path, 3, "tail_names", "")
    set_cell(path, 3, "tail_names_list", "[]")
    with pytest.raises(MedlamaInputError, match=r"may_treat_1000\.csv, row 3, field 'tail_names': empty answer list"):
        write_medlama(earlier_build, copy, verify_checksums=False, progress=False)
    assert_intact(earlier_build)


def test_malformed_answer_list(copy, earlier_build):
    set_cell(copy / "2021AA" / "occurs_after_1000.csv", 7, "tail_names_list", "['Surgery', 'Trauma'")
    with pytest.raises(MedlamaInputError,
                       match=r"occurs_after_1000\.csv, row 7, field 'tail_names_list': not a Python list literal"):
        write_medlama(earlier_build, copy, verify_checksums=False, progress=False)
    assert_intact(earlier_build)


def test_answer_count_disagrees(copy):
    set_cell(copy / "2021AA" / "may_treat_1000.csv", 2, "tail_names_len", "9")
    with pytest.raises(MedlamaInputError, match=r"row 2, field 'tail_names_len': tail_names_len is 9"):
        build_medlama(copy, verify_checksums=False, progress=False)


def test_checksum_mismatch(copy, earlier_build):
    path = copy / "2021AA" / "may_treat_1000.csv"
    path.write_bytes(path.read_bytes().replace(b"Hypertension", b"Hypotension", 1))
    with pytest.raises(MedlamaInputError, match=r"may_treat_1000\.csv: checksum mismatch: SHA-256 [0-9a-f]{64}"):
        write_medlama(earlier_build, copy, progress=False)
    assert_intact(earlier_build)


def test_prompt_without_slot(copy, earlier_build):
    def edit(header, rows):
        for row in rows:
            if row[0] == "may_treat":
                row[header.index("human_prompt")] = "[X] might treat ."
    rewrite(copy / "prompts.csv", edit)
    with pytest.raises(MedlamaInputError,
                       match=r"prompts\.csv, row 19, field 'human_prompt': prompt '\[X\] might treat \.' has 0 \[Y\]"):
        write_medlama(earlier_build, copy, verify_checksums=False, progress=False)
    assert_intact(earlier_build)


def test_cli_prints_error_without_traceback(copy, tmp_path, capsys):
    set_cell(copy / "2021AA" / "may_treat_1000.csv", 4, "tail_cuis_list", "not a list")
    status = main(["build", "medlama", "--out", str(tmp_path / "o"), "--source", str(copy), "--no-verify"])
    err = capsys.readouterr().err
    last_line = err.strip().splitlines()[-1]  # after the progress bar
    assert status == 2
    assert last_line.startswith("medlama: error: ") and "row 4, field 'tail_cuis_list'" in last_line
    assert "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_source_not_a_release(tmp_path):
    with pytest.raises(MedlamaInputError, match="no MedLAMA release here"):
        build_medlama(tmp_path, progress=False)
    with pytest.raises(MedlamaInputError, match="MedLAMA source not found"):
        build_medlama(tmp_path / "nowhere", progress=False)


def test_archive_source(copy, tmp_path):
    archive = tmp_path / "medlama.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:  # the layout of a GitHub archive of the repository
        tar.add(copy, arcname=f"medlama-{release.COMMIT}/data/medlama")
    with release.open_release(archive) as found:
        assert found.verified and (found.root / "prompts.csv").is_file()
    truncated = tmp_path / "truncated.tar.gz"
    truncated.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    with pytest.raises(MedlamaInputError, match=r"truncated\.tar\.gz: cannot read archive"):
        with release.open_release(truncated):
            pass


def test_download_verifies_and_caches(medlama_source, tmp_path):
    cache = tmp_path / "cache"
    root = release.download(cache, base_url=medlama_source.as_uri())
    release.verify(root)
    stamp = (root / "prompts.csv").stat().st_mtime_ns
    assert release.download(cache, base_url=medlama_source.as_uri()) == root
    assert (root / "prompts.csv").stat().st_mtime_ns == stamp  # verified cache hit, not fetched again


def test_download_rejects_wrong_bytes(copy, tmp_path):
    (copy / "prompts.csv").write_text("pid,default_prompt,human_prompt\n")
    cache = tmp_path / "cache"
    with pytest.raises(MedlamaInputError, match=r"prompts\.csv: checksum mismatch after download"):
        release.download(cache, base_url=copy.as_uri())
    assert not list(cache.rglob("prompts.csv"))  # the bad file never lands in the cache
