"""Contrastive-Probe's retrieval probing: nearest candidate names to each query, by FAISS.

The query is the prompt with the model's own mask token at the object slot; candidates and queries
are encoded once each (not once per relation, as the reference code does), then an exact FAISS
search returns the top candidates. The ``reference`` preset is the reference implementation's
settings: ``[CLS]`` of the last layer, names cut at 25 tokens and queries at 50, exact L2 search on
the raw vectors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from medlama.errors import MedlamaInputError
from medlama.probers.base import Prober
from medlama.probers.encoding import Encoder
from medlama.probers.queries import QuerySet

DISTANCES = ("l2", "cosine")


@dataclass(frozen=True)
class RetrievalSettings:
    """How queries and candidates are encoded and compared."""

    layer: int = -1
    pooling: str = "cls"
    distance: str = "l2"
    query_max_length: int = 50
    name_max_length: int = 25
    batch_size: int = 128


#: Named settings. ``reference`` reproduces the reference implementation's probing exactly.
PRESETS = {
    "reference": RetrievalSettings(),
    "cosine": RetrievalSettings(distance="cosine"),
}


def search(candidate_vectors: np.ndarray, query_vectors: np.ndarray, top_k: int, distance: str) -> np.ndarray:
    """Indices of the ``top_k`` nearest candidates per query: exact L2, or cosine as inner product."""
    import faiss

    if distance not in DISTANCES:
        raise MedlamaInputError(f"unknown distance {distance!r}; choose from {list(DISTANCES)}")
    candidates = np.ascontiguousarray(candidate_vectors, dtype=np.float32)
    queries = np.ascontiguousarray(query_vectors, dtype=np.float32)
    if distance == "cosine":
        candidates, queries = candidates.copy(), queries.copy()
        faiss.normalize_L2(candidates)
        faiss.normalize_L2(queries)
        index = faiss.IndexFlatIP(candidates.shape[1])
    else:
        index = faiss.IndexFlatL2(candidates.shape[1])
    index.add(candidates)
    _, indices = index.search(queries, min(top_k, len(candidates)))
    return indices


class ContrastiveProber(Prober):
    """Retrieval probing with an encoder (rewired or not): rank candidate names by distance to the query."""

    method = "contrastive"

    def __init__(self, model_path: str | Path, settings: RetrievalSettings = PRESETS["reference"], *,
                 layers: Sequence[int] | None = None, device: str | None = None) -> None:
        if settings.distance not in DISTANCES:
            raise MedlamaInputError(f"unknown distance {settings.distance!r}; choose from {list(DISTANCES)}")
        self.settings_ = settings
        self.encoder = Encoder(model_path, layers=list(layers) if layers else [settings.layer],
                               pooling=settings.pooling, batch_size=settings.batch_size, device=device)

    def settings(self) -> dict:
        return {"method": self.method, "model": self.encoder.model_path, **asdict(self.settings_),
                "layer": self.encoder.layers[0] if len(self.encoder.layers) == 1 else self.encoder.layers}

    def rank_layers(self, queries: QuerySet, top_k: int = 10) -> dict[int, list[list[str]]]:
        """Predictions for every configured layer, from one encoding pass over queries and candidates."""
        if not queries.candidates:
            raise MedlamaInputError(f"query set {queries.name!r} has no candidates")
        names = self.encoder.encode(queries.candidates, self.settings_.name_max_length, progress="candidates")
        texts = self.encoder.encode(queries.with_mask(self.encoder.mask_token), self.settings_.query_max_length,
                                    progress="queries")
        ranked = {}
        for layer in self.encoder.layers:
            indices = search(names[layer], texts[layer], top_k, self.settings_.distance)
            ranked[layer] = [[queries.candidates[j] for j in row if j >= 0] for row in indices]
        return ranked

    def rank(self, queries: QuerySet, top_k: int = 10) -> list[list[str]]:
        return self.rank_layers(queries, top_k)[self.encoder.layers[0]]


def settings_from(preset: str = "reference", **overrides) -> RetrievalSettings:
    """A preset with some fields overridden (``None`` values are ignored)."""
    if preset not in PRESETS:
        raise MedlamaInputError(f"unknown preset {preset!r}; choose from {sorted(PRESETS)}")
    return replace(PRESETS[preset], **{key: value for key, value in overrides.items() if value is not None})
