"""Reading a probe's output folder in tests: per-query predictions are in ``predictions.jsonl``, not in
``results.json``."""

from __future__ import annotations

import json
from pathlib import Path


def predictions(out: Path, run: str | None = None) -> list[dict]:
    """The rows of ``out/predictions.jsonl`` (of the run labelled ``run``, when given)."""
    rows = [json.loads(line) for line in (Path(out) / "predictions.jsonl").read_text().splitlines()]
    return [row for row in rows if run is None or row["run"] == run]


#: Relations and candidate names of :func:`toy_queries`.
TOY_RELATIONS = ("disease_has_finding", "may_treat", "has_component")
TOY_NAMES = tuple(f"name {i}" for i in range(40))


def toy_queries(per_relation: int = 30, *, fingerprint: str = "f0", candidates=TOY_NAMES, dataset: str = "medlama"):
    """A small MedLAMA-like query set built here: ``per_relation`` queries of each of :data:`TOY_RELATIONS`,
    each with one or two gold names drawn (seeded) from ``candidates``, the pool."""
    import numpy as np

    from medlama.probers.query_set import QuerySet

    rng = np.random.default_rng(0)
    ids, relations, gold = [], [], []
    for relation in TOY_RELATIONS:
        for i in range(per_relation):
            ids.append(f"{relation}-{i}")
            relations.append(relation)
            gold.append([str(name) for name in rng.choice(list(candidates), size=1 + i % 2, replace=False)])
    info = {"dataset": dataset, "config": "hard", "relations": "all", "fingerprint": fingerprint}
    return QuerySet(ids, relations, [f"q {i} [Y]." for i in range(len(ids))], gold, list(candidates), "hard", info)


def toy_result(queries, label: str, skill: float, seed: int, *, match: str = "exact", **fields):
    """A scored run on ``queries`` (by the acc@k module, answers matched by ``match``) whose top 10 puts a gold
    answer first with probability ``skill``, else is a seeded shuffle of the pool; ``fields``: more
    :class:`ProbeResult` fields."""
    import numpy as np

    from medlama.runs.result import ProbeResult
    from medlama.runs.scores import score

    rng = np.random.default_rng(seed)
    predictions = []
    for gold in queries.gold:
        ranked = [str(name) for name in rng.permutation(queries.candidates)[:10]]
        if rng.random() < skill:
            ranked = [gold[0]] + [name for name in ranked if name != gold[0]][:9]
        predictions.append(ranked)
    return ProbeResult(label=label, query_set=queries.name, settings=fields.pop("settings", {"method": "test"}),
                       ids=queries.ids, relations=queries.relations, gold=queries.gold, predictions=predictions,
                       metrics=score(queries, predictions, match=match), seconds=0.0,
                       data={**queries.info, "candidates": queries.pool_record()}, **fields)
