"""acc@k scoring: a probe's predictions scored per relation, micro and macro, by the acc@k metric module
(:mod:`medlama.metrics.acc_at_k`), the one scorer of every number a probe reports."""

from __future__ import annotations

from functools import lru_cache

from medlama.datasets.benchmark import ALWAYS_SCORED
from medlama.probers.query_set import QuerySet

#: The cut-offs every report shows (every probe scores them: :data:`~medlama.datasets.benchmark.ALWAYS_SCORED`).
REPORT_KS = ALWAYS_SCORED


@lru_cache(maxsize=None)
def acc_at_k_module():
    """The acc@k metric module, loaded once."""
    from medlama.metrics import load  # the metric loader reads its module files: only when scoring

    return load("acc_at_k")


def score(queries: QuerySet, predictions: list[list[str]], *, ks=REPORT_KS, match: str = "exact") -> dict:
    """acc@k of ``predictions`` per relation, micro and macro, computed by the acc@k metric module."""
    return acc_at_k_module().compute(predictions=predictions, references=queries.gold, groups=queries.relations,
                                     k=list(ks), match=match)
