"""The knowledge a context-variance set is built from: triples, correct objects and entity pools.

For a triple ``(S, relation, O_t)`` the paper needs three things (Methods, "Context Segmentation
and Retrieval", step 2):

* the subject ``S`` and the target object ``O_t``, each with the aliases used to find them in text;
* the entity pool ``O_pool``: every entity of ``O_t``'s type (e.g. every symptom), with aliases;
  pool entities are the segment delimiters and the candidates ranked at the mask;
* the correct objects ``O_cor``: the pool entities that satisfy the same relation with ``S``
  according to the knowledge base (``O_t`` is one of them); the rest of the pool is ``O_incor``.

These are plain in-memory structures; adapters from BioLAMA / MedLAMA fill them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from medlama.core.defaults import MASK_PLACEHOLDER, SUBJECT_PLACEHOLDER
from medlama.core.errors import MedlamaInputError



@dataclass(frozen=True)
class Entity:
    """A knowledge-base entity: a stable id (e.g. a UMLS CUI), a preferred name and aliases."""

    id: str
    name: str
    aliases: tuple[str, ...] = ()
    type: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id.strip():
            raise MedlamaInputError("an entity needs a non-empty id", field="id")
        if not isinstance(self.name, str) or not self.name.strip():
            raise MedlamaInputError(f"entity {self.id!r} needs a non-empty name", field="name")
        if isinstance(self.aliases, str):  # a lone string would be split into characters
            object.__setattr__(self, "aliases", (self.aliases,))
        else:
            object.__setattr__(self, "aliases", tuple(self.aliases))

    @property
    def surface_forms(self) -> tuple[str, ...]:
        """Name and aliases, stripped, without blanks or case-insensitive duplicates, name first."""
        seen: set[str] = set()
        forms = []
        for form in (self.name, *self.aliases):
            form = form.strip() if isinstance(form, str) else ""
            if form and form.lower() not in seen:
                seen.add(form.lower())
                forms.append(form)
        return tuple(forms)


class EntityPool:
    """``O_pool``: the entities of one type, in a stable order, looked up by id."""

    def __init__(self, entities: Iterable[Entity], type: str | None = None) -> None:
        self.type = type
        self._by_id: dict[str, Entity] = {}
        for entity in entities:
            known = self._by_id.get(entity.id)
            if known is not None and known != entity:
                entity = _merge(known, entity)
            self._by_id[entity.id] = entity

    def __contains__(self, entity_id: object) -> bool:
        return entity_id in self._by_id

    def __iter__(self) -> Iterator[Entity]:
        return iter(self._by_id.values())

    def __len__(self) -> int:
        return len(self._by_id)

    def __getitem__(self, entity_id: str) -> Entity:
        return self._by_id[entity_id]

    def get(self, entity_id: str) -> Entity | None:
        return self._by_id.get(entity_id)

    @property
    def ids(self) -> frozenset[str]:
        return frozenset(self._by_id)  # the pool never changes after construction

    def __repr__(self) -> str:
        return f"EntityPool(type={self.type!r}, {len(self)} entities)"


@dataclass(frozen=True)
class Triple:
    """``(S, relation, O_t)`` with its correct objects ``O_cor`` and its entity pool ``O_pool``.

    ``correct_objects`` holds every object the knowledge base gives for ``(S, relation)``; the target
    is added when missing. ``O_cor`` is part of ``O_pool`` by definition: a correct object missing from
    ``pool`` still counts as a pool entity (:meth:`in_pool`). The subject is never a candidate object,
    even when it has the pool's type (disease -> associated disease): it is left out of ``O_cor`` and
    ``O_pool``, so its mentions are plain text. ``pool`` is shared, not copied: one
    :class:`EntityPool` per entity type can serve thousands of triples.

    ``prompt_template`` is the relation's manual prompt with ``[X]`` for the subject and ``[Y]`` for
    the object slot; :meth:`prompt` fills it.
    """

    subject: Entity
    relation: str
    target: Entity
    correct_objects: tuple[Entity, ...]
    pool: EntityPool
    prompt_template: str | None = None
    correct_ids: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.relation, str) or not self.relation.strip():
            raise MedlamaInputError("a triple needs a relation", field="relation")
        if self.target.id == self.subject.id:
            raise MedlamaInputError(f"triple {self.subject.id!r} {self.relation!r} has itself as target",
                                    field="target")
        correct = {entity.id: entity for entity in self.correct_objects if entity.id != self.subject.id}
        correct.setdefault(self.target.id, self.target)
        if not isinstance(self.pool, EntityPool):
            object.__setattr__(self, "pool", EntityPool(self.pool))
        object.__setattr__(self, "correct_objects", tuple(correct.values()))
        object.__setattr__(self, "correct_ids", frozenset(correct))

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.subject.id, self.relation, self.target.id)

    def is_correct(self, entity_id: str) -> bool:
        """Whether ``entity_id`` is in ``O_cor`` (the target is)."""
        return entity_id in self.correct_ids

    def in_pool(self, entity_id: str) -> bool:
        """Whether ``entity_id`` is in ``O_pool`` (correct objects included, the subject excluded)."""
        return entity_id != self.subject.id and (entity_id in self.correct_ids or entity_id in self.pool)

    def candidates(self) -> list[Entity]:
        """``O_pool`` as entities: the pool without the subject, then correct objects missing from it."""
        entities = [entity for entity in self.pool if entity.id != self.subject.id]
        entities += [entity for entity in self.correct_objects if entity.id not in self.pool]
        return entities

    @property
    def incorrect_ids(self) -> frozenset[str]:
        """``O_incor``: the pool minus the correct objects (and the subject)."""
        return frozenset(entity.id for entity in self.pool
                         if entity.id != self.subject.id and entity.id not in self.correct_ids)

    def prompt(self, template: str | None = None, *, mask: str = MASK_PLACEHOLDER) -> str:
        """The prompt with the subject's name in ``[X]`` and ``mask`` in the object slot."""
        template = template if template is not None else self.prompt_template
        if template is None:
            raise MedlamaInputError(f"triple {self.key} has no prompt template", field="prompt_template")
        return fill_template(template, self.subject.name, mask=mask)


