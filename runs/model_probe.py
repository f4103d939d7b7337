"""One model probed by one method, with its batch size ``auto`` resolved as ``medlama probe`` resolves it: the
probe of ``medlama recipe`` and ``medlama sweep`` (their ``--batch-size`` is the one ``medlama probe`` offers,
:class:`~medlama.core.batching.BatchSizeFlag`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from medlama.core.batching import is_auto
from medlama.core.checkpoints import checkpoint_step, list_checkpoints
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


def probe_checkpoints(model: str | Path, settings: Any, queries: QuerySet, *, name: str, device: str | None = None,
                      progress: Callable[[str], None] | None = None) -> dict[int, ProbeResult]:
    """Every saved checkpoint of the rewired ``model`` (:func:`~medlama.core.checkpoints.list_checkpoints`)
    probed by retrieval with ``settings`` on ``queries``: ``{step: result}`` in step order, each labelled
    ``name@step`` (the probes of a Contrastive-Probe training curve, as ``medlama recipe --probe-checkpoints`` and
    ``medlama sweep`` make them). ``progress``: told before each checkpoint's probe."""
    steps = {}
    for path in list_checkpoints(model):
        step = checkpoint_step(path)
        if progress is not None:
            progress(f"probing {name} at step {step}")
        steps[step] = probe_model("retrieval", path, settings, queries, label=f"{name}@{step}", device=device)
    return steps
