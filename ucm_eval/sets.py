"""Context sets: the rows of a folder written by ``medlama build context-variance``, and the pools they rank.

:func:`load_sets` reads the folder's ``build_info.json`` and its configs (one per source, plus
``pools``), keeps the rows the selection asks for (sources, context types, negative-target sequences,
relations), and returns them with every pool's entity ids and names as :class:`ContextSets`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from medlama.core.errors import MedlamaInputError
from medlama.datasets.export import quiet_datasets
from medlama.datasets.folders import load_config
from medlama.core.defaults import BUILD_INFO


@dataclass
class ContextSets:
    """The selected rows of a built folder, the pools they rank, and the build's description."""

    directory: Path
    rows: object  # datasets.Dataset
    pools: dict[str, tuple[list[str], list[str]]]  # pool id -> (entity ids, names)
    info: dict
    selection: dict


def read_build_info(directory: Path) -> dict:
    """The folder's ``build_info.json``, checked to describe context-variance sets."""
    info_path = directory / BUILD_INFO
    try:
        info = json.loads(info_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise MedlamaInputError("not a context-variance folder (no build_info.json); run `medlama build "
                                "context-variance --out DIR`", file=directory) from None
    except json.JSONDecodeError as error:
        raise MedlamaInputError(f"unreadable build_info.json: {error}", file=info_path) from None
    if info.get("dataset") != "context-variance":
        raise MedlamaInputError(f"not a context-variance folder (dataset {info.get('dataset')!r})", file=directory)
    return info


def load_sets(directory: str | Path, *, sources: Sequence[str] | None = None,
              context_types: Sequence[str] | None = None, negative: bool = True,
              relations: Sequence[str] | None = None, limit: int | None = None) -> ContextSets:
    """Rows of a folder written by ``medlama build context-variance`` (all its sources by default).

    ``limit``: keep only the sequences of the first ``limit`` triples of each relation (a quick check).
    """
    from datasets import concatenate_datasets  # datasets stays out of `import medlama.ucm_eval` and argument checks

    directory = Path(directory)
    info = read_build_info(directory)
    built = [s["source"] for s in info["sources"]]
    chosen = list(sources) if sources else built
    unknown = sorted(set(chosen) - set(built))
    if unknown:
        raise MedlamaInputError(f"unknown source(s) {unknown}; this folder has {built}", file=directory)
    types = info["settings"]["context_types"]
    if context_types:
        bad = sorted(set(context_types) - set(types))
        if bad:
            raise MedlamaInputError(f"context type(s) {bad} not built; this folder has {types}", file=directory)
        types = [t for t in types if t in context_types]
    with quiet_datasets():
        parts = [load_config(directory, source, "test") for source in chosen]
        rows = concatenate_datasets(parts) if len(parts) > 1 else parts[0]
        frame = rows.select_columns(["context_type", "negative", "relation", "triple_id"]).to_pandas()
        keep = frame["context_type"].isin(types)
        if not negative:
            keep &= ~frame["negative"]
        if relations:
            bad = sorted(set(relations) - set(frame["relation"]))
            if bad:
                raise MedlamaInputError(f"unknown relation(s) {bad}; known: {sorted(set(frame['relation']))}",
                                        file=directory)
            keep &= frame["relation"].isin(list(relations))
        if limit is not None:
            import pandas as pd  # only for --limit; pandas stays out of argument checks

            pairs = frame.loc[keep, ["relation", "triple_id"]].drop_duplicates()
            first = pd.MultiIndex.from_frame(pairs.groupby("relation", sort=False).head(limit))
            keep &= pd.MultiIndex.from_frame(frame[["relation", "triple_id"]]).isin(first)
        if not keep.all():
            rows = rows.select(np.flatnonzero(keep.to_numpy()))
        pool_rows = load_config(directory, "pools", "test")
    if not len(rows):
        raise MedlamaInputError("no context sequences selected (empty sources, or filters that match nothing)",
                                file=directory)
    pools: dict[str, tuple[list[str], list[str]]] = {}
    for key, entity_id, name in zip(pool_rows["pool_id"], pool_rows["entity_id"], pool_rows["name"]):
        ids, names = pools.setdefault(key, ([], []))
        ids.append(entity_id)
        names.append(name)
    selection = {"sources": chosen, "context_types": types, "negative": negative,
                 "relations": list(relations) if relations else None,
                 **({"limit_triples_per_relation": limit} if limit is not None else {})}
    return ContextSets(directory, rows, pools, info, selection)
