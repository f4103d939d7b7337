"""Retrieval scoring, the one place that says how an embedded query is compared with embedded names.

Two views of the same comparison:

* :func:`search`: the ``top_k`` nearest names per query by an exact FAISS search (``IndexFlatL2`` on the
  raw vectors, as the reference implementation, or inner product on L2-normalised vectors for
  ``cosine``). MedLAMA and BioLAMA probing use it.
* :func:`score_matrix`: every query against every name, as scores where higher is nearer (the negated
  squared L2 distance, or the cosine), in float64. UCM ranking uses it, since it needs the rank of every
  pool member, not only the top few, and its pools are small.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from medlama.core.errors import MedlamaInputError

Distance = Literal["l2", "cosine"]
DISTANCES: tuple[str, ...] = ("l2", "cosine")


def check_distance(distance: str) -> str:
    if distance not in DISTANCES:
        raise MedlamaInputError(f"unknown distance {distance!r}; choose from {list(DISTANCES)}")
    return distance


def search(name_vectors: np.ndarray, query_vectors: np.ndarray, top_k: int, distance: Distance) -> np.ndarray:
    """Indices of the ``top_k`` nearest names per query (nearest first), by exact FAISS search."""
    import faiss  # faiss only when searching

    check_distance(distance)
    names = np.ascontiguousarray(name_vectors, dtype=np.float32)
    queries = np.ascontiguousarray(query_vectors, dtype=np.float32)
    if distance == "cosine":
        names, queries = names.copy(), queries.copy()
        faiss.normalize_L2(names)
        faiss.normalize_L2(queries)
        index = faiss.IndexFlatIP(names.shape[1])
    else:
        index = faiss.IndexFlatL2(names.shape[1])
    index.add(names)
    _, indices = index.search(queries, min(top_k, len(names)))
    return indices


def score_matrix(name_vectors: np.ndarray, query_vectors: np.ndarray, distance: Distance) -> np.ndarray:
    """``(queries, names)`` scores, higher is nearer: ``-||q - n||^2`` for ``l2``, the cosine for ``cosine``."""
    check_distance(distance)
    names = np.asarray(name_vectors, dtype=np.float64)
    queries = np.asarray(query_vectors, dtype=np.float64)
    if distance == "cosine":
        names = names / np.maximum(np.linalg.norm(names, axis=1, keepdims=True), 1e-12)
        queries = queries / np.maximum(np.linalg.norm(queries, axis=1, keepdims=True), 1e-12)
        return queries @ names.T
    return -((queries ** 2).sum(1)[:, None] - 2 * queries @ names.T + (names ** 2).sum(1)[None, :])
