"""Provenance blocks name versions, data, model and command without local paths."""

from __future__ import annotations

import shutil

from medlama.provenance import command_line, folder_hash, model_identity, provenance


def test_folder_hash_is_independent_of_where_the_folder_is(tmp_path):
    first = tmp_path / "a" / "model"
    first.mkdir(parents=True)
    (first / "config.json").write_text('{"x": 1}')
    (first / "sub").mkdir()
    (first / "sub" / "w.bin").write_bytes(b"\x00\x01")
    second = tmp_path / "elsewhere" / "copy"
    shutil.copytree(first, second)
    assert folder_hash(first) == folder_hash(second)
    (second / "sub" / "w.bin").write_bytes(b"\x00\x02")
    assert folder_hash(first) != folder_hash(second)
    identity = model_identity(first)
    assert identity == {"name": "model", "sha256": folder_hash(first)}


def test_command_line_keeps_no_local_path(tmp_path):
    line = command_line(["/usr/bin/medlama", "probe", "--model", str(tmp_path / "m"), f"--data={tmp_path}/d",
                         "--relations", "may_treat"])
    assert line == "medlama probe --model m --data=d --relations may_treat"
    assert str(tmp_path) not in line


def test_provenance_block_has_what_a_paper_cites(tmp_path):
    block = provenance(settings={"k": 1}, data={"config": "hard"}, model="org/model",
                       argv=["medlama", "probe"])
    assert set(block) >= {"versions", "date", "command", "device", "data", "model", "settings"}
    assert block["versions"]["medlama"] and block["versions"]["torch"]
    assert block["model"] == {"id": "org/model", "revision": None}
    assert block["date"].endswith("+00:00")
