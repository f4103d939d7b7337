"""The on-disk format of a corpus index, shared by its readers and writers: the format's name and version,
the layout of the stored documents and postings buckets, the manifest check, and the entity payload (``(id,
surface forms)`` pairs) whose fingerprint a manifest records. The folder's layout: :mod:`.corpus_index`."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from medlama.core.errors import MedlamaInputError
from medlama.datasets.context_variance.knowledge import Entity, KnowledgeBase, entities_fingerprint

FORMAT = "medlama-context-variance-index"
FORMAT_VERSION = 3
#: The arrays of a postings bucket, each ``postings/bucket-NNNN.<name>.npy``.
BUCKET_ARRAYS = ("codes", "offsets", "rows")
#: Documents per Parquet row group: a document fetch reads one group.
ROW_GROUP_SIZE = 64
#: The raw matches of a stored document, one list column each (what :class:`~.matching.RawMatch` holds).
MATCH_COLUMNS = ("match_token_start", "match_token_end", "match_start", "match_end", "match_form")


def entity_payload(entities: Iterable[Entity | tuple[str, Sequence[str]]] | KnowledgeBase
                   ) -> list[tuple[str, tuple[str, ...]]]:
    """``(id, surface forms)`` of every entity (an :class:`Entity` or such a pair), sorted by id (the code
    order), the forms of equal ids united."""
    merged: dict[str, list[str]] = {}
    for entity in (entities.entities.values() if isinstance(entities, KnowledgeBase) else entities):
        entity_id, forms = (entity.id, entity.surface_forms) if isinstance(entity, Entity) else entity
        merged.setdefault(entity_id, []).extend(forms)
    return [(entity_id, tuple(dict.fromkeys(merged[entity_id]))) for entity_id in sorted(merged)]


def current_manifest(directory: str | Path, fingerprint: str | None) -> dict | None:
    """The manifest in ``directory`` when it is this format's, of the corpus ``fingerprint`` (never for None)."""
    try:
        manifest = json.loads((Path(directory) / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    if (fingerprint is None or manifest.get("format") != FORMAT or manifest.get("version") != FORMAT_VERSION
            or manifest.get("corpus_fingerprint") != fingerprint):
        return None
    return manifest


def payload_fingerprint(payload: Sequence[tuple[str, Sequence[str]]]) -> str:
    """The fingerprint of the entities of :func:`entity_payload` (what an index's manifest records)."""
    return entities_fingerprint(Entity(entity_id, forms[0], tuple(forms[1:])) for entity_id, forms in payload if forms)


def bucket_path(folder: Path, number: int, name: str) -> Path:
    return folder / f"bucket-{number:04d}.{name}.npy"


def write_bucket(folder: Path, number: int, codes: np.ndarray, rows: np.ndarray) -> int:
    """Write bucket ``number`` of (code, row) pairs (any order, no repeats) as sorted CSR arrays; their count."""
    order = np.lexsort((rows, codes))
    codes, rows = np.asarray(codes, dtype=np.int64)[order], np.asarray(rows, dtype=np.int64)[order]
    unique, starts = np.unique(codes, return_index=True)
    arrays = {"codes": unique.astype(np.int64), "offsets": np.append(starts, len(codes)).astype(np.int64),
              "rows": rows}
    for name in BUCKET_ARRAYS:
        np.save(bucket_path(folder, number, name), arrays[name])
    return len(codes)


def read_bucket(folder: Path, number: int) -> dict[str, np.ndarray]:
    """The CSR arrays of bucket ``number``, memory-mapped (an empty array cannot be mapped: read)."""
    arrays = {}
    for name in BUCKET_ARRAYS:
        path = bucket_path(folder, number, name)
        try:
            arrays[name] = np.load(path, mmap_mode="r")
        except ValueError:  # numpy cannot map a zero-length array
            arrays[name] = np.load(path)
        except FileNotFoundError:
            raise MedlamaInputError("the index is incomplete (a postings file is missing); rebuild it",
                                    file=path) from None
    return arrays
