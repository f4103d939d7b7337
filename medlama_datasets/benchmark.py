"""What decides a benchmark's numbers, in one place: the :class:`Benchmark` protocol a dataset declaration
(:mod:`medlama.datasets.registry`) carries.

A :class:`Benchmark` names a benchmark's query configs, the column its prompts come from, what a candidate
is, the cut-offs it reports, how answers match, what acc@k groups and macro-averages over, and the extra
aggregation its paper reports (BioLAMA: macro acc@k per source). The loaders, the probe workflow
(:mod:`medlama.runs.workflow`), the CLI and the Python API read these declarations instead of testing
the dataset's name, so the CLI and ``medlama.probe`` cannot score one benchmark two ways.

The candidate pool a prober ranks against is the second thing that moves a number: its rules, the pools
they give and what a result records of its pool live in :mod:`medlama.probers.pools`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from medlama.core.errors import MedlamaInputError

#: The cut-offs every probe scores (tables and plots read them), whatever a benchmark reports.
ALWAYS_SCORED = (1, 5, 10)


@dataclass(frozen=True)
class Benchmark:
    """One benchmark's protocol (see the module docstring)."""

    name: str
    #: Query configs, the default first; per-relation configs are spelt :attr:`relation_configs`.
    configs: tuple[str, ...]
    relation_configs: str
    #: Splits probed (the default first).
    splits: tuple[str, ...]
    #: Columns a query's prompt may come from (the default first).
    prompt_columns: tuple[str, ...]
    #: What a candidate is, in words (the loaders implement it; the card and ``--help`` quote it).
    candidates: str
    #: Cut-offs reported by default, and the answer matching.
    ks: tuple[int, ...]
    match: str
    #: What a query's acc@k group (and so the macro average) is.
    grouping: str
    #: Extra aggregation the benchmark's paper reports, as ``(name, function of a result's metrics and the ks)``.
    aggregation: tuple[str, Callable[[Mapping, Sequence[int]], dict]] | None = None
    #: The build kept in the cache (from a release, or ``None``: ``$..._SOURCE`` / the pinned download); the
    #: query readers are the declarations' (:attr:`medlama.datasets.registry.Declaration.query_reader`).
    cached_build: Callable[[str | None], Path] | None = None

    @property
    def default_config(self) -> str:
        return self.configs[0]

    def scoring_plan(self, ks: Sequence[int] | None = None, match: str | None = None
                     ) -> tuple[tuple[int, ...], tuple[int, ...], str]:
        """``(cut-offs to report, cut-offs to score, matching)``: the given ``ks`` (else the benchmark's),
        always scoring :data:`ALWAYS_SCORED` too, and the benchmark's matching unless ``match`` is given.
        The one rule of the CLI and the Python API."""
        report = tuple(sorted(set(ks))) if ks else self.ks
        if report[0] < 1:
            raise MedlamaInputError(f"every ks value must be >= 1, got {list(report)}")
        return report, tuple(sorted(set(report) | set(ALWAYS_SCORED))), match or self.match
