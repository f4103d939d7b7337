"""``MedLAMAEvaluator``: MedLAMA retrieval probing as a sentence-transformers evaluator, so that
``SentenceTransformerTrainer(..., evaluator=MedLAMAEvaluator(...))`` logs acc@1, acc@10 and MRR@10 while it
trains (``medlama rewire --eval-steps N`` does).

The model being trained is probed exactly as :class:`~medlama.probers.retrieval.RetrievalProber` probes a
saved one (reference settings: ``[CLS]`` of the last layer, names cut at 25 tokens and queries at 50, exact
L2 search, :func:`medlama.probers.faiss_search.rank_pool`), through the same code and the same shard plan (one ranking call per candidate pool, :func:`medlama.runs.workflow.probe`): on CPU the scores equal
``medlama probe`` on the checkpoint saved at that step, to the last digit. The model is encoded as it is
(its dtype and device; dropout off while encoding, then back to training mode): on a GPU ``medlama probe``
encodes in half precision, so the last digits may differ there.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

try:  # sentence-transformers >= 6 names the base class BaseEvaluator; SentenceEvaluator is its old alias
    from sentence_transformers.base.evaluation.evaluator import BaseEvaluator as _Base
except ImportError:  # pragma: no cover - older sentence-transformers
    from sentence_transformers.evaluation import SentenceEvaluator as _Base

from medlama.core.defaults import TRAINING_PROBE_LIMIT
from medlama.runs.queries import QuerySource, load_queries
from medlama.probers.query_set import QuerySet
from medlama.probers.retrieval import PRESETS, RetrievalProber, RetrievalSettings
from medlama.runs.workflow import probe
import json

#: Queries per relation the evaluator probes by default (:data:`medlama.core.defaults.TRAINING_PROBE_LIMIT`).
DEFAULT_LIMIT = TRAINING_PROBE_LIMIT


def mrr_at_k(predictions: Sequence[Sequence[str]], gold: Sequence[Sequence[str]], k: int = 10) -> float:
    """Mean reciprocal rank of the first gold answer within the top ``k`` (0 when none is), exact match."""
    total = 0.0
    for ranked, answers in zip(predictions, gold):
        wanted = set(answers)
        rank = next((i for i, name in enumerate(ranked[:k], start=1) if name in wanted), None)
        total += 1.0 / rank if rank else 0.0
    return total / len(predictions) if predictions else 0.0


class MedLAMAEvaluator(_Base):
    """acc@1, acc@10 and MRR@10 of retrieval probing on MedLAMA, for ``SentenceTransformerTrainer``.

    ``queries``: a :class:`~medlama.runs.queries.QuerySet`; or, without it, ``data`` (a built folder, a
    Hub dataset id or a ``Dataset``; ``None``: the cached build), ``config`` (``hard``), ``relations`` and
    ``limit`` (the first ``limit`` queries per relation; default :data:`DEFAULT_LIMIT`, ``None`` for all).
    Returns ``{"medlama_acc@1", "medlama_acc@10", "medlama_mrr@10"}`` (the prefix is ``name``); the primary
    metric is acc@10. Each evaluation's scores go to ``<output_path>/medlama_results.jsonl`` too.
    """

    def __init__(self, queries: QuerySet | None = None, *, data: Any = None, config: str = "hard",
                 relations: Sequence[str] | None = None, limit: int | None = DEFAULT_LIMIT,
                 settings: RetrievalSettings = PRESETS["reference"], name: str = "medlama") -> None:
        super().__init__()
        if queries is None:
            queries = load_queries(QuerySource.of(data, config=config, relations=relations, limit=limit))
        self.queries = queries
        self.settings = settings
        self.name = name
        self.primary_metric = "acc@10"
        self.greater_is_better = True

    def __call__(self, model: Any, output_path: str | None = None, epoch: float = -1, steps: int = -1
                 ) -> dict[str, float]:
        result = probe(RetrievalProber(model, self.settings), self.queries, label=self.name, top_k=10, ks=(1, 10))
        metrics = {"acc@1": result.acc(1), "acc@10": result.acc(10),
                   "mrr@10": mrr_at_k(result.predictions, result.gold, 10)}
        if output_path is not None:
            with (Path(output_path) / f"{self.name}_results.jsonl").open("a", encoding="utf-8") as handle:
                handle.write(json.dumps({"epoch": epoch, "steps": steps, "queries": len(self.queries), **metrics})
                             + "\n")
        metrics = self.prefix_name_to_metrics(metrics, self.name)
        self.store_metrics_in_model_card_data(model, metrics, epoch, steps)
        return metrics

    @property
    def description(self) -> str:
        return "MedLAMA retrieval probing"

    def get_config_dict(self) -> dict[str, Any]:
        return {"query_set": self.queries.name, "queries": len(self.queries)}
