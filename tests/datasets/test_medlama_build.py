"""The built MedLAMA folder against the release: counts, schema, the hard set row for row, candidates, card."""

from __future__ import annotations

import csv
import json
import re
import shutil

import pytest
import yaml
from datasets import List, Value, load_dataset

from medlama.datasets.card import statistics_block
from medlama.datasets.medlama import features
from medlama.dataset_cards import card_path
from medlama.loaders.medlama_release import RELATIONS


def released_rows(path):
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def answers(record, column):
    return [part.strip() for part in record[column].split("||")]


def test_configs_load_with_their_counts(medlama_dir, medlama_source):
    assert len(RELATIONS) == 19
    assert load_dataset(str(medlama_dir), "hard")["test"].num_rows == 15_329
    assert load_dataset(str(medlama_dir), "full")["test"].num_rows == 19_000
    assert load_dataset(str(medlama_dir))["test"].num_rows == 15_329  # hard is the default config
    for rel in RELATIONS:  # all 38 per-relation configs: about 0.1 s each
        hard_file = next((medlama_source / "2021AA").glob(f"{rel}_*_hard.csv"))
        expected = int(re.search(r"_(\d+)_hard\.csv$", hard_file.name).group(1))
        hard = load_dataset(str(medlama_dir), f"hard_{rel}")["test"]
        full = load_dataset(str(medlama_dir), f"full_{rel}")["test"]
        assert (hard.num_rows, full.num_rows) == (expected, 1_000), rel
        assert set(hard["relation"]) == set(full["relation"]) == {rel}


def test_load_by_name_from_parent_folder(medlama_dir, monkeypatch):
    monkeypatch.chdir(medlama_dir.parent)
    assert load_dataset("medlama", "hard")["test"].num_rows == 15_329


def test_declared_features(medlama_dir):
    data = load_dataset(str(medlama_dir), "hard")["test"]
    assert data.features == features()
    assert data.features["answer_names"] == List(Value("string"))
    assert data.features["answer_cuis"] == List(Value("string"))


def test_hard_set_equals_release_row_for_row(medlama_build, medlama_source):
    _, build, _ = medlama_build
    hard = build.datasets["hard"]
    by_relation = {}
    for row in hard:
        by_relation.setdefault(row["relation"], []).append(row)
    total = 0
    for rel in RELATIONS:
        released = released_rows(next((medlama_source / "2021AA").glob(f"{rel}_*_hard.csv")))
        derived = by_relation[rel]
        assert len(derived) == len(released), rel
        for ours, theirs in zip(derived, released):
            assert ours["head_cui"] == theirs["head_cui"]
            assert ours["head_name"] == theirs["head_name"]
            assert ours["answer_names"] == answers(theirs, "tail_names")
            assert ours["answer_cuis"] == answers(theirs, "tail_cuis")
            assert ours["answer_count"] == int(theirs["tail_names_len"])
            assert ours["avg_match"] == pytest.approx(float(theirs["avg_match"]), abs=1e-6)
            assert ours["avg_rouge_l"] == pytest.approx(float(theirs["avg_rouge_l"]), abs=1e-6)
            assert ours["is_hard"]
        total += len(derived)
    assert total == 15_329
    report = build.report
    assert report.matches_release and report.released_hard_checked


def test_full_set_keeps_release_order_and_queries(medlama_build, medlama_source):
    _, build, _ = medlama_build
    full = build.datasets["full"]
    first = full.filter(lambda r: r["relation"] == "may_prevent")[0]
    record = released_rows(medlama_source / "2021AA" / "may_prevent_1000.csv")[0]
    assert first["id"] == "may_prevent-0001"
    assert first["head_name"] == record["head_name"] == "sulfisoxazole"
    # prompts.csv: human "[X] may be able to prevent [Y] .", default "[X] may prevent [Y] ."
    assert first["query_human"] == "sulfisoxazole may be able to prevent [Y] ."
    assert first["query_default"] == "sulfisoxazole may prevent [Y] ."
    assert first["answer_names"] == ["Bacterial Infections", "Mycoses", "Protozoan Infections"]
    assert sum(full["is_hard"]) == 15_329


def test_candidate_sets_as_the_reference_builds_them(medlama_dir, medlama_source):
    names = {"full": set(), "hard": set()}
    for path in (medlama_source / "2021AA").glob("*.csv"):
        kind = "hard" if path.name.endswith("_hard.csv") else "full"
        for record in released_rows(path):
            names[kind].add(record["head_name"])
            names[kind].update(answers(record, "tail_names"))
    full = load_dataset(str(medlama_dir), "candidates_full")["test"]["name"]
    hard = load_dataset(str(medlama_dir), "candidates_hard")["test"]["name"]
    assert len(full) == 22_923  # the reference's "common vocab" over the 19 full files
    assert set(full) == names["full"] and list(full) == sorted(full)
    assert set(hard) == names["hard"]
    may_treat = load_dataset(str(medlama_dir), "candidates_hard_may_treat")["test"]["name"]
    assert set(may_treat) < set(hard)


