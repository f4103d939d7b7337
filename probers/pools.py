"""Candidate pools: what each query is ranked against, in one place.

* The rules (:data:`CANDIDATE_RULES`): ``evaluated`` (the reference probe's rule and the default), ``relation``
  and ``config``; :func:`check_rule` refuses any other.
* The pools a rule gives: from a MedLAMA folder's ``candidates_<set>[_<relation>]`` configs
  (:func:`medlama_pools`), or from whole rows (:func:`row_pools`).
* Splitting a query set by pool (:func:`pool_parts`): one ranking call per pool, the one split every probe
  path takes (:func:`medlama.runs.resume.plan` cuts its shards from it).
* What a result records of its pool (:func:`pool_record`, :func:`pool_hash`: rule, size, SHA-256 of the
  sorted names), so that two results can be checked for comparability.
* Multiple choice (the ``_mc`` configs; rule :data:`CHOICES`): each query is ranked against its own choices
  (:func:`rank_choices`: by the prober itself where it ranks per-query pools in one call, else one query at a
  time), and the record names the choices and the chance level (:func:`choices_record`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from medlama.core.errors import MedlamaInputError
from medlama.datasets.choices import chance_level
from medlama.datasets.folders import load_config
from medlama.probers.ranking import Ranking

#: How the candidate pool is chosen. ``evaluated`` (the reference probe's rule and the default): the union of
#: the evaluated relations' pools, so a relation's score depends on what else is probed with it.
#: ``relation``: each relation against its own pool, whatever else runs. ``config``: the config's whole pool.
CANDIDATE_RULES = ("evaluated", "relation", "config")
#: The pool rule of a multiple-choice config: each query against its own choices (never chosen by --candidates).
CHOICES = "choices"


def check_rule(rule: str) -> None:
    """Refuse a candidate rule that is not one of :data:`CANDIDATE_RULES`."""
    if rule not in CANDIDATE_RULES:
        raise MedlamaInputError(f"unknown candidate rule {rule!r}; choose from {list(CANDIDATE_RULES)}")


def medlama_pools(folder: Path, set_name: str, relations: Sequence[str], rule: str, *, whole: bool
                  ) -> tuple[list[str], dict[str, list[str]] | None]:
    """``(candidates, per-relation pools or None)`` of MedLAMA ``set_name`` (``hard``, ``full``) of ``folder`` for
    the evaluated ``relations`` under ``rule``; ``whole``: they are all the config's relations. The pools are
    the folder's ``candidates_<set>[_<relation>]`` configs, whatever rows are probed (a subset, a shuffle, the
    first N of each relation)."""
    check_rule(rule)
    if rule == "config" or (rule == "evaluated" and whole):
        return list(load_config(folder, f"candidates_{set_name}", "test")["name"]), None
    pools = {rel: list(load_config(folder, f"candidates_{set_name}_{rel}", "test")["name"]) for rel in relations}
    union = sorted(set().union(*pools.values()))
    return union, (pools if rule == "relation" else None)


def row_pools(rows, rule: str) -> tuple[list[str], dict[str, list[str]] | None]:
    """Pools from whole rows: head and answer names, per relation for the ``relation`` rule."""
    per: dict[str, set[str]] = {}
    for relation, head, answers in zip(rows["relation"], rows["head_name"], rows["answer_names"]):
        per.setdefault(relation, set()).update([head, *answers])
    names = sorted(set().union(*per.values())) if per else []
    return names, ({r: sorted(p) for r, p in per.items()} if rule == "relation" else None)


def pool_parts(queries: Any) -> list[tuple[list[int], Any]]:
    """``(positions, query set)`` per ranking call of a :class:`~medlama.runs.queries.QuerySet`: the whole
    set with one pool; with per-relation pools (the ``relation`` rule), each relation's queries with their own
    pool as candidates."""
    if queries.pools is None:
        return [(list(range(len(queries))), queries)]
    parts = []
    for relation in dict.fromkeys(queries.relations):
        pick = [i for i, r in enumerate(queries.relations) if r == relation]
        part = queries.subset(pick)
        parts.append((pick, replace(part, candidates=list(queries.pools[relation]), rule="evaluated", pools=None)))
    return parts


def pool_hash(names: Sequence[str]) -> str:
    """SHA-256 of the sorted, distinct candidate names (one per line, UTF-8): equal pools, equal hashes."""
    return hashlib.sha256("\n".join(sorted(set(names))).encode("utf-8")).hexdigest()


def pool_record(rule: str, candidates: Sequence[str], pools: Mapping[str, Sequence[str]] | None = None) -> dict:
    """What a result records of its candidate pool: ``rule``, ``size`` and ``sha256`` of the pool (for the
    ``relation`` rule, of the union) and, per relation, each pool's own size and hash."""
    record = {"rule": rule, "size": len(set(candidates)), "sha256": pool_hash(candidates)}
    if pools is not None:
        record["per_relation"] = {relation: {"size": len(set(names)), "sha256": pool_hash(names)}
                                  for relation, names in sorted(pools.items())}
    return record


def choices_record(ids: Sequence[str], choices: Sequence[Sequence[str]]) -> dict:
    """What a result records of a multiple-choice query set's pools: rule ``choices``, the size and SHA-256 of
    their union, the SHA-256 of every query's choices in order (``choices_sha256``: equal only for the same
    draw), the mean number of choices and the chance level (the mean of 1 / choices: a uniform guess's acc@1)."""
    union = sorted({name for row in choices for name in row})
    drawn = hashlib.sha256("\n".join(f"{i}\t" + "\t".join(row) for i, row in zip(ids, choices)).encode("utf-8"))
    return {"rule": CHOICES, "size": len(union), "sha256": pool_hash(union), "choices_sha256": drawn.hexdigest(),
            "mean_choices": sum(map(len, choices)) / len(choices) if choices else 0.0,
            "chance_level": chance_level(choices)}


def one_choice_pool(queries: Any, index: int) -> Any:
    """Query ``index`` of a multiple-choice query set alone, its choices as its candidates (a plain query set)."""
    return replace(queries.subset([index]), candidates=list(queries.choices[index]), rule="evaluated", choices=None)


def rank_choices(prober: Any, queries: Any, top_k: int, *, all_scores: bool = False,
                 layers: bool = False) -> Ranking | dict[int, Ranking]:
    """Each query of a multiple-choice ``queries`` ranked against its own choices: ``prober``'s own ranking where it
    ranks per-query pools in one call (its :attr:`~medlama.probers.prober.Prober.ranks_choices`), else one query
    at a time, each as a query set whose candidates are its choices (so every method ranks them as it ranks a
    pool). ``prober``: a :class:`~medlama.probers.prober.Prober` (typed ``Any``: that module imports this one).
    ``layers``: a layer sweep's ``{layer: Ranking}``."""
    if prober.ranks_choices:
        if layers:
            return prober.rank_layers_scored(queries, top_k, all_scores=all_scores)
        return prober.rank_scored(queries, top_k=top_k, all_scores=all_scores)
    rows: dict[int | None, list] = {}
    for index in range(len(queries)):
        one = one_choice_pool(queries, index)
        ranked = prober.rank_layers_scored(one, top_k, all_scores=all_scores) if layers else \
            {None: prober.rank_scored(one, top_k=top_k, all_scores=all_scores)}
        for layer, ranking in ranked.items():
            rows.setdefault(layer, []).extend(ranking.rows())
    if layers:
        return {layer: Ranking.from_rows(layer_rows) for layer, layer_rows in rows.items()}
    return Ranking.from_rows(rows.get(None, []))
