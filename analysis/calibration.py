"""Calibration in ``medlama compare``: each run's Brier score and ECE of its top-1 prediction
(:mod:`medlama.runs.calibration`) with their bootstrap intervals, and the paired difference ``run - baseline``.

* Each query's confidence is the ``confidence`` of its ``predictions.jsonl`` row (the softmax over its scored
  pool at the top-1 candidate), its outcome the row's ``hit@1`` (checked against its predictions when the
  run was read: :func:`medlama.analysis.runs.load_runs`). A confidence that is not a probability is refused,
  naming the file, the run and the query.
* A paired comparison is over the queries both runs give a confidence (all of them, for methods that score
  the pool). The Brier score is a mean over queries, so its difference's interval is the percentile bootstrap
  of the per-query differences, as acc@k's (:func:`medlama.core.intervals.bootstrap_mean_ci`); the ECE is not
  a mean, so each resample of the queries (the same indices for both runs, seeded) is binned again and the
  interval is the percentiles of the resampled differences.
* A run whose method scores no pool (its ``results.json`` says why) has no calibration: its entry and its
  comparisons record the reason instead of a number.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from medlama.core.errors import MedlamaInputError
from medlama.core.intervals import bootstrap_mean_ci
from medlama.analysis.runs import Run
from medlama.runs.calibration import BINS, METHOD, bin_of
from medlama.runs.outputs import PREDICTIONS_FILE

#: How the comparison's calibration numbers are computed, recorded beside them.
COMPARE_METHOD = {**METHOD, "difference": "run minus baseline (the first run) on the queries both give a confidence; "
                                          "Brier: percentile bootstrap of the per-query differences; ECE: the same "
                                          "resamples of the queries binned again for both runs (paired bootstrap)"}


def confidences_of(run: Run) -> dict[str, tuple[float, bool]] | str:
    """``{query id: (confidence, hit@1)}`` of ``run``'s rows that have a confidence, or why it has none."""
    absent = ((run.record.get("calibration") or {}).get("absent"))
    if absent:
        return absent
    if 1 not in run.hits:
        return "acc@1 was not scored (the outcome of the top-1 prediction)"
    out = {}
    for row, hit in zip(run.rows, run.hits[1]):
        value = row.get("confidence")
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1 \
                or not math.isfinite(value):
            raise MedlamaInputError(f"run {run.label!r}: query {row.get('id')!r} has confidence {value!r}; a "
                                    "confidence is a probability in [0, 1]", file=run.folder / PREDICTIONS_FILE)
        out[str(row["id"])] = (float(value), bool(hit))
    return out or "no query has a confidence (the run was written before calibration was recorded)"


def _ece(errors: np.ndarray, bins: np.ndarray, n: int) -> float:
    """ECE from each query's ``hit - confidence`` and bin: ``sum over bins |sum of the bin's errors| / n``."""
    return float(np.abs(np.bincount(bins, weights=errors, minlength=BINS)).sum() / n)


def _resampled_eces(errors: Sequence[np.ndarray], bins: Sequence[np.ndarray], resamples: int, seed: int) -> np.ndarray:
    """``(resamples, len(errors))``: each run's ECE on the same resamples of the queries."""
    n = len(errors[0])
    rng = np.random.default_rng(seed)
    out = np.empty((resamples, len(errors)))
    for r in range(resamples):
        picks = rng.integers(0, n, size=n)
        out[r] = [_ece(e[picks], b[picks], n) for e, b in zip(errors, bins)]
    return out


def _interval(values: np.ndarray, level: float) -> list[float]:
    low, high = np.percentile(values, [100 * (1 - level) / 2, 100 * (1 + level) / 2])
    return [float(low), float(high)]


