"""``medlama annotate estimate``: the whole run's expert-judged acc@k, estimated from a rated sample by
prediction-powered inference (Angelopoulos et al., Science 2023).

Per run, rater and cut-off c (1, 5 and the sheet's k, those up to k), over the N queries the sheet was drawn
from (the run's queries of the sheet's relations):

* the prediction ``f_i``: the query's UMLS hit@c (a gold answer among its top c, by the run's matching), known
  for every query;
* the label ``Y_i``, on the rated queries only: the expert hit@c (a prediction of the run's top c rated at
  least the threshold); the rectifier ``Y_i - f_i`` corrects the UMLS answers' error.

``stratified`` sheets (the default design, :mod:`medlama.annotation.design`): per relation h (N_h queries,
n_h rated, weight w_h = N_h / N), PPI's mean estimate ``theta_h = mean_{N_h}(f) + mean_{n_h}(Y - f)`` and its
variance ``var_{N_h}(f) / N_h + var_{n_h}(Y - f) / n_h`` (variances with divisor n, as PPI's); the estimate is
``sum_h w_h theta_h`` with variance ``sum_h w_h^2 var_h``. With one relation this is PPI's mean exactly
(``ppi_py.ppi_mean_ci(..., lam=1)``). Every relation needs two rated queries or more.

``uncertainty`` sheets (queries drawn with unequal probabilities pi_i, recorded in the manifest): the
rectifier's mean is the Horvitz-Thompson estimate ``(1/N) sum_rated (Y_i - f_i) / pi_i``, its variance the
with-replacement (Hansen-Hurwitz) estimate ``var_rated(z) / n`` of ``z_i = n (Y_i - f_i) / (N pi_i)`` (divisor
n - 1; conservative for a draw without replacement), beside ``var_N(f) / N``.

The interval is the CLT's, ``estimate -/+ z_{(1+level)/2} * se``, cut to [0, 1] (where the expert acc@k
lies; the cut keeps the coverage). The record holds the method, design, N and n, the level, and each ratings
file's SHA-256 (its fingerprint). Coverage at the stated level is checked by simulation in the tests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist

import numpy as np

from medlama.analysis.comparison import input_record
from medlama.analysis.runs import Run
from medlama.annotation.ratings import RaterRatings
from medlama.annotation.scoring import ScoreSettings, cutoffs, read_rated, run_on_sheet
from medlama.annotation.sheet import Sheet
from medlama.core.errors import MedlamaInputError
from medlama.core.intervals import DEFAULT_LEVEL
from medlama.core.provenance import provenance
from medlama.core.settings import Checked, setting
from medlama.metrics import load as load_metric

METHOD = "prediction-powered inference (Angelopoulos et al. 2023): the mean estimate and its CLT interval"


@dataclass(frozen=True)
class EstimateSettings(Checked):
    """The estimate's confidence level."""

    level: float = setting(DEFAULT_LEVEL, min=0.5, max=0.999, help="confidence level of the CLT intervals")


@dataclass(frozen=True)
class EstimateOutput(Checked):
    """How ``medlama annotate estimate`` shows its record."""

    json: bool = setting(False, switch=True, help="print the record as JSON instead of the table")


@dataclass(frozen=True)
class Estimate:
    """A PPI estimate: its value, standard error, interval and the parts it came from."""

    value: float
    se: float
    interval: tuple[float, float]
    predicted: float
    rectifier: float

    def to_json(self) -> dict:
        return {"value": self.value, "se": self.se, "interval": list(self.interval),
                "umls_mean": self.predicted, "rectifier": self.rectifier}


def _interval(value: float, se: float, level: float) -> tuple[float, float]:
    z = NormalDist().inv_cdf((1 + level) / 2)
    return max(0.0, value - z * se), min(1.0, value + z * se)


