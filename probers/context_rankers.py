"""Rank a whole entity pool at the mask of each incremental context input: two rankers, one interface.

``ranker.rank(inputs, pool)`` takes the inputs of a context sequence (texts with one ``[Y]`` slot) and
the pool's entity names, and returns an int array ``(len(inputs), len(pool))``: the 1-based rank of every
pool entity at every input (1 = best). Ties are broken by pool order (the earlier entity ranks first),
so ranks are a permutation of ``1..len(pool)`` in each row. ``ranker.scores(inputs, pool)`` gives the
underlying scores (higher is better), from which :func:`ranks_from_scores` ranks any subset of the pool.
``ranker.whole(inputs, pool)`` says which inputs the model sees whole (inputs over its length limit are
cut, see below).

* :class:`MaskedLMRanker`: a masked LM with its MLM head, by **mask average** (the multi-token strategy
  BioLAMA uses, Kassner et al. 2021): a name of n tokens is scored by the mean log-probability of its
  tokens at n masks (:mod:`medlama.probers.mask_average`, the same code as ``medlama probe --method
  mask-average``). Context far from the slot is cut when an input exceeds the model's length limit.
* :class:`RetrievalRanker`: an encoder (base or rewired by Contrastive-Probe), as the contrastive
  prober ranks: ``[CLS]`` (or mean) of the input with the model's mask token at the slot, against the
  same representation of every pool name; score = minus the squared L2 distance (the reference's exact
  L2 search), or the cosine. Inputs longer than the limit lose their *start* (the prompt and its mask sit
  at the end), names are cut at 25 tokens as in the reference.

Work shared across the inputs of a sequence (and across sequences): identical inputs are scored once
per call (``input0``, the prompt alone, is shared by every sequence of a triple); the retrieval ranker
encodes each pool name once and keeps its vector for later calls; the MLM ranker tokenises the pool once
per call and runs one forward pass per (input, name length) for all names of that length.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from medlama.defaults import MASK_PLACEHOLDER
from medlama.errors import MedlamaInputError

RANKERS = ("mlm", "retrieval")


def ranks_from_scores(scores: np.ndarray) -> np.ndarray:
    """1-based ranks of each column in each row of ``scores`` (higher first; ties: lower column first)."""
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 2:
        raise ValueError("scores must be a 2-d array (inputs x entities)")
    order = np.argsort(-scores, axis=1, kind="stable")
    ranks = np.empty_like(order)
    rows = np.arange(scores.shape[0])[:, None]
    ranks[rows, order] = np.arange(1, scores.shape[1] + 1)[None, :]
    return ranks


def _check(inputs: Sequence[str], pool: Sequence[str]) -> tuple[list[str], list[str]]:
    inputs, pool = list(inputs), list(pool)
    if not pool:
        raise MedlamaInputError("the entity pool is empty: nothing to rank")
    for index, text in enumerate(inputs):
        if not isinstance(text, str) or text.count(MASK_PLACEHOLDER) != 1:
            count = text.count(MASK_PLACEHOLDER) if isinstance(text, str) else 0
            raise MedlamaInputError(f"input {index} has {count} {MASK_PLACEHOLDER} slots, needs exactly one: {text!r}")
    return inputs, pool


class ContextRanker(ABC):
    """Ranks an entity pool at the ``[Y]`` slot of each input."""

    method: str = "ranker"

    def scores(self, inputs: Sequence[str], pool: Sequence[str]) -> np.ndarray:
        """Scores ``(len(inputs), len(pool))`` as float64, higher is better (``-inf``: cannot be scored)."""
        inputs, pool = _check(inputs, pool)
        if not inputs:
            return np.empty((0, len(pool)), dtype=np.float64)
        unique = list(dict.fromkeys(inputs))
        scored = self._scores(unique, pool)
        if len(unique) == len(inputs):
            return scored
        where = {text: i for i, text in enumerate(unique)}
        return scored[[where[text] for text in inputs]]

    def rank(self, inputs: Sequence[str], pool: Sequence[str]) -> np.ndarray:
        """1-based rank of every pool entity at every input, ``(len(inputs), len(pool))`` int64."""
        return ranks_from_scores(self.scores(inputs, pool))

    def whole(self, inputs: Sequence[str], pool: Sequence[str]) -> np.ndarray:
        """Per input, whether the model sees all of it when ranking ``pool`` (False: the input is cut).

        A rank change between two cut inputs says nothing about the segment added between them (it may
        have been cut away), so the UCM run leaves such records out and counts them.
        """
        inputs, pool = _check(inputs, pool)
        return np.array([self._fits(text, pool) for text in inputs], dtype=bool)

    @abstractmethod
    def _fits(self, text: str, pool: list[str]) -> bool:
        """Whether ``text`` fits the model's length limit whole (for every name of ``pool``)."""

    @abstractmethod
    def _scores(self, inputs: list[str], pool: list[str]) -> np.ndarray:
        """Scores of distinct, checked inputs."""

    def settings(self) -> dict:
        return {"method": self.method}


