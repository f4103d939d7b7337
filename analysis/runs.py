"""The runs ``medlama compare`` reads, and the check that they can be paired.

* :func:`load_runs`: every run of the output folders given (``medlama probe`` writes a list of runs in
  ``results.json``, ``medlama recipe`` a record whose ``runs`` are the un-rewired and rewired models); each
  run's per-query hits come from ``predictions.jsonl`` (its ``run``, ``id``, ``relation``, ``gold``,
  ``predictions`` and ``hit@k`` keys; other keys are ignored), and must be what its predictions and gold
  answers give (scored again by the acc@k module): a hand-edited hit is refused, naming the file and line;
  so is a file that differs from what the folder's ownership record says its command wrote.
  A run is labelled by its own label, prefixed by its folder's name when two runs share one; a label the one
  label rule refuses (blank, or holding a line break or other control character:
  :func:`medlama.core.models.check_label`) is refused here too, naming the file.
* :func:`check_comparable`: a paired comparison needs the same queries: the same data (dataset, config and
  the data's identity, :data:`DATA_IDENTITY`), the same candidate pool (rule, size, SHA-256 of its names),
  the same matching, and the same query ids, each with the same relation and gold answers. Anything else is
  refused, naming the field and the two runs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from medlama.core.atomic import owner_record
from medlama.core.errors import MedlamaInputError
from medlama.core.json_lines import json_lines
from medlama.core.integrity import FILES_KEY, change_since
from medlama.core.models import check_label
from medlama.metrics import load as load_metric
from medlama.runs.outputs import KEEP_PREDICTIONS, PREDICTIONS_FILE, RESULTS_FILE

#: What every compared run must share, as ``(name in messages, key in the run's data record)``: the dataset and
#: query set, the data's identity (:data:`DATA_IDENTITY`) and the candidate pool.
SAME_DATA = (("dataset", "dataset"), ("query set", "config"), ("data files (SHA-256)", "sha256"),
             ("data fingerprint", "fingerprint"), ("candidate pool", "candidates"))
#: The keys of a run's data record that identify the data itself, whatever its origin: ``sha256``, of the
#: data folder's files (a built folder, a ``push-dataset`` dry run, a Hub snapshot, the cached build;
#: :func:`medlama.datasets.folders.identity`), and ``fingerprint``, of a loaded ``datasets.Dataset`` (or what
#: a hand-made query set declares). A run must record one: other prompt text is other data.
DATA_IDENTITY = ("sha256", "fingerprint")


@dataclass
class Run:
    """One compared run: its ``label``, the ``folder`` it came from, its ``results.json`` entry (``record``)
    and its per-query ``ids``, ``relations``, ``gold``, ``hits`` (``{k: bool array}``), ``predictions`` (the
    top names kept) and ``inputs`` (the text fed to the model; ``None`` where the row has none), in file order;
    ``rows``: its ``predictions.jsonl`` rows as read (scores and the gold's rank too)."""

    label: str
    folder: Path
    record: dict
    ids: list[str] = field(default_factory=list)
    relations: list[str] = field(default_factory=list)
    gold: list[list[str]] = field(default_factory=list)
    hits: dict[int, np.ndarray] = field(default_factory=dict)
    predictions: list[list[str]] = field(default_factory=list)
    inputs: list[str | None] = field(default_factory=list)
    rows: list[dict] = field(default_factory=list, repr=False)

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
        for number, row in json_lines(handle, file):
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
        for key in ("id", "relation", "gold", "predictions", *(f"hit@{k}" for k in run.ks)):
            if key not in row:
                raise MedlamaInputError(f"run {row['run']!r}: the row has no {key!r}", file=file, row=number)
        for key in ("gold", "predictions"):
            if not isinstance(row[key], list):
                raise MedlamaInputError(f"`{key}` must be a list of names", file=file, row=number)
        run.ids.append(str(row["id"]))
        run.relations.append(str(row["relation"]))
        run.gold.append(sorted(map(str, row["gold"])))
        run.predictions.append([str(name) for name in row["predictions"]])
        run.inputs.append(row["input"] if isinstance(row.get("input"), str) else None)
    run.hits = {k: np.array([bool(row[f"hit@{k}"]) for _, row in rows]) for k in run.ks}
    run.rows = [row for _, row in rows]
    if len(set(run.ids)) != len(run.ids):
        repeated = next(i for i in run.ids if run.ids.count(i) > 1)
        raise MedlamaInputError(f"run {run.label!r}: query {repeated!r} appears more than once", file=file)
    for k, hits in run.hits.items():  # the rows must say what results.json says
        recorded = (run.record.get("metrics") or {}).get(f"acc@{k}")
        if isinstance(recorded, (int, float)) and not math.isclose(float(hits.mean()), recorded, abs_tol=1e-9):
            raise MedlamaInputError(f"run {run.label!r}: its rows give acc@{k} = {hits.mean():.6f} but results.json "
                                    f"records {recorded:.6f}; the two files are not of one run", file=file)
    _check_hits(run, rows, file)


def _check_hits(run: Run, rows: list[tuple[int, dict]], file: Path) -> None:
    """Refuse rows whose ``hit@k`` contradict their own ``predictions`` and ``gold``, scored again by the acc@k
    module with the run's matching and ks. A row keeps the top ``top_k`` names its run recorded
    (:data:`KEEP_PREDICTIONS` before runs recorded it), so a hit
    beyond them is checked only when those names already hold a gold answer (or the row holds every name)."""
    if not run.ks:
        return
    match = (run.record.get("metrics") or {}).get("match", "exact")
    limit = (run.record.get("settings") or {}).get("top_k", KEEP_PREDICTIONS)  # what each row was cut at
    predictions = [[str(name) for name in row["predictions"]] for _, row in rows]
    groups = [str(i) for i in range(len(rows))]  # each query its own group: a group's acc@k is its hit@k
    try:
        scored = load_metric("acc_at_k").compute(predictions=predictions, references=[row["gold"] for _, row in rows],
                                                 groups=groups, k=list(run.ks), match=match)
    except ValueError as error:
        raise MedlamaInputError(f"run {run.label!r}: its rows cannot be scored again: {error}", file=file) from None
    for group, kept, (number, row) in zip(groups, map(len, predictions), rows):
        for k in run.ks:
            found = scored["groups"][group][f"acc@{k}"] == 1.0
            if found != bool(row[f"hit@{k}"]) and (found or k <= kept or kept < limit):
                raise MedlamaInputError(
                    f"run {run.label!r}: query {row['id']!r} records hit@{k} = {json.dumps(row[f'hit@{k}'])}, but its "
                    f"predictions and gold answers give {json.dumps(found)} ({match} matching): the file was changed "
                    "after medlama wrote it; probe again rather than compare edited hits", file=file, row=number)


def _check_unchanged(folder: Path) -> None:
    """Refuse a folder whose ``results.json`` or ``predictions.jsonl`` is not what the command that wrote it
    recorded (:mod:`medlama.core.integrity`: its ownership record lists each file's size and SHA-256); a
    folder without that record is read as it is, its hits scored again all the same."""
    record = owner_record(folder) or {}
    files = record.get(FILES_KEY)
    if not isinstance(files, dict):
        return
    for name in (RESULTS_FILE, PREDICTIONS_FILE):
        entry, path = files.get(name), folder / name
        change = change_since(path, entry) if isinstance(entry, dict) else None
        if change is not None:
            raise MedlamaInputError(f"changed since `medlama {record.get('kind')}` wrote it ({change}): compare "
                                    "pairs only what a run wrote; probe again rather than compare an edited file",
                                    file=path)


#: How messages write a minimum count of runs.
_AT_LEAST = {1: "one", 2: "two"}


def load_runs(folders: Sequence[str | Path], *, at_least: int = 2, purpose: str = "a comparison") -> list[Run]:
    """Every run of ``folders`` (each a ``probe`` or ``recipe`` output), in the order given, labelled uniquely;
    fewer than ``at_least`` runs are refused (``purpose``: what needs them, for the message)."""
    runs: list[Run] = []
    seen: set[Path] = set()
    for folder in map(Path, folders):
        if folder.resolve() in seen:
            raise MedlamaInputError("the folder is given twice", file=folder)
        seen.add(folder.resolve())
        records = _results_of(folder)
        labels = [check_label(str(record["label"]), what="the run label", file=folder / RESULTS_FILE)
                  for record in records]
        if len(set(labels)) != len(labels):
            raise MedlamaInputError("two runs of results.json share a label", file=folder / RESULTS_FILE)
        rows = _rows_of(folder, set(labels))
        for label, record in zip(labels, records):
            run = Run(label, folder, record)
            _fill(run, rows[label], folder / PREDICTIONS_FILE)
            runs.append(run)
        _check_unchanged(folder)
    if len(runs) < at_least:
        raise MedlamaInputError(f"{len(runs)} run in {', '.join(map(str, folders))}: {purpose} needs "
                                f"{_AT_LEAST.get(at_least, at_least)} or more")
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
    for run in runs:
        if all(run.data.get(key) is None for key in DATA_IDENTITY):
            raise MedlamaInputError(
                f"run {run.label!r} ({run.folder}) records no identity of its data (neither the SHA-256 of a data "
                "folder nor a Dataset's fingerprint), so nothing says its queries are worded as the other runs'; "
                "probe data given as a folder, a Hub id or a Dataset (a QuerySet: with a `fingerprint` in its info)")
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
