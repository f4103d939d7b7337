"""Licence tags of a dataset card: the one definition that builders write and ``medlama push-dataset`` reads.

* :data:`UMLS_TAG`: the rows derive from the UMLS Metathesaurus (MedLAMA, BioLAMA's ``umls`` source), so a
  push is gated to UMLS licensees;
* :data:`MIMIC_TAG`: the rows quote MIMIC-III notes, which the PhysioNet data use agreement forbids
  redistributing, so a push must be ``--private``.
"""

UMLS_TAG = "umls"
MIMIC_TAG = "mimic"

__all__ = ["MIMIC_TAG", "UMLS_TAG"]
