"""Retrieval probing (Contrastive-Probe's probe): rank candidate names by nearness to each query.

The query is the prompt with the model's own mask token at the object slot; candidates and queries
are encoded once each (not once per relation, as the reference code does), then the one retrieval
scorer (:func:`medlama.probers.scoring.search`, an exact FAISS search) returns the top candidates. The
``reference`` preset is the reference implementation's settings: ``[CLS]`` of the last layer, names cut
at 25 tokens and queries at 50, exact L2 search on the raw vectors.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from medlama.errors import MedlamaInputError
from medlama.probers.base import Prober, check_settings
from medlama.probers.encoding import POOLINGS, Encoder
from medlama.probers.queries import QuerySet
from medlama.probers.scoring import Distance, check_distance, search
from medlama.settings import setting

__all__ = ["PRESETS", "RetrievalProber", "RetrievalSettings"]


@dataclass(frozen=True)
class RetrievalSettings:
    """How queries and candidates are encoded and compared."""

    layer: int = setting(-1, help="hidden layer to probe (0 = embeddings, -1 = last)")
    layers: tuple[int, ...] | None = setting(
        None, help="probe several layers from one encoding pass and plot acc per layer (figure 6); "
                   "replaces --layer", metavar="LAYER")
    pooling: str = setting("cls", help="how a text becomes one vector: the first token ([CLS]) or the mean over "
                                       "its tokens", choices=POOLINGS)
    distance: Distance = setting("l2", help="nearness of a query and a name: exact L2 on the "
                                                "raw vectors, or cosine")
    query_max_length: int = setting(50, help="tokens a query is cut to", min=1)
    name_max_length: int = setting(25, help="tokens a candidate name is cut to", min=1)
    batch_size: int = setting(128, help="texts per forward pass", min=1)

    def __post_init__(self) -> None:
        if isinstance(self.distance, str):
            check_distance(self.distance)  # the scorer's own message for an unknown distance
        check_settings(self)


#: Named settings. ``reference`` reproduces the reference implementation's probing exactly.
PRESETS = {
    "reference": RetrievalSettings(),
    "cosine": RetrievalSettings(distance="cosine"),
}


class RetrievalProber(Prober):
    """Retrieval probing with an encoder (rewired or not): rank candidate names by distance to the query."""

    method = "retrieval"

    def __init__(self, model_path: str | Path | Any, settings: RetrievalSettings = PRESETS["reference"], *,
                 device: str | None = None, tokenizer: Any = None) -> None:
        """``model_path``: a folder or Hub id, or a loaded ``SentenceTransformer`` / ``PreTrainedModel``
        (with ``tokenizer``), used as :class:`~medlama.probers.encoding.Encoder` says."""
        self.settings_ = settings
        self.encoder = Encoder(model_path, layers=list(settings.layers) if settings.layers else [settings.layer],
                               pooling=settings.pooling, batch_size=settings.batch_size, device=device,
                               tokenizer=tokenizer)

    def settings(self) -> dict:
        recorded = {key: value for key, value in asdict(self.settings_).items() if key != "layers"}
        return {"method": self.method, "model": self.encoder.model_path, **recorded,
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
