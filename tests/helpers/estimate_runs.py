"""Runs written by hand for the expert-estimate tests: many queries over a few relations, with scores, so that
a sheet can hold two or more rated queries per relation."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def write_scored_run(folder: Path, label: str = "run", *, sizes=(("may_treat", 30), ("may_prevent", 20)),
                     seed: int = 0, ks=(1, 3)) -> Path:
    """A probe run of ``sizes`` queries per relation: each query's gold is ``gold-<id>``, ranked first for about
    a third of the queries; three predictions each, with softmax-ready scores."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    data = {"dataset": "medlama", "config": "hard", "fingerprint": "hand-made", "candidates": {"rule": "evaluated"}}
    (folder / "results.json").write_text(json.dumps([{"label": label, "metrics": {"k": list(ks), "match": "exact"},
                                                      "settings": {"method": "hand"}, "data": data}]))
    rows = []
    for relation, size in sizes:
        for j in range(size):
            qid = f"{relation}-{j:03d}"
            gold = [f"gold-{qid}"]
            names = [f"near-{qid}", f"far-{qid}"]
            if rng.uniform() < 1 / 3:
                names.insert(0, gold[0])
            else:
                names.append("other")
            scores = sorted(rng.normal(size=3).tolist(), reverse=True)
            rows.append({"run": label, "id": qid, "relation": relation, "gold": gold, "predictions": names,
                         "scores": scores, "input": f"{qid} [Y] .",
                         **{f"hit@{k}": gold[0] in names[:k] for k in ks}})
    (folder / "predictions.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return folder
