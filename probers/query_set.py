"""A probe's queries (:class:`QuerySet`): cloze texts with the object slot as ``[Y]``, their gold answers, and
the candidate names each is ranked against (with the rule that chose them). Where they come from is
:mod:`medlama.runs.queries`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from medlama.core.defaults import MASK_PLACEHOLDER
from medlama.core.errors import MedlamaInputError
from medlama.metrics import answer_normalizer
from medlama.probers.pools import CHOICES, choices_record, pool_record


@dataclass(frozen=True)
class QuerySet:
    """Cloze queries with the object slot as ``[Y]``, their gold answers, and the candidate names.

    Probers fill ``[Y]`` with their own model's mask token (``with_mask``).
    """

    ids: list[str]
    relations: list[str]
    texts: list[str]
    gold: list[list[str]]
    candidates: list[str]
    name: str = "queries"
    #: What identifies the data (dataset, config, relations, release commit or Hub revision, content hash):
    #: the ``data`` block of a result's provenance. Never a local path.
    info: dict = field(default_factory=dict, compare=False)
    #: How the candidates were chosen (:data:`~medlama.probers.pools.CANDIDATE_RULES`).
    rule: str = "evaluated"
    #: Rule ``relation``: each relation's own pool (``candidates`` is then their union); probers rank each
    #: relation's queries against its pool (:func:`medlama.probers.pools.pool_parts`).
    pools: dict[str, list[str]] | None = None
    #: Rule ``choices`` (a multiple-choice config): each query's own pool, its choices (``candidates`` is then
    #: their union); probers rank each query against its choices (:func:`medlama.probers.pools.rank_choices`).
    choices: list[list[str]] | None = None
    #: Each query's subject (MedLAMA: the head concept's CUI); few-shot examples never share the query's
    #: (:mod:`medlama.probers.causal.fewshot`). ``None``: not known, and few-shot prompting is refused.
    subjects: list[str] | None = None
    #: The query set this one was cut from (:meth:`subset`, :meth:`limit_per_relation`): the facts few-shot
    #: examples are drawn from, so a part of a set draws the examples the whole set would. ``None``: itself.
    whole: "QuerySet | None" = field(default=None, compare=False, repr=False)
    #: What names each query's fact, where the data has it (MedLAMA: ``head_cui``, ``head_name`` and
    #: ``answer_cuis``, aligned with ``gold``): written into each ``predictions.jsonl`` row, so that a fact and
    #: its inverse can be paired afterwards (``medlama consistency``).
    facts: list[dict] | None = field(default=None, compare=False)
    #: Each query's subject name as the data names it (MedLAMA's ``head_name``, BioLAMA's ``sub_label``), written
    #: to the prediction rows (``subject``) so that a run's facts can be looked up in a corpus
    #: (``medlama frequency``); ``None``: unknown.
    subject_names: list[str] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        sizes = {len(self.ids), len(self.relations), len(self.texts), len(self.gold)}
        if len(sizes) != 1 or any(column is not None and len(column) != len(self.ids)
                                  for column in (self.choices, self.subjects, self.facts, self.subject_names)):
            raise ValueError(f"query set columns differ in length: {sorted(sizes)}")
        for index, text in enumerate(self.texts):
            if text.count(MASK_PLACEHOLDER) != 1:
                raise MedlamaInputError(f"query {self.ids[index]!r} has {text.count(MASK_PLACEHOLDER)} "
                                        f"{MASK_PLACEHOLDER} slots, needs exactly one: {text!r}")

    def check_gold(self, match: str) -> None:
        """Refuse, before anything is ranked, a query none of whose gold answers is left under ``match``'s
        matching key (``normalized``: ``.``, ``A``, ``The`` become nothing), which acc@k could not score."""
        key = answer_normalizer() if match == "normalized" else str  # the metric's own key (exact: the text)
        for index, gold in enumerate(self.gold):
            if not any(key(answer) for answer in gold):
                raise MedlamaInputError(
                    f"{self.name}: query {self.ids[index]!r} (relation {self.relations[index]}) has no gold answer "
                    f"left under --match {match}: {list(gold)!r} all become nothing; rebuild the data (medlama "
                    "build refuses such labels) or probe with --match exact")

    def __len__(self) -> int:
        return len(self.texts)

    def with_mask(self, mask_token: str) -> list[str]:
        """The queries with ``[Y]`` replaced by ``mask_token``."""
        return [text.replace(MASK_PLACEHOLDER, mask_token) for text in self.texts]

    def subset(self, indices: Sequence[int], name: str | None = None) -> "QuerySet":
        pick = list(indices)
        return QuerySet([self.ids[i] for i in pick], [self.relations[i] for i in pick],
                        [self.texts[i] for i in pick], [self.gold[i] for i in pick], self.candidates,
                        name or self.name, {**self.info, "subset": len(pick)} if self.info else {},
                        self.rule, self.pools, None if self.choices is None else [self.choices[i] for i in pick],
                        None if self.subjects is None else [self.subjects[i] for i in pick], self.whole or self,
                        None if self.facts is None else [self.facts[i] for i in pick],
                        None if self.subject_names is None else [self.subject_names[i] for i in pick])

    def pool_record(self) -> dict:
        """The candidate pool as a result records it: rule, size and SHA-256 of the sorted names
        (:func:`~medlama.probers.pools.pool_record`)."""
        if self.choices is not None:
            return choices_record(self.ids, self.choices)
        pools = None if self.pools is None else {r: p for r, p in self.pools.items() if r in set(self.relations)}
        return pool_record(self.rule, self.candidates, pools)

    def limit_per_relation(self, limit: int) -> "QuerySet":
        """The first ``limit`` queries of each relation, in query order, with the same candidates (a quick
        check; its scores are not the benchmark's, though a hit means what it means in a full run). Named
        ``<name>[first N per relation]``, and recorded as ``limit_per_relation`` in :attr:`info`."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise MedlamaInputError(f"the query limit must be an integer >= 1, got {limit!r}")
        seen: dict[str, int] = {}
        pick = []
        for index, relation in enumerate(self.relations):
            seen[relation] = seen.get(relation, 0) + 1
            if seen[relation] <= limit:
                pick.append(index)
        if len(pick) == len(self):
            return self
        subset = self.subset(pick, name=f"{self.name}[first {limit} per relation]")
        return QuerySet(subset.ids, subset.relations, subset.texts, subset.gold, subset.candidates, subset.name,
                        {**self.info, "limit_per_relation": limit} if self.info else {}, self.rule, self.pools,
                        subset.choices, subset.subjects, subset.whole, subset.facts,
                        subset.subject_names)


def choice_queries(rows, texts: list[str], gold, candidates: str, *, name: str, info: dict,
                   relations: list[str] | None = None, subject_names: list[str] | None = None,
                   subjects: list[str] | None = None) -> QuerySet:
    """The :class:`QuerySet` of multiple-choice rows (columns ``id``, ``relation``, ``choices``): each query's
    pool is its own ``choices`` (rule ``choices``), ``candidates`` their union. A candidate rule other than the
    default is refused: the choices are the pools."""
    if candidates != "evaluated":
        raise MedlamaInputError(f"{name!r} is a multiple-choice config: each query is ranked against its own "
                                f"choices, so the candidate rule {candidates!r} does not apply; leave --candidates out")
    choices = [list(row) for row in rows["choices"]]
    return QuerySet(ids=list(rows["id"]), relations=relations or list(rows["relation"]), texts=texts,
                    gold=[list(g) for g in gold], candidates=sorted({n for row in choices for n in row}), name=name,
                    info=info, rule=CHOICES, choices=choices, facts=fact_columns(rows),
                    subject_names=subject_names, subjects=subjects)


#: The columns naming a MedLAMA query's fact (:attr:`QuerySet.facts`).
FACT_COLUMNS = ("head_cui", "head_name", "answer_cuis")


def fact_columns(rows) -> list[dict] | None:
    """Each row's :data:`FACT_COLUMNS` (rows: a ``datasets.Dataset``), or ``None`` when it lacks one."""
    if not set(FACT_COLUMNS) <= set(getattr(rows, "column_names", None) or ()):
        return None
    columns = [rows[name] for name in FACT_COLUMNS]
    return [{"head_cui": cui, "head_name": name, "answer_cuis": list(answers)} for cui, name, answers in zip(*columns)]
