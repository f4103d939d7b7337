"""The data of MedLAMA as an MTEB retrieval task (``medlama.mteb_task(data=..., config="hard")``), shared with
``medlama export mteb``.

What MTEB scores is what ``medlama probe --preset sentence-transformers --candidates relation`` scores:

* **one subset per relation**. A subset's corpus is that relation's candidate pool (the built folder's
  ``candidates_<config>_<relation>`` config, in its order), its queries the relation's queries and its
  relevant documents every gold name of each query (relevance 1). A query is ranked against its own
  relation's pool only, as under medlama's ``relation`` candidate rule; ``medlama probe``'s default rule
  (``evaluated``) ranks against the union of the probed relations' pools, which gives other numbers when
  several relations are probed together.
* **corpus ids** (:func:`corpus_id`): ``name-`` and a name's position in its relation's pool, zero-padded
  to :data:`ID_DIGITS` digits (``name-000000``, ``name-000001``, ...; the folder's pools are sorted by name,
  so an id is stable for a given build). They sort in pool order: MTEB ranks with ``pytrec_eval``
  (trec_eval), which breaks exact score ties by the higher document id, and medlama's exact FAISS search
  breaks them by the later pool entry, so names that encode alike (an uncased model, two spellings) are
  ranked alike by both. The prefix keeps the ids strings where a TSV reader would make numbers of them.
  Query ids are MedLAMA's own (``may_treat-0042``).
* **queries** are the human prompts with the object slot filled, when MTEB runs a model, by the model's own
  mask token (its tokenizer's, ``[MASK]`` for BERT-like models), as the ``sentence-transformers`` preset
  renders them; a model without one (an API model, a tokenizer with no mask token) gets the neutral blank
  :data:`BLANK` (``___``), which ``medlama probe`` has no counterpart for (it refuses such a model).
  ``mask_token=`` fixes the filler whatever the model.
* **main score** ``hit_rate_at_10``: the share of queries with at least one relevant document among the top 10
  (trec_eval's ``success@10``), which is medlama's acc@10 with exact matching: the pool holds each name once
  and every gold name is in it, so "a gold name in the top 10" and "a relevant id in the top 10" are one
  event. MTEB rounds it to 5 decimals.

MTEB itself is an optional extra (``pip install "medlama[mteb]"``): only :mod:`medlama.integrations.mteb.task`,
the task class and :func:`~medlama.integrations.mteb.task.mteb_task`, imports it; this module, shared with
``medlama export mteb``, does not.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from medlama.core.defaults import MASK_PLACEHOLDER
from medlama.core.errors import MedlamaInputError
from medlama.runs.arguments import ProbeArguments, relation_names

__all__ = ["BLANK", "ID_DIGITS", "RelationData", "corpus_id", "fill_slot", "mteb_task", "relation_data",
           "task_name"]

logger = logging.getLogger(__name__)

#: The object slot's filler for a model without a mask token: a cloze blank, no model's special token.
BLANK = "___"
#: Digits of a corpus id (pools have at most a few thousand names; a million is refused).
ID_DIGITS = 6
#: What MTEB reports as the task's main score (acc@10).
MAIN_SCORE = "hit_rate_at_10"

REFERENCE = "https://aclanthology.org/2022.acl-long.329"
UMLS_LICENCE = ("https://www.nlm.nih.gov/research/umls/knowledge_sources/metathesaurus/release/"
                "license_agreement.html")
BIBTEX = """@inproceedings{meng-etal-2022-rewire,
    title = "Rewire-then-Probe: A Contrastive Recipe for Probing Biomedical Knowledge of Pre-trained Language Models",
    author = "Meng, Zaiqiao and Liu, Fangyu and Shareghi, Ehsan and Su, Yixuan and Collins, Charlotte and Collier, Nigel",
    booktitle = "Proceedings of the 60th Annual Meeting of the Association for Computational Linguistics (Volume 1: Long Papers)",
    year = "2022",
    publisher = "Association for Computational Linguistics",
    pages = "4798--4810",
    url = "https://aclanthology.org/2022.acl-long.329",
}"""


def corpus_id(index: int) -> str:
    """The corpus id of the ``index``-th name of a pool (see the module docstring)."""
    if not 0 <= index < 10 ** ID_DIGITS:
        raise MedlamaInputError(f"a candidate pool of more than {10 ** ID_DIGITS:,} names cannot be numbered "
                                f"with {ID_DIGITS}-digit corpus ids")
    return f"name-{index:0{ID_DIGITS}d}"


def fill_slot(template: str, filler: str) -> str:
    """A query template with its object slot (``[Y]``) replaced by ``filler``."""
    return template.replace(MASK_PLACEHOLDER, filler)


@dataclass(frozen=True)
class RelationData:
    """One relation's subset: its pool (corpus, ids by position), its queries (with the ``[Y]`` slot) and
    every query's gold names as corpus ids."""

    relation: str
    names: list[str]
    query_ids: list[str]
    templates: list[str]
    relevant: dict[str, list[str]]

    @property
    def corpus_ids(self) -> list[str]:
        return [corpus_id(i) for i in range(len(self.names))]


