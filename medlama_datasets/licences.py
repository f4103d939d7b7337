"""Licence tags of a dataset card: the one definition that builders write and ``medlama push-dataset`` reads.

* :data:`UMLS_TAG`: the rows derive from the UMLS Metathesaurus (MedLAMA, BioLAMA's ``umls`` source), so a
  push is gated to UMLS licensees;
* :data:`MIMIC_TAG`: the rows quote MIMIC-III notes, which the PhysioNet data use agreement forbids
  redistributing, so a push must be ``--private``.

UMLS-derived data is gated on the Hub with :data:`GATED_PROMPT` and :data:`GATED_FIELDS` (the access-request
form), in the built folder's own card and in the card ``medlama push-dataset`` uploads.
"""

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

__all__ = ["GATED_FIELDS", "GATED_PROMPT", "MIMIC_TAG", "UMLS_TAG"]
