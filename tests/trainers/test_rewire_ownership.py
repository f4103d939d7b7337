"""``rewire``'s output folder: only a rewire output is resumed or replaced, a folder without an ownership
record (hand-made, or a pre-release medlama's) is refused, and a second run into the same OUT is refused at once."""

from __future__ import annotations

import json

import pytest

from medlama.core.atomic import write_owner
from medlama.cli import main
from locks import lock_held_elsewhere  # tests/helpers


def rewire_into(out, tmp_path, capsys) -> tuple[int, str]:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("aspirin may treat headache in adults\n", encoding="utf-8")
    not_a_model = tmp_path / "not-a-model"  # there (its path is checked first), yet no model: nothing trains
    not_a_model.mkdir(exist_ok=True)
    status = main(["rewire", "--corpus", str(corpus), "--out", str(out), "--model", str(not_a_model)])
    return status, capsys.readouterr().err


def in_progress(out, record: dict | None):
    (out / "checkpoints").mkdir(parents=True)
    if record is not None:
        (out / "checkpoints" / "rewire_config.json").write_text(json.dumps(record))
    return out


@pytest.mark.parametrize("owner", ["build medlama", "probe"])
def test_another_commands_folder_is_refused(tmp_path, capsys, owner):
    out = in_progress(tmp_path / "out", {"format": "medlama-rewire/1"})
    write_owner(out, owner)
    status, err = rewire_into(out, tmp_path, capsys)
    assert status == 2 and f"written by `medlama {owner}`, not by `medlama rewire`" in err


def test_folders_without_an_ownership_record_are_refused(tmp_path, capsys):
    """A hand-written run record, and a pre-release medlama's in-progress folder (a run record but no ownership
    record), are both refused before any work, saying why."""
    for name, record in (("hand", {}), ("earlier", {"format": "medlama-rewire/1"})):
        out = in_progress(tmp_path / name, record)
        status, err = rewire_into(out, tmp_path, capsys)
        assert status == 2 and "was not written by `medlama rewire`" in err and "nothing was changed" in err
        assert "no readable .medlama-output.json" in err
        assert "will not resume or replace it" in err and "not-a-model" not in err  # refused before the model


def test_a_second_rewire_into_one_out_is_refused(tmp_path, capsys):
    out = tmp_path / "out"
    with lock_held_elsewhere(out):
        status, err = rewire_into(out, tmp_path, capsys)
    assert status == 2 and "is writing this output folder right now" in err and "not-a-model" not in err
