"""MedLAMA as an MTEB retrieval task: :func:`mteb_task` and the task class, :class:`MedlamaRetrieval`.

What the task holds (one subset per relation, the pools, the object slot's filler) and the data helpers it shares
with ``medlama export mteb`` are :mod:`medlama.integrations.mteb.data`'s. MTEB itself is an optional extra
(``pip install "medlama[mteb]"``): importing this module without it is a message naming the extra.

The data come from medlama's own loaders, already in memory: :meth:`MedlamaRetrieval.load_data` only puts
them in MTEB's layout, so nothing is downloaded and the dataset path in the metadata names the data, never a
Hub repository MTEB could fetch. The object slot is filled when MTEB runs a model
(:meth:`MedlamaRetrieval._evaluate_subset`), since only then is the model's mask token known (the data as
loaded hold the fixed filler: the given ``mask_token``, else the blank).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from medlama.core.extras import require

require("mteb", "mteb", what="MedLAMA as an MTEB task")  # before MTEB's own imports below, for the message

from datasets import Dataset  # noqa: E402
from mteb.abstasks.retrieval import AbsTaskRetrieval  # noqa: E402
from mteb.abstasks.task_metadata import TaskMetadata  # noqa: E402

from medlama.integrations.mteb.data import (BIBTEX, BLANK, MAIN_SCORE, REFERENCE, UMLS_LICENCE,  # noqa: E402
                                            RelationData, check_task_arguments, fill_slot, model_mask_token,
                                            relation_data, task_name)
from medlama.runs.queries import queries_from  # noqa: E402

__all__ = ["MedlamaRetrieval", "build_task", "mteb_task"]

logger = logging.getLogger(__name__)


def _metadata(subsets: Sequence[RelationData], *, config: str, limit: int | None, mask_token: str | None,
              identity: dict) -> TaskMetadata:
    filler = repr(mask_token) if mask_token else f"the model's mask token (else the neutral blank {BLANK!r})"
    part = "" if limit is None else (f" Only the first {limit} queries of each relation are kept (the pools stay "
                                     "whole): a quick check, not the benchmark's scores.")
    description = (
        f"MedLAMA ({config} set): biomedical knowledge probing as retrieval. Each subset is one UMLS relation; "
        "a query is the relation's cloze prompt for a head concept with the object slot filled by "
        f"{filler}, the corpus is the relation's candidate pool (the head and answer names of its rows), and "
        "every gold answer name is relevant. hit_rate_at_10 is MedLAMA's acc@10 under the per-relation pool "
        f"rule.{part} The names come from the UMLS Metathesaurus: use under a UMLS licence.")
    revision = identity.get("revision") or identity.get("sha256") or identity.get("release_commit") or "local"
    return TaskMetadata(
        name=task_name(config, limit), description=description, reference=REFERENCE,
        dataset={"path": f"medlama:{identity.get('id') or 'medlama'}", "revision": str(revision)},
        type="Retrieval", category="t2t", modalities=["text"], eval_splits=["test"],
        eval_langs={subset.relation: ["eng-Latn"] for subset in subsets}, main_score=MAIN_SCORE,
        # the names are those of the UMLS 2021AA release (3 May 2021) that MedLAMA was built from
        date=("2021-05-03", "2021-05-03"), domains=["Medical", "Academic", "Written"],
        task_subtypes=["Question answering"], license=UMLS_LICENCE,
        annotations_creators="derived", dialect=[], sample_creation="created", bibtex_citation=BIBTEX,
        adapted_from=None, is_public=False, contributed_by="medlama")


class MedlamaRetrieval(AbsTaskRetrieval):
    """MedLAMA, one subset per relation (see :mod:`medlama.integrations.mteb.task`).

    :attr:`filled_with`: the slot filler of the last run, per subset (the model's mask token, or
    :data:`~medlama.integrations.mteb.task.BLANK`).
    """

    metadata: TaskMetadata

    def __init__(self, subsets: Sequence[RelationData], mask_token: str | None = None, **kwargs: Any) -> None:
        self.subsets = {subset.relation: subset for subset in subsets}
        self.mask_token = mask_token
        self.filled_with: dict[str, str] = {}
        super().__init__(**kwargs)

    def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
        """The subsets in MTEB's layout. Until a model is run, the queries' slot holds the fixed filler
        (``mask_token``, else the blank), so that what reads the data outside an evaluation (statistics, a
        push to the Hub) sees the export's queries, never medlama's ``[Y]`` placeholder."""
        if self.data_loaded:
            return
        self.dataset = {}
        for relation, subset in self.subsets.items():
            corpus = Dataset.from_dict({"id": subset.corpus_ids, "text": subset.names})
            queries = self._queries(subset, self.mask_token or BLANK)
            relevant = {query: {doc: 1 for doc in docs} for query, docs in subset.relevant.items()}
            self.dataset[relation] = {"test": {"corpus": corpus, "queries": queries, "relevant_docs": relevant,
                                               "top_ranked": None}}
        self.data_loaded = True

    def _evaluate_subset(self, model: Any, data_split: Any, *, hf_subset: str, **kwargs: Any):
        filler = self.mask_token or model_mask_token(model) or BLANK
        if filler == BLANK and not self.mask_token:
            logger.warning("%s: the model has no mask token; the queries' object slot is the blank %r",
                           self.metadata.name, BLANK)
        self.filled_with[hf_subset] = filler
        rendered = {**data_split, "queries": self._queries(self.subsets[hf_subset], filler)}
        return super()._evaluate_subset(model, rendered, hf_subset=hf_subset, **kwargs)

    @staticmethod
    def _queries(subset: RelationData, filler: str) -> Dataset:
        return Dataset.from_dict({"id": subset.query_ids,
                                  "text": [fill_slot(text, filler) for text in subset.templates]})


def build_task(subsets: Sequence[RelationData], *, config: str, limit: int | None, mask_token: str | None,
               identity: dict) -> MedlamaRetrieval:
    """The task over ``subsets`` (:func:`medlama.integrations.mteb.task.relation_data`)."""
    metadata = _metadata(subsets, config=config, limit=limit, mask_token=mask_token, identity=identity)
    # MTEB reads the metadata from the class (unload_data drops an instance's own), so each task gets its class
    task_class = type(metadata.name, (MedlamaRetrieval,), {"metadata": metadata, "__module__": __name__})
    return task_class(subsets, mask_token)


def mteb_task(data: Any = None, config: str = "hard", relations: Sequence[str] | str | None = None, *,
              limit: int | None = None, mask_token: str | None = None):
    """MedLAMA ``config`` (``hard`` or ``full``) of ``data`` as an MTEB retrieval task (module docstring).

    ``data``: as ``medlama.probe``'s (``None``: the build kept in the cache; a built folder, a ``push-dataset``
    dry run or a Hub dataset id); ``relations``: the subsets (default: every relation); ``limit``: only the
    first ``limit`` queries of each relation, against the whole pool (a quick check, as ``--limit``);
    ``mask_token``: the slot's filler whatever the model (default: the model's own mask token, else
    :data:`BLANK`). Arguments are checked before any data is read.

    >>> import mteb, medlama
    >>> task = medlama.mteb_task(data="out/medlama", relations=["may_treat"])
    >>> mteb.evaluate(model, task, encode_kwargs={"batch_size": 128})  # the preset's batch size
    """
    relations = check_task_arguments(config, relations, limit, mask_token)
    queries = queries_from(data, config=config, relations=relations, candidates="relation")
    if limit is not None:
        queries = queries.limit_per_relation(limit)
    return build_task(relation_data(queries), config=config, limit=limit, mask_token=mask_token,
                      identity=dict(queries.info))

