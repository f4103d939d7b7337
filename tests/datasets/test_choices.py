"""The multiple-choice configs: no gold answer of a query among its distractors (under either matching), the draw
reproducible from the seed the build records, the rule for a pool with too few names, and the same rows from the
builder's own ``_mc`` config, from the built folder and (BioLAMA) from the fixture release."""

from __future__ import annotations

import json

import pytest
from datasets import load_dataset

from medlama.datasets.choices import DEFAULT_CHOICES, draw_choices, normalized


def test_draw_excludes_every_gold_answer_and_is_reproducible():
    pool = ["Aspirin", "aspirin.", "The Aspirin", "Ibuprofen", "Heparin", "Warfarin", "Paracetamol", "Codeine",
            "Morphine", "Naproxen", "Insulin", "Digoxin", "Heparin"]  # a gold's case, punctuation, article variants
    choices, label = draw_choices("q-1", "Aspirin", ["Aspirin", "Heparin"], pool, 5, seed=3)
    assert choices[label] == "Aspirin" and len(choices) == 6 == len(set(choices))
    assert not {normalized(name) for name in choices[:label] + choices[label + 1:]} & {"aspirin", "heparin"}
    assert draw_choices("q-1", "Aspirin", ["Aspirin", "Heparin"], list(reversed(pool)), 5, seed=3) == (choices, label)
    by_seed = {tuple(draw_choices("q-1", "Aspirin", ["Aspirin", "Heparin"], pool, 5, seed=s)[0]) for s in range(8)}
    by_id = {tuple(draw_choices(f"q-{i}", "Aspirin", ["Aspirin", "Heparin"], pool, 5, seed=3)[0]) for i in range(8)}
    assert len(by_seed) > 1 and len(by_id) > 1  # the seed and the query's id both decide the draw
    few, label = draw_choices("q-1", "Aspirin", ["Aspirin"], ["Aspirin", "Codeine", "codeine", "Insulin"], 9, seed=0)
    # all eligible, each answer once: "codeine" reads as "Codeine" (the first in sorted order is kept)
    assert sorted(few) == ["Aspirin", "Codeine", "Insulin"] and few[label] == "Aspirin"


def test_medlama_folder_choices(medlama_dir):
    info = json.loads((medlama_dir / "build_info.json").read_text())["choices"]
    assert (info["distractors"], info["seed"]) == (DEFAULT_CHOICES, 0) and info["short"] == {"full_mc": 0,
                                                                                             "hard_mc": 0}
    card = (medlama_dir / "README.md").read_text()
    assert "N = 9 distractors per query" in card and "random.Random(f\"{seed}:{id}\")" in card
    hard = load_dataset(str(medlama_dir), "hard")["test"]
    mc = load_dataset(str(medlama_dir), "hard_mc")["test"]
    assert mc["id"] == hard["id"] and mc["query_human"] == hard["query_human"]
    pools = {}
    for row in mc:
        answers = {normalized(name) for name in row["answer_names"]}
        assert row["choices"][row["label"]] == row["answer_names"][0]
        assert len(row["choices"]) == 10 == len({normalized(name) for name in row["choices"]})  # none twice
        assert sum(normalized(name) in answers for name in row["choices"]) == 1, row["id"]
        if row["relation"] in ("may_treat", "occurs_after"):  # redrawn from the recorded seed and the pool
            if row["relation"] not in pools:
                pools[row["relation"]] = list(load_dataset(str(medlama_dir),
                                                           f"candidates_hard_{row['relation']}")["test"]["name"])
            assert draw_choices(row["id"], row["answer_names"][0], row["answer_names"], pools[row["relation"]],
                                info["distractors"], info["seed"]) == (row["choices"], row["label"])
    assert set(pools) == {"may_treat", "occurs_after"}
    one = load_dataset(str(medlama_dir), "full_may_treat_mc")["test"]
    full = load_dataset(str(medlama_dir), "full_mc")["test"]
    assert one.to_list() == full.filter(lambda r: r["relation"] == "may_treat").to_list()


def test_builder_config_gives_the_folder_rows(medlama_dir, medlama_source, tmp_path):
    from medlama.datasets.medlama import MedlamaBuilder

    builder = MedlamaBuilder(config_name="hard_occurs_after_mc", source=str(medlama_source), cache_dir=tmp_path)
    builder.download_and_prepare()
    built = builder.as_dataset(split="test")
    assert built.to_list() == load_dataset(str(medlama_dir), "hard_occurs_after_mc")["test"].to_list()


def test_biolama_choices_and_short_pools(biolama_dir, biolama_release_dir, tmp_path, capsys):
    from medlama.cli import main

    info = json.loads((biolama_dir / "build_info.json").read_text())["choices"]
    rows = load_dataset(str(biolama_dir), "umls_mc", split="test")
    plain = load_dataset(str(biolama_dir), "umls", split="test")
    assert rows["id"] == plain["id"]
    for row in rows:
        gold = {normalized(name) for name in row["answers"]}
        assert row["choices"][row["label"]] == row["obj_labels"][0]
        assert sum(normalized(name) in gold for name in row["choices"]) == 1
        # the fixture's pools are small: every eligible name of the relation's pool in the split is a choice
        pool = {name for other in plain if other["relation"] == row["relation"]
                for name in [other["sub_label"], *other["obj_labels"]]}
        assert set(row["choices"]) == {row["obj_labels"][0]} | {n for n in pool if normalized(n) not in gold}
    assert info["short"]["umls_UR116_mc/test"] == 4  # recorded, and said by the build command
    assert "4 in `umls_UR116_mc/test`" in (biolama_dir / "README.md").read_text()
    assert main(["build", "biolama", "--source", str(biolama_release_dir), "--out", str(tmp_path / "b"),
                 "--sources", "wikidata", "--choices", "2", "--choices-seed", "7"]) == 0
    out = capsys.readouterr()
    assert "2 distractors per query, seed 7" in out.out
    redone = load_dataset(str(tmp_path / "b"), "wikidata_P780_mc", split="dev")
    assert all(len(row["choices"]) == 3 for row in redone)
    assert json.loads((tmp_path / "b" / "build_info.json").read_text())["choices"]["seed"] == 7
