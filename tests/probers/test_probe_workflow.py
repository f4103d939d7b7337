"""One probing path for ``medlama probe`` and ``medlama.probe``: the candidate pool (its rule, recorded, and a
Dataset's part ranked against its config's pool), unique row labels, checkpoint sweeps checked first, and
``ProbeResult.save`` writing as the command writes."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest

import medlama
from medlama.core.atomic import owner_kind, write_owner
from medlama.cli import main
from medlama.datasets.folders import load_config
from medlama.core.errors import MedlamaInputError
from medlama.runs.queries import load_medlama_queries, queries_from_dataset

RELATION, OTHER = "associated_morphology_of", "may_treat"
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def tiny(make_tiny_bert):
    return make_tiny_bert("workflow-tiny-bert")


def pool_sha(names) -> str:
    return hashlib.sha256("\n".join(sorted(set(names))).encode("utf-8")).hexdigest()


def test_a_part_of_a_loaded_config_is_ranked_against_its_pool(tiny, medlama_dir):
    whole = medlama.load_medlama("hard", data=medlama_dir)
    part = whole.filter(lambda row: row["relation"] == RELATION).select(range(20))
    limited = medlama.probe(str(tiny), medlama_dir, relations=[RELATION], limit=20)
    from_part = medlama.probe(str(tiny), part)
    assert from_part.predictions == limited.predictions and from_part.metrics == limited.metrics
    pool = load_config(medlama_dir, f"candidates_hard_{RELATION}")["name"]
    assert from_part.data["candidates"]["size"] == len(pool) == limited.data["candidates"]["size"]
    assert from_part.data["candidates"]["sha256"] == pool_sha(pool)
    # a shuffle and a selection across relations: the union of the present relations' pools, as --relations
    mixed = whole.shuffle(seed=0).select(range(300))
    present = sorted(set(mixed["relation"]))
    assert len(present) > 1
    assert queries_from_dataset(mixed).candidates == load_medlama_queries(medlama_dir, "hard",
                                                                          relations=present).candidates
    # A Dataset medlama did not load: its whole split gives its pool, a part of it is refused.
    from datasets import Dataset

    [relation_file] = (medlama_dir / "data" / "hard").glob(f"{RELATION}-*.parquet")  # named after its content
    plain = Dataset.from_parquet(str(relation_file))
    assert queries_from_dataset(plain).candidates == sorted(pool)
    with pytest.raises(MedlamaInputError, match="candidate pool of its config cannot be known"):
        queries_from_dataset(plain.select(range(20)))


def test_relation_pool_makes_a_relation_score_independent_and_is_recorded(tiny, medlama_dir, tmp_path, capsys):
    alone = medlama.probe(str(tiny), medlama_dir, relations=[RELATION], candidates="relation", limit=20)
    paired = medlama.probe(str(tiny), medlama_dir, relations=[RELATION, OTHER], limit=20)  # evaluated: the union
    out = tmp_path / "relation"
    assert main(["probe", "--data", str(medlama_dir), "--relations", RELATION, OTHER, "--candidates", "relation",
                 "--limit", "20", "--model", str(tiny), "--out", str(out)]) == 0
    assert "(pool: relation)" in capsys.readouterr().out
    run = json.loads((out / "results.json").read_text())[0]
    assert run["per_relation"][RELATION] == alone.per_relation()[RELATION]
    lines = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert [line["predictions"] for line in lines if line["relation"] == RELATION] == alone.predictions
    # Under the default rule the other relation's names join the pool, and this relation's rankings move.
    assert [p for p, r in zip(paired.predictions, paired.relations) if r == RELATION] != alone.predictions
    own, other = (load_config(medlama_dir, f"candidates_hard_{r}")["name"] for r in (RELATION, OTHER))
    record = run["data"]["candidates"]
    assert record["rule"] == "relation" and record["size"] == len(set(own) | set(other))
    assert record["per_relation"][RELATION] == {"size": len(own), "sha256": pool_sha(own)}
    assert record["per_relation"][RELATION] == alone.data["candidates"]["per_relation"][RELATION]
    assert paired.data["candidates"] == {"rule": "evaluated", "size": len(set(own) | set(other)),
                                         "sha256": pool_sha([*own, *other])}
    whole_pool = load_config(medlama_dir, "candidates_hard")["name"]
    config = medlama.probe(str(tiny), medlama_dir, relations=[RELATION], candidates="config", limit=3)
    assert config.data["candidates"] == {"rule": "config", "size": len(whole_pool), "sha256": pool_sha(whole_pool)}
    with pytest.raises(MedlamaInputError, match=r"unknown candidate rule 'relations'; choose from \['evaluated'"):
        medlama.probe(str(tiny), medlama_dir, candidates="relations")


def test_labels_are_unique(tiny, medlama_dir, tmp_path, capsys):
    assert main(["probe", "--model", str(tiny), str(tiny), "--label", "same", "same", "--data", str(medlama_dir),
                 "--out", str(tmp_path / "dup")]) == 2
    assert "--label 'same' given more than once" in capsys.readouterr().err
    assert not (tmp_path / "dup").exists()
    first, second = tmp_path / "a" / "model", tmp_path / "b" / "model"
    shutil.copytree(tiny, first)
    shutil.copytree(tiny, second)
    out = tmp_path / "two"
    assert main(["probe", "--model", str(first), str(second), "--data", str(medlama_dir), "--relations", RELATION,
                 "--limit", "3", "--out", str(out)]) == 0
    assert [run["label"] for run in json.loads((out / "results.json").read_text())] == ["a/model", "b/model"]
    from medlama.core.models import unique_labels

    assert unique_labels(["x/m", "x/m"]) == ["x/m", "x/m #2"]


def test_a_checkpoint_sweep_is_checked_before_anything_runs(tiny, tmp_path, capsys):
    missing = tmp_path / "no-such-data"  # the queries would fail to load: the check must come first
    assert main(["probe", "--model", str(tiny), "--checkpoints", "--data", str(missing),
                 "--out", str(tmp_path / "out")]) == 2
    assert "no checkpoint-N folders to probe" in capsys.readouterr().err
    with pytest.raises(MedlamaInputError, match="no checkpoint-N folders to probe"):
        medlama.probe(str(tiny), missing, checkpoints=True)


def test_save_writes_as_the_command_and_replaces_only_its_own(tiny, medlama_dir, tmp_path, capsys):
    result = medlama.probe(str(tiny), medlama_dir, relations=[RELATION], limit=5)
    saved = result.save(tmp_path / "saved")
    cli = tmp_path / "cli"
    assert main(["probe", "--model", str(tiny), "--data", str(medlama_dir), "--relations", RELATION, "--limit", "5",
                 "--out", str(cli)]) == 0
    assert sorted(p.name for p in saved.iterdir()) == sorted(p.name for p in cli.iterdir())
    assert owner_kind(saved) == "probe"
    ours, theirs = (json.loads((folder / "results.json").read_text()) for folder in (saved, cli))
    assert ours[0]["metrics"] == theirs[0]["metrics"] and ours[0]["data"] == theirs[0]["data"]
    before = (saved / "results.json").read_text()
    with pytest.raises(MedlamaInputError, match="overwrite=True"):
        result.save(saved)
    assert (saved / "results.json").read_text() == before
    result.save(saved, overwrite=True)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    rewired = tmp_path / "rewired"
    write_owner(rewired, "rewire")
    (rewired / "results.json").write_text("{}")
    for folder in (mine, rewired):
        listing = sorted(p.name for p in folder.iterdir())
        with pytest.raises(MedlamaInputError, match="nothing was changed"):
            result.save(folder, overwrite=True)
        assert sorted(p.name for p in folder.iterdir()) == listing
