"""The one interface every prober implements, and scoring through the acc@k metric module."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from functools import lru_cache

from medlama.probers.queries import QuerySet

#: The cut-offs every report shows.
DEFAULT_KS = (1, 5, 10)


class Prober(ABC):
    """Ranks answers for cloze queries. Implementations differ only in how they rank."""

    #: Short method name, as ``medlama probe --method`` spells it.
    method: str = "prober"

    @abstractmethod
    def rank(self, queries: QuerySet, top_k: int = 10) -> list[list[str]]:
        """Ranked predictions (best first, at most ``top_k``) for each query, in query order."""

    def settings(self) -> dict:
        """Everything that determines the predictions, for the JSON output and model cards."""
        return {"method": self.method}


@dataclass
class ProbeResult:
    """Predictions for a query set and their scores."""

    label: str
    query_set: str
    settings: dict
    ids: list[str]
    relations: list[str]
    gold: list[list[str]]
    predictions: list[list[str]]
    metrics: dict
    seconds: float
    extra: dict = field(default_factory=dict)

    def acc(self, k: int, average: str = "micro") -> float:
        """acc@k in [0, 1]; ``average`` is ``micro`` (over queries) or ``macro`` (mean over relations)."""
        return self.metrics[f"acc@{k}" if average == "micro" else f"acc@{k}_macro"]

    def to_json(self) -> dict:
        data = asdict(self)
        data["queries"] = [
            {"id": i, "relation": r, "gold": g, "top10": p[:10]}
            for i, r, g, p in zip(data.pop("ids"), data.pop("relations"), data.pop("gold"), data.pop("predictions"))
        ]
        return data


@lru_cache(maxsize=None)
def _acc_at_k_module():
    from medlama.metrics import load

    return load("acc_at_k")


def score(queries: QuerySet, predictions: list[list[str]], *, ks=DEFAULT_KS, match: str = "exact") -> dict:
    """acc@k of ``predictions`` per relation, micro and macro, computed by the acc@k metric module."""
    return _acc_at_k_module().compute(predictions=predictions, references=queries.gold, groups=queries.relations,
                                      k=list(ks), match=match)


def probe(prober: Prober, queries: QuerySet, *, label: str | None = None, top_k: int = 10, ks=DEFAULT_KS,
          match: str = "exact") -> ProbeResult:
    """Run ``prober`` on ``queries`` and score its top ``top_k`` predictions."""
    start = time.perf_counter()
    predictions = prober.rank(queries, top_k=top_k)
    seconds = time.perf_counter() - start
    return ProbeResult(label=label or prober.method, query_set=queries.name, settings=prober.settings(),
                       ids=queries.ids, relations=queries.relations, gold=queries.gold, predictions=predictions,
                       metrics=score(queries, predictions, ks=ks, match=match), seconds=seconds)
