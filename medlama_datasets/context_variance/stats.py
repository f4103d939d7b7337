"""What a context-variance build found: counts per source and relation, and the build's summary.

:class:`SourceStats` fills in as the rows of a source are made (:func:`count_chunk`); the finished
:class:`ContextVarianceBuild` is what the card, ``build_info.json`` and the command's table report.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from medlama.datasets.context_variance.kb_adapters import pool_id
from medlama.datasets.context_variance.knowledge import Triple
from medlama.datasets.context_variance.settings import BuildSettings
from medlama.datasets.licences import UNKNOWN, SourceLicence, is_physionet


@dataclass
class SourceStats:
    """Counts for one source (and, in ``relations``, per relation)."""

    source: str
    format: str
    paths: list[str]
    documents: int = 0
    # Documents the corpus index stores: those naming at least min_entities (2) entities of any knowledge base it serves
    # (shared by them all, so not this knowledge base's own count).
    stored_documents: int = 0
    index: str = ""
    index_reused: bool = False
    triples: int = 0
    triples_with_context: int = 0
    documents_retrieved: int = 0
    sequences: dict[str, int] = field(default_factory=dict)  # "<context_type>" / "<context_type>_negative"
    inputs: int = 0
    records: int = 0  # inputs after input0: one UCM record each
    relations: dict[str, dict[str, int]] = field(default_factory=dict)
    seconds: float = 0.0
    # The source's licence and how it is known (medlama.datasets.licences): push-dataset decides from these.
    licence: str = UNKNOWN
    licence_basis: str = "undeclared"
    licence_evidence: str = ""

    @property
    def source_licence(self) -> SourceLicence:
        return SourceLicence(self.licence, self.licence_basis, self.licence_evidence)


@dataclass
class ContextVarianceBuild:
    """A finished build: its folder, settings, per-source counts, configs and provenance."""

    out: Path
    settings: BuildSettings
    sources: list[SourceStats]
    configs: dict[str, dict[str, list[str]]]  # config -> split -> files (named after their content)
    default_config: str
    origin: str
    umls_derived: bool = False

    @property
    def mimic_sources(self) -> list[str]:
        """Sources whose rows quote MIMIC notes (PhysioNet's licence, whatever reader read them): never
        redistributed publicly."""
        return [s.source for s in self.sources if is_physionet(s.licence)]


def count_chunk(stat: SourceStats, rows: list[dict], found: list[tuple[int, int]], triples: Sequence[Triple],
                used_pools: dict) -> None:
    """Add the rows of one chunk of triples to ``stat``; record in ``used_pools`` the pools they rank."""
    for position, documents in found:
        triple = triples[position]
        per = stat.relations.setdefault(triple.relation, {"triples": 0, "triples_with_context": 0, "sequences": 0,
                                                          "records": 0})
        per["triples"] += 1
        if documents:
            stat.triples_with_context += 1
            stat.documents_retrieved += documents
            per["triples_with_context"] += 1
            used_pools.setdefault(pool_id(triple), triple.pool)
    for row in rows:
        key = row["context_type"] + ("_negative" if row["negative"] else "")
        stat.sequences[key] = stat.sequences.get(key, 0) + 1
        added = len(row["segments"])  # input_k adds S_k: inputs 0..N
        stat.inputs += added + 1
        stat.records += added
        per = stat.relations[row["relation"]]
        per["sequences"] += 1
        per["records"] += added


def pool_rows(pools: dict) -> dict[str, list]:
    """The ``pools`` config's columns: one row per entity of each pool, pools in id order."""
    columns: dict[str, list] = {"pool_id": [], "entity_id": [], "name": [], "aliases": []}
    for key in sorted(pools):
        for entity in pools[key]:
            columns["pool_id"].append(key)
            columns["entity_id"].append(entity.id)
            columns["name"].append(entity.name)
            columns["aliases"].append(list(entity.aliases))
    return columns
