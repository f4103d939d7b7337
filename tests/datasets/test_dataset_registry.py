"""A dataset is declared once: a toy dataset declared here (three rows), and nowhere else, is a ``medlama build``
sub-command that builds its folder, a kind ``push-dataset`` uploads, a ``--dataset`` the probe's query reader
reads, and a benchmark protocol ``medlama list`` and the scoring plan read. The built-in declarations agree
with the builders, readers and command modules they name."""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from medlama.cli import main
from medlama.core.errors import MedlamaInputError
from medlama.core.settings import setting
from medlama.datasets.benchmark import Benchmark
from medlama.datasets.card import render_card
from medlama.datasets.export import write_folder
from medlama.datasets.folders import load_config
from medlama.datasets.registry import BuildCommand, Declaration, declarations, declared, register, unregister
from medlama.probers.query_set import QuerySet
from medlama.publishing.dataset_push import dataset_kinds, push_dataset
from medlama.runs.benchmarks import benchmark, resolve_data
from medlama.runs.queries import QuerySource, load_queries

TOY_ROWS = {"id": ["t1", "t2", "t3"], "relation": ["treats", "treats", "causes"],
            "query": ["aspirin treats [Y] .", "insulin treats [Y] .", "smoking causes [Y] ."],
            "answers": [["headache", "pain"], ["diabetes"], ["cancer"]]}


@dataclass(frozen=True)
class ToySettings:
    """Where the toy dataset goes and how many of its rows."""

    out: Path = setting(parse=Path, help="output folder")
    rows: int = setting(3, min=1, max=3, help="rows kept, the first ones")


def build_toy(settings: ToySettings, as_json: bool) -> int:
    from datasets import Dataset  # as the builders do: datasets only when a build runs

    table = Dataset.from_dict({column: values[:settings.rows] for column, values in TOY_ROWS.items()})
    write_folder(settings.out, {"data/test.parquet": table}, {"toy": {"test": ["data/test.parquet"]}},
                 lambda folder, configs: render_card("medlama", folder=folder, configs=configs, default_config="toy"),
                 {"dataset": "toy"}, kind="build toy")
    print(json.dumps({"rows": len(table)}) if as_json else f"toy: {len(table)} rows written to {settings.out}")
    return 0


def read_toy(source: QuerySource) -> QuerySet:
    folder = resolve_data(source)
    rows = load_config(folder.path, source.config or "toy", source.split)
    return QuerySet(ids=list(rows["id"]), relations=list(rows["relation"]), texts=list(rows["query"]),
                    gold=[list(g) for g in rows["answers"]], name="toy", info={"dataset": "toy", **folder.info},
                    candidates=sorted({answer for gold in rows["answers"] for answer in gold}))


TOY = Declaration(
    name="toy", card="medlama", query_reader=f"{__name__}:read_toy",
    benchmark=Benchmark(name="toy", configs=("toy",), relation_configs="-", splits=("test",),
                        prompt_columns=("query",), candidates="the answers of the rows", ks=(1, 3), match="exact",
                        grouping="relation"),
    build=BuildCommand(help="a toy dataset of three rows", description="Write the toy dataset's three rows.",
                       settings=ToySettings, run=build_toy))


@pytest.fixture
def toy():
    register(TOY)
    yield TOY
    unregister(TOY.name)


