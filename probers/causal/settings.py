"""The settings of the three causal methods (:mod:`medlama.probers.causal.prober`), over what every causal LM
is loaded and fed with (:class:`~medlama.probers.causal.scoring.CausalModelSettings`): their fields are
``medlama probe``'s flags of ``--method causal-likelihood``, ``causal-constrained`` and ``causal-generate``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from medlama.core.batching import BatchSize, batch_size_setting
from medlama.core.errors import MedlamaInputError
from medlama.core.settings import setting
from medlama.probers.causal.scoring import CausalModelSettings

__all__ = ["ConstrainedSettings", "GenerateSettings", "LikelihoodSettings"]

REDUCTION_HELP = "a candidate's score: the sum of its (and the suffix's) token log-probabilities, or their mean"


@dataclass(frozen=True)
class LikelihoodSettings(CausalModelSettings):
    batch_size: BatchSize = batch_size_setting(32, help="candidate continuations per forward pass")
    reduction: Literal["sum", "mean"] = setting("sum", help=REDUCTION_HELP)
    kv_cache: bool = setting(True, help="run each query's prefix once and reuse its KV cache for every candidate "
                                        "(off: score every full sequence from scratch; same scores, more work)")
    search: Literal["best-first", "exhaustive"] | None = setting(
        None, help="how the top-k is found: best-first over the candidates' token trie (exact for the sum "
                   "reduction; scores a fraction of the names) or exhaustive (every candidate scored); none: "
                   "best-first for sum (with the KV cache), exhaustive for mean")
    rank_cutoff: int | None = setting(
        None, min=1, help="best-first: bound the work spent on the gold's rank in the sample log: exact up to this "
                          "rank, null beyond it; none: the exact rank over the whole pool, as exhaustive search "
                          "gives (the search goes on until every name that can score as much as the gold is "
                          "scored)")
    layers: tuple[int, ...] | None = setting(
        None, metavar="LAYER", help="the logit lens: score at each of these layers (0 = embeddings, -1 = last) "
                                    "through the final norm and the output head, from one pass; one result per "
                                    "layer, plotted as acc per layer (every candidate scored)")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.layers is not None and self.search == "best-first":
            raise MedlamaInputError("layers scores every candidate at every layer; search 'best-first' does not "
                                    "apply to it: leave search out or give 'exhaustive'")
        if self.search == "best-first" and self.reduction != "sum":
            raise MedlamaInputError(f"search 'best-first' needs reduction 'sum' (a prefix's summed log-probability "
                                    f"bounds every name below it; a mean does not); with reduction "
                                    f"{self.reduction!r} use search 'exhaustive'")
        if self.search == "best-first" and not self.kv_cache:
            raise MedlamaInputError("search 'best-first' feeds its paths after the prefix's KV cache; with kv_cache "
                                    "off use search 'exhaustive'")

    @property
    def resolved_search(self) -> str:
        """The search ``rank`` uses: the one given, else best-first where it is exact (sum, KV cache on)."""
        if self.search is not None:
            return self.search
        if self.layers is not None:
            return "exhaustive"
        return "best-first" if self.reduction == "sum" and self.kv_cache else "exhaustive"


@dataclass(frozen=True)
class ConstrainedSettings(CausalModelSettings):
    batch_size: BatchSize = batch_size_setting(8, help="queries per beam search")
    num_beams: int | None = setting(None, help="beam width (none: top_k); at least the number of candidates "
                                               "gives the exact likelihood ranking", min=1, metavar="N")
    reduction: Literal["sum", "mean"] = setting("sum", help=REDUCTION_HELP)
    close_tokens: int | None = setting(1, help="tokens of the text after [Y] that close a candidate (none: all "
                                               "of it, so beams score exactly as causal-likelihood)", min=1,
                                       metavar="N")


@dataclass(frozen=True)
class GenerateSettings(CausalModelSettings):
    batch_size: BatchSize = batch_size_setting(16, help="queries per generate call")
    num_beams: int | None = setting(None, help="beams (none: top_k, one answer per beam; 1: greedy)", min=1,
                                       metavar="N")
    max_answer_tokens: int = setting(16, help="most tokens generated for an answer", min=1)
    to_candidates: bool = setting(True, help="report an answer matching candidate names as those names "
                                             "(--raw-predictions: as generated)", cli=False)
    answer_match: Literal["exact", "normalized"] = setting(
        "exact", help="a generated answer is reported as the candidate names with the same token ids (exact) or "
                      "the same normalised text (normalized)")
