"""Loading a config of a built folder never returns another folder's rows. ``datasets`` 5.2 keys the cache of
``load_dataset(DIR, config)`` by the folder's name and card YAML only (README: "Which copy load_dataset
loads"), so the toolkit reads a config's Parquet files by absolute path (``load_config``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from medlama.datasets.folders import folder_configs, load_config
from medlama.core.errors import MedlamaInputError
from named_folders import medlama_named_folder as make  # tests/helpers


def test_two_folders_named_medlama_load_their_own_rows(tmp_path, monkeypatch):
    first, second = make(tmp_path / "a", ["a1", "a2"]), make(tmp_path / "b", ["b1"])
    assert load_config(first, "hard")["id"] == ["a1", "a2"]
    assert load_config(second, "hard")["id"] == ["b1"]
    monkeypatch.chdir(tmp_path / "b")  # a relative path names the folder of this directory
    assert load_config(Path("medlama"), "hard")["id"] == ["b1"]
    assert load_config(first, "hard")["id"] == ["a1", "a2"]


def test_a_rebuilt_folder_loads_its_new_rows(tmp_path):
    folder = make(tmp_path, ["old"])
    assert load_config(folder, "hard")["id"] == ["old"]
    make(tmp_path, ["new", "newer"])  # same card, same file name
    rows = folder / "data" / "hard" / "rows.parquet"
    os.utime(rows, ns=(rows.stat().st_atime_ns, rows.stat().st_mtime_ns + 1_000_000))  # coarse clocks
    assert load_config(folder, "hard")["id"] == ["new", "newer"]


def test_configs_splits_and_errors(tmp_path):
    folder = make(tmp_path, ["a"])
    assert folder_configs(folder) == {"hard": {"test": ["data/hard/*.parquet"]}, "pools": {"train": ["pools.parquet"]}}
    assert load_config(folder, "pools", "train")["name"] == ["x"]
    with pytest.raises(MedlamaInputError, match=r"cannot load config 'easy': no such config; the dataset has "
                                                r"\['hard', 'pools'\]"):
        load_config(folder, "easy")
    with pytest.raises(MedlamaInputError, match=r"cannot load config 'hard', split 'dev': no such split; it has "
                                                r"\['test'\]"):
        load_config(folder, "hard", "dev")
    (folder / "data" / "hard" / "rows.parquet").unlink()
    with pytest.raises(MedlamaInputError, match="no file matches"):
        load_config(folder, "hard")
