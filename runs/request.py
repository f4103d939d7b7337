"""What one probe asks for, grouped by concept, as :func:`medlama.runs.workflow.run_probe` takes it beside its
:class:`~medlama.runs.queries.QuerySource` (the data): :class:`ProbeModels` (what is probed, by which methods,
loaded how and where), :class:`ProbeScoring` (how the rankings are cut and scored) and :class:`ProbeOutput`
(where the results go and what is printed). ``medlama probe``, ``medlama.probe`` and the trainer callback all
build these, so the three cannot disagree."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from medlama.core.models import LoadOptions
from medlama.core.settings import check, setting
from medlama.runs.outputs import API_HINT, KEEP_PREDICTIONS

__all__ = ["ProbeModels", "ProbeOutput", "ProbeScoring"]


@dataclass(frozen=True)
class ProbeModels:
    """What is probed. ``methods``: current method names; ``settings``: each method's settings dataclass;
    ``models``: folders, Hub ids or one loaded model with its ``tokenizer`` (none: the bundled encoder; a
    loaded masked, causal or sequence-to-sequence LM is probed as it is:
    :class:`~medlama.core.loaded.LoadedModel`); ``labels``: their row names (none:
    :func:`~medlama.core.models.unique_labels`). ``load``: how models are loaded; ``device``: where they run;
    ``checkpoints``: also every ``checkpoint-N`` folder of each model."""

    methods: Sequence[str]
    settings: Mapping[str, Any]
    models: Sequence[Any] = ()
    labels: Sequence[str] | None = None
    tokenizer: Any = None
    load: LoadOptions | None = None
    device: str | None = None
    checkpoints: bool = False


@dataclass(frozen=True)
class ProbeScoring:
    """How a probe is ranked and scored. ``ks`` and ``match`` as given (none: the benchmark's own);
    ``top_k``: predictions kept per query (``predictions.jsonl``, recorded as ``settings.top_k``); the
    ranking keeps ``max(top_k, largest k scored)`` (:meth:`ranked`, recorded as ``settings.ranked_top_k`` and
    in the resume manifest); ``all_scores``: keep every candidate's score (``scores.parquet``)."""

    ks: tuple[int, ...] | None = setting(None, help="cut-offs to score (none: the dataset's; each >= 1, checked "
                                                    "by the benchmark's scoring plan)")
    match: Literal["exact", "normalized"] | None = setting(None, help="answer matching (none: the dataset's)")
    top_k: int = setting(KEEP_PREDICTIONS, min=1, help="predictions kept per query")
    all_scores: bool = setting(False, help="keep every candidate's score (scores.parquet)")

    def __post_init__(self) -> None:
        if isinstance(self.ks, (list, range)):  # the Python API's ks=[1, 5] or range(1, 6): one frozen tuple
            object.__setattr__(self, "ks", tuple(self.ks))
        check(self)

    def ranked(self, scored: Sequence[int]) -> int:
        """Predictions ranked per query: the ``top_k`` kept, or more where a scored cut-off needs them."""
        return max(self.top_k, *scored)


@dataclass(frozen=True)
class ProbeOutput:
    """Where a probe's results go. ``out``: the output folder (claimed once, for the whole run; its resume
    shards kept beside it), with ``overwrite``, ``reads`` (what it may not be, nor hold), ``argv`` (the
    command line recorded) and the ``hint`` of a refusal; none: nothing is written and the rankings stay in
    memory. ``report``: print the pool, the tables and what was written."""

    out: Path | None = None
    overwrite: bool = False
    reads: Sequence[str] = ()
    argv: Sequence[str] | None = None
    hint: str = API_HINT
    report: bool = False
