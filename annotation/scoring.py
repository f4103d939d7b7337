"""``medlama annotate score``: the experts' ratings against the UMLS gold answers, per run and rater.

For each run and rater, over the run's own top-k predictions of the sheet's queries (k the sheet's):

* ``confusion``: Figure 8, gold (a UMLS answer, by the run's own answer matching) or not x the level given;
* ``acc``: acc@c (c = 1, 5 and k, those up to k) as the paper counts it in section 5.3 (13/150 = 8.67%): the
  share of the top-c prediction slots of the sampled queries (queries x c) that hold a correct answer: under
  ``umls`` a gold answer, under ``expert`` a prediction rated at least the threshold; with the percentile
  bootstrap interval of each and of their difference, queries resampled (the same resamples for both: paired),
  and McNemar's exact test of the predictions on which the two disagree (``umls_only``: gold but rated below
  the threshold; ``expert_only``: rated correct but not gold);
* ``acc_queries``: acc@c as ``medlama probe`` counts it, the share of queries with a correct answer in their
  top c, under both, with the paired difference (:func:`medlama.analysis.statistics.paired_difference`);
* ``umls_below_threshold``: the gold answers the rater rated below the threshold, and ``expert_not_umls``: the
  predictions rated at or above it that are not gold.

``agreement`` over every prediction of the sheet: quadratic-weighted Cohen's kappa (scikit-learn) for two
raters, ordinal Krippendorff's alpha (the ``krippendorff`` package) for more; none for one rater. Runs must be
the very files the sheet was made from (the SHA-256 its manifest records).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from medlama.annotation.ratings import RaterRatings, read_ratings
from medlama.annotation.sheet import LEVELS, Sheet, read_manifest
from medlama.core.errors import MedlamaInputError
from medlama.core.intervals import bootstrap_mean_ci
from medlama.core.provenance import package_versions, provenance
from medlama.core.settings import Checked, setting
from medlama.metrics import load as load_metric
from medlama.analysis.comparison import CompareSettings, input_record
from medlama.analysis.runs import Run, load_runs
from medlama.analysis.statistics import mcnemar_exact, paired_difference


@dataclass(frozen=True)
class ScoreSettings(Checked):
    """What counts as correct under the experts' answers."""

    threshold: int = setting(5, min=min(LEVELS), max=max(LEVELS),
                             help="a prediction rated at least this level counts as correct under the experts' answers")


@dataclass
class RunOnSheet:
    """A run's top-k of each sheet query: ``predictions`` (per query, in rank order) and whether each is gold."""

    label: str
    predictions: list[list[str]]
    gold: list[list[bool]]


def cutoffs(k: int) -> list[int]:
    """The cut-offs scored: 1, 5 and ``k``, those up to ``k``."""
    return sorted({c for c in (1, 5) if c < k} | {k})


def run_on_sheet(run: Run, sheet: Sheet) -> RunOnSheet:
    """``run``'s top-k of the sheet's queries, each prediction marked gold by the run's own answer matching (the
    acc@k module, each prediction scored alone against its query's gold answers)."""
    rows = {qid: i for i, qid in enumerate(run.ids)}
    predictions = []
    for query in sheet.queries:
        if query.id not in rows:
            raise MedlamaInputError(f"run {run.label!r} has no query {query.id!r} of the sheet", file=run.folder)
        top = run.predictions[rows[query.id]][:sheet.k]
        shown = set(query.predictions)
        for name in top:
            if name not in shown:
                raise MedlamaInputError(f"run {run.label!r}: query {query.id!r}'s prediction {name!r} is not on the "
                                        "sheet: the run is not one the sheet was made from", file=run.folder)
        predictions.append(top)
    flat = [(name, run.gold[rows[query.id]]) for query, top in zip(sheet.queries, predictions) for name in top]
    match = (run.record.get("metrics") or {}).get("match", "exact")
    groups = [str(i) for i in range(len(flat))]
    scored = load_metric("acc_at_k").compute(predictions=[[name] for name, _ in flat],
                                             references=[gold for _, gold in flat], groups=groups, k=[1], match=match)
    is_gold = iter(scored["groups"][g]["acc@1"] == 1.0 for g in groups)
    return RunOnSheet(run.label, predictions, [[next(is_gold) for _ in top] for top in predictions])


def _pct(interval) -> list[float] | None:
    return [100 * interval[0], 100 * interval[1]] if interval else None