def stratified_estimate(f: np.ndarray, strata: Sequence[str], rated: Sequence[int], y: np.ndarray,
                        level: float = DEFAULT_LEVEL) -> Estimate:
    """PPI by relation (module docstring): ``f`` every query's prediction, ``strata`` its relation, ``rated``
    the positions of the rated queries and ``y`` their labels."""
    f, y = np.asarray(f, dtype=np.float64), np.asarray(y, dtype=np.float64)
    labels = np.asarray(list(strata), dtype=object)
    rated = np.asarray(rated, dtype=int)
    value = variance = predicted = rectifier = 0.0
    for name in sorted(set(labels.tolist())):
        members = labels == name
        in_sample = members[rated]
        n_h = int(in_sample.sum())
        if n_h < 2:
            raise MedlamaInputError(f"relation {name!r}: {n_h} rated quer{'y' if n_h == 1 else 'ies'} of "
                                    f"{int(members.sum())}; the stratified estimate needs 2 or more in every "
                                    "relation (export more queries, or fewer relations with --relations)")
        w = members.sum() / len(f)
        delta = y[in_sample] - f[rated[in_sample]]
        predicted += w * f[members].mean()
        rectifier += w * delta.mean()
        variance += w ** 2 * (f[members].var() / members.sum() + delta.var() / n_h)
    value = predicted + rectifier
    se = math.sqrt(variance)
    return Estimate(value, se, _interval(value, se, level), predicted, rectifier)


def weighted_estimate(f: np.ndarray, rated: Sequence[int], y: np.ndarray, pi: Sequence[float],
                      level: float = DEFAULT_LEVEL) -> Estimate:
    """PPI with the rated queries drawn with probabilities ``pi`` (module docstring)."""
    f, y, pi = (np.asarray(a, dtype=np.float64) for a in (f, y, pi))
    rated = np.asarray(rated, dtype=int)
    n, N = len(rated), len(f)
    if n < 2:
        raise MedlamaInputError(f"{n} rated query: the estimate needs 2 or more")
    z = n * (y - f[rated]) / (N * pi)
    predicted, rectifier = float(f.mean()), float(z.mean())
    value = predicted + rectifier
    se = math.sqrt(f.var() / N + z.var(ddof=1) / n)
    return Estimate(value, se, _interval(value, se, level), predicted, rectifier)


def _design(manifest: dict, run: Run, sheet: Sheet) -> tuple[str, list[int], list[float] | None]:
    """The sheet's design, the eligible queries of ``run`` (by index) and the rated queries' probabilities."""
    sampling = manifest.get("sampling") or {}
    strategy = sampling.get("strategy", "stratified")  # sheets of before the strategies were stratified
    relations = set(sampling.get("relations") or run.relations)
    eligible = [i for i, relation in enumerate(run.relations) if relation in relations]
    population = sampling.get("population")
    if population is not None and population != len(eligible):
        raise MedlamaInputError(f"run {run.label!r} has {len(eligible)} queries of the sheet's relations but the "
                                f"sheet was drawn from {population}", file=run.folder)
    if strategy == "stratified":
        return strategy, eligible, None
    pi = sampling.get("inclusion")
    if strategy != "uncertainty" or not isinstance(pi, list) or len(pi) != len(sheet.queries):
        raise MedlamaInputError(f"the sheet's design {strategy!r} records no inclusion probability per query",
                                file=run.folder)
    return strategy, eligible, [float(p) for p in pi]


def _umls_hits(run: Run, eligible: Sequence[int], ks: Sequence[int]) -> dict[int, np.ndarray]:
    """Every eligible query's UMLS hit@c, by the acc@k module with the run's matching."""
    groups = [str(i) for i in range(len(eligible))]
    scored = load_metric("acc_at_k").compute(
        predictions=[run.predictions[i] for i in eligible], references=[run.gold[i] for i in eligible],
        groups=groups, k=list(ks), match=(run.record.get("metrics") or {}).get("match", "exact"))
    return {c: np.array([scored["groups"][g][f"acc@{c}"] == 1.0 for g in groups]) for c in ks}


