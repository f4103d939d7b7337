"""``medlama list``: what can be probed and how: datasets and their configs, a dataset's relations with their
query and candidate counts, the probing methods and the named presets (of the methods and of ``rewire``)."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from medlama.commands.flags import add_command, add_settings_flags, given_settings
from medlama.core.errors import MedlamaInputError
from medlama.core.settings import Checked, setting, settings_from
from medlama.core.display import console as make_console
from medlama.datasets.registry import PROBED_NAMES, declarations
from medlama.probers.registry import METHODS
from medlama.trainers.config import DEFAULT_PRESET, PRESETS
from medlama.runs.benchmarks import benchmark
from medlama.runs.queries import QuerySource, load_queries


@dataclass(frozen=True)
class ListSettings(Checked):
    """Whose relations ``medlama list`` counts, in which folder and config, and how it prints."""

    dataset: str = setting("medlama", choices=PROBED_NAMES, help="whose relations to count")
    data: Path | None = setting(None, parse=Path, show_default=False,
                                help="the dataset folder to count relations in (a built folder, a push-dataset dry "
                                     "run or a Hub dataset id), as probe --data; default: the build probe uses")
    config: str | None = setting(None, parse=str, show_default="every config of the dataset",
                                 help="the config whose relations are counted")
    json: bool = setting(False, switch=True, show_default=False, help="print JSON instead of tables")


def register(subparsers) -> None:
    parser = add_command(subparsers, "list", run,
                         help="list datasets, configs, relations (query and candidate counts), methods and presets")
    parser.add_argument("what", nargs="?", default="all",
                        choices=("all", "datasets", "relations", "methods", "presets"),
                        help="what to list (default: all)")
    add_settings_flags(parser, ListSettings)


def datasets() -> list[dict]:
    """Every dataset with its configs, per-relation config spelling, splits and what its candidates are."""
    return [{"dataset": b.name, "configs": list(b.configs), "relation_configs": b.relation_configs,
             "splits": list(b.splits), "candidates": b.candidates, "ks": list(b.ks), "match": b.match,
             "command": d.scored_by} for d in declarations() if (b := d.benchmark) is not None]


def methods() -> list[dict]:
    """Every probing method of :data:`~medlama.probers.registry.METHODS`: what it does, its presets, and
    whether it scores every candidate of the pool (so ``--log-all-scores`` applies)."""
    return [{"method": name, "description": _first_line(method.prober.__doc__), "presets": list(method.presets),
             "scores_pool": method.prober.scores_pool} for name, method in METHODS.items()]


def presets() -> list[dict]:
    """Every named preset: the probing methods' (``probe --preset``) and rewiring's (``rewire --preset``)."""

    out = [{"for": f"probe --method {name}", "preset": preset, "default": i == 0}
           for name, method in METHODS.items() for i, preset in enumerate(method.presets)]
    return out + [{"for": "rewire", "preset": preset, "default": preset == DEFAULT_PRESET} for preset in PRESETS]


def relations(dataset: str = "medlama", data: str | Path | None = None, config: str | None = None) -> list[dict]:
    """Per config and relation of ``dataset`` (from ``data``, else the build probe uses): its query count and
    its candidate pool's size (distinct names of the relation's own pool, the ``relation`` rule); one row per
    config with ``relation`` ``null`` gives the config's totals (its whole pool, the ``config`` rule)."""

    bench = benchmark(dataset)
    configs = [config] if config else list(bench.configs)
    rows = []
    for name in configs:
        source = QuerySource(dataset=dataset, data=Path(data) if data is not None else None, config=name,
                             candidates="relation")
        queries = load_queries(source)
        whole = load_queries(QuerySource(dataset=dataset, data=source.data, config=name, candidates="config"))
        rows.append({"config": name, "relation": None, "queries": len(queries),
                     "candidates": len(set(whole.candidates))})
        counts: dict[str, int] = {}
        for relation in queries.relations:
            counts[relation] = counts.get(relation, 0) + 1
        for relation in sorted(counts):
            rows.append({"config": name, "relation": relation, "queries": counts[relation],
                         "candidates": len(set(queries.pools[relation]))})
    return rows


def _first_line(doc: str | None) -> str:
    return (doc or "").strip().splitlines()[0] if (doc or "").strip() else ""


def run(args: argparse.Namespace) -> int:
    """List what medlama can probe: the datasets and their configs, the relations of a dataset with their query and
    candidate counts (read from --data, else from the build probe uses by default), the probing methods and the
    named presets."""

    want = args.what
    settings = settings_from(ListSettings, given_settings(args, ListSettings))
    if settings.config is not None and want not in ("all", "relations"):
        raise MedlamaInputError(f"--config chooses whose relations are counted; `medlama list {want}` counts none")
    listing: dict[str, list] = {}
    if want in ("all", "datasets"):
        listing["datasets"] = datasets()
    if want in ("all", "methods"):
        listing["methods"] = methods()
    if want in ("all", "presets"):
        listing["presets"] = presets()
    if want in ("all", "relations"):
        listing["relations"] = relations(settings.dataset, settings.data, settings.config)
    if settings.json:
        print(json.dumps(listing, indent=2, ensure_ascii=False))
        return 0
    _print_tables(listing, settings.dataset)
    return 0


def _print_tables(listing: dict[str, list], dataset: str) -> None:
    # rich loads when a table prints, not when the CLI parses its flags
    from rich.table import Table

    console = make_console()  # full width off a terminal: nothing cut in a file or a pipe
    columns = {"datasets": ("dataset", "configs", "relation_configs", "splits", "command"),
               "methods": ("method", "presets", "scores_pool", "description"),
               "presets": ("for", "preset", "default"),
               "relations": ("config", "relation", "queries", "candidates")}
    for key, rows in listing.items():
        title = f"relations of {dataset} (queries, candidates in the relation's pool)" if key == "relations" else key
        table = Table(title=title)
        for column in columns[key]:
            table.add_column(column, justify="right" if column in ("queries", "candidates") else "left")
        for row in rows:
            table.add_row(*(_cell(row[column], column) for column in columns[key]))
        console.print(table)


def _cell(value, column: str) -> str:
    if column == "relation" and value is None:
        return "(all)"
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)