def score_rater(run: RunOnSheet, sheet: Sheet, rater: RaterRatings, settings: ScoreSettings,
                intervals: CompareSettings) -> dict:
    """One run and rater's record (module docstring); every acc and interval in percent."""
    options = {"resamples": intervals.resamples, "seed": intervals.seed, "level": intervals.level}
    levels = [[rater.ratings[(query.id, name)] for name in top] for query, top in zip(sheet.queries, run.predictions)]
    confusion = {"gold": {str(level): 0 for level in sorted(LEVELS)}, "not_gold": {str(level): 0 for level in sorted(LEVELS)}}
    below, found = [], []
    for query, top, gold, given in zip(sheet.queries, run.predictions, run.gold, levels):
        for rank, (name, is_gold, level) in enumerate(zip(top, gold, given), start=1):
            confusion["gold" if is_gold else "not_gold"][str(level)] += 1
            entry = {"query_id": query.id, "query": query.text, "prediction": name, "rank": rank, "rating": level}
            if is_gold and level < settings.threshold:
                below.append(entry)
            elif not is_gold and level >= settings.threshold:
                found.append(entry)
    record: dict = {"predictions": sum(map(len, run.predictions)), "confusion": confusion,
                    "acc": {"umls": {}, "expert": {}}, "acc_interval": {"umls": {}, "expert": {}},
                    "umls_vs_expert": {}, "acc_queries": {"umls": {}, "expert": {}},
                    "acc_queries_interval": {"umls": {}, "expert": {}}, "queries_umls_vs_expert": {}}
    for c in cutoffs(sheet.k):
        umls = np.array([sum(gold[:c]) / c for gold in run.gold])
        expert = np.array([sum(level >= settings.threshold for level in given[:c]) / c for given in levels])
        umls_only = sum(g and l < settings.threshold for gold, given in zip(run.gold, levels)
                        for g, l in zip(gold[:c], given[:c]))
        expert_only = sum(not g and l >= settings.threshold for gold, given in zip(run.gold, levels)
                          for g, l in zip(gold[:c], given[:c]))
        key = str(c)
        for name, values in (("umls", umls), ("expert", expert)):
            record["acc"][name][key] = 100 * float(values.mean())
            record["acc_interval"][name][key] = _pct(bootstrap_mean_ci(values, **options))
        record["umls_vs_expert"][key] = {
            "difference": 100 * float((expert - umls).mean()),
            "interval": _pct(bootstrap_mean_ci(expert - umls, **options)),
            "umls_only": int(umls_only), "expert_only": int(expert_only),
            "p_value": mcnemar_exact(int(umls_only), int(expert_only)),
            # Slots of one query are not independent: the p-value is the slot-level test the paper's counts
            # invite; the interval (queries resampled) is the one that respects the pairing
            "test": "McNemar's exact test over the top-k prediction slots (treats a query's slots as independent, "
                    "so it is optimistic); the interval resamples queries (paired bootstrap)"}
        hits_umls, hits_expert = umls > 0, expert > 0
        for name, hits in (("umls", hits_umls), ("expert", hits_expert)):
            record["acc_queries"][name][key] = 100 * float(hits.mean())
            record["acc_queries_interval"][name][key] = _pct(bootstrap_mean_ci(hits.astype(float), **options))
        paired = paired_difference(hits_umls, hits_expert, **options)
        record["queries_umls_vs_expert"][key] = {
            "difference": 100 * paired.difference, "interval": _pct(paired.interval), "umls_only": paired.b,
            "expert_only": paired.c, "p_value": paired.p_value}
    record["umls_below_threshold"] = below
    record["expert_not_umls"] = found
    return record


def agreement(raters: Sequence[RaterRatings], sheet: Sheet) -> dict:
    """Inter-rater agreement over every prediction of the sheet (module docstring)."""
    pairs = [(query.id, name) for _, query, name in sheet.items()]
    names = [rater.rater for rater in raters]
    if len(raters) < 2:
        return {"raters": names, "items": len(pairs), "measure": None, "value": None,
                "note": "one rater: no agreement to measure"}
    table = np.array([[rater.ratings[pair] for pair in pairs] for rater in raters])
    with warnings.catch_warnings():  # no variation at all gives 0/0: reported as null with a note, not a warning
        warnings.simplefilter("ignore", RuntimeWarning)
        if len(raters) == 2:
            # scikit-learn loads when two raters are compared, not when the CLI parses its flags
            from sklearn.metrics import cohen_kappa_score

            measure, key = "Cohen's kappa, quadratic weights (scikit-learn)", "kappa"
            value = cohen_kappa_score(table[0], table[1], weights="quadratic", labels=sorted(LEVELS))
        else:
            # krippendorff loads when three or more raters are compared
            import krippendorff

            measure, key = "Krippendorff's alpha, ordinal (krippendorff)", "alpha"
            try:
                value = krippendorff.alpha(reliability_data=table.astype(float), level_of_measurement="ordinal",
                                           value_domain=sorted(LEVELS))
            except (ValueError, ZeroDivisionError):
                value = float("nan")
    value = float(value)
    record = {"raters": names, "items": len(pairs), "measure": measure, key: None if math.isnan(value) else value}
    record["value"] = record[key]
    if record[key] is None:
        record["note"] = "undefined: the ratings do not vary"
    return record