def test_card_generated_from_template_with_statistics(medlama_build):
    out, _, stats = medlama_build
    readme = (out / "README.md").read_text()
    template = card_path("medlama").read_text()
    # The committed card's numbers are the ones the data gives (rebuild it if this fails).
    assert statistics_block(readme) == statistics_block(template)
    assert "| **all** | 19,000 | 15,329 |" in readme
    meta = yaml.safe_load(readme.split("---")[1])
    configs = {config["config_name"]: config for config in meta["configs"]}
    assert len(configs) == 3 * (2 + 2 * 19)  # full, hard, per relation; a candidate and a multiple-choice config each
    assert [name for name, config in configs.items() if config.get("default")] == ["hard"]
    # Every file is named after its content and the card names each one, never a glob (README: loading).
    [entry] = configs["hard_may_treat"]["data_files"]
    assert entry["split"] == "test" and re.fullmatch(r"data/hard/may_treat-[0-9a-f]{8}\.parquet", entry["path"])
    assert [re.sub(r"-[0-9a-f]{8}\.parquet$", "", path) for path in configs["hard"]["data_files"][0]["path"]] == [
        f"data/hard/{rel}" for rel in RELATIONS]
    infos = {info["config_name"]: info for info in meta["dataset_info"]}
    assert set(infos) == set(configs)  # every config states its schema and sizes (tests/datasets/test_dataset_cards)
    assert infos["hard"]["splits"][0]["num_examples"] == 15_329 and infos["full"]["splits"][0]["num_examples"] == 19_000
    all_row = stats[-1]
    assert all_row["relation"] == "all" and all_row["full"] == 19_000 and all_row["hard"] == 15_329
    info = json.loads((out / "build_info.json").read_text())
    assert info["report"]["score_mismatches"] == [] and info["report"]["hard_only_derived"] == []


def test_thresholds_configurable(medlama_source):
    from medlama.datasets.hardness import HardnessRule
    from medlama.datasets.medlama import build_medlama

    build = build_medlama(medlama_source, rule=HardnessRule(0.1, 0.05), progress=False)
    hard = build.datasets["hard"]
    assert 0 < hard.num_rows < 15_329
    assert all(r < 0.05 for r in hard["avg_rouge_l"])
    # Stricter thresholds only remove released hard rows, and the report says which.
    assert not build.report.hard_only_derived
    assert len(build.report.hard_only_released) == 15_329 - hard.num_rows


def test_python_api_returns_dataset_dict(medlama_source):
    from medlama.datasets.medlama import load_medlama_sets

    data = load_medlama_sets(medlama_source, progress=False)
    assert set(data) == {"full", "hard"}
    assert data["hard"].num_rows == 15_329


def test_relation_without_hard_rows(medlama_source, tmp_path, capsys):
    """Thresholds of 0.01 leave one relation without hard rows: it builds, and every declared config loads."""
    from medlama.cli import main

    empty = "gene_associated_with_disease"
    copy = tmp_path / "release"
    shutil.copytree(medlama_source, copy)
    for path in (copy / "2021AA").glob("*_hard.csv"):
        path.unlink()  # a shortened full set no longer holds the released hard rows
    expected = {}
    for rel in RELATIONS:
        path = copy / "2021AA" / f"{rel}_1000.csv"
        with open(path, newline="", encoding="utf-8") as handle:
            header, *rows = list(csv.reader(handle))
        # A row is hard when both scores are < 0.01, i.e. when the larger one is.
        top = [max(float(row[header.index("avg_match")]), float(row[header.index("avg_rouge_l")])) for row in rows]
        # 30 rows per relation keep the build fast; `empty` keeps only its 3 rows with a score >= 0.01.
        kept = [i for i in range(len(rows)) if top[i] >= 0.01] if rel == empty else range(30)
        with open(path, "w", newline="", encoding="utf-8") as handle:
            csv.writer(handle).writerows([header] + [rows[i] for i in kept])
        expected[f"full_{rel}"] = len(kept)
        expected[f"hard_{rel}"] = sum(top[i] < 0.01 for i in kept)
    assert expected[f"full_{empty}"] == 3 and expected[f"hard_{empty}"] == 0
    assert all(expected[f"hard_{rel}"] > 0 for rel in RELATIONS if rel != empty)

    out = tmp_path / "medlama"
    status = main(["build", "medlama", "--out", str(out), "--source", str(copy), "--no-verify",
                   "--match-threshold", "0.01", "--rouge-threshold", "0.01"])
    assert status == 0
    assert f"left out of the folder (with their candidates_ configs): hard_{empty}\n" in capsys.readouterr().out

    info = json.loads((out / "build_info.json").read_text())
    assert info["report"]["empty_configs"] == [f"hard_{empty}"]
    row = next(r for r in info["statistics"] if r["relation"] == empty)
    assert (row["full"], row["hard"]) == (3, 0)
    meta = yaml.safe_load((out / "README.md").read_text().split("---")[1])
    with_rows = {"full", "hard"} | {f"{s}_{rel}" for s in ("full", "hard") for rel in RELATIONS} - {f"hard_{empty}"}
    assert {config["config_name"] for config in meta["configs"]} == \
        with_rows | {f"candidates_{c}" for c in with_rows} | {f"{c}_mc" for c in with_rows}
    assert sorted(re.sub(r"-[0-9a-f]{8}\.parquet$", "", p.name) for p in (out / "data" / "hard").iterdir()) == sorted(
        rel for rel in RELATIONS if rel != empty)  # what is declared is written, and only that
    for set_name in ("full", "hard"):
        expected[set_name] = sum(expected[f"{set_name}_{rel}"] for rel in RELATIONS)
    for config in sorted(with_rows):  # every declared config loads, with its rows (about 0.1 s each)
        assert load_dataset(str(out), config)["test"].num_rows == expected[config], config
        assert load_dataset(str(out), f"candidates_{config}")["test"].num_rows > 0, config
    # datasets cannot load a split of 0 rows; the undeclared config is "not found", its name in the message.
    with pytest.raises(ValueError, match=f"hard_{empty}"):
        load_dataset(str(out), f"hard_{empty}")
