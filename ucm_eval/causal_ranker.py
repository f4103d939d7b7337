"""A UCM context ranker for decoder-only causal LMs: the whole pool ranked by exact likelihood.

Each input's pool is scored as ``medlama probe --method causal-likelihood`` scores candidates (the
log-probability of the name, then the input's text after ``[Y]``, as the continuation of the text
before it; the prefix's KV cache reused across the pool), so context variance is measured for decoder
LMs the same way as for masked LMs. An input whose prefix plus the longest continuation exceeds the
model's positions loses the start of its prefix, and ``whole`` reports it as cut (``_fits``), so the
UCM run leaves it out and counts it as it does for the other rankers.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from medlama.probers.causal.prober import CausalLikelihoodProber, LikelihoodSettings
from medlama.probers.query_set import QuerySet
from medlama.ucm_eval.context_ranker import ContextRanker


class CausalRanker(ContextRanker):
    """Exact likelihood of every pool name in the slot, with a causal LM (GPT-2, BioGPT, Llama style)."""

    method = "causal-likelihood"

    def __init__(self, model_path: str | Path, settings: LikelihoodSettings | None = None, *,
                 batch_size: int | None = None, device: str | None = None) -> None:
        settings = settings or LikelihoodSettings()
        if batch_size is not None:
            settings = replace(settings, batch_size=batch_size)
        self.prober = CausalLikelihoodProber(model_path, settings, device=device)
        self.model_path = str(model_path)

    def _scores(self, inputs: list[str], pool: list[str]) -> np.ndarray:
        queries = QuerySet(ids=[str(i) for i in range(len(inputs))], relations=[""] * len(inputs), texts=inputs,
                           gold=[[] for _ in inputs], candidates=pool, name="context inputs")
        return self.prober.scores(queries)

    def _fits(self, text: str, pool: list[str]) -> bool:
        lm = self.prober.lm
        split = lm.split(text)
        longest = max((len(ids) for ids in lm.candidate_ids(pool, split.slot)), default=0)
        # The last continuation token is predicted, never fed (as ``CausalLM.fit_prefix`` counts).
        return len(split.prefix) + longest + len(split.suffix) - 1 <= lm.max_length

    def settings(self) -> dict:
        # The ranker scores every pool name (``scores``): how the prober's ``rank`` searches does not apply.
        return {**{k: v for k, v in self.prober.settings().items() if k != "search"}, "method": self.method}
