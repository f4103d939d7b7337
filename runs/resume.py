"""Resuming a probe: the probe computed shard by shard, what makes resuming a killed probe and splitting one
across processes give exactly the predictions of one uninterrupted run. (The shard store and the check of a
resumed run's settings, shared with ``ucm`` and ``rewire``, are :mod:`medlama.core.resume`.)

* Shards (:func:`plan`): every ranking call the probe makes is one shard: the queries of one candidate pool
  (all of them with a shared pool, each relation's with the ``relation`` rule). A method whose ranking of a
  query does not depend on the queries ranked with it (:attr:`Prober.independent_queries
  <medlama.probers.prober.Prober.independent_queries>`: causal-likelihood scores each query alone) has its
  shards cut further, per relation and into blocks of :data:`SHARD_QUERIES` queries. The cut depends on the
  queries only, never on the number of processes or on what an earlier run finished, so every shard is
  ranked on the same inputs however the run is split or resumed.
* Units: one per result row, a run (its model and settings), each layer sweep, each checkpoint of a sweep.
* :func:`rank_units` ranks the shards this process owns (shard ``j`` of the run's list goes to process
  ``j mod K``) that the store does not hold yet, keeping each as it finishes
  (:class:`medlama.core.resume.ShardStore`; without an output folder the rankings stay in memory and nothing
  is serialised); then, in the main process, after every process is done, merges them in query order. What
  a shard keeps per query is its ranking row as JSON (:func:`rank_rows`), so more per-query fields pass
  through unchanged; with a store, the probe's results are made from the shards as read back, in a first
  run as in a resumed one.
* :func:`rank_prober`: a prober made by hand ranked through the same plan (one shard per candidate pool).
* :func:`manifest`: everything that decides the predictions and their logged scores (methods and their
  settings, the batch size included: rows batched otherwise are rounded otherwise in the last float32
  digits; model identities; the data, its candidate pool and the query selection; ``top_k``, the
  predictions ranked per query: what a shard holds, at least the largest k scored, not the fewer
  ``predictions.jsonl`` may keep; whether every score is kept), which a resumed run must share: a rerun
  that would rank deeper is refused, one that keeps fewer of the same ranking continues it.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from medlama.core import distributed
from medlama.core.batching import fit_batch, is_auto, starting_size
from medlama.core.errors import MedlamaInputError
from medlama.core.models import LoadOptions
from medlama.core.provenance import model_identity
from medlama.core.settings import as_dict
from medlama.probers.learned_prompts import identity_of
from medlama.probers.pools import pool_parts, rank_choices
from medlama.probers.prober import Prober, ProberNote
from medlama.probers.query_set import QuerySet
from medlama.probers.ranking import PoolScores, Ranking
from medlama.probers.registry import METHODS

#: Queries per shard of a method that ranks each query on its own (a few minutes of a causal LM's work).
SHARD_QUERIES = 64

__all__ = ["SHARD_QUERIES", "Held", "ProberFactory", "Shard", "Unit", "manifest", "plan", "rank_prober", "rank_rows",
           "rank_units"]


#: Makes a unit's prober: ``(device, model, settings) -> Prober`` (the workflow's
#: :meth:`ModelRun.prober <medlama.runs.workflow.ModelRun.prober>`); called when the unit's first shard is
#: ranked, and again with another batch size where ``batch_size="auto"`` meets out-of-memory.
ProberFactory = Callable[[str | None, Any, Any], Prober]


@dataclass(frozen=True)
class Unit:
    """One result row to compute: its ``label``, the label of the run it belongs to (``run_label``), the
    ``method`` and its ``settings``, the ``model`` probed (the run's, or a checkpoint folder), the ``make``
    that makes its prober (:data:`ProberFactory`), how the model is loaded (``load``, recorded in the
    manifest), whether it is a layer sweep (one result per layer) and the checkpoint ``step``."""

    label: str
    run_label: str
    method: str
    model: Any
    settings: Any
    make: ProberFactory
    load: LoadOptions | None = None
    layers: bool = False
    step: int | None = None

    def prober(self, device: str | None, batch_size: int | None = None) -> Prober:
        """The prober of this unit (with ``batch_size`` in place of its settings' ``auto``)."""
        settings = self.settings if batch_size is None else replace(self.settings, batch_size=batch_size)
        return self.make(device, self.model, settings)


@dataclass
class Held:
    """A model's prober kept from one :func:`rank_units` call to the next (the templates of one model run:
    :mod:`medlama.runs.template_runs`), so the model is loaded once: a unit handed a ``Held`` ranks with its
    ``prober`` (made when ``None``) and leaves in it the prober it ended with."""

    prober: Prober | None = None


@dataclass(frozen=True)
class Shard:
    """Queries ranked in one call: their positions in the query set, and the query set to rank them as."""

    relation: str | None
    indices: tuple[int, ...]
    part: QuerySet

    def identity(self, unit: str) -> dict:
        ids = hashlib.sha256("\0".join(self.part.ids).encode()).hexdigest()
        return {"unit": unit, "relation": self.relation, "start": self.indices[0] if self.indices else 0,
                "count": len(self.indices), "ids": ids}


def independent(method_or_prober: str | Prober) -> bool:
    """Whether the method ranks each query on its own (its shards may then be blocks of queries)."""
    if isinstance(method_or_prober, str):
        entry = METHODS.get(method_or_prober)
        return bool(entry and entry.prober.independent_queries)
    return method_or_prober.independent_queries


def plan(queries: QuerySet, *, blocks: bool, size: int | None = None) -> list[Shard]:
    """The shards of ``queries``: one per candidate pool, or (``blocks``) per relation and ``size`` queries."""
    size = size or SHARD_QUERIES
    shards = []
    for pick, part in pool_parts(queries):
        if not blocks:
            shards.append(Shard(None if len(pick) == len(queries) else part.relations[0], tuple(pick), part))
            continue
        for relation in dict.fromkeys(part.relations):
            local = [i for i, r in enumerate(part.relations) if r == relation]
            for start in range(0, len(local), size):
                chosen = local[start:start + size]
                shards.append(Shard(relation, tuple(pick[i] for i in chosen), part.subset(chosen)))
    return shards


def rank_rows(prober: Prober, part: QuerySet, top_k: int, layers: bool, all_scores: bool = False) -> Any:
    """The rows of ``part``'s scored ranking (:meth:`Ranking.rows <medlama.probers.ranking.Ranking.rows>`;
    ``{layer: rows}`` for a layer sweep), every candidate's score and rank included when ``all_scores``; a
    multiple-choice ``part`` has each query ranked against its own choices (:func:`rank_choices`)."""
    if part.choices is not None:
        ranked = rank_choices(prober, part, top_k, all_scores=all_scores, layers=layers)
        return {layer: ranking.rows() for layer, ranking in ranked.items()} if layers else ranked.rows()
    if layers:
        ranked = prober.rank_layers_scored(part, top_k, all_scores=all_scores)
        return {layer: ranking.rows() for layer, ranking in ranked.items()}
    return prober.rank_scored(part, top_k=top_k, all_scores=all_scores).rows()


def _items(rows: Any, layers: bool, own: bool = False) -> list[Any]:
    """What a resume shard keeps per query: its ranking row as JSON (:func:`_item`; ``[[layer, item], ...]``
    for a layer sweep); ``own``: each query has its own pool (multiple choice), kept with its scores."""
    if layers:
        count = len(next(iter(rows.values()))) if rows else 0
        return [[[layer, _item(rows[layer][i], own)] for layer in rows] for i in range(count)]
    return [_item(row, own) for row in rows]


def _from_items(items: Sequence[Any], candidates: Sequence[str] | None, layers: bool) -> Any:
    """:func:`_items` read back as ranking rows."""
    if not layers:
        return [_row(item, candidates) for item in items]
    rows: dict[int, list] = {int(layer): [] for layer, _ in items[0]} if items else {}
    for item in items:
        for layer, scored in item:
            rows[int(layer)].append(_row(scored, candidates))
    return rows


def _item(row: tuple, own: bool = False) -> dict:
    """One query's row of a :class:`~medlama.probers.ranking.Ranking` as JSON: the pool's candidates are not
    repeated per query (the shard's ``candidates`` hold them once), unless the query has its ``own`` pool."""
    names, scores, text, gold_rank, gold_score, pool, confidence = row
    item = {"names": list(names), "scores": list(scores), "input": text, "gold_rank": gold_rank,
            "gold_score": gold_score, "confidence": confidence}
    if pool is not None:
        item["pool"] = {"scores": [float(v) for v in pool.scores], "ranks": [int(v) for v in pool.ranks]}
        if own:
            item["pool"]["candidates"] = list(pool.candidates)
    return item


def _row(item: dict, candidates: Sequence[str] | None) -> tuple:
    """:func:`_item` read back as a ranking row."""
    import numpy as np  # numpy only when this runs

    pool = item.get("pool")
    if pool is not None:
        pool = PoolScores(list(pool.get("candidates", candidates or ())), np.asarray(pool["scores"], dtype=np.float64),
                          np.asarray(pool["ranks"], dtype=np.int64))
    return (item["names"], item["scores"], item["input"], item["gold_rank"], item["gold_score"], pool,
            item.get("confidence"))


def _candidates(rows: Any, part: QuerySet, layers: bool) -> list[str] | None:
    """The shard's pool names when its rows keep every candidate's score (else ``None``: nothing to repeat)."""
    first = (next(iter(rows.values()))[:1] if rows else []) if layers else rows[:1]
    return list(part.candidates) if first and first[0][5] is not None and part.choices is None else None


def manifest(queries: QuerySet, units: Sequence[Unit], *, top_k: int, all_scores: bool = False) -> dict:
    """What decides a probe's predictions (see the module docstring), as a resumed run must repeat it."""
    def settings(unit: Unit) -> dict:  # the batch size too: it changes the float rounding of the logged scores
        return as_dict(unit.settings) if not isinstance(unit.settings, Mapping) else dict(unit.settings)

    def loading(unit: Unit) -> dict | None:  # the revision asked for, and the adapter by its content
        load = unit.load
        if load is None:
            return None
        return {"revision": load.revision, "trust_remote_code": load.trust_remote_code,
                "peft": model_identity(load.peft) if load.peft else None}

    selection = hashlib.sha256("\0".join(f"{i}\t{r}" for i, r in zip(queries.ids, queries.relations)).encode())
    return {"data": {**queries.info, "name": queries.name, "queries": len(queries),
                     "selection_sha256": selection.hexdigest(), "candidates": queries.pool_record()},
            "top_k": top_k, "all_scores": all_scores,
            "units": {unit.label: {"method": unit.method, "model": model_identity(unit.model),
                                   "settings": settings(unit), "layers": unit.layers, "load": loading(unit),
                                   **({"prompts": identity_of(unit.settings)}
                                      if getattr(unit.settings, "prompts", None) else {})}
                      for unit in units}}


class _UnitRanker:
    """A unit's prober, made when its first shard is ranked; with ``batch_size="auto"``, made with the largest
    batch size that fits (:func:`medlama.core.batching.fit_batch`, made again at half the size on out-of-memory;
    a later shard starts at the size the last one used)."""

    def __init__(self, unit: Unit, device: str | None, prober: Prober | None = None) -> None:
        self.unit, self.device = unit, device
        self.auto = is_auto(unit.settings)
        self.size = starting_size(unit.settings) if self.auto else None
        self.prober, self.built = prober, None
        if prober is not None and self.auto:  # made before (preflight's, an earlier template's): start at its size,
            made = getattr(prober.settings_, "batch_size", None)  # as a later shard starts at the last one's
            if isinstance(made, int):
                self.size = self.built = made
            else:
                self.prober = None

    def _at(self, size: int | None) -> Prober:
        if self.prober is None or self.built != size:
            self.prober = None  # let go of the model before loading it again
            self.prober = self.unit.prober(self.device, size)
            self.built = size
        return self.prober

    def rank(self, part: QuerySet, top_k: int, all_scores: bool = False) -> Any:
        if not self.auto:
            return rank_rows(self._at(None), part, top_k, self.unit.layers, all_scores)
        rows, self.size = fit_batch(lambda size: rank_rows(self._at(size), part, top_k, self.unit.layers,
                                                           all_scores), self.size)
        return rows

    def note(self) -> ProberNote:
        """What results record of this unit's prober (``auto`` with the batch size it resolved to)."""
        note = ProberNote.of(self.prober)
        if self.auto:
            note = replace(note, settings={**note.settings, "batch_size": "auto", "resolved_batch_size": self.size})
        return note


def _count(rows: Any, layers: bool) -> int:
    return (len(next(iter(rows.values()))) if rows else 0) if layers else len(rows)


def rank_units(queries: QuerySet, units: Sequence[Unit], store: Any = None, *, top_k: int,
               device: str | None = None, probers: MutableMapping[str, Prober | Held] | None = None,
               block: int | None = None, all_scores: bool = False) -> dict[str, tuple[Any, ProberNote, float]] | None:
    """Rank what this process owns and ``store`` (a :class:`~medlama.core.resume.ShardStore`; ``None``: no
    output folder, nothing kept) lacks; then (main process) ``{unit label: (its Ranking in query order, or
    {layer: Ranking}; what it records of the prober that ranked; seconds of ranking, over every shard)}``.
    Without a store the rankings stay in memory; with one, the results are made from the shards as read
    back, in a first run as in a resumed one. Other processes return ``None`` once every process is done.
    ``probers``: made already (a loaded model's, the preflight's), by unit label; each is taken out of it, so
    its model is let go of once its unit is ranked, unless handed as a :class:`Held` (kept for the caller)."""
    me, world = distributed.rank(), distributed.world_size()
    planned = [(unit, plan(queries, blocks=independent(unit.method), size=block)) for unit in units]
    kept: dict[str, tuple[dict, ProberNote | None]] = {}  # without a store: {unit: ({shard start: rows, seconds}, note)}
    position = 0
    for unit, shards in planned:
        given = probers.pop(unit.label, None) if probers else None
        held = given if isinstance(given, Held) else Held(given)
        ranker, held.prober, given = _UnitRanker(unit, device, held.prober), None, None  # the ranker's alone now
        ranked: dict = {}
        note: ProberNote | None = None
        for shard in shards:
            mine = position % world == me
            position += 1
            identity = shard.identity(unit.label)
            if not mine or (store is not None and store.has(identity)):
                continue
            start = time.perf_counter()
            rows = ranker.rank(shard.part, top_k, all_scores)
            if _count(rows, unit.layers) != len(shard.indices):
                raise RuntimeError(f"{unit.label}: {_count(rows, unit.layers)} rankings for {len(shard.indices)} "
                                   "queries")
            seconds = time.perf_counter() - start
            if store is None:
                ranked[shard.indices] = (rows, seconds)
                note = note or ranker.note()  # the first shard's, as a store keeps it
                continue
            store.note(unit.label, ranker.note().record())
            store.write(identity, _items(rows, unit.layers, own=shard.part.choices is not None), seconds=seconds,
                        candidates=_candidates(rows, shard.part, unit.layers))
        kept[unit.label] = (ranked, note)
        held.prober = ranker.prober  # the caller's, where it handed a Held; else let go of with it
        del ranker, held
    distributed.barrier()
    if not distributed.is_main_process():
        return None
    out = {}
    for unit, shards in planned:
        ranked, note = kept[unit.label]
        if store is not None:
            record = store.noted(unit.label)
            note = ProberNote(**record) if record is not None else None
        if note is None:
            raise MedlamaInputError(f"{unit.label}: no shard of this run was computed; rerun with --overwrite")
        merged: Any = {} if unit.layers else [None] * len(queries)
        seconds = 0.0
        for shard in shards:
            if store is None:
                rows, took = ranked[shard.indices]
            else:
                items, meta = store.read(shard.identity(unit.label))
                rows, took = _from_items(items, meta.get("candidates"), unit.layers), meta.get("seconds")
            seconds += float(took or 0.0)
            _place(merged, shard.indices, rows, len(queries), unit.layers)
        ranking = ({layer: Ranking.from_rows(rows) for layer, rows in merged.items()} if unit.layers
                   else Ranking.from_rows(merged))
        out[unit.label] = (ranking, note, seconds)
    return out


def _place(merged: Any, indices: Sequence[int], rows: Any, total: int, layers: bool) -> None:
    """Put a shard's ``rows`` at their ``indices`` of ``merged`` (query order; ``{layer: rows}`` for a sweep)."""
    for layer, layer_rows in (rows.items() if layers else [(None, rows)]):
        target = merged.setdefault(int(layer), [None] * total) if layers else merged
        for index, row in zip(indices, layer_rows):
            target[index] = row


def rank_prober(prober: Prober, queries: QuerySet, *, top_k: int = 10, all_scores: bool = False) -> Ranking:
    """``prober``'s ranking of ``queries``, shard by shard as :func:`rank_units` plans it (one shard per
    candidate pool), nothing kept: what a prober used on its own (:func:`medlama.runs.workflow.probe`, the
    rewiring evaluator) ranks."""
    merged: list = [None] * len(queries)
    for shard in plan(queries, blocks=False):
        _place(merged, shard.indices, rank_rows(prober, shard.part, top_k, False, all_scores), len(queries), False)
    return Ranking.from_rows(merged)


def resumed(store: Any, queries: QuerySet, units: Sequence[Unit], *, block: int | None = None) -> tuple[int, int]:
    """``(completed shards, all shards)`` of the run, as the store holds them now."""
    total = done = 0
    for unit in units:
        for shard in plan(queries, blocks=independent(unit.method), size=block):
            total += 1
            done += bool(store.has(shard.identity(unit.label)))
    return done, total

