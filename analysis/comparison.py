"""The comparison ``medlama compare`` prints: leaderboard, paired differences and per-relation tests.

* :func:`compare_runs`: for every cut-off k the runs share, the leaderboard (each run's micro acc@k with its
  percentile-bootstrap interval, the same as its ``results.json`` ``intervals``, and macro acc@k with the
  stratified interval) and, for every run after the first (the baseline; a run probed with a template: the
  first run of the same template, if any: :func:`baseline_of`), the paired difference ``run - baseline`` in
  micro and macro acc@k with its interval and McNemar's exact p-value, and per relation with Holm-corrected
  p-values across the relations (:mod:`medlama.analysis.statistics`). The method, resamples, seed and level
  are recorded beside the numbers.
* :func:`compare_folders`: what ``medlama compare`` runs: the above for every run of the folders given
  (:func:`medlama.analysis.runs.load_runs`), with each input recorded by its folder's name, its files'
  SHA-256 and what it probed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from medlama.core.checksums import sha256_of
from medlama.core.errors import MedlamaInputError
from medlama.core.intervals import bootstrap_macro_ci, bootstrap_mean_ci
from medlama.core.provenance import provenance
from medlama.runs.outputs import PREDICTIONS_FILE, RESULTS_FILE
from medlama.analysis.runs import Run, check_comparable, load_runs
from medlama.analysis.statistics import IntervalSettings, holm, paired_difference
from medlama.analysis.calibration import compare_calibration


@dataclass(frozen=True)
class CompareSettings(IntervalSettings):
    """How ``medlama compare`` computes its intervals (recorded in its JSON): the queries resampled."""


def _aligned(run: Run, order: dict[str, int], k: int) -> np.ndarray:
    """``run``'s hits at k in the first run's query order."""
    hits = np.empty(len(order), dtype=bool)
    hits[[order[qid] for qid in run.ids]] = run.hits[k]
    return hits


def compare_runs(runs: Sequence[Run], settings: CompareSettings = CompareSettings()) -> dict:
    """The comparison's record (module docstring): ``ks``, ``leaderboard``, ``comparisons``, ``method``."""
    check_comparable(runs)
    ks = sorted(set.intersection(*(set(run.ks) for run in runs)))
    if not ks:
        raise MedlamaInputError("the runs share no scored cut-off k: " + "; ".join(
            f"{run.label}: {run.ks}" for run in runs))
    options = {"resamples": settings.resamples, "seed": settings.seed, "level": settings.level}
    base = runs[0]
    order = {qid: i for i, qid in enumerate(base.ids)}
    relations = np.asarray(base.relations, dtype=object)
    names = sorted(set(base.relations))
    hits = {run.label: {k: _aligned(run, order, k) for k in ks} for run in runs}
    leaderboard = []
    for run in runs:
        entry: dict[str, Any] = {"label": run.label}
        for k in ks:
            h = hits[run.label][k].astype(np.float64)
            ci = bootstrap_mean_ci(h, **options)
            entry[f"acc@{k}"] = {"value": float(h.mean()), "interval": list(ci) if ci else None}
            macro_ci = bootstrap_macro_ci(h, relations, **options)
            entry[f"acc@{k}_macro"] = {"value": float(np.mean([h[relations == r].mean() for r in names])),
                                       "interval": list(macro_ci) if macro_ci else None}
        leaderboard.append(entry)
    comparisons = []
    for at, run in enumerate(runs[1:], start=1):
        baseline = baseline_of(runs[:at], run)
        a, b = hits[baseline.label], hits[run.label]
        entry = {"baseline": baseline.label, "run": run.label, "per_relation": {r: {} for r in names}}
        if any(template_of(r) for r in runs):
            entry["templates"] = {"baseline": template_of(baseline), "run": template_of(run)}
        for k in ks:
            entry[f"acc@{k}"] = paired_difference(a[k], b[k], **options).to_json()
            entry[f"acc@{k}_macro"] = paired_difference(a[k], b[k], groups=relations, **options).to_json()
            per = {r: paired_difference(a[k][relations == r], b[k][relations == r], **options).to_json()
                   for r in names}
            for r, adjusted in zip(names, holm([per[r]["p_value"] for r in names])):
                entry["per_relation"][r][f"acc@{k}"] = {**per[r], "p_holm": adjusted}
        comparisons.append(entry)
    return {"ks": ks, "queries": len(base.ids), "relations": {r: int((relations == r).sum()) for r in names},
            "leaderboard": leaderboard, "comparisons": comparisons, "method": method_record(settings),
            "calibration": compare_calibration(runs, **options)}  # Brier and ECE (medlama.analysis.calibration)


def template_of(run: Run) -> dict | None:
    """The template a run was probed with (its ``data["template"]``: the set's name and SHA-256, and the
    template's name: ``T1``, ``human_prompt``, ``ensemble``), or ``None`` for a run of the plain prompt column."""
    template = run.data.get("template")
    return {key: template.get(key) for key in ("set", "sha256", "name")} if isinstance(template, dict) else None


def _template_key(run: Run) -> tuple | None:
    template = run.data.get("template")
    return (template.get("sha256"), template.get("name")) if isinstance(template, dict) else None


def baseline_of(earlier: Sequence[Run], run: Run) -> Run:
    """The run ``run`` is paired with: the first of the ``earlier`` runs probed with its template (the same
    template of the same set: two models' ``T2`` are paired with each other, never with another template),
    else the first run (a run of a template no earlier run has: the difference is the template's, and the
    comparison records both templates)."""
    key = _template_key(run)
    return next((other for other in earlier if _template_key(other) == key), earlier[0])


def method_record(settings: CompareSettings) -> dict:
    """How the numbers were computed, recorded beside them."""
    return {
        "settings": {"resamples": settings.resamples, "seed": settings.seed, "level": settings.level},
        "interval": "percentile bootstrap over queries, seeded; micro: all queries resampled together; macro: "
                    "stratified (each relation's queries resampled within it)",
        "difference": "run minus baseline (the first run; for a run probed with a template, the first run of the "
                      "same template, if any), paired: both runs scored on the same resampled queries",
        "test": "McNemar's exact test: two-sided binomial test of the discordant queries (baseline-only hits "
                "a_only, run-only hits b_only) with p = 1/2",
        "correction": "Holm's step-down correction across the relations, per comparison and k (p_holm)",
    }


def input_record(run: Run) -> dict:
    """What identifies a compared run's input: its folder's name, its files' SHA-256, and what it probed."""
    provenance = run.record.get("provenance") or {}
    return {"label": run.label, "run": run.record.get("label"), "folder": run.folder.resolve().name,
            "results_sha256": sha256_of(run.folder / RESULTS_FILE),
            "predictions_sha256": sha256_of(run.folder / PREDICTIONS_FILE),
            "settings": run.record.get("settings"), "model": provenance.get("model"), "date": provenance.get("date"),
            "data": run.data}


def compare_folders(folders: Sequence[str | Path], settings: CompareSettings = CompareSettings(), *,
                    argv: Sequence[str] | None = None) -> dict:
    """What ``medlama compare FOLDER ...`` computes: :func:`compare_runs` of every run of ``folders``
    (:func:`load_runs`), with each input's record (:func:`input_record`) and the comparison's own provenance."""
    runs = load_runs(folders)
    record = compare_runs(runs, settings)
    record["inputs"] = [input_record(run) for run in runs]
    record["provenance"] = provenance(argv=argv)
    return record
