"""Retrieval probing (Contrastive-Probe's probe): rank candidate names by nearness to each query.

The query is the prompt with the model's own mask token at the object slot; candidates and queries
are encoded once each (not once per relation, as the reference code does), then the one retrieval
scorer (:func:`medlama.probers.faiss_search.rank_pool`: an exact search, FAISS on a CPU and torch on a GPU)
returns the top candidates and the gold's rank.

Presets (:data:`PRESETS`):

* ``reference``: the reference implementation's settings: ``[CLS]`` of the last layer, names cut at 25
  tokens and queries at 50, exact L2 search on the raw vectors (what the paper's tables report);
* ``cosine``: the same encoding ranked by cosine;
* ``sentence-transformers``: ``SentenceTransformer(model).encode`` itself (the model's own modules, pooling,
  normalisation and ``max_seq_length``, its precision) ranked by cosine: equal to sentence-transformers'
  ``InformationRetrievalEvaluator`` with the prompts as queries and the candidates as corpus.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from medlama.core.batching import BatchSize, batch_size_setting
from medlama.core.errors import MedlamaInputError
from medlama.probers.prober import Prober, check_settings
from medlama.probers.embedding_cache import encode_cached
from medlama.probers.encoding import POOLINGS, SENTENCE_TRANSFORMERS, Encoder, SentenceTransformerEncoder
from medlama.probers.query_set import QuerySet
from medlama.probers.ranking import Ranking, gold_indices
from medlama.probers.faiss_search import Distance, check_distance, rank_pool, score_matrix, search
from medlama.core.settings import setting

__all__ = ["PRESETS", "RetrievalProber", "RetrievalSettings"]


@dataclass(frozen=True)
class RetrievalSettings:
    """How queries and candidates are encoded and compared."""

    layer: int = setting(-1, help="hidden layer to probe (0 = embeddings, -1 = last)")
    layers: tuple[int, ...] | None = setting(
        None, help="probe several layers from one encoding pass and plot acc per layer (figure 6); "
                   "replaces --layer", metavar="LAYER")
    pooling: str = setting("cls", help="how a text becomes one vector: the first token ([CLS]), the mean over "
                                       "its tokens, or sentence-transformers: the model's own modules "
                                       "(SentenceTransformer.encode: its pooling, normalisation, max_seq_length; "
                                       "the last layer only)", choices=(*POOLINGS, SENTENCE_TRANSFORMERS))
    distance: Distance = setting("l2", help="nearness of a query and a name: exact L2 on the "
                                                "raw vectors, or cosine")
    query_max_length: int | None = setting(50, help="tokens a query is cut to (none: the model's own maximum, "
                                                    "its max_seq_length for sentence-transformers)", min=1)
    name_max_length: int | None = setting(25, help="tokens a candidate name is cut to (none: the model's own "
                                                   "maximum, as for queries)", min=1)
    batch_size: BatchSize = batch_size_setting(128, help="texts per forward pass")

    def __post_init__(self) -> None:
        if isinstance(self.distance, str):
            check_distance(self.distance)  # the scorer's own message for an unknown distance
        check_settings(self)
        if self.pooling == SENTENCE_TRANSFORMERS and (self.layer != -1 or self.layers is not None):
            raise MedlamaInputError(f"pooling {SENTENCE_TRANSFORMERS!r} encodes with the model's own modules, "
                                    "whose output is the last layer: layer and layers do not apply to it")


#: Named settings (see the module docstring). ``reference`` reproduces the reference implementation's
#: probing exactly; ``sentence-transformers`` sentence-transformers' own retrieval evaluation.
PRESETS = {
    "reference": RetrievalSettings(),
    "cosine": RetrievalSettings(distance="cosine"),
    "sentence-transformers": RetrievalSettings(pooling=SENTENCE_TRANSFORMERS, distance="cosine",
                                               query_max_length=None, name_max_length=None),
}


class RetrievalProber(Prober):
    """Retrieval probing with an encoder (rewired or not): rank candidate names by distance to the query."""

    method = "retrieval"

    def __init__(self, model_path: str | Path | Any, settings: RetrievalSettings = PRESETS["reference"], *,
                 device: str | None = None, tokenizer: Any = None) -> None:
        """``model_path``: a folder or Hub id, or a loaded ``SentenceTransformer`` / ``PreTrainedModel``
        (with ``tokenizer``), used as :class:`~medlama.probers.encoding.Encoder` says; with pooling
        ``sentence-transformers``, a folder, Hub id or ``SentenceTransformer`` that
        :class:`~medlama.probers.encoding.SentenceTransformerEncoder` encodes."""
        self.settings_ = settings
        self.candidate_embeddings: str | None = None  # what the embedding cache did, once candidates are encoded
        self.encoder: Encoder | SentenceTransformerEncoder
        if settings.pooling == SENTENCE_TRANSFORMERS:
            if tokenizer is not None:
                raise MedlamaInputError(f"pooling {SENTENCE_TRANSFORMERS!r} uses the SentenceTransformer's own "
                                        "tokenizer: give no tokenizer")
            self.encoder = SentenceTransformerEncoder(model_path, batch_size=settings.batch_size, device=device)
            return
        self.encoder = Encoder(model_path, layers=list(settings.layers) if settings.layers else [settings.layer],
                               pooling=settings.pooling, batch_size=settings.batch_size, device=device,
                               tokenizer=tokenizer)

    def settings(self) -> dict:
        recorded = {key: value for key, value in asdict(self.settings_).items() if key != "layers"}
        for key in ("query_max_length", "name_max_length"):  # "the model's own": the number it was
            if recorded[key] is None:
                recorded[key] = self.encoder.max_length
        return {"method": self.method, "model": self.encoder.model_path, **recorded,
                "layer": self.encoder.layers[0] if len(self.encoder.layers) == 1 else self.encoder.layers,
                # whether the candidates' vectors came from the embedding cache (served), were encoded and kept
                # (stored), encoded but the cache could not be written (not stored), or encoded only (off); the
                # numbers are the same either way
                "candidate_embeddings": self.candidate_embeddings}

    @property
    def device(self) -> Any:
        """The encoder's device."""
        return self.encoder.device

    scores_pool = True
    #: A multiple-choice query set is ranked in one call: the choices' union encoded once, each query scored
    #: against its own choices.
    ranks_choices = True

    @property
    def score_meaning(self) -> str:
        return "cosine similarity" if self.settings_.distance == "cosine" else "negative squared L2 distance"

    def rank_layers(self, queries: QuerySet, top_k: int = 10) -> dict[int, list[list[str]]]:
        """Predictions for every configured layer, from one encoding pass over queries and candidates."""
        return {layer: ranking.names for layer, ranking in self.rank_layers_scored(queries, top_k).items()}

    def rank_layers_scored(self, queries: QuerySet, top_k: int = 10, *, all_scores: bool = False
                           ) -> dict[int, Ranking]:
        """The scored ranking (:class:`~medlama.probers.ranking.Ranking`) of every configured layer, from one
        encoding pass. The top ``top_k`` and the gold's rank beyond them come from
        :func:`~medlama.probers.faiss_search.rank_pool` (the exact FAISS search on a CPU, ``torch.topk`` on a
        GPU; the scores :func:`~medlama.probers.faiss_search.score_matrix`'s, in float64), without the whole
        score matrix; with ``all_scores`` the whole matrix is scored, a block of queries at a time, and kept."""
        if not queries.candidates:
            raise MedlamaInputError(f"query set {queries.name!r} has no candidates")
        names, self.candidate_embeddings = encode_cached(self.encoder, queries.candidates,
                                                         self.settings_.name_max_length, progress="candidates",
                                                         role="document", loaded=self.loaded)
        inputs = queries.with_mask(self.encoder.mask_token)
        texts = self.encoder.encode(inputs, self.settings_.query_max_length, progress="queries", role="query")
        if queries.choices is not None:
            return {layer: self._rank_choices(queries, names[layer], texts[layer], inputs, top_k, all_scores)
                    for layer in self.encoder.layers}
        ranked = {}
        gold = None if all_scores else gold_indices(queries.gold, queries.candidates)  # the same for every layer
        for layer in self.encoder.layers:
            if all_scores:  # every candidate's score is kept: the whole matrix, a block of queries at a time
                indices = search(names[layer], texts[layer], top_k, self.settings_.distance)
                top = [[int(j) for j in row if j >= 0] for row in indices]
                rows = _ScoreRows(names[layer], texts[layer], self.settings_.distance)
                ranked[layer] = Ranking.from_pool(queries.gold, queries.candidates, rows, top, inputs=inputs,
                                                  all_scores=True)
                continue
            found = rank_pool(names[layer], texts[layer], top_k, self.settings_.distance, gold,
                              device=self.encoder.device)
            ranked[layer] = Ranking.from_ranked(queries.candidates, found.top, found.top_scores, found.gold_ranks,
                                                found.gold_scores, inputs=inputs,
                                                log_normalizers=found.log_normalizers)
        return ranked

    def rank_scored(self, queries: QuerySet, top_k: int = 10, *, all_scores: bool = False) -> Ranking:
        return self.rank_layers_scored(queries, top_k, all_scores=all_scores)[self.encoder.layers[0]]

    def _rank_choices(self, queries: QuerySet, names: Any, texts: Any, inputs: list[str], top_k: int,
                      all_scores: bool) -> Ranking:
        """Each query against its own choices (``queries.choices``; ``names``: the vectors of
        ``queries.candidates``): the same scores as :func:`~medlama.probers.faiss_search.score_matrix` gives
        over a pool, ordered by score, ties in choice order."""
        import numpy as np  # numpy only when ranking

        at = {name: i for i, name in reversed(list(enumerate(queries.candidates)))}
        rows = []
        for q, choices in enumerate(queries.choices):
            row = score_matrix(names[[at[name] for name in choices]], texts[q:q + 1], self.settings_.distance)[0]
            top = [np.argsort(-row, kind="stable")[:top_k].tolist()]
            rows += Ranking.from_pool([queries.gold[q]], choices, [row], top, inputs=[inputs[q]],
                                      all_scores=all_scores).rows()
        return Ranking.from_rows(rows)


class _ScoreRows:
    """Rows of the query x candidate score matrix, computed a block of queries at a time as they are read."""

    BLOCK = 256

    def __init__(self, names: Any, queries: Any, distance: Distance) -> None:
        self.names, self.queries, self.distance = names, queries, distance
        self.start, self.block = -1, None

    def __getitem__(self, q: int):
        start = q - q % self.BLOCK
        if start != self.start:
            self.start = start
            self.block = score_matrix(self.names, self.queries[start:start + self.BLOCK], self.distance)
        return self.block[q - start]
