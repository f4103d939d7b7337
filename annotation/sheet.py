"""A blind rating sheet: sampled queries, each with the pooled top-k predictions of the runs, and the manifest
that ties it to those runs.

* :data:`LEVELS`: the paper's five levels (section 5.3, Figure 8), in its words.
* :func:`sample_queries`: a seeded sample stratified by relation: the relations are visited in a seeded order,
  round after round, each giving one query drawn without replacement from its own (seeded) shuffle, until the
  sample is full; every relation thus gets ``n // R`` or one more query while it has some left.
* :func:`build_sheet`: for each sampled query, the top-k names of every run pooled (a name several runs
  predict is shown once) and shuffled with the seed, so neither the rank, nor the run, nor gold status shows.
  The sheet's id is the SHA-256 of what it shows (queries, their text and predictions, in order), so ratings
  of another sheet are told apart.
* :func:`read_manifest`: the sheet back from its folder's ``manifest.json``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from medlama.core.errors import MedlamaInputError
from medlama.analysis.runs import Run

#: The paper's five levels, highest first (section 5.3; Figure 8's caption).
LEVELS = {
    5: "Perfectly answers the query",
    4: "Similar to the gold answer, could somehow be the answer",
    3: "Related to the query but not correct",
    2: "Same domain or slight relation",
    1: "Completely unrelated",
}
#: The files of a sheet's folder.
MANIFEST, PAGE, CSV_SHEET, LS_TASKS, LS_CONFIG = ("manifest.json", "annotate.html", "sheet.csv",
                                                   "label_studio_tasks.json", "label_studio_config.xml")
#: The manifest's format marker.
FORMAT_KEY, FORMAT = "medlama_annotation_sheet", 1


@dataclass(frozen=True)
class SheetQuery:
    """One query of a sheet: its id, relation, text and the predictions shown (in their blind order)."""

    id: str
    relation: str
    text: str
    predictions: tuple[str, ...]


@dataclass(frozen=True)
class Sheet:
    """What raters see: ``queries`` with their predictions, the cut-off ``k`` they were pooled at, and the id."""

    id: str
    k: int
    queries: tuple[SheetQuery, ...]

    def items(self) -> list[tuple[int, SheetQuery, str]]:
        """``(item number from 1, query, prediction)`` in the sheet's order."""
        out = []
        for query in self.queries:
            for prediction in query.predictions:
                out.append((len(out) + 1, query, prediction))
        return out

    def to_json(self) -> list[dict]:
        return [{"id": q.id, "relation": q.relation, "query": q.text, "predictions": list(q.predictions)}
                for q in self.queries]


def sheet_id(k: int, queries: Sequence[SheetQuery]) -> str:
    """The SHA-256 of what a sheet shows (module docstring)."""
    shown = [[q.id, q.relation, q.text, list(q.predictions)] for q in queries]
    return hashlib.sha256(json.dumps({"k": k, "queries": shown}, ensure_ascii=False).encode("utf-8")).hexdigest()


def sample_queries(relations: Sequence[str], n: int, seed: int) -> list[int]:
    """Indices of ``n`` queries, stratified by relation (module docstring); ``relations``: each query's."""
    rng = np.random.default_rng(seed)
    names = sorted(set(relations))
    pools = {name: [i for i, r in enumerate(relations) if r == name] for name in names}
    pools = {name: [pools[name][j] for j in rng.permutation(len(pools[name]))] for name in names}
    order = [names[j] for j in rng.permutation(len(names))]
    picked: list[int] = []
    while len(picked) < n and any(pools.values()):
        for name in order:
            if pools[name] and len(picked) < n:
                picked.append(pools[name].pop(0))
    return picked


def query_text(runs: Sequence[Run], qid: str, rows: dict[str, dict[str, int]]) -> str:
    """What raters read for query ``qid``: the text the first run that kept one fed to its model."""
    for run in runs:
        text = run.inputs[rows[run.label][qid]]
        if text:
            return text
    return qid


def build_sheet(runs: Sequence[Run], picked: Sequence[int], k: int, seed: int) -> Sheet:
    """The blind sheet of the queries ``picked`` (indices into the first run) with every run's top ``k``."""
    rows = {run.label: {qid: i for i, qid in enumerate(run.ids)} for run in runs}
    rng = np.random.default_rng([seed, 1])  # a stream of its own: the sample does not move the shuffles
    queries = []
    for index in picked:
        qid = runs[0].ids[index]
        pooled = list(dict.fromkeys(name for run in runs for name in run.predictions[rows[run.label][qid]][:k]))
        shown = tuple(pooled[j] for j in rng.permutation(len(pooled)))
        queries.append(SheetQuery(qid, runs[0].relations[index], query_text(runs, qid, rows), shown))
    return Sheet(sheet_id(k, queries), k, tuple(queries))


def read_manifest(folder: str | Path) -> tuple[Sheet, dict]:
    """The sheet written to ``folder`` by ``medlama annotate export``, and its whole manifest."""
    folder = Path(folder)
    file = folder / MANIFEST
    if not folder.is_dir():
        raise MedlamaInputError("not a folder: give the folder `medlama annotate export --out` wrote", file=folder)
    try:
        manifest = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise MedlamaInputError(f"no {MANIFEST}: give the folder `medlama annotate export --out` wrote",
                                file=folder) from None
    except (OSError, ValueError) as error:
        raise MedlamaInputError(f"cannot read the manifest: {error}", file=file) from None
    if not isinstance(manifest, dict) or manifest.get(FORMAT_KEY) != FORMAT:
        raise MedlamaInputError("not the manifest of `medlama annotate export`", file=file)
    try:
        queries = tuple(SheetQuery(str(q["id"]), str(q["relation"]), str(q["query"]),
                                   tuple(str(p) for p in q["predictions"])) for q in manifest["queries"])
        sheet = Sheet(str(manifest["sheet"]), int(manifest["k"]), queries)
    except (KeyError, TypeError, ValueError) as error:
        raise MedlamaInputError(f"the manifest lacks or garbles {error}", file=file) from None
    if sheet_id(sheet.k, sheet.queries) != sheet.id:
        raise MedlamaInputError("the queries and predictions no longer give the sheet's id: the manifest was "
                                "edited after `medlama annotate export` wrote it", file=file)
    return sheet, manifest
