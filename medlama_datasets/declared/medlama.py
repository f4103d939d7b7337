"""MedLAMA (Meng et al. 2022): its build, card, benchmark protocol and query reader, declared once."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from medlama.datasets.benchmark import Benchmark
from medlama.datasets.build_settings import MedlamaBuildSettings
from medlama.datasets.licences import UMLS_TAG
from medlama.datasets.prompts import PROMPT_COLUMNS
from medlama.datasets.registry import BuildCommand, Declaration


def _cached_build(release: str | None) -> Path:
    from medlama.datasets.medlama_folder import cached_build  # the builder only when a build is needed

    return cached_build(release)


def _build(settings: MedlamaBuildSettings, as_json: bool) -> int:
    from medlama.datasets.build_runs import run_medlama  # the builder only when a build runs, not for --help

    return run_medlama(settings, as_json)


def _release_relations() -> Sequence[str]:
    from medlama.loaders.medlama_release import RELATIONS  # the release loader only when a relation is checked

    return RELATIONS


MEDLAMA = Benchmark(
    name="medlama", configs=("hard", "full"), relation_configs="hard_<relation> / full_<relation>",
    splits=("test",), prompt_columns=PROMPT_COLUMNS,
    candidates="the head and answer names of the relations' rows (the folder's candidates_<config>_<relation>)",
    ks=(1, 5, 10), match="exact", grouping="relation", cached_build=_cached_build)

DECLARATION = Declaration(
    name="medlama", card="medlama", benchmark=MEDLAMA, query_reader="medlama.runs.queries:load_medlama_source",
    release_relations=_release_relations, listed=0, terms=UMLS_TAG,  # names from the UMLS Metathesaurus
    build=BuildCommand(
        help="MedLAMA full and hard sets, per-relation configs and candidate sets",
        description="Build MedLAMA from the pinned release (downloaded and verified), or from --source / "
                    "$MEDLAMA_SOURCE (a folder or archive of the release).",
        settings=MedlamaBuildSettings, run=_build))