def _help(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as stop:
        main([*argv, "--help"])
    assert stop.value.code == 0
    return capsys.readouterr().out


def test_a_declared_dataset_is_a_build_sub_command(toy, capsys):
    assert "a toy dataset of three rows" in _help(capsys, "build")
    usage = _help(capsys, "build", "toy")
    assert "--out OUT" in usage and "--rows ROWS" in usage and "--json" in usage
    assert "toy" not in _help(capsys, "build").split("medlama", 1)[0]  # the built-ins are still listed first
    unregister("toy")
    assert "a toy dataset of three rows" not in _help(capsys, "build")


def test_a_declared_dataset_is_built_pushed_and_probed(toy, tmp_path, capsys):
    out = tmp_path / "toy"
    assert main(["build", "toy", "--out", str(out), "--rows", "2"]) == 0
    assert capsys.readouterr().out.strip() == f"toy: 2 rows written to {out}"
    # push-dataset takes the folder: its ownership record names the declared kind
    assert "build toy" in dataset_kinds()
    manifest = push_dataset(out, "you/toy", dry_run=tmp_path / "dry")
    assert manifest["repo_id"] == "you/toy" and (tmp_path / "dry").is_dir()
    # the probe's query reader is the declaration's, through the same QuerySource `medlama probe` makes
    queries = load_queries(QuerySource(dataset="toy", data=out))
    assert (queries.ids, queries.texts, queries.gold) == (["t1", "t2"], TOY_ROWS["query"][:2], TOY_ROWS["answers"][:2])
    assert queries.candidates == ["diabetes", "headache", "pain"]
    # and its benchmark protocol is the one the scoring plan and `medlama list` read
    assert benchmark("toy").scoring_plan() == ((1, 3), (1, 3, 5, 10), "exact")
    assert main(["list", "datasets", "--json"]) == 0
    listed = {row["dataset"]: row for row in json.loads(capsys.readouterr().out)["datasets"]}
    assert list(listed) == ["medlama", "biolama", "context-variance", "toy"]
    assert (listed["toy"]["ks"], listed["toy"]["command"]) == ([1, 3], "medlama probe")


def test_an_undeclared_dataset_is_nowhere(tmp_path, capsys):
    out = tmp_path / "toy"
    register(TOY)
    try:
        assert main(["build", "toy", "--out", str(out)]) == 0
    finally:
        unregister("toy")
    assert "build toy" not in dataset_kinds()
    with pytest.raises(MedlamaInputError, match="written by `medlama build toy`"):
        push_dataset(out, "you/toy", dry_run=tmp_path / "dry")
    with pytest.raises(MedlamaInputError, match=r"unknown dataset 'toy'; choose from \['medlama', 'biolama'\]"):
        benchmark("toy")
    with pytest.raises(MedlamaInputError, match="setting 'dataset' must be one of 'medlama', 'biolama', got 'toy'"):
        QuerySource(dataset="toy", data=out)
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        main(["probe", "--dataset", "toy", "--data", str(out), "--model", "x", "--out", str(tmp_path / "r")])
    assert stop.value.code == 2 and "invalid choice: 'toy'" in capsys.readouterr().err


def test_a_name_is_declared_once():
    with pytest.raises(MedlamaInputError, match="dataset 'medlama' is already declared"):
        register(Declaration(name="medlama", card="medlama", build=TOY.build))
    with pytest.raises(ValueError, match="no card template"):
        Declaration(name="toy", card="no-such-card", build=TOY.build)
    with pytest.raises(ValueError, match="settings and run, or a parser module"):
        BuildCommand(help="h", description="d")


def test_the_built_in_declarations_name_what_exists():
    from medlama.datasets.biolama_folder import KIND as BIOLAMA_KIND
    from medlama.datasets.context_variance.export import KIND as CONTEXT_VARIANCE_KIND
    from medlama.datasets.medlama_folder import KIND as MEDLAMA_KIND

    assert [d.name for d in declarations()] == ["medlama", "biolama", "context-variance"]
    assert dataset_kinds() == (MEDLAMA_KIND, BIOLAMA_KIND, CONTEXT_VARIANCE_KIND)
    for declaration in declarations():
        assert declaration.benchmark is not None and declaration.benchmark.name == declaration.name
        if declaration.query_reader:  # a reader of the probe run's floor, where it is imported
            module, _, function = declaration.query_reader.partition(":")
            assert module.startswith("medlama.runs.") and callable(getattr(importlib.import_module(module), function))
        if declaration.build.hand_made:  # the CLI's own module, above the declaration's floor
            from medlama.commands.build import hand_made_module

            assert callable(importlib.import_module(hand_made_module(declaration.name)).register)
    assert declared("context-variance").query_reader is None and declared("context-variance").scored_by == "medlama ucm"
