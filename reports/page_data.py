"""What the results page shows, as one JSON-ready value (:func:`page_data`), from the runs ``medlama compare``
reads and the record it computes (:mod:`medlama.analysis`): nothing is scored or resampled another way.

* ``leaderboard``, ``comparisons``, ``ks``, ``method``: ``compare``'s record as it is (micro and macro acc@k with
  their bootstrap intervals; each run minus the first with its paired interval and McNemar's p);
* ``per_relation``: each run's acc@k per relation with the percentile-bootstrap interval of that relation's
  queries (:func:`medlama.core.intervals.bootstrap_group_cis`, as ``relations.png`` draws it), from the same
  per-query hits ``compare`` pairs;
* the query browser's rows, column by column in the first run's query order: ``queries`` (id, relation,
  gold answers, the input as the first run fed it) and per run (``runs``) its top ``top`` predictions with
  their scores, the gold's rank and score, and ``hits`` (``{"k": "0110..."}``, one character per query).
  Names are stored once (``names``) and referred to by index, so the full hard set with several runs stays
  a few megabytes; scores are kept to 6 significant digits;
* ``templates``: the summary across templates of each template sweep among the runs (``medlama probe
  --templates``: each template's acc@k, best-of, mean, ensemble), as its ``results.json`` records it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from medlama.core.errors import MedlamaInputError
from medlama.core.intervals import bootstrap_group_cis
from medlama.analysis import Run
from medlama.runs.outputs import PREDICTIONS_FILE


def _score(value: Any) -> float | None:
    """A score to 6 significant digits; ``None`` for none or one that is not finite (JSON has no such number)."""
    return None if value is None or not math.isfinite(float(value)) else float(f"{float(value):.6g}")


def _checked_row(run: Run, row: dict, top: int) -> tuple[list[str], list[float | None] | None, int | None]:
    """A row's top predictions, their scores and the gold's rank, refusing what ``probe`` does not write."""
    where = {"file": run.folder / PREDICTIONS_FILE}
    names = [str(name) for name in row["predictions"][:top]]
    scores = row.get("scores")
    if scores is not None:
        if not isinstance(scores, list) or len(scores) < len(names) or not all(
                s is None or (isinstance(s, (int, float)) and not isinstance(s, bool)) for s in scores):
            raise MedlamaInputError(f"run {run.label!r}: query {row['id']!r}: `scores` must be a list of numbers "
                                    "(or null) aligned with `predictions`", **where)
        scores = [_score(s) for s in scores[:len(names)]]
    rank = row.get("gold_rank")
    if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or rank < 1):
        raise MedlamaInputError(f"run {run.label!r}: query {row['id']!r}: `gold_rank` must be a rank (an integer "
                                f">= 1) or null, got {rank!r}", **where)
    return names, scores, rank


def _per_relation(hits: np.ndarray, relations: Sequence[str], options: dict) -> dict[str, dict]:
    cis = bootstrap_group_cis(hits.astype(np.float64), relations, **options)
    labels = np.asarray(relations, dtype=object)
    return {relation: {"value": float(hits[labels == relation].mean()), "queries": int((labels == relation).sum()),
                       "interval": list(ci) if ci else None} for relation, ci in cis.items()}


def page_data(runs: Sequence[Run], record: dict, *, top: int = 10, title: str | None = None) -> dict:
    """The page's data (module docstring) of ``runs`` (checked comparable by ``compare_runs``, which made
    ``record``), the browser showing each run's top ``top`` predictions."""
    base = runs[0]
    order = {qid: i for i, qid in enumerate(base.ids)}
    names: dict[str, int] = {}

    def index(name: str) -> int:
        return names.setdefault(name, len(names))

    relation_names = sorted(set(base.relations))
    relation_index = {name: i for i, name in enumerate(relation_names)}
    settings = record["method"]["settings"]
    options = {"resamples": settings["resamples"], "seed": settings["seed"], "level": settings["level"]}
    first_inputs: list[str | None] | None = None
    columns = []
    for run in runs:
        rows: list[dict | None] = [None] * len(order)
        for row in run.rows:
            rows[order[str(row["id"])]] = row
        predictions, scores, ranks, gold_scores, inputs = [], [], [], [], []
        any_score = False
        for row in rows:
            top_names, top_scores, rank = _checked_row(run, row, top)
            predictions.append([index(name) for name in top_names])
            scores.append(top_scores)
            any_score = any_score or top_scores is not None
            ranks.append(rank)
            gold_scores.append(_score(row.get("gold_score")) if isinstance(row.get("gold_score"), (int, float))
                               else None)
            inputs.append(None if row.get("input") is None else str(row["input"]))
        if first_inputs is None:
            first_inputs = inputs
        hits = {k: np.array([bool(row[f"hit@{k}"]) for row in rows]) for k in record["ks"]}
        provenance = run.record.get("provenance") or {}
        columns.append({
            "label": run.label, "folder": run.folder.resolve().name, "model": provenance.get("model"),
            "method": (run.record.get("settings") or {}).get("method"),
            # whether the run recorded its ranking (input, scores, gold rank): a result built by hand has none
            "ranked": any_score or any(r is not None for r in ranks) or any(t is not None for t in inputs),
            "predictions": predictions, "scores": scores if any_score else None, "gold_rank": ranks,
            "gold_score": gold_scores, "inputs": None if run is base or inputs == first_inputs else inputs,
            "hits": {str(k): "".join("1" if h else "0" for h in hits[k]) for k in record["ks"]},
            # rows are in the first run's query order, so its relations label them
            "per_relation": {str(k): _per_relation(hits[k], base.relations, options) for k in record["ks"]}})
    data = runs[0].data
    templates, seen = [], set()
    for run in runs:  # each template sweep's summary once (every run of it records the same)
        summary = (run.record.get("extra") or {}).get("templates")
        key = (str(run.folder.resolve()), str(summary.get("templates")) if isinstance(summary, dict) else None)
        if isinstance(summary, dict) and key not in seen:
            seen.add(key)
            templates.append({"folder": run.folder.resolve().name, "summary": summary})
    return {
        "title": title or f"medlama results: {', '.join(run.label for run in runs)}",
        "dataset": {key: data.get(key) for key in ("dataset", "config", "relations", "sha256", "fingerprint")},
        "ks": record["ks"], "top": top, "method": record["method"],
        "leaderboard": record["leaderboard"], "comparisons": record["comparisons"],
        "calibration": record.get("calibration"),  # Brier and ECE per run (medlama.analysis.calibration)
        "inputs": record.get("inputs"), "provenance": record.get("provenance"),
        "relations": relation_names,
        "queries": {"id": list(base.ids), "relation": [relation_index[r] for r in base.relations],
                    "gold": [[index(name) for name in gold] for gold in base.gold], "input": first_inputs},
        "runs": columns, "names": list(names), "templates": templates}
