"""Licences of a built dataset: the one definition that builders write and ``medlama push-dataset`` reads.

Card tags:

* :data:`UMLS_TAG`: the rows derive from the UMLS Metathesaurus (MedLAMA, BioLAMA's ``umls`` source), so a
  push is gated to UMLS licensees;
* :data:`MIMIC_TAG`: the rows quote MIMIC notes (MIMIC-III or MIMIC-IV), which the PhysioNet data use
  agreement forbids redistributing, so a push must be ``--private``.

UMLS-derived data is gated on the Hub with :data:`GATED_PROMPT` and :data:`GATED_FIELDS` (the access-request
form), in the built folder's own card and in the card ``medlama push-dataset`` uploads.

Corpus sources (context-variance sets) each carry a :class:`SourceLicence`, recorded in ``build_info.json``
and the card, so that ``push-dataset`` decides from the folder whatever reader brought the text in:

* ``reader``: a MIMIC reader (format ``mimic``) read the source: :data:`PHYSIONET`;
* ``columns``: the files carry MIMIC's column signature (:func:`medlama.loaders.mimic_notes.mimic_signature`:
  MIMIC notes converted to JSON Lines, or a MIMIC CSV read as text): :data:`PHYSIONET` too, and no
  declaration can change it;
* ``declared``: the licence the builder declared (an SPDX id or text, ``--corpus-licence NAME=LICENCE``);
* ``undeclared``: nothing known: :data:`UNKNOWN`.

Deny by default (:func:`allows_redistribution`): a set is pushed publicly only if every source's licence
allows it; PhysioNet-restricted and unknown sources mean ``--private``. A declared licence is the builder's
statement, taken as allowing redistribution unless it names a restricted licence (:data:`RESTRICTED`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

UMLS_TAG = "umls"
MIMIC_TAG = "mimic"
GATED_PROMPT = (
    "This dataset holds data derived from the UMLS Metathesaurus. Access is limited to holders of a UMLS licence: "
    "by requesting access you confirm that you hold a current UMLS Metathesaurus licence from the U.S. "
    "National Library of Medicine (free, https://uts.nlm.nih.gov/uts/signup-login) and will use the data "
    "under the UMLS licence agreement, including the terms of its source vocabularies.")
GATED_FIELDS = {
    "I hold a UMLS Metathesaurus licence and accept the UMLS licence agreement": "checkbox",
    "UTS username (UMLS Terminology Services)": "text",
}

#: The licence of MIMIC-III and MIMIC-IV(-Note) on PhysioNet: no redistribution.
PHYSIONET = "PhysioNet-Credentialed-Health-Data-1.5.0"
#: A source whose licence nobody declared.
UNKNOWN = "unknown"
#: How a source's licence is known (see the module docstring).
BASES = ("reader", "columns", "declared", "undeclared")
#: Licences (lower case) that never allow a public push, declared or not.
RESTRICTED = frozenset({PHYSIONET.lower(), "physionet-credentialed-health-data", "physionet", UNKNOWN, "none",
                        "proprietary", "all-rights-reserved", "noassertion"})

#: The terms of a dataset's rows, which a run's per-query rows quote (``push-results``), least strict first:
#: public; gated to UMLS licensees (:data:`UMLS_TAG`); private only. A dataset declares its own
#: (:class:`medlama.datasets.registry.Declaration`); undeclared data is private only (deny by default).
OPEN_TERMS, PRIVATE_TERMS = "open", "restricted"
TERMS = (OPEN_TERMS, UMLS_TAG, PRIVATE_TERMS)


def strictest(terms: Iterable[str]) -> str:
    """The strictest of ``terms`` (of :data:`TERMS`); none at all: :data:`OPEN_TERMS`."""
    return max(terms, key=TERMS.index, default=OPEN_TERMS)


@dataclass(frozen=True)
class SourceLicence:
    """A source's licence, how it is known (:data:`BASES`) and, for a detected one, what showed it."""

    licence: str
    basis: str
    evidence: str = ""

    @property
    def redistributable(self) -> bool:
        return allows_redistribution(self.licence)

    def describe(self) -> str:
        """The licence as the card says it: ``CC-BY-4.0 (declared by the builder)``."""
        how = {"reader": "read as MIMIC notes", "columns": f"MIMIC columns found: {self.evidence}",
               "declared": "declared by the builder", "undeclared": "not declared"}[self.basis]
        return f"{self.licence} ({how})"


def allows_redistribution(licence: str | None) -> bool:
    """Whether a source under ``licence`` may be pushed publicly (deny by default: None and unknown may not)."""
    return bool(licence and licence.strip()) and licence.strip().lower() not in RESTRICTED


def is_physionet(licence: str | None) -> bool:
    return bool(licence) and licence.strip().lower().startswith("physionet")


def recorded_licence(source: Mapping) -> SourceLicence:
    """The licence a ``build_info.json`` source records; a source recorded before licences were (none given)
    is :data:`PHYSIONET` when read as ``mimic``, else :data:`UNKNOWN`."""
    licence, basis = source.get("licence"), source.get("licence_basis")
    if isinstance(licence, str) and licence.strip() and basis in BASES:
        return SourceLicence(licence, basis, str(source.get("licence_evidence") or ""))
    if source.get("format") == "mimic":
        return SourceLicence(PHYSIONET, "reader")
    return SourceLicence(UNKNOWN, "undeclared")


def licence_lines(sources: Iterable[tuple[str, SourceLicence]]) -> str:
    """The card's list of source licences (Markdown)."""
    lines = []
    for name, licence in sources:
        note = "" if licence.redistributable else "; `medlama push-dataset` pushes it only `--private`"
        lines.append(f"- `{name}`: {licence.describe()}{note}")
    return "\n".join(lines)


__all__ = ["BASES", "GATED_FIELDS", "GATED_PROMPT", "MIMIC_TAG", "OPEN_TERMS", "PHYSIONET", "PRIVATE_TERMS",
           "RESTRICTED", "TERMS", "UMLS_TAG", "UNKNOWN", "strictest",
           "SourceLicence", "allows_redistribution", "is_physionet", "licence_lines", "recorded_licence"]
