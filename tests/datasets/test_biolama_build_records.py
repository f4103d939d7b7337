"""``medlama build biolama``: every record true. A record all of whose gold answers BioLAMA's matching reduces to
nothing is refused at build, naming file, row and field (and a folder that holds one is refused by the probe before
any ranking), as the probe refuses such a query; a single such answer beside others is left out of ``answers`` and
counted in build_info.json and the card; a release whose triples are all in test builds a test-only folder, said
so in the card and build_info.json; the archive's SHA-256 is recorded with where the hash it was checked against
came from (``digest_source``: the authors publish none, so an unchecked local archive's is ``supplied``)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from datasets import load_dataset

from medlama.cli import main
from medlama.datasets import biolama as builder
from medlama.loaders import biolama_release as release
from medlama.probers.retrieval import RetrievalProber


def split_file(root: Path, source: str, rel: str, split: str = "test") -> Path:
    return root / "data" / source / "triples_processed" / rel / f"{split}.jsonl"


def set_label(path: Path, line: int, label: str, *others: str) -> dict:
    """Line ``line`` of ``path`` with the object labels ``label, *others`` and no aliases (its only gold answers);
    returns the record."""
    lines = path.read_text().splitlines()
    record = json.loads(lines[line - 1])
    record["obj_labels"] = [label, *others]
    for field in ("obj_uris", "obj_types"):
        record[field] = (record[field] * (1 + len(others)))[:1 + len(others)]
    record["obj_aliases"] = [[] for _ in record["obj_labels"]]
    lines[line - 1] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")
    return record


def error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.strip().splitlines()[-1]


@pytest.mark.parametrize("label", [".", "A", "The", "-"])
def test_a_record_whose_labels_all_normalise_to_nothing_is_refused_at_build(copy, tmp_path, capsys, label):
    path = split_file(copy, "umls", "UR44")
    set_label(path, 2, label, "the")
    assert main(["build", "biolama", "--source", str(copy), "--out", str(tmp_path / "out")]) == 2
    line = error_line(capsys)
    assert line.startswith(f"medlama: error: {path}, row 2, field 'obj_labels': object labels [{label!r}, 'the'] "
                           "(and aliases) are all nothing once normalised")
    assert not (tmp_path / "out").exists()


def test_a_label_that_normalises_to_nothing_beside_others_is_dropped_and_counted(copy, tmp_path, capsys):
    """As the probe scores a query while one gold answer is left: the build keeps the record, leaves the answer
    no prediction can match out of ``answers`` (its raw labels kept), and says so in build_info.json and the card."""
    record = set_label(split_file(copy, "umls", "UR44"), 2, "The", "wheezing")
    out = tmp_path / "out"
    assert main(["build", "biolama", "--source", str(copy), "--out", str(out)]) == 0
    (row,) = [row for row in load_dataset(str(out), "umls_UR44")["test"] if row["id"] == record["uuid"]]
    assert row["answers"] == ["wheezing"] and row["obj_labels"] == ["The", "wheezing"]
    report = json.loads((out / "build_info.json").read_text())["report"]
    assert report["dropped_answers"] == [{"config": "umls_UR44", "split": "test", "uuid": record["uuid"],
                                          "answer": "The"}]
    assert "1 gold answer of 1 record (object labels or aliases such as `.`, `A`, `The`) is left out of `answers`" \
        in (out / "README.md").read_text()


def test_a_folder_holding_such_a_label_is_refused_by_the_probe_before_ranking(copy, tmp_path, capsys, monkeypatch,
                                                                            make_tiny_bert):
    set_label(split_file(copy, "umls", "UR44"), 2, "The")
    with monkeypatch.context() as patched:  # a folder built before the build refused such labels
        patched.setattr(builder, "matchable_answers",
                        lambda record: (builder.gold_answers(record.obj_labels, record.obj_aliases), []))
        assert main(["build", "biolama", "--source", str(copy), "--out", str(tmp_path / "old")]) == 0
    calls = []
    rank = RetrievalProber.rank_scored
    monkeypatch.setattr(RetrievalProber, "rank_scored", lambda self, *a, **k: calls.append(1) or rank(self, *a, **k))
    model = make_tiny_bert("records-encoder")
    capsys.readouterr()
    assert main(["probe", "--dataset", "biolama", "--data", str(tmp_path / "old"), "--model", str(model),
                 "--out", str(tmp_path / "probe")]) == 2
    line = error_line(capsys)
    assert line.startswith("medlama: error: biolama all/test: query ") and "UR44" in line
    assert "['The'] all become nothing" in line and "--match exact" in line
    assert calls == [] and not (tmp_path / "probe").exists()
    # the label is a fine answer matched exactly: that probe runs
    assert main(["probe", "--dataset", "biolama", "--data", str(tmp_path / "old"), "--model", str(model),
                 "--match", "exact", "--out", str(tmp_path / "exact")]) == 0 and calls


def test_a_release_with_every_triple_in_test_builds_a_test_only_folder(copy, tmp_path, capsys, make_tiny_bert):
    data = copy / "data"
    moved = 0
    for folder in sorted(data.glob("*/triples_processed/*")):
        test = folder / "test.jsonl"
        for split in ("train", "dev"):
            lines = (folder / f"{split}.jsonl").read_text()
            test.write_text(test.read_text() + lines)
            (folder / f"{split}.jsonl").write_text("")
            moved += lines.count("\n")
    out = tmp_path / "out"
    assert main(["build", "biolama", "--source", str(copy), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "test-only build: the release has no train or dev records" in printed
    info = json.loads((out / "build_info.json").read_text())
    assert info["report"]["empty_splits"] == ["train", "dev"]
    assert set(info["configs"]["all"]) == {"test"} and set(info["configs"]["umls_UR44_mc"]) == {"test"}
    assert "This build has no train and dev splits" in (out / "README.md").read_text()
    loaded = load_dataset(str(out), "all")
    assert list(loaded) == ["test"] and loaded["test"].num_rows == 54 and moved == 30

    model = make_tiny_bert("records-encoder-2")
    assert main(["probe", "--dataset", "biolama", "--data", str(out), "--model", str(model), "--limit", "2",
                 "--out", str(tmp_path / "probe")]) == 0
    capsys.readouterr()
    assert main(["optiprompt", "--model", str(model), "--data", str(out), "--out", str(tmp_path / "prompts")]) == 2
    assert error_line(capsys) == (f"medlama: error: {out}: config 'all' has no 'train' split: OptiPrompt trains on "
                                  "'train' and selects on 'dev'")


def test_the_archive_digest_and_where_its_check_came_from_are_recorded(biolama_fx, copy, tmp_path, monkeypatch,
                                                                     capsys):
    monkeypatch.setattr(release, "ARCHIVE_SHA256", None)  # as released: the authors publish no digest
    monkeypatch.delenv(release.SHA256_ENV, raising=False)
    archive = biolama_fx.write_archive(tmp_path / "data.tar.gz", copy / "data")
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()

    def built(*flags: str) -> dict:
        out = tmp_path / f"out-{len(list(tmp_path.glob('out-*')))}"
        assert main(["build", "biolama", "--out", str(out), *flags]) == 0
        info = json.loads((out / "build_info.json").read_text())["report"]
        info["card"] = (out / "README.md").read_text()
        return info

    supplied = built("--source", str(archive))
    assert supplied["archive_sha256"] == digest and supplied["digest_source"] == "supplied"
    assert not supplied["checksums_verified"] and "the authors publish none" in supplied["verification"]
    assert "`supplied`, none: the authors publish no digest of data.tar.gz" in supplied["card"]
    assert "(digest_source: supplied)" in capsys.readouterr().out

    given = built("--source", str(archive), "--sha256", digest)
    assert given["digest_source"] == "given" and given["checksums_verified"] and "`given`" in given["card"]
    monkeypatch.setenv(release.SHA256_ENV, digest)
    assert built("--source", str(archive))["digest_source"] == "environment"
    monkeypatch.delenv(release.SHA256_ENV)
    monkeypatch.setattr(release, "ARCHIVE_SHA256", digest)
    assert built("--source", str(archive))["digest_source"] == "pinned"
    folder = built("--source", str(copy))
    assert folder["digest_source"] is None and folder["archive_sha256"] is None
    assert "Digest source" not in folder["card"]


def test_a_relation_without_dev_records_is_a_config_without_dev(copy, tmp_path):
    folder = copy / "data" / "ctd" / "triples_processed" / "CD1"
    (folder / "test.jsonl").write_text((folder / "test.jsonl").read_text() + (folder / "dev.jsonl").read_text())
    (folder / "dev.jsonl").write_text("")
    out = tmp_path / "out"
    assert main(["build", "biolama", "--source", str(copy), "--out", str(out)]) == 0
    info = json.loads((out / "build_info.json").read_text())
    assert info["report"]["empty_splits"] == [] and set(info["configs"]["ctd_CD1"]) == {"train", "test"}
    assert set(info["configs"]["ctd"]) == {"train", "dev", "test"}  # CG1 has dev records
    assert list(load_dataset(str(out), "ctd_CD1")) == ["train", "test"]
    assert load_dataset(str(out), "ctd", split="dev").num_rows == 2
