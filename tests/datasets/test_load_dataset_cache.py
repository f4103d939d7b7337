"""``datasets.load_dataset(DIR, config)`` on a folder that medlama built always returns that folder's rows.

``datasets`` 5.2 keys the cache of a local folder by the folder's name and its card's YAML (configs and sizes),
not by its files. A build names each data file after its content and its card names those files, so two
folders named ``medlama`` holding different rows of the same sizes, or a folder rebuilt in place, have
different cards and never share a cache entry. Each test has a cache of its own (``HF_DATASETS_CACHE``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from datasets import Dataset, load_dataset

from medlama.datasets.card import render_card
from medlama.datasets.export import write_folder
from medlama.datasets.folders import load_config
from medlama.datasets.medlama_folder import KIND


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch) -> Path:
    import datasets.config

    cache = tmp_path / "hf-datasets-cache"
    monkeypatch.setenv("HF_DATASETS_CACHE", str(cache))
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", cache)
    return cache


def build(folder: Path, ids: list[str]) -> Path:
    """A folder written by the builders' own export (content-named files, card, record): config ``hard`` of
    ``ids`` (all of one length, so that two builds have the same sizes) and ``candidates_hard``."""
    tables = {"data/hard/may_treat.parquet": Dataset.from_dict({"id": ids, "relation": ["may_treat"] * len(ids)}),
              "candidates/hard.parquet": Dataset.from_dict({"name": sorted(ids)})}
    configs = {"hard": {"test": ["data/hard/may_treat.parquet"]},
               "candidates_hard": {"test": ["candidates/hard.parquet"]}}
    write_folder(folder, tables, configs,
                 lambda staging, sealed: render_card("medlama", folder=staging, configs=sealed, default_config="hard",
                                                     statistics="| statistics |"),
                 {"dataset": "medlama"}, kind=KIND)
    return folder


def card_without_names(folder: Path) -> str:
    return re.sub(r"-[0-9a-f]{8}\.parquet", ".parquet", (folder / "README.md").read_text())


def test_two_folders_of_one_name_load_their_own_rows(tmp_path, monkeypatch):
    first = build(tmp_path / "a" / "medlama", ["a1", "a2", "a3"])
    second = build(tmp_path / "b" / "medlama", ["b1", "b2", "b3"])
    # Same name, same configs, same sizes: before files were named after their content, the cards were equal.
    assert card_without_names(first) == card_without_names(second)
    assert load_dataset(str(first), "hard", split="test")["id"] == ["a1", "a2", "a3"]
    assert load_dataset(str(second), "hard", split="test")["id"] == ["b1", "b2", "b3"]
    monkeypatch.chdir(tmp_path / "b")  # the headline usage: the folder by its name, from the folder holding it
    assert load_dataset("medlama", "hard", split="test")["id"] == ["b1", "b2", "b3"]
    monkeypatch.chdir(tmp_path / "a")
    assert load_dataset("medlama", "hard", split="test")["id"] == ["a1", "a2", "a3"]
    assert load_dataset("medlama", split="test")["id"] == ["a1", "a2", "a3"]  # hard is the default config
    assert load_dataset("medlama", "candidates_hard", split="test")["name"] == ["a1", "a2", "a3"]


def test_a_folder_rebuilt_in_place_loads_its_new_rows(tmp_path, monkeypatch):
    folder = build(tmp_path / "medlama", ["old1", "old2"])
    old_card = card_without_names(folder)
    assert load_dataset(str(folder), "hard", split="test")["id"] == ["old1", "old2"]
    build(folder, ["new1", "new2"])  # same sizes, same card apart from the files' names
    assert card_without_names(folder) == old_card
    assert load_dataset(str(folder), "hard", split="test")["id"] == ["new1", "new2"]
    monkeypatch.chdir(tmp_path)
    assert load_dataset("medlama", "hard", split="test")["id"] == ["new1", "new2"]
    assert load_config(folder, "hard")["id"] == ["new1", "new2"]


def test_a_rebuild_with_the_same_rows_keeps_the_same_files(tmp_path):
    folder = build(tmp_path / "medlama", ["x1", "x2"])
    names = sorted(path.relative_to(folder).as_posix() for path in folder.rglob("*.parquet"))
    build(folder, ["x1", "x2"])
    assert sorted(path.relative_to(folder).as_posix() for path in folder.rglob("*.parquet")) == names
    assert load_dataset(str(folder), "hard", split="test")["id"] == ["x1", "x2"]


def test_the_built_medlama_folder_loads_by_its_name(medlama_dir, monkeypatch):
    monkeypatch.chdir(medlama_dir.parent)
    hard = load_dataset("medlama", "hard", split="test")
    assert hard.num_rows == 15_329
    assert hard["id"] == load_config(medlama_dir, "hard")["id"]