class MaskedLMRanker(ContextRanker):
    """Mask average over the pool with a masked LM (BERT style, MLM head required)."""

    method = "mlm"

    def __init__(self, model_path: str | Path, *, max_tokens: int | None = None, batch_size: int = 32,
                 device: str | None = None) -> None:
        from medlama.probers.mask_average import MaskAverageProber, settings_from

        self.prober = MaskAverageProber(model_path, settings_from(max_tokens=max_tokens, batch_size=batch_size),
                                        device=device)
        self.model_path = str(model_path)

    def _scores(self, inputs: list[str], pool: list[str]) -> np.ndarray:
        from medlama.probers.queries import QuerySet

        queries = QuerySet(ids=[str(i) for i in range(len(inputs))], relations=[""] * len(inputs), texts=inputs,
                           gold=[[] for _ in inputs], candidates=pool, name="context inputs")
        try:
            return self.prober.scores(queries).double().numpy()
        finally:
            splits = getattr(self.prober.lm, "_splits", None)
            if isinstance(splits, dict) and len(splits) > 10_000:
                splits.clear()  # the per-text tokenisation cache would otherwise grow with every input

    def _fits(self, text: str, pool: list[str]) -> bool:
        # The longest name needs the most masks: if its template fits, every name's does.
        lm, cap = self.prober.lm, self.prober.settings_.max_tokens
        split = lm.split(text)
        longest = max((len(ids) for ids in lm.candidate_ids(pool, split.space_before)), default=0)
        masks = min(longest, cap) if cap else longest
        return len(lm.lead) + len(split.prefix) + masks + len(split.suffix) + len(lm.trail) <= lm.max_length

    def settings(self) -> dict:
        return {**self.prober.settings(), "method": self.method, "scoring": "mask-average"}


