"""Atomic folder and file writes."""

import pytest

from medlama.atomic import atomic_directory, atomic_write_text


def test_directory_replaced_only_on_success(tmp_path):
    target = tmp_path / "out"
    with atomic_directory(target) as staging:
        (staging / "a.txt").write_text("first")
    assert (target / "a.txt").read_text() == "first"
    with pytest.raises(RuntimeError):
        with atomic_directory(target) as staging:
            (staging / "a.txt").write_text("second")
            raise RuntimeError("interrupted")
    assert (target / "a.txt").read_text() == "first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    with atomic_directory(target) as staging:
        (staging / "b.txt").write_text("third")
    assert sorted(p.name for p in target.iterdir()) == ["b.txt"]


def test_stale_staging_from_a_killed_run_is_cleaned(tmp_path):
    stale = tmp_path / ".out.tmp-abc123"
    stale.mkdir()
    with atomic_directory(tmp_path / "out") as staging:
        (staging / "x").write_text("x")
    assert not stale.exists()


def test_write_text(tmp_path):
    path = tmp_path / "sub" / "f.json"
    atomic_write_text(path, "{}")
    assert path.read_text() == "{}"
    assert [p.name for p in path.parent.iterdir()] == ["f.json"]
