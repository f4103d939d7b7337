"""``masked-likelihood``: masked LMs ranked by the pseudo-log-likelihood of the whole filled-in statement.

A candidate's score is the PLL (:mod:`medlama.probers.pll`) of the query with the candidate in its ``[Y]``
slot, the whole statement scored (every token but the special ones, template words included: they read
the candidate as context), summed (``reduction="sum"``) or averaged per token (``"mean"``). With
``pll="within-word-l2r"`` (the default; Kauf & Ivanova, 2023) a token is scored with the later tokens of its
word masked too; ``pll="original"`` masks one token at a time (Salazar et al., 2020); ``"sentence-l2r"`` every
later token; ``"answer-l2r-word-l2r"`` the later tokens of the answer for the candidate's own tokens and of the
word for the others (:mod:`medlama.probers.pll`, the four ``pll_metric`` values of lm-pub-quiz). This is the score BEAR
(Wiland et al., 2024; ``lm-pub-quiz``) gives masked LMs; ``causal-likelihood`` gives causal LMs the log-
likelihood of the statement's answer and what follows it, so the pair puts both families on one scale.

Exact: every candidate of the pool is scored, and the masked copies (statements x tokens) of several queries
at once (up to :data:`STATEMENTS_PER_CALL` statements) run in length-sorted batches of ``batch_size`` rows
across their candidates. A candidate with an empty name is
not ranked (``-inf``). Ties keep candidate order. Registered as ``masked-likelihood`` in
:data:`medlama.probers.registry.METHODS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from medlama.core.batching import BatchSize, batch_size_setting
from medlama.core.defaults import MASK_PLACEHOLDER
from medlama.core.errors import MedlamaInputError
from medlama.core.loaded import LoadedModel
from medlama.core.models import torch_dtype
from medlama.core.settings import as_dict, setting
from medlama.probers.mlm import MaskedLM
from medlama.probers.pll import PllScorer
from medlama.probers.prober import Prober, check_settings
from medlama.probers.query_set import QuerySet
from medlama.probers.ranking import Ranking

#: Statements scored in one call of the PLL scorer, at most (whole queries: at least one query's).
STATEMENTS_PER_CALL = 1 << 16


@dataclass(frozen=True)
class MaskedLikelihoodSettings:
    """How statements are scored: the PLL variant, its reduction, masked copies per pass, the weights' dtype."""

    pll: Literal["within-word-l2r", "original", "sentence-l2r", "answer-l2r-word-l2r"] = setting(
        "within-word-l2r", help="which tokens a scored token's copy masks: it and the later tokens of its word "
                                "(within-word-l2r, Kauf & Ivanova 2023), it alone (original, Salazar et al. "
                                "2020), it and every later token of the statement (sentence-l2r, read left to "
                                "right), or, for a token of the candidate, it and the candidate's later tokens "
                                "and, for any other, within-word-l2r (answer-l2r-word-l2r); lm-pub-quiz's "
                                "pll_metric of the same name")
    reduction: Literal["sum", "mean"] = setting("sum", help="a candidate's score: the statement's PLL (the sum of "
                                                            "its tokens' masked log-probabilities) or their mean")
    batch_size: BatchSize = batch_size_setting(128, help="masked copies of statements per forward pass")
    dtype: Literal["fp32", "bf16", "fp16"] = setting("fp32", help="weights' dtype (bf16/fp16 halve memory on a GPU; "
                                                                   "scores are summed in float64)")

    def __post_init__(self) -> None:
        check_settings(self)


class MaskedLikelihoodProber(Prober):
    """Every candidate ranked by the PLL of its filled-in statement (exact)."""

    method = "masked-likelihood"
    independent_queries = True  # each query's statements are scored on their own (see Prober)
    scores_pool = True

    def __init__(self, model_path: str | Path | LoadedModel,
                 settings: MaskedLikelihoodSettings = MaskedLikelihoodSettings(), *,
                 device: str | None = None) -> None:
        self.settings_ = settings
        if isinstance(model_path, LoadedModel):
            model_path.check_dtype(settings.dtype)
        self.lm = MaskedLM(model_path, device=device, batch_size=settings.batch_size)
        if not isinstance(model_path, LoadedModel):
            self.lm.model.to(torch_dtype(settings.dtype))
        self.scorer = PllScorer(self.lm, settings.pll, batch_size=settings.batch_size)

    @property
    def device(self) -> Any:
        """The masked LM's device."""
        return self.lm.device

    def settings(self) -> dict:
        return {"method": self.method, "model": self.lm.model_path, **as_dict(self.settings_)}

    @property
    def score_meaning(self) -> str:
        return (f"{self.settings_.reduction} of the statement's token log-probabilities, each token masked "
                f"({self.settings_.pll} PLL)")

    @staticmethod
    def statements(text: str, names: list[str]) -> list[str]:
        """The statements of query ``text`` (one ``[Y]``, as a ``QuerySet`` checks): each name in the slot."""
        return [text.replace(MASK_PLACEHOLDER, name) for name in names]

    @staticmethod
    def answer_spans(text: str, names: list[str]) -> list[tuple[int, int]]:
        """Where each name lies in its statement of :meth:`statements` (characters ``[start, end)``)."""
        start = text.index(MASK_PLACEHOLDER)
        return [(start, start + len(name)) for name in names]

    def scores(self, queries: QuerySet) -> np.ndarray:
        """Scores ``(len(queries), len(candidates))`` as float64, higher is better (every candidate scored;
        ``-inf`` for an empty name)."""
        names = self._need_candidates(queries)
        real = [i for i, name in enumerate(names) if name.strip()]
        out = np.full((len(queries), len(names)), float("-inf"), dtype=np.float64)
        if not real:
            return out
        # several queries' statements per call, so the passes stay full across queries (a statement's PLL
        # does not depend on the others scored beside it)
        group = max(1, STATEMENTS_PER_CALL // len(real))
        kept = [names[i] for i in real]
        for first in range(0, len(queries), group):
            texts = queries.texts[first:first + group]
            spans = [span for text in texts for span in self.answer_spans(text, kept)]
            sums, counts = self.scorer.pll([line for text in texts for line in self.statements(text, kept)], spans)
            values = sums / counts.clamp(min=1) if self.settings_.reduction == "mean" else sums
            out[first:first + len(texts), real] = values.numpy().reshape(len(texts), len(real))
        return out

    def rank_scored(self, queries: QuerySet, top_k: int = 10, *, all_scores: bool = False) -> Ranking:
        """Every candidate scored (:meth:`scores`), the top ``top_k`` by score, ties in candidate order; the gold
        ranked among the whole pool. ``inputs``: the query, ``[Y]`` where each candidate goes."""
        if top_k < 1:
            raise MedlamaInputError(f"top_k must be >= 1, got {top_k}")
        scores = self.scores(queries)
        top = [[int(j) for j in np.argsort(-row, kind="stable")[:top_k] if np.isfinite(row[j])] for row in scores]
        return Ranking.from_pool(queries.gold, queries.candidates, scores, top, inputs=list(queries.texts),
                                 all_scores=all_scores)
