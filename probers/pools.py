"""Candidate pools: what each query is ranked against, in one place.

* The rules (:data:`CANDIDATE_RULES`): ``evaluated`` (the reference probe's rule and the default), ``relation``
  and ``config``; :func:`check_rule` refuses any other.
* The pools a rule gives: from a MedLAMA folder's ``candidates_<set>[_<relation>]`` configs
  (:func:`medlama_pools`), or from whole rows (:func:`row_pools`).
* Splitting a query set by pool (:func:`pool_parts`): one ranking call per pool, the one split every probe
  path takes (:func:`medlama.probers.resume.plan` cuts its shards from it).
* What a result records of its pool (:func:`pool_record`, :func:`pool_hash`: rule, size, SHA-256 of the
  sorted names), so that two results can be checked for comparability.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from medlama.core.errors import MedlamaInputError
from medlama.datasets.folders import load_config

#: How the candidate pool is chosen. ``evaluated`` (the reference probe's rule and the default): the union of
#: the evaluated relations' pools, so a relation's score depends on what else is probed with it.
#: ``relation``: each relation against its own pool, whatever else runs. ``config``: the config's whole pool.
CANDIDATE_RULES = ("evaluated", "relation", "config")


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
    """``(positions, query set)`` per ranking call of a :class:`~medlama.probers.queries.QuerySet`: the whole
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
