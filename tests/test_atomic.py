"""Atomic folder and file writes; a folder that is not an earlier output is never replaced."""

import pytest

from medlama.atomic import atomic_directory, atomic_write_text, check_replaceable
from medlama.cli import main
from medlama.errors import MedlamaInputError

MARKER = "info.json"


def snapshot(folder):
    """Every path under ``folder`` with its bytes (None for a folder): equal snapshots, equal trees."""
    return {str(p.relative_to(folder)): (None if p.is_dir() else p.read_bytes()) for p in sorted(folder.rglob("*"))}


@pytest.fixture
def foreign(tmp_path):
    """A user's folder: files and a subfolder, no marker."""
    folder = tmp_path / "project"
    (folder / "src").mkdir(parents=True)
    (folder / "notes.txt").write_text("my notes")
    (folder / "src" / "main.py").write_bytes(b"print('hi')\n")
    return folder


def test_directory_replaced_only_on_success(tmp_path):
    target = tmp_path / "out"
    with atomic_directory(target, marker=MARKER) as staging:
        (staging / MARKER).write_text("first")
    assert (target / MARKER).read_text() == "first"
    with pytest.raises(RuntimeError):
        with atomic_directory(target, marker=MARKER) as staging:
            (staging / MARKER).write_text("second")
            raise RuntimeError("interrupted")
    assert (target / MARKER).read_text() == "first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    with atomic_directory(target, marker=MARKER) as staging:
        (staging / "b.txt").write_text("third")
    assert sorted(p.name for p in target.iterdir()) == ["b.txt"]


def test_stale_staging_from_a_killed_run_is_cleaned(tmp_path):
    stale = tmp_path / ".out.tmp-abc123"
    stale.mkdir()
    with atomic_directory(tmp_path / "out", marker=MARKER) as staging:
        (staging / "x").write_text("x")
    assert not stale.exists()


def test_foreign_folder_refused_before_the_block_runs(foreign):
    before = snapshot(foreign.parent)
    ran = False
    with pytest.raises(MedlamaInputError) as error:
        with atomic_directory(foreign, marker=MARKER):
            ran = True
    message = str(error.value)
    assert message.startswith(f"{foreign}: ") and f"no {MARKER}" in message and "nothing was changed" in message
    assert not ran  # refused on entry: no work is done only to be thrown away
    assert snapshot(foreign.parent) == before  # byte for byte, and no staging folder beside it


def test_folder_filled_while_the_block_ran_is_not_replaced(tmp_path):
    target = tmp_path / "out"
    target.mkdir()
    with pytest.raises(MedlamaInputError, match="no info.json"):
        with atomic_directory(target, marker=MARKER) as staging:
            (staging / MARKER).write_text("new")
            (target / "added meanwhile.txt").write_text("keep me")
    assert snapshot(tmp_path) == {"out": None, "out/added meanwhile.txt": b"keep me"}


def test_file_in_the_way_refused(tmp_path):
    path = tmp_path / "out"
    path.write_text("a file")
    with pytest.raises(MedlamaInputError, match="exists and is not a folder"):
        with atomic_directory(path, marker=MARKER):
            pass
    assert path.read_text() == "a file"


@pytest.mark.parametrize("marker", [MARKER, "checkpoints/rewire_config.json"])
def test_empty_folder_and_earlier_output_replaced(tmp_path, marker):
    empty = tmp_path / "empty"
    empty.mkdir()
    with atomic_directory(empty, marker=marker) as staging:
        (staging / "new.txt").write_text("new")
    assert snapshot(empty) == {"new.txt": b"new"}

    earlier = tmp_path / "earlier"
    (earlier / marker).parent.mkdir(parents=True)
    (earlier / marker).write_text("{}")
    (earlier / "old.txt").write_text("old")
    check_replaceable(earlier, marker=marker)
    with atomic_directory(earlier, marker=marker) as staging:
        (staging / "new.txt").write_text("new")
    assert snapshot(earlier) == {"new.txt": b"new"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["earlier", "empty"]


def test_build_refuses_a_users_folder(foreign, monkeypatch, capsys):
    # `medlama build medlama --out .` in a project folder: refused before the release is even read.
    monkeypatch.chdir(foreign)
    before = snapshot(foreign.parent)
    status = main(["build", "medlama", "--out", ".", "--source", str(foreign.parent / "no-such-release")])
    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith(f"medlama: error: {foreign}: ") and "no build_info.json" in err
    assert "nothing was changed" in err and "Traceback" not in err
    assert snapshot(foreign.parent) == before


def test_write_text(tmp_path):
    path = tmp_path / "sub" / "f.json"
    atomic_write_text(path, "{}")
    assert path.read_text() == "{}"
    assert [p.name for p in path.parent.iterdir()] == ["f.json"]
