"""Each benchmark declared once: what decides its numbers, in one place.

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
from typing import Any

from medlama.core.errors import MedlamaInputError
from medlama.datasets.folders import DataFolder, identity, resolve_folder
from medlama.datasets.prompts import PROMPT_COLUMNS

#: The cut-offs every probe scores (tables and plots read them), whatever a benchmark reports.
ALWAYS_SCORED = (1, 5, 10)



@dataclass(frozen=True)
class Benchmark:
    """One benchmark's declaration (see the module docstring)."""

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
    #: loaders are :func:`medlama.runs.queries.load_queries`'.
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


def _build_medlama(release: str | None) -> Path:
    from medlama.datasets.medlama_folder import cached_build  # the builder only when a build is needed

    return cached_build(release)


def _build_biolama(release: str | None) -> Path:
    from medlama.datasets.biolama_folder import cached_build  # the builder only when a build is needed

    return cached_build(release)


#: BioLAMA's sources (its relations are ``<source>_<PID>``).
SOURCES = ("ctd", "umls", "wikidata")


def group_of(source: str, relation: str) -> str:
    return f"{source}_{relation}"


def source_of(group: str) -> str:
    return group.split("_", 1)[0]


def by_source(metrics: Mapping, ks: Sequence[int] = (1, 5)) -> dict[str, dict]:
    """Macro acc@k per source (mean over the source's relations) from an acc@k result with groups.

    Also ``all``: the mean over the sources' macro values (how BioLAMA summarises several sources).
    """
    groups = metrics.get("groups") or {}
    per_source: dict[str, list[str]] = {}
    for group in sorted(groups):
        per_source.setdefault(source_of(group), []).append(group)
    out = {}
    for source, members in per_source.items():
        out[source] = {"relations": len(members), "queries": sum(groups[g]["num_queries"] for g in members)}
        for k in ks:
            out[source][f"acc@{k}"] = sum(groups[g][f"acc@{k}"] for g in members) / len(members)
    return out



MEDLAMA = Benchmark(
    name="medlama", configs=("hard", "full"), relation_configs="hard_<relation> / full_<relation>",
    splits=("test",), prompt_columns=PROMPT_COLUMNS,
    candidates="the head and answer names of the relations' rows (the folder's candidates_<config>_<relation>)",
    ks=(1, 5, 10), match="exact", grouping="relation", cached_build=_build_medlama)

BIOLAMA = Benchmark(
    name="biolama", configs=("all", "ctd", "umls", "wikidata"), relation_configs="<source>_<PID>",
    splits=("test", "dev", "train"), prompt_columns=("query",),
    candidates="the subject and object labels of the relations' rows in the probed split (aliases are gold "
               "answers, not candidates)",
    ks=(1, 5), match="normalized", grouping="<source>_<PID>", aggregation=("by_source", by_source),
    cached_build=_build_biolama)

#: Context variance is scored by :mod:`medlama.ucm_eval` (UCM, and acc@k with and without context); its ranking
#: is over each triple's own candidate entities.
CONTEXT_VARIANCE = Benchmark(
    name="context-variance", configs=("sets",), relation_configs="--relations", splits=("test",),
    prompt_columns=("sequence",), candidates="each triple's candidate entities", ks=(1, 5), match="exact",
    grouping="relation")

#: The benchmarks ``medlama probe`` runs, by ``--dataset`` name.
BENCHMARKS: dict[str, Benchmark] = {"medlama": MEDLAMA, "biolama": BIOLAMA}


def benchmark(name: str) -> Benchmark:
    """The declaration of ``name`` (``medlama`` or ``biolama``)."""
    try:
        return BENCHMARKS[name]
    except KeyError:
        raise MedlamaInputError(f"unknown dataset {name!r}; choose from {list(BENCHMARKS)}") from None


def resolve_data(source: Any) -> DataFolder:
    """The dataset folder of ``source`` and its identity: ``source.data`` (a folder, a dry run or a Hub id),
    else a folder built once into the cache from the release."""
    if source.data is not None:
        return resolve_folder(source.data, dataset=source.dataset)
    folder = benchmark(source.dataset).cached_build(source.source)
    return DataFolder(folder, identity(folder, "build", source.dataset))
