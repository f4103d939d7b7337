"""A ``medlama probe`` output's scores for the card of the rewired model it probed (``push-model --results``).

:func:`probe_scores` reads ``PROBE_OUT/results.json`` and keeps the runs that probed the model folder being
pushed *as it is now*: a run's provenance names the model folder and the SHA-256 of its files
(:func:`medlama.core.provenance.folder_hash`, checkpoints left out), so scores of another model, or of this folder
before it was trained further, are refused rather than published under its name. Scores are acc@k in percent,
rounded to 2 decimals, as ``medlama recipe`` writes them into the cards of the models it rewires.

A run of part of a query set (``--limit``, some ``--relations``, a Dataset subset) is not the model's score on
that set: it is refused unless asked for (``partial=True``), and then its metric names say what part it was
(``MedLAMA hard (partial: first 20 queries per relation) acc@1``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medlama.core.errors import MedlamaInputError
from medlama.runs.outputs import RESULTS_FILE
from medlama.core.provenance import folder_hash


@dataclass(frozen=True)
class CardScores:
    """Scores for a model card and what they were measured on (:func:`update_model_card_scores`'s arguments)."""

    scores: dict[str, float]
    source: str
    dataset: str | None
    config: str | None


def _runs(results: Path) -> tuple[Path, list[dict[str, Any]]]:
    file = results / RESULTS_FILE if results.is_dir() else results
    try:
        payload = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise MedlamaInputError("no results.json: give the output folder of `medlama probe`", file=results) from None
    except (OSError, ValueError) as error:
        raise MedlamaInputError(f"cannot read the probe results: {error}", file=file) from None
    if isinstance(payload, dict) and "runs" in payload:
        raise MedlamaInputError("this is a `medlama recipe` output; the recipe writes each rewired model's scores "
                                "into its card itself. Give the output folder of `medlama probe`", file=file)
    if not isinstance(payload, list) or not all(isinstance(run, dict) for run in payload):
        raise MedlamaInputError("not the results.json of `medlama probe` (a list of runs expected)", file=file)
    return file, payload


def _percent(metrics: dict[str, Any]) -> dict[str, float]:
    return {key: round(100 * value, 2) for key, value in metrics.items()
            if key.startswith("acc@") and isinstance(value, (int, float)) and not isinstance(value, bool)}


def partial_part(run: dict[str, Any]) -> str | None:
    """What part of its query set ``run`` probed (``first 20 queries per relation``, ``2 relations``, ``a subset
    of 50 queries``), ``None`` for the whole set."""
    data = (run.get("provenance") or {}).get("data") or run.get("data") or {}
    parts = []
    if data.get("limit_per_relation"):
        parts.append(f"first {data['limit_per_relation']} queries per relation")
    if isinstance(data.get("relations"), list):
        parts.append(f"{len(data['relations'])} relation{'s' if len(data['relations']) != 1 else ''}")
    if data.get("subset"):
        parts.append(f"a subset of {data['subset']:,} queries")
    return ", ".join(parts) or None


def probe_scores(results: str | Path, model: str | Path, *, partial: bool = False) -> CardScores:
    """The acc@k scores of the runs in ``results`` (a ``medlama probe`` output folder or its ``results.json``)
    that probed the model folder ``model`` as it is now (module docstring). A run of part of its query set
    (:func:`partial_part`) is refused unless ``partial``, and then named as partial."""
    file, runs = _runs(Path(results))
    folder = Path(model)
    identity = {"name": folder.resolve().name, "sha256": folder_hash(folder)}
    matching, others = [], []
    for run in runs:
        probed = (run.get("provenance") or {}).get("model") or {}
        if {key: probed.get(key) for key in identity} == identity:
            matching.append(run)
        else:
            others.append(f"{run.get('label')!r} ({probed.get('name') or probed.get('id') or 'unknown model'})")
    if not matching:
        raise MedlamaInputError(
            f"no run in it probed {folder.name} as it is now (runs: {', '.join(others) or 'none'}); a run of another "
            "model, or of this folder before it changed (trained on, for example), is never put in its card. Probe "
            f"it again: medlama probe --model {folder} --out PROBE_OUT", file=file)
    scores: dict[str, float] = {}
    described = []
    for run in matching:
        data = (run.get("provenance") or {}).get("data") or {}
        if data.get("dataset", "medlama") != "medlama":
            raise MedlamaInputError(f"run {run.get('label')!r} probed {data.get('dataset')}; the card's model-index "
                                    "holds MedLAMA scores", file=file)
        method = (run.get("settings") or {}).get("method")
        part = partial_part(run)
        if part is not None and not partial:
            raise MedlamaInputError(f"run {run.get('label')!r} probed part of its query set ({part}): its scores are "
                                    "not the model's on that set, so they do not go into the card's model-index. "
                                    "Probe the whole set, or give --partial-results to put them there named as "
                                    "partial", file=file)
        query_set = data.get("config") or run.get("query_set") if part else run.get("query_set")
        name = (f"MedLAMA {query_set}" + (f" (partial: {part})" if part else "")
                + (f" ({method})" if len(matching) > 1 and method else ""))
        scores.update({f"{name} {key}": value for key, value in _percent(run.get("metrics") or {}).items()})
        queries = sum(entry.get("queries", 0) for entry in (run.get("per_relation") or {}).values())
        date = (run.get("provenance") or {}).get("date")
        described.append(f"MedLAMA {run.get('query_set')}, {queries:,} queries" + (" (partial)" if part else "")
                         + f", `medlama probe --method {method}`"
                         + (f" ({date})" if date else ""))
    if not scores:
        raise MedlamaInputError("the matching runs hold no acc@k scores", file=file)
    data = (matching[0].get("provenance") or {}).get("data") or {}
    dataset = data.get("id") if data.get("kind") == "hub" else None
    configs = {((run.get("provenance") or {}).get("data") or {}).get("config") for run in matching}
    return CardScores(scores=scores, source="; ".join(described), dataset=dataset,
                      config=configs.pop() if len(configs) == 1 else None)
