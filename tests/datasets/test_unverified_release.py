"""A MedLAMA build from a copy that is not the pinned release (``--no-verify``) says so: ``build_info.json``, the
card and the provenance of every result probed on it record it as unverified and name the files that differ
from the pinned commit or were not there to check. A checked build says it was verified."""

from __future__ import annotations

import csv
import json
import shutil

import medlama
from medlama.loaders import medlama_release as release
from medlama.runs.queries import queries_from


def test_the_loader_lists_what_differs_without_stopping(medlama_source, tmp_path):
    with release.open_release(medlama_source, verify_checksums=False) as found:  # the release itself
        assert found.verified and not found.checksum_mismatches and not found.checksums_unchecked
    copy = tmp_path / "release"
    shutil.copytree(medlama_source, copy)
    with open(copy / "prompts.csv", "a", encoding="utf-8") as handle:
        handle.write("\n")  # the same prompts, other bytes
    (copy / "2021AA" / "may_treat_977_hard.csv").unlink()
    with release.open_release(copy, verify_checksums=False) as found:
        assert not found.verified
        assert found.checksum_mismatches == ("prompts.csv",)
        assert found.checksums_unchecked == ("2021AA/may_treat_977_hard.csv",)


def test_a_no_verify_build_of_a_modified_copy_is_recorded_as_unverified(medlama_source, tmp_path, capsys):
    from medlama.cli import main

    copy = tmp_path / "release"
    shutil.copytree(medlama_source, copy)
    for path in (copy / "2021AA").glob("*_hard.csv"):
        path.unlink()  # a shortened full set no longer holds the released hard rows
    for rel in release.RELATIONS:  # 20 rows per relation keep the build fast
        path = copy / "2021AA" / f"{rel}_1000.csv"
        with open(path, newline="", encoding="utf-8") as handle:
            rows = list(csv.reader(handle))[:21]
        with open(path, "w", newline="", encoding="utf-8") as handle:
            csv.writer(handle).writerows(rows)
    out = tmp_path / "medlama"
    assert main(["build", "medlama", "--out", str(out), "--source", str(copy), "--no-verify"]) == 0
    assert "input: NOT the pinned release (--no-verify): 19 file(s) differ from commit 8a314d11c3b8, 19 were not " \
           "there to check" in capsys.readouterr().out

    report = json.loads((out / "build_info.json").read_text())["report"]
    full_files = sorted(f"2021AA/{rel}_1000.csv" for rel in release.RELATIONS)
    hard_files = sorted(name for name in release.SHA256 if name.endswith("_hard.csv"))
    assert report["checksums_verified"] is False
    assert report["checksum_mismatches"] == full_files and report["checksums_unchecked"] == hard_files

    card = (out / "README.md").read_text()
    assert "verified by SHA-256" not in card and "every file verified" not in card
    assert "**not verified** against the pinned SHA-256 (`--no-verify`); 19 file(s) differ from that commit" in card
    assert "`2021AA/may_treat_1000.csv`" in card and "`2021AA/may_treat_977_hard.csv`" in card

    queries = queries_from(out, relations=["may_treat"])
    assert queries.info["release_commit"] == release.COMMIT
    assert queries.info["release_verified"] is False
    assert queries.info["release_differs"] == full_files + hard_files
    data = medlama.probe(data=queries, limit=2).provenance()["data"]  # what results.json carries
    assert data["release_verified"] is False and "2021AA/may_treat_1000.csv" in data["release_differs"]


def test_a_checked_build_is_recorded_as_verified(medlama_dir):
    card = (medlama_dir / "README.md").read_text()
    assert "This build's input: the release, every file verified by its pinned SHA-256." in card
    info = queries_from(medlama_dir, relations=["may_treat"]).info
    assert info["release_verified"] is True and "release_differs" not in info
