"""Provenance blocks name versions, data, model and command without local paths."""

from __future__ import annotations

import shutil

from medlama.core.provenance import command_line, folder_hash, model_identity, provenance


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


def test_one_rule_set_names_local_paths_in_results_and_uploads():
    """Results files and the Hub uploads reduce a path by the same rules: a Windows path in a command line
    or a recorded model loses its folders on any machine, as the upload's own rule always did."""
    from medlama.publishing import public_names
    from medlama.core.public_paths import public_path, public_word, with_public_model

    for word in ("C:\\Users\\me\\models\\m", "C:/Users/me/models/m", "\\\\server\\share\\m", "~/models/m",
                 "/home/me/models/m/"):
        assert public_word(word) == public_path(word) == public_names.public_path(word) == "m", word
    assert command_line(["medlama", "probe", "--model", "C:\\Users\\me\\m", "--out=D:\\runs\\o"]) == \
        "medlama probe --model m --out=o"
    for kept in ("org/model", "out/minilm", "bert-base-uncased", "--method=retrieval"):
        assert public_word(kept) == kept
    settings = {"method": "retrieval", "model": "C:\\Users\\me\\m", "layer": -1}
    assert with_public_model(settings) == {"method": "retrieval", "model": "m", "layer": -1}
    assert list(with_public_model(settings)) == list(settings) and settings["model"] == "C:\\Users\\me\\m"


def test_provenance_block_has_what_a_paper_cites(tmp_path):
    block = provenance(settings={"k": 1}, data={"config": "hard"}, model="org/model",
                       argv=["medlama", "probe"])
    assert set(block) >= {"versions", "date", "command", "device", "data", "model", "settings"}
    assert block["versions"]["medlama"] and block["versions"]["torch"]
    assert block["model"] == {"id": "org/model", "revision": None}
    assert block["date"].endswith("+00:00")
