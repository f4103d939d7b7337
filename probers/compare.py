"""Comparing probe runs as a paper must: the runs of ``medlama compare``, checked to be comparable, and their
leaderboard, paired differences and per-relation tests (tables and plot: :mod:`medlama.probers.compare_report`).

* :func:`load_runs`: every run of the output folders given (``medlama probe`` writes a list of runs in
  ``results.json``, ``medlama recipe`` a record whose ``runs`` are the un-rewired and rewired models); each
  run's per-query hits come from ``predictions.jsonl`` (its ``run``, ``id``, ``relation``, ``gold`` and
  ``hit@k`` keys; other keys are ignored). A run is labelled by its own label, prefixed by its folder's name
  when two runs share one.
* :func:`check_comparable`: a paired comparison needs the same queries: the same data (dataset, config and
  the data's fingerprint), the same candidate pool (rule, size, SHA-256 of its names), the same matching,
  and the same query ids, each with the same relation and gold answers. Anything else is refused, naming
  the field and the two runs.
* :func:`compare_runs`: for every cut-off k the runs share, the leaderboard (each run's micro acc@k with its
  percentile-bootstrap interval, the same as its ``results.json`` ``intervals``, and macro acc@k with the
  stratified interval) and, for every run after the first (the baseline), the paired difference ``run -
  baseline`` in micro and macro acc@k with its interval and McNemar's exact p-value, and per relation with
  Holm-corrected p-values across the relations (:mod:`medlama.core.significance`). The method, resamples,
  seed and level are recorded beside the numbers.
* :func:`compare_folders`: what ``medlama compare`` runs: the above for every run of the folders given, with
  each input recorded by its folder's name, its files' SHA-256 and what it probed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from medlama.core.errors import MedlamaInputError
from medlama.core.intervals import DEFAULT_LEVEL, DEFAULT_RESAMPLES, DEFAULT_SEED
from medlama.core.settings import check, setting
from medlama.probers.outputs import PREDICTIONS_FILE, RESULTS_FILE

#: What every compared run must share, as ``(name in messages, key in the run's data record)``.
SAME_DATA = (("dataset", "dataset"), ("query set", "config"), ("data fingerprint", "fingerprint"),
             ("candidate pool", "candidates"))


@dataclass(frozen=True)
class CompareSettings:
    """How ``medlama compare`` computes its intervals (recorded in its JSON)."""

    resamples: int = setting(DEFAULT_RESAMPLES, min=100, metavar="N",
                             help="bootstrap resamples of the queries for every interval")
    seed: int = setting(DEFAULT_SEED, min=0, help="seed of the bootstrap (the same seed gives the same intervals)")
    level: float = setting(DEFAULT_LEVEL, min=0.5, max=0.999, help="confidence level of the intervals")

    def __post_init__(self) -> None:
        check(self)


@dataclass
class Run:
    """One compared run: its ``label``, the ``folder`` it came from, its ``results.json`` entry (``record``)
    and its per-query ``ids``, ``relations``, ``gold`` and ``hits`` (``{k: bool array}``), in file order."""

    label: str
    folder: Path
    record: dict
    ids: list[str] = field(default_factory=list)
    relations: list[str] = field(default_factory=list)
    gold: list[list[str]] = field(default_factory=list)
    hits: dict[int, np.ndarray] = field(default_factory=dict)

    @property
    def data(self) -> dict:
        return self.record.get("data") or (self.record.get("provenance") or {}).get("data") or {}

    @property
    def ks(self) -> list[int]:
        return [int(k) for k in (self.record.get("metrics") or {}).get("k") or []]


def _results_of(folder: Path) -> list[dict]:
    file = folder / RESULTS_FILE
    if not folder.is_dir():
        raise MedlamaInputError("not a folder: give the output folder of `medlama probe` or `medlama recipe`",
                                file=folder)
    try:
        payload = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise MedlamaInputError("no results.json: give the output folder of a finished `medlama probe` or "
                                "`medlama recipe` run", file=folder) from None
    except (OSError, ValueError) as error:
        raise MedlamaInputError(f"cannot read the results: {error}", file=file) from None
    runs = payload.get("runs") if isinstance(payload, dict) else payload
    if not isinstance(runs, list) or not runs or not all(isinstance(r, dict) and "label" in r for r in runs):
        raise MedlamaInputError("not the results.json of `medlama probe` or `medlama recipe` (a list of runs, "
                                "each with its label, expected)", file=file)
    return runs


def _rows_of(folder: Path, labels: set[str]) -> dict[str, list[tuple[int, dict]]]:
    """``{run label: [(line number, row), ...]}`` of ``folder/predictions.jsonl`` for the runs ``labels``."""
    file = folder / PREDICTIONS_FILE
    rows: dict[str, list[tuple[int, dict]]] = {label: [] for label in labels}
    try:
        handle = open(file, encoding="utf-8")
    except FileNotFoundError:
        raise MedlamaInputError("no predictions.jsonl (the per-query rows a comparison pairs)", file=folder) from None
    with handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as error:
                raise MedlamaInputError(f"not JSON: {error}", file=file, row=number) from None
            if not isinstance(row, dict) or not isinstance(row.get("run"), str):
                raise MedlamaInputError("a row without its run's label (a JSON object with `run` expected)",
                                        file=file, row=number)
            if row["run"] in rows:
                rows[row["run"]].append((number, row))
    return rows


def _fill(run: Run, rows: list[tuple[int, dict]], file: Path) -> None:
    if not rows:
        raise MedlamaInputError(f"no per-query rows of run {run.label!r}", file=file)
    for number, row in rows:
        for key in ("id", "relation", "gold", *(f"hit@{k}" for k in run.ks)):
            if key not in row:
                raise MedlamaInputError(f"run {row['run']!r}: the row has no {key!r}", file=file, row=number)
        if not isinstance(row["gold"], list):
            raise MedlamaInputError("`gold` must be a list of names", file=file, row=number)
        run.ids.append(str(row["id"]))
        run.relations.append(str(row["relation"]))
        run.gold.append(sorted(map(str, row["gold"])))
    run.hits = {k: np.array([bool(row[f"hit@{k}"]) for _, row in rows]) for k in run.ks}
    if len(set(run.ids)) != len(run.ids):
        repeated = next(i for i in run.ids if run.ids.count(i) > 1)
        raise MedlamaInputError(f"run {run.label!r}: query {repeated!r} appears more than once", file=file)
    for k, hits in run.hits.items():  # the rows must say what results.json says
        recorded = (run.record.get("metrics") or {}).get(f"acc@{k}")
        if isinstance(recorded, (int, float)) and not math.isclose(float(hits.mean()), recorded, abs_tol=1e-9):
            raise MedlamaInputError(f"run {run.label!r}: its rows give acc@{k} = {hits.mean():.6f} but results.json "
                                    f"records {recorded:.6f}; the two files are not of one run", file=file)


def load_runs(folders: Sequence[str | Path]) -> list[Run]:
    """Every run of ``folders`` (each a ``probe`` or ``recipe`` output), in the order given, labelled uniquely."""
    runs: list[Run] = []
    seen: set[Path] = set()
    for folder in map(Path, folders):
        if folder.resolve() in seen:
            raise MedlamaInputError("the folder is given twice", file=folder)
        seen.add(folder.resolve())
        records = _results_of(folder)
        labels = [str(record["label"]) for record in records]
        if len(set(labels)) != len(labels):
            raise MedlamaInputError("two runs of results.json share a label", file=folder / RESULTS_FILE)
        rows = _rows_of(folder, set(labels))
        for label, record in zip(labels, records):
            run = Run(label, folder, record)
            _fill(run, rows[label], folder / PREDICTIONS_FILE)
            runs.append(run)
    if len(runs) < 2:
        raise MedlamaInputError(f"{len(runs)} run in {', '.join(map(str, folders))}: a comparison needs two or more")
    plain = [run.label for run in runs]
    for run in runs:
        if plain.count(run.label) > 1:
            run.label = f"{run.folder.resolve().name}/{run.label}"
    labels = [run.label for run in runs]
    if len(set(labels)) != len(labels):
        raise MedlamaInputError("two runs have the same label in folders of the same name; rename a folder")
    return runs


def check_comparable(runs: Sequence[Run]) -> None:
    """Refuse runs that are not of the same queries and pool (module docstring), naming the field and runs."""
    first = runs[0]
    order = {qid: i for i, qid in enumerate(first.ids)}
    for run in runs[1:]:
        def differ(what: str, a: Any, b: Any) -> MedlamaInputError:
            return MedlamaInputError(f"runs {first.label!r} ({first.folder}) and {run.label!r} ({run.folder}) differ "
                                     f"in their {what}: {a} vs {b}; a paired comparison needs runs of the same "
                                     "queries against the same candidate pool")
        for what, key in SAME_DATA:
            if first.data.get(key) != run.data.get(key):
                raise differ(what, json.dumps(first.data.get(key)), json.dumps(run.data.get(key)))
        match_a, match_b = ((r.record.get("metrics") or {}).get("match", "exact") for r in (first, run))
        if match_a != match_b:
            raise differ("answer matching", match_a, match_b)
        if set(run.ids) != set(first.ids):
            only_a, only_b = sorted(set(first.ids) - set(run.ids)), sorted(set(run.ids) - set(first.ids))
            raise differ("queries", f"{len(first.ids)} queries ({len(only_a)} not in the other, e.g. "
                         f"{only_a[:3]})", f"{len(run.ids)} ({len(only_b)} not in the first, e.g. {only_b[:3]})")
        for qid, relation, gold in zip(run.ids, run.relations, run.gold):
            i = order[qid]
            if (relation, gold) != (first.relations[i], first.gold[i]):
                raise differ(f"relation or gold answers of query {qid!r}", (first.relations[i], first.gold[i]),
                             (relation, gold))


def _aligned(run: Run, order: dict[str, int], k: int) -> np.ndarray:
    """``run``'s hits at k in the first run's query order."""
    hits = np.empty(len(order), dtype=bool)
    hits[[order[qid] for qid in run.ids]] = run.hits[k]
    return hits


def compare_runs(runs: Sequence[Run], settings: CompareSettings = CompareSettings()) -> dict:
    """The comparison's record (module docstring): ``ks``, ``leaderboard``, ``comparisons``, ``method``."""
    from medlama.core.intervals import bootstrap_macro_ci, bootstrap_mean_ci
    from medlama.core.significance import holm, paired_difference

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
    for run in runs[1:]:
        a, b = hits[base.label], hits[run.label]
        entry = {"baseline": base.label, "run": run.label, "per_relation": {r: {} for r in names}}
        for k in ks:
            entry[f"acc@{k}"] = paired_difference(a[k], b[k], **options).to_json()
            entry[f"acc@{k}_macro"] = paired_difference(a[k], b[k], groups=relations, **options).to_json()
            per = {r: paired_difference(a[k][relations == r], b[k][relations == r], **options).to_json()
                   for r in names}
            for r, adjusted in zip(names, holm([per[r]["p_value"] for r in names])):
                entry["per_relation"][r][f"acc@{k}"] = {**per[r], "p_holm": adjusted}
        comparisons.append(entry)
    return {"ks": ks, "queries": len(base.ids), "relations": {r: int((relations == r).sum()) for r in names},
            "leaderboard": leaderboard, "comparisons": comparisons, "method": method_record(settings)}


def method_record(settings: CompareSettings) -> dict:
    """How the numbers were computed, recorded beside them."""
    return {
        "settings": {"resamples": settings.resamples, "seed": settings.seed, "level": settings.level},
        "interval": "percentile bootstrap over queries, seeded; micro: all queries resampled together; macro: "
                    "stratified (each relation's queries resampled within it)",
        "difference": "run minus baseline (the first run), paired: both runs scored on the same resampled queries",
        "test": "McNemar's exact test: two-sided binomial test of the discordant queries (baseline-only hits "
                "a_only, run-only hits b_only) with p = 1/2",
        "correction": "Holm's step-down correction across the relations, per comparison and k (p_holm)",
    }


def input_record(run: Run) -> dict:
    """What identifies a compared run's input: its folder's name, its files' SHA-256, and what it probed."""
    from medlama.core.checksums import sha256_of

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
    from medlama.core.provenance import provenance

    runs = load_runs(folders)
    record = compare_runs(runs, settings)
    record["inputs"] = [input_record(run) for run in runs]
    record["provenance"] = provenance(argv=argv)
    return record
