"""``medlama list``: the relations' query and candidate counts equal those read directly from the data folder
(``datasets.load_dataset`` of its configs), and the methods and presets are the registry's."""

from __future__ import annotations

import json
from collections import Counter

from medlama.cli import main


def test_list_counts_equal_the_folder(medlama_dir, capsys):
    from datasets import load_dataset

    assert main(["list", "--data", str(medlama_dir), "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    got = {(row["config"], row["relation"]): (row["queries"], row["candidates"]) for row in listing["relations"]}
    expected = {}
    for config in ("hard", "full"):
        rows = load_dataset(str(medlama_dir), config, split="test")
        pool = load_dataset(str(medlama_dir), f"candidates_{config}", split="test")
        expected[config, None] = (len(rows), len(set(pool["name"])))
        for relation, count in Counter(rows["relation"]).items():
            names = load_dataset(str(medlama_dir), f"candidates_{config}_{relation}", split="test")["name"]
            expected[config, relation] = (count, len(set(names)))
    assert got == expected
    assert [d["dataset"] for d in listing["datasets"]] == ["medlama", "biolama", "context-variance"]

    from medlama.probers.registry import METHODS
    from medlama.trainers.config import PRESETS

    assert [m["method"] for m in listing["methods"]] == list(METHODS)
    assert {(p["for"], p["preset"]) for p in listing["presets"]} == {
        *((f"probe --method {m}", p) for m, method in METHODS.items() for p in method.presets),
        *(("rewire", p) for p in PRESETS)}


def test_list_table_names_the_relations(medlama_dir, capsys):
    assert main(["list", "relations", "--data", str(medlama_dir), "--config", "hard"]) == 0
    out = capsys.readouterr().out
    assert "relations of medlama" in out and "may_treat" in out and "hard" in out


def test_list_piped_to_a_file_is_never_cut(capsys):
    """Off a terminal (capsys, a pipe, a file) a table is as wide as its rows: every method's description and
    every preset stand whole on one line, where rich's assumed 80 columns would wrap and cut them."""
    from medlama.commands.list import methods

    assert main(["list", "methods"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for method in methods():
        row = next(line for line in lines if line.startswith(f"│ {method['method']} "))
        assert method["description"] in row and all(preset in row for preset in method["presets"])
