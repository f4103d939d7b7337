"""One model probed by one method, with its batch size ``auto`` resolved as ``medlama probe`` resolves it: the
probe of ``medlama recipe`` and ``medlama sweep`` (their ``--batch-size`` is the one ``medlama probe`` offers,
:class:`~medlama.core.batching.BatchSizeFlag`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from medlama.core.batching import is_auto
from medlama.probers.query_set import QuerySet
from medlama.probers.registry import make_prober
from medlama.runs.result import ProbeResult, result_of
from medlama.runs.resume import rank_units
from medlama.runs.scores import REPORT_KS
from medlama.runs.workflow import ModelRun, check_depth, probe


def probe_model(method: str, model: str | Path, settings: Any, queries: QuerySet, *, label: str,
                device: str | None = None, top_k: int = 10, ks=REPORT_KS, match: str = "exact") -> ProbeResult:
    """``model`` (a folder or Hub id) probed by ``method`` with its ``settings`` on ``queries``, scored as
    :func:`~medlama.runs.workflow.probe` scores a prober made by hand. With ``batch_size="auto"`` the prober is
    made at the largest batch size that fits (:class:`~medlama.runs.resume.Unit`'s, made again at half the size
    on out-of-memory), and the result records ``"auto"`` beside the size it resolved to
    (``resolved_batch_size``)."""
    if not is_auto(settings):
        return probe(make_prober(method, model, settings, device=device), queries, label=label, top_k=top_k, ks=ks,
                     match=match)
    check_depth(top_k, ks)
    unit = ModelRun(label, method, model, settings).unit()
    ranking, note, seconds = rank_units(queries, [unit], top_k=top_k, device=device)[label]
    return result_of(note, queries, ranking, seconds, label=label, ks=ks, match=match, top_k=top_k,
                     ranked_top_k=top_k)
