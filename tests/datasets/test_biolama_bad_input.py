"""Bad input to the BioLAMA builder: clear errors naming the file (and line and field), no partial output."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from medlama.core.atomic import write_owner
from medlama.cli import main
from medlama.datasets.biolama_folder import write_biolama
from medlama.core.errors import MedlamaInputError



@pytest.fixture
def earlier_build(tmp_path) -> Path:
    out = tmp_path / "out" / "biolama"
    out.mkdir(parents=True)
    (out / "README.md").write_text("earlier build")
    (out / "build_info.json").write_text("{}")  # with the ownership record: an earlier build, not someone else's
    write_owner(out, "build biolama")
    return out


def assert_intact(out: Path) -> None:
    assert (out / "README.md").read_text() == "earlier build"
    assert (out / "build_info.json").read_text() == "{}"
    assert [p.name for p in out.parent.iterdir() if p.name != ".biolama.lock"] == ["biolama"]  # no staging folder left behind


def edit_line(path: Path, line: int, change) -> None:
    lines = path.read_text().splitlines()
    record = json.loads(lines[line - 1])
    change(record)
    lines[line - 1] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")


def split_file(root: Path, source: str, rel: str, split: str = "test") -> Path:
    return root / "data" / source / "triples_processed" / rel / f"{split}.jsonl"


def test_truncated_archive(biolama_fx, copy, earlier_build, tmp_path):
    archive = biolama_fx.write_archive(tmp_path / "data.tar.gz", copy / "data")
    truncated = tmp_path / "truncated" / "data.tar.gz"
    truncated.parent.mkdir()
    truncated.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    with pytest.raises(MedlamaInputError, match=r"truncated[/\\]data\.tar\.gz: cannot read archive \(truncated or "
                                                r"corrupt\?\)"):
        write_biolama(earlier_build, truncated, progress=False)
    # with the expected hash, the checksum catches it first
    expected = hashlib.sha256(archive.read_bytes()).hexdigest()
    with pytest.raises(MedlamaInputError, match=rf"data\.tar\.gz: checksum mismatch: SHA-256 [0-9a-f]{{64}}, "
                                                rf"expected {expected}"):
        write_biolama(earlier_build, truncated, sha256=expected, progress=False)
    assert_intact(earlier_build)


def test_wrong_checksum(biolama_fx, copy, earlier_build, tmp_path):
    archive = biolama_fx.write_archive(tmp_path / "data.tar.gz", copy / "data")
    with pytest.raises(MedlamaInputError, match=r"data\.tar\.gz: checksum mismatch: SHA-256 [0-9a-f]{64}, "
                                                r"expected a{64}; pass --no-verify"):
        write_biolama(earlier_build, archive, sha256="a" * 64, progress=False)
    with pytest.raises(MedlamaInputError, match="not a SHA-256"):
        write_biolama(earlier_build, archive, sha256="abc", progress=False)
    with pytest.raises(MedlamaInputError, match="an extracted folder has no checksum"):
        write_biolama(earlier_build, copy, sha256="a" * 64, progress=False)
    assert_intact(earlier_build)


def test_relation_folder_without_test_split(copy, earlier_build):
    split_file(copy, "umls", "UR116").unlink()
    with pytest.raises(MedlamaInputError, match=r"UR116[/\\]test\.jsonl: missing file of the BioLAMA release"):
        write_biolama(earlier_build, copy, progress=False)
    assert_intact(earlier_build)


def test_record_missing_obj_labels(copy, earlier_build):
    edit_line(split_file(copy, "wikidata", "P780"), 2, lambda record: record.pop("obj_labels"))
    with pytest.raises(MedlamaInputError, match=r"P780[/\\]test\.jsonl, row 2, field 'obj_labels': missing"):
        write_biolama(earlier_build, copy, progress=False)
    assert_intact(earlier_build)


def test_prompt_file_without_the_relation(copy, earlier_build):
    prompts = copy / "data" / "umls" / "prompts" / "manual.jsonl"
    prompts.write_text("".join(line + "\n" for line in prompts.read_text().splitlines() if '"UR44"' not in line))
    with pytest.raises(MedlamaInputError, match=r"umls[/\\]prompts[/\\]manual\.jsonl: no manual prompt for "
                                                r"relation 'UR44'"):
        write_biolama(earlier_build, copy, progress=False)
    assert_intact(earlier_build)


@pytest.mark.parametrize(("change", "message"), [
    (lambda r: r.update(predicate_id="UR45"), r"row 1, field 'predicate_id': predicate_id 'UR45' in a file of "
                                              r"relation 'UR44'"),
    (lambda r: r.update(obj_labels=[]), r"row 1, field 'obj_labels': no gold object"),
    (lambda r: r.update(obj_labels=["Malaria", " "], obj_uris=["C1", "C2"], obj_aliases=[[], []]),
     r"row 1, field 'obj_labels': blank label"),
    # line 1 of umls/UR44/test.jsonl: Warfarin, with two objects
    (lambda r: r.update(obj_uris=["C1"]), r"row 1, field 'obj_uris': 1 object URIs for 2 object labels"),
    (lambda r: r.update(obj_aliases=[["a"]]), r"row 1, field 'obj_aliases': 1 alias lists for 2 object labels"),
    (lambda r: r.update(obj_aliases=["flat", "list"]), r"row 1, field 'obj_aliases': expected a list of lists"),
    (lambda r: r.update(sub_label=""), r"row 1, field 'sub_label': empty"),
    (lambda r: r.pop("uuid"), r"row 1, field 'uuid': missing"),
])
def test_bad_records(copy, change, message):
    edit_line(split_file(copy, "umls", "UR44"), 1, change)
    with pytest.raises(MedlamaInputError, match=r"UR44[/\\]test\.jsonl, " + message):
        write_biolama(copy.parent / "never", copy, progress=False)
    assert not (copy.parent / "never").exists()


def test_malformed_json_and_duplicate_uuid(copy):
    path = split_file(copy, "ctd", "CD1", "dev")
    lines = path.read_text().splitlines()
    path.write_text(lines[0] + "\n" + lines[1][:-5] + "\n")
    with pytest.raises(MedlamaInputError, match=r"CD1[/\\]dev\.jsonl, row 2: not a JSON object"):
        write_biolama(copy.parent / "o", copy, progress=False)
    path.write_text(lines[0] + "\n" + lines[0] + "\n")
    with pytest.raises(MedlamaInputError, match=r"CD1[/\\]dev\.jsonl, row 2, field 'uuid': uuid .* also on line 1"):
        write_biolama(copy.parent / "o", copy, progress=False)


def test_bad_prompt_template(copy):
    prompts = copy / "data" / "ctd" / "prompts" / "manual.jsonl"
    edit_line(prompts, 2, lambda record: record.update(template="[X] interacts with genes ."))
    with pytest.raises(MedlamaInputError, match=r"manual\.jsonl, row 2, field 'template': template '\[X\] interacts "
                                                r"with genes \.' has 0 \[Y\] slot\(s\)"):
        write_biolama(copy.parent / "o", copy, progress=False)


def test_not_a_release(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(MedlamaInputError, match=r"empty: no BioLAMA release here"):
        write_biolama(tmp_path / "o", tmp_path / "empty", progress=False)
    with pytest.raises(MedlamaInputError, match=r"nowhere: BioLAMA source not found"):
        write_biolama(tmp_path / "o", tmp_path / "nowhere", progress=False)
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(MedlamaInputError, match=r"notes\.txt: not a folder, \.tar\.gz"):
        write_biolama(tmp_path / "o", tmp_path / "notes.txt", progress=False)


def test_cli_prints_error_without_traceback(copy, earlier_build, capsys):
    split_file(copy, "umls", "UR116").unlink()
    status = main(["build", "biolama", "--out", str(earlier_build), "--source", str(copy)])
    err = capsys.readouterr().err
    assert status == 2
    assert "Traceback" not in err
    assert "medlama: error:" in err and "test.jsonl: missing file of the BioLAMA release" in err
    assert_intact(earlier_build)