def estimate_rater(run: Run, sheet: Sheet, manifest: dict, rater: RaterRatings, settings: ScoreSettings,
                   estimate: EstimateSettings) -> dict:
    """One run and rater's estimate at every cut-off (module docstring)."""
    strategy, eligible, pi = _design(manifest, run, sheet)
    position = {run.ids[i]: p for p, i in enumerate(eligible)}
    rated = []
    for query in sheet.queries:
        if query.id not in position:
            raise MedlamaInputError(f"run {run.label!r}: the sheet's query {query.id!r} is not among its queries "
                                    "of the sheet's relations", file=run.folder)
        rated.append(position[query.id])
    on_sheet = run_on_sheet(run, sheet)
    ks = cutoffs(sheet.k)
    umls = _umls_hits(run, eligible, ks)
    out = {}
    for c in ks:
        y = np.array([any(rater.ratings[(query.id, name)] >= settings.threshold for name in top[:c])
                      for query, top in zip(sheet.queries, on_sheet.predictions)], dtype=np.float64)
        if strategy == "stratified":
            found = stratified_estimate(umls[c], [run.relations[i] for i in eligible], rated, y, estimate.level)
        else:
            found = weighted_estimate(umls[c], rated, y, pi, estimate.level)
        out[str(c)] = {**found.to_json(), "umls_whole_run": float(umls[c].mean()),
                       "expert_on_sample": float(y.mean()), "umls_on_sample": float(umls[c][rated].mean())}
    return {"design": strategy, "population": len(eligible), "rated": len(rated), "acc": out}


def estimate_sheet(folders: Sequence[str | Path], sheet_folder: str | Path, ratings: Sequence[str | Path],
                   settings: ScoreSettings = ScoreSettings(), estimate: EstimateSettings = EstimateSettings(), *,
                   argv: Sequence[str] | None = None) -> dict:
    """What ``medlama annotate estimate`` computes (module docstring): ``runs`` maps each run's label to its
    estimates per rater."""
    sheet, manifest, raters, runs = read_rated(folders, sheet_folder, ratings, purpose="an estimate")
    return {
        "sheet": sheet.id, "k": sheet.k, "ks": cutoffs(sheet.k), "threshold": settings.threshold,
        "queries": len(sheet.queries), "raters": [rater.rater for rater in raters], "level": estimate.level,
        "runs": {run.label: {rater.rater: estimate_rater(run, sheet, manifest, rater, settings, estimate)
                             for rater in raters} for run in runs},
        "method": {"estimate": METHOD, "design": (manifest.get("sampling") or {}).get("strategy", "stratified"),
                   "prediction": "the query's UMLS hit@k (every query of the run)",
                   "label": f"the expert hit@k: a top-k prediction rated at least {settings.threshold}",
                   "stratified": "per relation, weighted by its share of the queries",
                   "uncertainty": "Horvitz-Thompson rectifier with the recorded inclusion probabilities, "
                                  "Hansen-Hurwitz variance",
                   "interval": f"CLT: estimate -/+ z * se at level {estimate.level}, cut to [0, 1]"},
        "inputs": {"runs": [input_record(run) for run in runs], "ratings": [rater.record() for rater in raters]},
        "provenance": provenance(argv=argv),
    }


def render_estimate(record: dict) -> str:
    """The terminal table: per run and rater, each cut-off's estimate with its interval beside the UMLS acc@k."""
    lines = [f"expert-judged acc@k (rated >= {record['threshold']}) of the whole run, by prediction-powered "
             f"inference; {record['level']:.0%} CLT intervals"]
    for label, raters in record["runs"].items():
        for rater, entry in raters.items():
            lines.append(f"\n{label}, rated by {rater} ({entry['design']} sheet: {entry['rated']} of "
                         f"{entry['population']} queries rated)")
            lines.append(f"{'k':>4}  {'expert (estimate)':<28} {'UMLS':>7}  {'expert/UMLS on the sample':>26}")
            for c, acc in entry["acc"].items():
                low, high = acc["interval"]
                lines.append(f"{c:>4}  {100 * acc['value']:6.2f} [{100 * low:6.2f}, {100 * high:6.2f}]       "
                             f"{100 * acc['umls_whole_run']:7.2f}  {100 * acc['expert_on_sample']:12.2f} / "
                             f"{100 * acc['umls_on_sample']:.2f}")
    return "\n".join(lines) + "\n"
