"""The interface of a UCM context ranker: rank a whole entity pool at the ``[Y]`` slot of each incremental
context input (:class:`ContextRanker`), and ranks from scores (:func:`ranks_from_scores`). The rankers
themselves are in :mod:`medlama.ucm_eval.rankers` (mask-average, retrieval),
:mod:`medlama.ucm_eval.mask_predict_ranker` (mask-predict, the UCM paper's decoding) and
:mod:`medlama.ucm_eval.causal_ranker` (causal-likelihood)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np

from medlama.core.defaults import MASK_PLACEHOLDER
from medlama.core.errors import MedlamaInputError


def ranks_from_scores(scores: np.ndarray, *, unranked: bool = False) -> np.ndarray:
    """1-based ranks of each column in each row of ``scores`` (higher first; ties: lower column first).

    ``unranked``: a ``-inf`` score means "not ranked" (a decoding ranker that did not return the entity):
    every such column shares the rank ``columns + 1`` instead of taking places in column order.
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 2:
        raise ValueError("scores must be a 2-d array (inputs x entities)")
    order = np.argsort(-scores, axis=1, kind="stable")
    ranks = np.empty_like(order)
    rows = np.arange(scores.shape[0])[:, None]
    ranks[rows, order] = np.arange(1, scores.shape[1] + 1)[None, :]
    if unranked:
        ranks[np.isneginf(scores)] = scores.shape[1] + 1
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

    #: The method's name, as ``--method`` spells it.
    method: str = "ranker"
    #: Whether every pool entity gets a score (False: a decoding ranker, whose ``-inf`` means "not ranked",
    #: each such entity ranked ``len(pool) + 1``; see :func:`ranks_from_scores`).
    ranks_all: bool = True
    #: The model's folder or Hub id (``None``: a model not known by one); a resumed run's shards are keyed by it.
    model_path: str | None = None

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
        return ranks_from_scores(self.scores(inputs, pool), unranked=not self.ranks_all)

    def whole(self, inputs: Sequence[str], pool: Sequence[str]) -> np.ndarray:
        """Per input, whether the model sees all of it when ranking ``pool`` (False: the input is cut).

        A rank change between two cut inputs says nothing about the segment added between them (it may
        have been cut away), so the UCM evaluation leaves such records out and counts them.
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
        """What determines the ranks, as ``results.json`` records it."""
        return {"method": self.method}
