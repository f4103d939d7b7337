"""BioLAMA (Sung et al. 2021): its build, card, benchmark protocol (with its per-source aggregation) and query
reader, declared once."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from medlama.datasets.benchmark import Benchmark
from medlama.datasets.build_settings import BiolamaBuildSettings
from medlama.datasets.licences import OPEN_TERMS, UMLS_TAG
from medlama.datasets.registry import BuildCommand, Declaration


def _cached_build(release: str | None) -> Path:
    from medlama.datasets.biolama_folder import cached_build  # the builder only when a build is needed

    return cached_build(release)


def _build(settings: BiolamaBuildSettings, as_json: bool) -> int:
    from medlama.datasets.build_runs import run_biolama  # the builder only when a build runs, not for --help

    return run_biolama(settings, as_json)


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


BIOLAMA = Benchmark(
    name="biolama", configs=("all", "ctd", "umls", "wikidata"), relation_configs="<source>_<PID>",
    splits=("test", "dev", "train"), prompt_columns=("query",),
    candidates="the subject and object labels of the relations' rows in the probed split (aliases are gold "
               "answers, not candidates)",
    ks=(1, 5), match="normalized", grouping="<source>_<PID>", aggregation=("by_source", by_source),
    cached_build=_cached_build)

DECLARATION = Declaration(
    name="biolama", card="biolama", benchmark=BIOLAMA,
    query_reader="medlama.runs.biolama_queries:load_biolama_source", listed=1,
    # CTD and Wikidata are open; the umls source's names come from the UMLS Metathesaurus, and the all config holds it
    terms=OPEN_TERMS, part_terms=(("umls", UMLS_TAG), ("all", UMLS_TAG)),
    build=BuildCommand(
        help="BioLAMA (CTD, UMLS, Wikidata): train/dev/test per source and per relation",
        description="Build BioLAMA from the authors' data.tar.gz: --source (a local archive or extracted folder) / "
                    "$BIOLAMA_SOURCE, else a download of the pinned URL into the cache. The authors publish no "
                    "SHA-256 of the archive, so none is pinned: a download needs --sha256 HASH (or "
                    "$BIOLAMA_SHA256) or --no-verify; a local archive's SHA-256 is recorded (digest_source: "
                    "supplied) in build_info.json and the card.",
        settings=BiolamaBuildSettings, run=_build))