def fill_template(template: str, subject: str, *, mask: str = MASK_PLACEHOLDER) -> str:
    """``"[X] has symptoms such as [Y]."`` -> ``"nasal polyp has symptoms such as [Y]."``.

    The template needs exactly one ``[Y]``; ``[X]`` may be absent (a prompt written for one subject).
    """
    if template.count(MASK_PLACEHOLDER) != 1:
        raise MedlamaInputError(f"a prompt template needs exactly one {MASK_PLACEHOLDER}: {template!r}",
                                field="prompt_template")
    return template.replace(SUBJECT_PLACEHOLDER, subject).replace(MASK_PLACEHOLDER, mask)


class KnowledgeBase:
    """Triples plus every entity they mention, merged by id (aliases are united)."""

    def __init__(self, triples: Iterable[Triple]) -> None:
        self.triples: tuple[Triple, ...] = tuple(triples)
        self._entities: dict[str, Entity] = {}
        for triple in self.triples:
            for entity in (triple.subject, *triple.pool, *triple.correct_objects):
                known = self._entities.get(entity.id)
                self._entities[entity.id] = entity if known is None else _merge(known, entity)

    def __len__(self) -> int:
        return len(self.triples)

    def __iter__(self) -> Iterator[Triple]:
        return iter(self.triples)

    @property
    def entities(self) -> Mapping[str, Entity]:
        """Every subject and pool entity by id: what the corpus index matches."""
        return self._entities


def _merge(first: Entity, second: Entity) -> Entity:
    if first.type is not None and second.type is not None and first.type != second.type:
        raise MedlamaInputError(f"entity {first.id!r} has two types: {first.type!r} and {second.type!r}",
                                field="type")
    aliases = tuple(dict.fromkeys((*first.aliases, second.name, *second.aliases)))
    return Entity(first.id, first.name, tuple(a for a in aliases if a != first.name), first.type or second.type)


def entities_fingerprint(entities: Iterable[Entity]) -> str:
    """A hash of ids and lower-cased surface forms (a corpus index records that of the forms it matched)."""
    digest = hashlib.sha256()
    for entity in sorted(entities, key=lambda e: e.id):
        forms = sorted(form.lower() for form in entity.surface_forms)
        digest.update(json.dumps([entity.id, forms], ensure_ascii=False).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()
