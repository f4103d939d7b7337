"""Knowledge bases for context-variance sets from built BioLAMA and MedLAMA folders.

Both adapters turn the rows of a built folder into :class:`~.knowledge.Triple` s, one per gold object
of a row (that object is ``O_t``), with the row's other objects as ``O_cor`` and a shared
:class:`~.knowledge.EntityPool` per entity type as ``O_pool``. A triple's id is ``<row id>:<object id>``
and its pool's id is ``EntityPool.type`` (the sets record it, and the scorer ranks that pool).

BioLAMA (``medlama build biolama``)
    Rows carry the subject's URI, label, type and aliases, and the objects' URIs, labels and aliases;
    ``obj_types`` is the row's object type(s) (UMLS semantic types, Wikidata classes; CTD leaves it
    empty). The pool of a row is every entity of its object type(s) in the loaded relations, all
    splits: the objects of rows with that type and, with ``include_subjects``, the subjects whose
    ``sub_type`` is that type. A row without object types (CTD) gets its relation's objects as pool.
    Pools are per source (``umls:T047``, ``wikidata:Q12136``, ``ctd:relation:CD1``), relations are named
    ``<source>_<PID>`` as the BioLAMA prober names them, and the prompt is the relation's manual
    template. ``O_cor`` is the union of the objects of every row with the same subject and relation.

MedLAMA (``medlama build medlama``)
    There are no entity types; as the MedLAMA probe does, a relation's pool is its answer set: every
    answer concept (CUI) of the relation in the ``full`` set (a superset of ``hard``), so pools do not
    shrink when only hard rows are probed. A concept named differently in different rows gets the other
    names as aliases. The prompt is the row's query (``query_human`` by default: ``[X]`` already filled).
    A row whose head is one of its own answers keeps its other answers as triples.

Entity types are kept on the pools, not on the entities: the same URI can carry different types in
different relations, and :class:`~.knowledge.KnowledgeBase` would refuse that.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from medlama.datasets.context_variance.knowledge import Entity, EntityPool, KnowledgeBase, Triple, _merge
from medlama.datasets.folders import load_config  # not load_dataset(DIR): its cache mixes up folders
from medlama.core.errors import MedlamaInputError
from medlama.datasets.prompts import DEFAULT_PROMPT_COLUMN, PROMPT_COLUMNS


def _load(data_dir: Path, config: str, split: str, what: str):
    if not (data_dir / "README.md").is_file():
        raise MedlamaInputError(f"not a built dataset folder (no README.md); run `medlama build {what} --out DIR`",
                                file=data_dir)
    return load_config(data_dir, config, split)


def _check_columns(data, needed: Sequence[str], data_dir: Path, config: str, what: str) -> None:
    missing = [name for name in needed if name not in data.column_names]
    if missing:
        raise MedlamaInputError(f"config {config!r} is not a {what} build (missing columns {missing})",
                                file=data_dir)


def _pick_relations(present: Iterable[str], relations: Sequence[str] | None, data_dir: Path,
                    aliases: dict[str, str] | None = None) -> set[str] | None:
    if not relations:
        return None
    known = sorted(set(present))
    wanted = {(aliases or {}).get(rel, rel) for rel in relations}
    unknown = sorted(wanted - set(known))
    if unknown:
        raise MedlamaInputError(f"unknown relation(s) {unknown}; known: {known}", file=data_dir)
    return wanted


class SharedPoolKnowledgeBase(KnowledgeBase):
    """:class:`~.knowledge.KnowledgeBase` whose entity table reads each shared pool once.

    The base class walks every triple's pool, which costs triples x pool size (43,327 MedLAMA triples
    over pools of up to 2,800 entities: about a minute); a pool shared by many triples gives the same
    entities every time, so reading it once gives the same table (merging is idempotent).
    """

    def __init__(self, triples) -> None:
        self.triples = tuple(triples)
        self._entities = {}
        seen_pools: set[int] = set()
        for triple in self.triples:
            pool = () if id(triple.pool) in seen_pools else triple.pool
            seen_pools.add(id(triple.pool))
            for entity in (triple.subject, *pool, *triple.correct_objects):
                known = self._entities.get(entity.id)
                self._entities[entity.id] = entity if known is None else _merge(known, entity)


def _finish(triples: list[Triple], data_dir: Path, what: str) -> KnowledgeBase:
    if not triples:
        raise MedlamaInputError(f"no triples in the selected {what} rows", file=data_dir)
    return SharedPoolKnowledgeBase(triples)


# ---------------------------------------------------------------------------------------- MedLAMA
def knowledge_base_from_medlama(data_dir: str | Path, config: str = "hard", *,
                                relations: Sequence[str] | None = None, prompt_column: str = DEFAULT_PROMPT_COLUMN,
                                limit: int | None = None) -> KnowledgeBase:
    """Triples of a built MedLAMA folder (``config`` ``hard`` or ``full``, or ``<set>_<relation>``).

    ``limit`` keeps the first ``limit`` rows of each relation (in row order).
    """
    data_dir = Path(data_dir)
    if prompt_column not in PROMPT_COLUMNS:
        raise MedlamaInputError(f"unknown prompt column {prompt_column!r}; choose {' or '.join(PROMPT_COLUMNS)}")
    data = _load(data_dir, config, "test", "medlama")
    needed = ("id", "relation", "head_cui", "head_name", "answer_cuis", "answer_names", prompt_column)
    _check_columns(data, needed, data_dir, config, "MedLAMA")
    try:
        full = data if config == "full" else _load(data_dir, "full", "test", "medlama")
        _check_columns(full, needed, data_dir, "full", "MedLAMA")
    except MedlamaInputError:
        full = data  # a folder without the full set: pools from the rows at hand
    wanted = _pick_relations(data["relation"], relations, data_dir)

    def keep(relation: str) -> bool:
        return wanted is None or relation in wanted

    pool_members: dict[str, dict[str, Entity]] = {}
    correct: dict[tuple[str, str], dict[str, Entity]] = {}
    for relation, head, cuis, names in zip(full["relation"], full["head_cui"], full["answer_cuis"],
                                           full["answer_names"]):
        if not keep(relation):
            continue
        members = pool_members.setdefault(relation, {})
        gold = correct.setdefault((head, relation), {})
        for cui, name in zip(cuis, names):
            entity = Entity(cui, name)
            members[cui] = _merge_names(members.get(cui), entity)
            gold[cui] = _merge_names(gold.get(cui), entity)
    pools = {relation: EntityPool(members.values(), type=relation) for relation, members in pool_members.items()}

    triples: list[Triple] = []
    taken: dict[str, int] = {}
    for row_id, relation, head, head_name, cuis, names, prompt in zip(
            data["id"], data["relation"], data["head_cui"], data["head_name"], data["answer_cuis"],
            data["answer_names"], data[prompt_column]):
        if not keep(relation):
            continue
        if limit is not None and taken.get(relation, 0) >= limit:
            continue
        taken[relation] = taken.get(relation, 0) + 1
        subject = Entity(head, head_name)
        gold = correct.get((head, relation)) or {cui: Entity(cui, name) for cui, name in zip(cuis, names)}
        pool = pools.get(relation) or EntityPool(gold.values(), type=relation)
        for cui, name in zip(cuis, names):
            if cui == head:
                continue
            triples.append(_Triple(f"{row_id}:{cui}", subject, relation, Entity(cui, name), tuple(gold.values()),
                                   pool, prompt))
    return _finish(triples, data_dir, "MedLAMA")


# ---------------------------------------------------------------------------------------- BioLAMA
def knowledge_base_from_biolama(data_dir: str | Path, config: str = "all", *, split: str = "test",
                                relations: Sequence[str] | None = None, include_subjects: bool = True,
                                limit: int | None = None) -> KnowledgeBase:
    """Triples of ``split`` of a built BioLAMA folder (``config``: ``all``, a source or ``<source>_<PID>``).

    ``relations`` are named ``UR44`` or ``umls_UR44``; ``limit`` keeps the first rows of each relation.
    Pools are built from every split of the loaded relations.
    """
    data_dir = Path(data_dir)
    splits = {}
    for name in ("train", "dev", "test"):
        try:
            splits[name] = _load(data_dir, config, name, "biolama")
        except MedlamaInputError:
            if name == split:
                raise
    if split not in splits:
        raise MedlamaInputError(f"unknown split {split!r}; BioLAMA has train, dev and test", file=data_dir)
    needed = ("id", "relation", "source", "sub_uri", "sub_label", "sub_type", "sub_aliases", "obj_uris",
              "obj_labels", "obj_types", "obj_aliases", "template")
    for name, data in splits.items():
        _check_columns(data, needed, data_dir, config, "BioLAMA")
    present = {f"{s}_{r}" for s, r in zip(splits[split]["source"], splits[split]["relation"])}
    short = {}
    for name in present:
        short.setdefault(name.split("_", 1)[1], name)
    wanted = _pick_relations(present, relations, data_dir, short)

    def relation_of(source: str, relation: str) -> str:
        return f"{source}_{relation}"

    def pool_keys(source: str, relation: str, types: Sequence[str]) -> tuple[str, ...]:
        types = sorted({t for t in types if t and t.strip()})
        return tuple(f"{source}:{t}" for t in types) or (f"{source}:relation:{relation}",)

    members: dict[str, dict[str, Entity]] = {}
    correct: dict[tuple[str, str], dict[str, Entity]] = {}
    for data in splits.values():
        for row in data:
            relation = relation_of(row["source"], row["relation"])
            if wanted is not None and relation not in wanted:
                continue
            objects = [Entity(u, label, tuple(aliases))
                       for u, label, aliases in zip(row["obj_uris"], row["obj_labels"], row["obj_aliases"]
                                                    or [[] for _ in row["obj_uris"]])]
            gold = correct.setdefault((row["sub_uri"], relation), {})
            for key in pool_keys(row["source"], row["relation"], row["obj_types"]):
                bucket = members.setdefault(key, {})
                for entity in objects:
                    bucket[entity.id] = _merge_names(bucket.get(entity.id), entity)
            for entity in objects:
                gold[entity.id] = _merge_names(gold.get(entity.id), entity)
    if include_subjects:
        for data in splits.values():
            for row in data:
                relation = relation_of(row["source"], row["relation"])
                if wanted is not None and relation not in wanted:
                    continue
                key = f"{row['source']}:{row['sub_type']}"
                if row["sub_type"] and key in members:
                    subject = Entity(row["sub_uri"], row["sub_label"], tuple(row["sub_aliases"] or ()))
                    members[key][subject.id] = _merge_names(members[key].get(subject.id), subject)

    pools: dict[tuple[str, ...], EntityPool] = {}

    def pool_for(keys: tuple[str, ...]) -> EntityPool:
        found = pools.get(keys)
        if found is None:
            union: dict[str, Entity] = {}
            for key in keys:
                for entity_id, entity in members.get(key, {}).items():
                    union[entity_id] = _merge_names(union.get(entity_id), entity)
            found = pools[keys] = EntityPool(union.values(), type="+".join(keys))
        return found

    triples: list[Triple] = []
    taken: dict[str, int] = {}
    for row in splits[split]:
        relation = relation_of(row["source"], row["relation"])
        if wanted is not None and relation not in wanted:
            continue
        if limit is not None and taken.get(relation, 0) >= limit:
            continue
        taken[relation] = taken.get(relation, 0) + 1
        subject = Entity(row["sub_uri"], row["sub_label"], tuple(row["sub_aliases"] or ()))
        pool = pool_for(pool_keys(row["source"], row["relation"], row["obj_types"]))
        gold = correct[(row["sub_uri"], relation)]
        for uri in dict.fromkeys(row["obj_uris"]):
            if uri == subject.id:
                continue
            triples.append(_Triple(f"{row['id']}:{uri}", subject, relation, gold[uri], tuple(gold.values()), pool,
                                   row["template"]))
    return _finish(triples, data_dir, "BioLAMA")


# ------------------------------------------------------------------------------------------ helpers
def _merge_names(known: Entity | None, new: Entity) -> Entity:
    """``known`` with ``new``'s name and aliases added as aliases (the first name seen stays the name)."""
    if known is None:
        return new
    if known == new:
        return known
    aliases = tuple(dict.fromkeys(a for a in (*known.aliases, new.name, *new.aliases) if a != known.name))
    return Entity(known.id, known.name, aliases, known.type or new.type)


@dataclass(frozen=True)
class IdentifiedTriple(Triple):
    """A :class:`~.knowledge.Triple` with the id the sets and UCM records carry."""

    triple_id: str = ""


def _Triple(triple_id: str, subject: Entity, relation: str, target: Entity, correct: tuple[Entity, ...],
            pool: EntityPool, prompt: str) -> Triple:
    return IdentifiedTriple(subject, relation, target, correct, pool, prompt, triple_id=triple_id)


def triple_id(triple: Triple) -> str:
    """The triple's id: ``<row id>:<object id>`` for adapter-made triples, else ``subject|relation|target``."""
    return getattr(triple, "triple_id", "") or "|".join(triple.key)


def pool_id(triple: Triple) -> str:
    """The id of the triple's pool: its ``type`` (set by the adapters), else a hash of its entity ids."""
    if triple.pool.type:
        return str(triple.pool.type)
    digest = hashlib.sha256("\n".join(sorted(triple.pool.ids)).encode()).hexdigest()[:12]
    return f"pool-{digest}"
