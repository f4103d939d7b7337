"""The UCM paper's ranker: X-FACTR confidence decoding with a masked LM's MLM head, as BioLAMA decodes.

The UCM paper (Yao et al.) decodes multi-token answers "following BioLAMA" (Sung et al. 2021), whose probe
is X-FACTR's decoding (Jiang et al. 2020) with BioLAMA's settings: beam 5, answers of 1..10 tokens, the
``confidence`` fill (each round fills the single most confident (mask, token) pair), no refinement. That is
``medlama probe --method mask-predict --preset biolama``; this ranker runs that prober
(:class:`medlama.probers.mask_predict.MaskPredictProber`, the same code) on each incremental context input.

Ranks. Decoding generates answers from the vocabulary; it does not score the pool. An entity's rank at an
input is its place among the pool entities the decoding returned (a decoded answer is that entity when its
token ids equal the name's, X-FACTR's criterion), ordered by the decoded score (the mean token
log-probability at fill time; ties: pool order). An entity decoding did not return is *not ranked*: its
score is ``-inf`` and every such entity shares the rank ``len(pool) + 1``, one past the last. So an entity
absent before and after a segment has a rank change of 0 (the paper's "ranking-unchanged"), one that
appears rises (negative change), one that drops out falls (positive change); no rank change is made up
from pool order among entities the model never produced. Answers that are no pool entity take no rank.

``mask-average`` (:class:`medlama.ucm_eval.rankers.MaskAverageRanker`, every entity scored by its mean token
log-probability) is the other choice for a masked LM, recorded as the ranker's ``method``.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np

from medlama.core.errors import MedlamaInputError
from medlama.probers.mask_predict import PRESETS, MaskPredictProber, MaskPredictSettings, preset_of
from medlama.probers.query_set import QuerySet
from medlama.ucm_eval.context_ranker import ContextRanker

#: The UCM paper's decoding (BioLAMA's X-FACTR settings): the mask-predict ranker's default settings.
PAPER_DECODING = PRESETS["biolama"]


class MaskPredictRanker(ContextRanker):
    """X-FACTR decoding at the slot; pool entities ranked by their decoded score, the rest not ranked."""

    method = "mask-predict"
    ranks_all = False

    def __init__(self, model_path: str | Path, settings: MaskPredictSettings | None = None, *,
                 device: str | None = None) -> None:
        chosen = settings if settings is not None else PAPER_DECODING
        if chosen.prompts is not None:
            raise MedlamaInputError("the mask-predict UCM ranker decodes the context inputs as they are; "
                                    "learned prompts are for medlama probe")
        # Decoded answers must be named as the pool's entities to be ranked at all.
        self.settings_ = replace(chosen, to_candidates=True)
        self.prober = MaskPredictProber(model_path, self.settings_, device=device)
        self.model_path = str(model_path)

    def _scores(self, inputs: list[str], pool: list[str]) -> np.ndarray:
        queries = QuerySet(ids=[str(i) for i in range(len(inputs))], relations=[""] * len(inputs), texts=inputs,
                           gold=[[] for _ in inputs], candidates=pool, name="context inputs")
        where: dict[str, list[int]] = {}
        for j, name in enumerate(pool):
            where.setdefault(name, []).append(j)
        out = np.full((len(inputs), len(pool)), -math.inf, dtype=np.float64)
        for i, answers in enumerate(self.prober.decode(queries)):
            for text, score in answers:
                for j in where.get(text, ()):
                    out[i, j] = max(out[i, j], float(score))
        return out

    def _fits(self, text: str, pool: list[str]) -> bool:
        # The most masks decoding tries decides whether the input fits whole.
        lm = self.prober.lm
        split = lm.split(text)
        masks = self.settings_.max_masks
        return len(lm.lead) + len(split.prefix) + masks + len(split.suffix) + len(lm.trail) <= lm.max_length

    def settings(self) -> dict:
        chosen = {key: value for key, value in self.prober.settings().items() if key not in ("model", "prompts")}
        return {**chosen, "method": self.method, "model": self.model_path,
                "paper_decoding": preset_of(self.settings_) == "biolama",
                "unranked": "an entity decoding did not return shares the rank len(pool) + 1"}
