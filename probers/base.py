"""The one interface every prober implements, and scoring through the acc@k metric module."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import TypeVar

from medlama.errors import MedlamaInputError
from medlama.probers.queries import QuerySet
from medlama.settings import check, choices_of, fields_of, type_hints

S = TypeVar("S")

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


def check_settings(settings: S) -> S:
    """Check a prober's settings dataclass (:func:`medlama.settings.check`), wording a value outside its
    choices or bounds as the probers always have: "unknown initial fill 'left'; choose from [...]", "beam
    size must be >= 1, got 0" (the noun is the field's ``noun`` metadata, else its name)."""
    hints = type_hints(settings)
    for field in fields_of(settings):
        value = getattr(settings, field.name)
        noun = field.metadata.get("noun") or field.name.replace("_", " ")
        allowed = choices_of(field, hints.get(field.name))
        if allowed is not None and isinstance(value, str) and value not in allowed:
            raise MedlamaInputError(f"unknown {noun} {value!r}; choose from {list(allowed)}")
        low = field.metadata.get("min")
        if low is not None and isinstance(value, (int, float)) and not isinstance(value, bool) and value < low:
            raise MedlamaInputError(f"{noun} must be >= {low}, got {value}")
    return check(settings)


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