class RetrievalRanker(ContextRanker):
    """An encoder's ``[CLS]`` of the masked input against the pool names' (the contrastive prober's ranking)."""

    method = "retrieval"

    def __init__(self, model_path: str | Path, *, layer: int = -1, pooling: str = "cls", distance: str = "l2",
                 query_max_length: int | None = None, name_max_length: int = 25, batch_size: int = 64,
                 device: str | None = None, cache_names: int = 200_000) -> None:
        from medlama.probers.contrastive import DISTANCES
        from medlama.probers.encoding import Encoder

        if distance not in DISTANCES:
            raise MedlamaInputError(f"unknown distance {distance!r}; choose from {list(DISTANCES)}")
        self.encoder = Encoder(model_path, layers=[layer], pooling=pooling, batch_size=batch_size, device=device)
        self.layer = self.encoder.layers[0]
        self.distance = distance
        config = self.encoder.model.config
        limits = [getattr(config, "max_position_embeddings", None) or 512, self.encoder.tokenizer.model_max_length,
                  512]
        limit = int(min(x for x in limits if x and x > 0))
        self.query_max_length = min(query_max_length, limit) if query_max_length else limit
        self.name_max_length = name_max_length
        self.model_path = str(model_path)
        self._names: dict[str, np.ndarray] = {}
        self._cache_names = cache_names

    def name_vectors(self, names: list[str]) -> np.ndarray:
        """Vectors of ``names`` (encoded once, kept for later calls)."""
        missing = [name for name in dict.fromkeys(names) if name not in self._names]
        if missing:
            if len(self._names) + len(missing) > self._cache_names:
                self._names.clear()
            vectors = self.encoder.encode(missing, self.name_max_length)[self.layer]
            self._names.update(zip(missing, vectors))
        return np.stack([self._names[name] for name in names]).astype(np.float64)

    def query_vectors(self, inputs: list[str]) -> np.ndarray:
        tokenizer = self.encoder.tokenizer
        texts = [text.replace(MASK_PLACEHOLDER, self.encoder.mask_token) for text in inputs]
        side = tokenizer.truncation_side
        tokenizer.truncation_side = "left"  # keep the prompt and its mask, drop the start of the context
        try:
            return self.encoder.encode(texts, self.query_max_length)[self.layer].astype(np.float64)
        finally:
            tokenizer.truncation_side = side

    def _fits(self, text: str, pool: list[str]) -> bool:
        masked = text.replace(MASK_PLACEHOLDER, self.encoder.mask_token)
        return len(self.encoder.tokenizer(masked)["input_ids"]) <= self.query_max_length

    def _scores(self, inputs: list[str], pool: list[str]) -> np.ndarray:
        names = self.name_vectors(pool)
        queries = self.query_vectors(inputs)
        if self.distance == "cosine":
            names = names / np.maximum(np.linalg.norm(names, axis=1, keepdims=True), 1e-12)
            queries = queries / np.maximum(np.linalg.norm(queries, axis=1, keepdims=True), 1e-12)
            return queries @ names.T
        squared = (queries ** 2).sum(1)[:, None] - 2 * queries @ names.T + (names ** 2).sum(1)[None, :]
        return -squared

    def settings(self) -> dict:
        return {"method": self.method, "model": self.model_path, "layer": self.layer,
                "pooling": self.encoder.pooling, "distance": self.distance,
                "query_max_length": self.query_max_length, "name_max_length": self.name_max_length,
                "truncation": "inputs lose their start"}


def make_ranker(kind: str, model_path: str | Path, **options) -> ContextRanker:
    """``mlm``, ``retrieval`` or ``auto`` (mlm when the model has an MLM head, else retrieval).

    ``options`` go to the ranker they apply to (``max_tokens`` to mlm; ``layer``, ``pooling``, ``distance``
    to retrieval; ``batch_size`` and ``device`` to both); ``None`` values are ignored.
    """
    options = {key: value for key, value in options.items() if value is not None}
    mlm_keys, retrieval_keys = {"max_tokens", "batch_size", "device"}, {"layer", "pooling", "distance",
                                                                        "query_max_length", "batch_size", "device"}
    if kind == "mlm":
        return MaskedLMRanker(model_path, **{k: v for k, v in options.items() if k in mlm_keys})
    if kind == "retrieval":
        return RetrievalRanker(model_path, **{k: v for k, v in options.items() if k in retrieval_keys})
    if kind == "auto":
        try:
            return MaskedLMRanker(model_path, **{k: v for k, v in options.items() if k in mlm_keys})
        except MedlamaInputError as error:
            try:
                return RetrievalRanker(model_path, **{k: v for k, v in options.items() if k in retrieval_keys})
            except MedlamaInputError as second:
                raise MedlamaInputError(f"neither a masked LM ({error}) nor an encoder ({second})") from None
    raise MedlamaInputError(f"unknown ranker {kind!r}; choose from {['auto', *RANKERS]}")