def relation_data(queries) -> list[RelationData]:
    """The per-relation subsets of a :class:`~medlama.runs.queries.QuerySet` loaded with the ``relation``
    candidate rule, relations in the order they first appear."""
    if queries.pools is None:
        raise ValueError("the queries must be loaded with per-relation pools (candidates='relation')")
    subsets = []
    for relation in dict.fromkeys(queries.relations):
        names = list(queries.pools[relation])
        if len(set(names)) != len(names):
            raise MedlamaInputError(f"relation {relation!r}: its candidate pool lists a name twice")
        ids = {name: corpus_id(i) for i, name in enumerate(names)}
        rows = [i for i, r in enumerate(queries.relations) if r == relation]
        relevant = {}
        for i in rows:
            missing = [name for name in queries.gold[i] if name not in ids]
            if missing:  # acc@10 would count what MTEB cannot: refuse rather than score two things
                raise MedlamaInputError(f"query {queries.ids[i]!r}: gold name(s) {missing} are not in relation "
                                        f"{relation!r}'s candidate pool")
            relevant[queries.ids[i]] = list(dict.fromkeys(ids[name] for name in queries.gold[i]))
        subsets.append(RelationData(relation, names, [queries.ids[i] for i in rows],
                                    [queries.texts[i] for i in rows], relevant))
    return subsets


def task_name(config: str, limit: int | None = None) -> str:
    """``MedLAMAHardRetrieval`` (``MedLAMAHardFirst40Retrieval`` for the first 40 queries of each relation:
    MTEB keeps results by task name, and a limited run's scores are not the benchmark's)."""
    return f"MedLAMA{config.capitalize()}{'' if limit is None else f'First{limit}'}Retrieval"


def model_mask_token(model: Any) -> str | None:
    """The mask token of an MTEB model's tokenizer (a wrapped SentenceTransformer's, or the model's own), or
    ``None`` when it has none."""
    for owner in (model, getattr(model, "model", None)):
        token = getattr(getattr(owner, "tokenizer", None), "mask_token", None)
        if isinstance(token, str) and token:
            return token
    return None


def check_task_arguments(config: Any, relations: Any, limit: Any, mask_token: Any) -> tuple[str, ...] | None:
    """Refuse a bad argument of :func:`mteb_task` (or the export) before any data is read; returns the relations
    as a tuple (``None``: all)."""

    if not isinstance(config, str) or config not in ("hard", "full"):
        raise MedlamaInputError(f"config must be 'hard' or 'full' (one subset per relation), got {config!r}")
    ProbeArguments(limit=limit)  # the probe's own check of a limit
    if mask_token is not None and (not isinstance(mask_token, str) or not mask_token.strip()):
        raise MedlamaInputError(f"mask_token must be a non-empty string, got {mask_token!r}")
    return relation_names(relations)