def check_runs(runs: Sequence[Run], manifest: dict, sheet_folder: Path) -> None:
    """Each run must be one the sheet was made from, its files unchanged since (their SHA-256)."""
    entries = [entry for entry in manifest.get("runs") or [] if isinstance(entry, dict)]
    made_from = {entry.get("label"): entry for entry in entries}
    for run in runs:
        # by its label, or (a label prefixed by its folder's name when exported beside a namesake) its own
        # label and folder's name
        entry = made_from.get(run.label) or next((e for e in entries if (e.get("run"), e.get("folder")) == (
            run.record.get("label"), run.folder.resolve().name)), None)
        if entry is None:
            raise MedlamaInputError(f"run {run.label!r} ({run.folder}) is not one the sheet was made from (its runs: "
                                    f"{', '.join(map(str, made_from)) or 'none'})", file=sheet_folder)
        now = input_record(run)
        for key in ("results_sha256", "predictions_sha256"):
            if now[key] != entry.get(key):
                raise MedlamaInputError(f"run {run.label!r}: its files differ from those the sheet was made from "
                                        f"({key.split('_')[0]} SHA-256 {now[key][:12]} vs {str(entry.get(key))[:12]})",
                                        file=run.folder)


def read_rated(folders: Sequence[str | Path], sheet_folder: str | Path, ratings: Sequence[str | Path], *,
               purpose: str) -> tuple[Sheet, dict, list[RaterRatings], list[Run]]:
    """A rated sheet as ``annotate score`` and ``annotate estimate`` read it: the sheet and its manifest, one
    ratings file per rater (two of one rater refused), and the runs it was made from, checked to be them."""
    if not ratings:
        raise MedlamaInputError("no ratings: give one file per rater after the sheet (--sheet SHEET RATINGS...)")
    sheet, manifest = read_manifest(sheet_folder)
    raters = [read_ratings(file, sheet) for file in ratings]
    names = [rater.rater for rater in raters]
    for rater in raters:
        if names.count(rater.rater) > 1:
            raise MedlamaInputError(f"two ratings files are of the rater {rater.rater!r}; name each file (or the page's "
                                    "rater field) for its rater", file=rater.file)
    runs = load_runs(folders, at_least=1, purpose=purpose)
    check_runs(runs, manifest, Path(sheet_folder))
    return sheet, manifest, raters, runs


def score_sheet(folders: Sequence[str | Path], sheet_folder: str | Path, ratings: Sequence[str | Path],
                settings: ScoreSettings = ScoreSettings(), intervals: CompareSettings = CompareSettings(), *,
                argv: Sequence[str] | None = None) -> dict:
    """What ``medlama annotate score`` computes (module docstring): ``runs`` maps each run's label to its record
    per rater, ``agreement`` the raters' agreement."""
    sheet, manifest, raters, runs = read_rated(folders, sheet_folder, ratings, purpose="scoring a sheet")
    on_sheet = [run_on_sheet(run, sheet) for run in runs]
    return {
        "sheet": sheet.id, "k": sheet.k, "ks": cutoffs(sheet.k), "threshold": settings.threshold,
        "queries": len(sheet.queries), "raters": [rater.rater for rater in raters],
        "runs": {run.label: {rater.rater: score_rater(run, sheet, rater, settings, intervals) for rater in raters}
                 for run in on_sheet},
        "agreement": agreement(raters, sheet),
        "method": {"intervals": {"resamples": intervals.resamples, "seed": intervals.seed, "level": intervals.level,
                                 "kind": "percentile bootstrap over the sheet's queries, paired (the same resamples "
                                         "for UMLS and expert)"},
                   "acc": "share of the top-k prediction slots (queries x k) holding a correct answer, as the paper's "
                          "section 5.3 counts acc@10 (13/150)",
                   "acc_queries": "share of queries with a correct answer in their top k (medlama probe's acc@k)",
                   "test": "McNemar's exact test of the discordant predictions (acc) or queries (acc_queries)",
                   "agreement": {"kappa": "sklearn.metrics.cohen_kappa_score(weights='quadratic')",
                                 "alpha": "krippendorff.alpha(level_of_measurement='ordinal')",
                                 "versions": package_versions(("scikit-learn", "krippendorff"))}},
        "inputs": {"runs": [input_record(run) for run in runs], "ratings": [rater.record() for rater in raters]},
        "provenance": provenance(argv=argv),
    }