def _scores(found: dict[str, tuple[float, bool]], ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Per query of ``ids``: its squared error (Brier term) and ``hit - confidence`` (ECE term), and its bin."""
    conf = np.array([found[q][0] for q in ids], dtype=np.float64)
    hits = np.array([found[q][1] for q in ids], dtype=np.float64)
    return (conf - hits) ** 2, hits - conf, bin_of(conf)


def compare_calibration(runs: Sequence[Run], *, resamples: int, seed: int, level: float) -> dict[str, Any]:
    """``{"leaderboard": [...], "comparisons": [...], "method": ...}``: each run's Brier and ECE (``value``,
    ``interval``) or ``absent``; each later run's paired difference from the first (module docstring)."""
    found = {run.label: confidences_of(run) for run in runs}
    leaderboard = []
    for run in runs:
        mine = found[run.label]
        if isinstance(mine, str):
            leaderboard.append({"label": run.label, "absent": mine})
            continue
        ids = sorted(mine)
        squared, errors, bins = _scores(mine, ids)
        eces = _resampled_eces([errors], [bins], resamples, seed)[:, 0] if len(ids) > 1 else None
        leaderboard.append({"label": run.label, "queries": len(ids),
                            "brier": {"value": float(squared.mean()),
                                      "interval": list(ci) if (ci := bootstrap_mean_ci(
                                          squared, resamples=resamples, seed=seed, level=level)) else None},
                            "ece": {"value": _ece(errors, bins, len(ids)),
                                    "interval": _interval(eces, level) if eces is not None else None}})
    comparisons = []
    base = runs[0]
    for run in runs[1:]:
        entry: dict[str, Any] = {"baseline": base.label, "run": run.label}
        a, b = found[base.label], found[run.label]
        if isinstance(a, str) or isinstance(b, str):
            entry["absent"] = f"{base.label if isinstance(a, str) else run.label}: {a if isinstance(a, str) else b}"
            comparisons.append(entry)
            continue
        ids = sorted(set(a) & set(b))
        (sq_a, err_a, bin_a), (sq_b, err_b, bin_b) = _scores(a, ids), _scores(b, ids)
        delta = sq_b - sq_a
        brier_ci = bootstrap_mean_ci(delta, resamples=resamples, seed=seed, level=level)
        entry["queries"] = len(ids)
        entry["brier"] = {"difference": float(delta.mean()) if len(ids) else 0.0,
                          "interval": list(brier_ci) if brier_ci else None}
        difference = _ece(err_b, bin_b, len(ids)) - _ece(err_a, bin_a, len(ids)) if ids else 0.0
        eces = _resampled_eces([err_a, err_b], [bin_a, bin_b], resamples, seed) if len(ids) > 1 else None
        entry["ece"] = {"difference": difference,
                        "interval": _interval(eces[:, 1] - eces[:, 0], level) if eces is not None else None}
        comparisons.append(entry)
    return {"leaderboard": leaderboard, "comparisons": comparisons, "method": COMPARE_METHOD}


def calibration_tables(record: dict, table: Any) -> list:
    """``medlama compare``'s calibration tables (``table``: the report's table type): each run's Brier and ECE
    with intervals, and the paired differences from the baseline; none when no run has a calibration (the
    record says why of each)."""
    calibration = record.get("calibration")
    if not calibration or all("absent" in entry for entry in calibration["leaderboard"]):
        return []
    level = f"{100 * record['method']['settings']['level']:g}%"

    def cell(entry: dict, signed: bool = False) -> str:
        value = entry.get("value", entry.get("difference"))
        text = f"{value:+.4f}" if signed else f"{value:.4f}"
        interval = entry.get("interval")
        return text if not interval else f"{text} [{interval[0]:.4f}, {interval[1]:.4f}]"

    out = [table("Calibration of the top-1 prediction", ["run", "queries", "Brier", "ECE", "note"],
                 [[e["label"], "-", "-", "-", e["absent"]] if "absent" in e else
                  [e["label"], e["queries"], cell(e["brier"]), cell(e["ece"]), ""] for e in calibration["leaderboard"]],
                 f"confidence: softmax over the pool's scores; Brier: top-1 binary form; ECE: {BINS} equal-width "
                 f"bins; [{level} bootstrap interval]")]
    if calibration["comparisons"]:
        out.append(table(f"Calibration: difference from {calibration['comparisons'][0]['baseline']}",
                         ["run", "queries", "Δ Brier", "Δ ECE", "note"],
                         [[c["run"], "-", "-", "-", c["absent"]] if "absent" in c else
                          [c["run"], c["queries"], cell(c["brier"], True), cell(c["ece"], True), ""]
                          for c in calibration["comparisons"]],
                         f"run minus baseline on the same queries (lower is better calibrated); [{level} paired "
                         "bootstrap interval]"))
    return out
