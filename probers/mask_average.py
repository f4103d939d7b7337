"""Mask average (Kassner et al. 2021): rank the candidate names by the mean log-probability of their tokens.

For a query and a candidate of n tokens (the model tokenizer's tokens, no special tokens), the slot
``[Y]`` is replaced by n mask tokens, and the candidate's score is the mean over the n masks of the
log-softmax probability (over the whole vocabulary) of the candidate's i-th token at the i-th mask.
Every candidate is ranked (the query set's candidate names, MedLAMA's "common vocab"); ties keep the
candidate order.

Shared work is done once: a query is tokenised once, and one forward pass per (query, n) serves all
candidates of n tokens, whose scores are gathered from that pass at once. Queries go through the model
in batches (``batch_size`` rows per pass, fewer when the n x vocabulary log-probabilities would be large).

``max_tokens`` caps n (default: none, so n goes up to the longest candidate, one pass per distinct
length). A candidate longer than the cap is scored on its first ``max_tokens`` tokens at
``max_tokens`` masks, so it is still ranked; a name with no tokens at all is never ranked.

The reference repository's ``run_multi_token_mean_prob.py`` differs: it averages raw logits of the
candidate's tokens (special tokens included) at a single mask, over a type-restricted candidate set.
This prober follows the method as the paper and Kassner et al. describe it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from medlama.core.batching import BatchSize, batch_size_setting
from medlama.core.errors import MedlamaInputError
from medlama.probers.prober import Prober, check_settings
from medlama.probers.mlm import MaskedLM
from medlama.probers.query_set import QuerySet
from medlama.probers.ranking import Ranking
from medlama.core.settings import setting


@dataclass(frozen=True)
class MaskAverageSettings:
    """How candidates are scored: masks per candidate and rows per forward pass."""

    max_tokens: int | None = setting(None, help="most masks per candidate (none: the longest candidate's token "
                                                "count); longer candidates are scored on their first N tokens",
                                     min=1, metavar="N")
    batch_size: BatchSize = batch_size_setting(32, help="queries per forward pass (one row each, per candidate length)")

    def __post_init__(self) -> None:
        check_settings(self)


class MaskAverageProber(Prober):
    """Retrieval by a masked LM's MLM head: candidates ranked by their mean token log-probability."""

    method = "mask-average"

    def __init__(self, model_path: str | Path, settings: MaskAverageSettings = MaskAverageSettings(), *,
                 device: str | None = None) -> None:
        self.settings_ = settings
        self.lm = MaskedLM(model_path, device=device, batch_size=settings.batch_size)

    @property
    def device(self) -> Any:
        """The masked LM's device."""
        return self.lm.device

    def settings(self) -> dict:
        return {"method": self.method, "model": self.lm.model_path, **asdict(self.settings_)}

    def _groups(self, candidates: list[str], space_before: bool) -> dict:
        """n -> (candidate indices, their first n token ids as an n-column tensor), for each distinct n."""
        import torch  # torch only when a model runs

        cap = self.settings_.max_tokens
        by_length: dict[int, tuple[list[int], list[list[int]]]] = {}
        for index, ids in enumerate(self.lm.candidate_ids(candidates, space_before)):
            n = min(len(ids), cap) if cap else len(ids)
            if n:
                by_length.setdefault(n, ([], []))
                by_length[n][0].append(index)
                by_length[n][1].append(ids[:n])
        return {n: (torch.tensor(idx, dtype=torch.long), torch.tensor(ids, dtype=torch.long, device=self.lm.device))
                for n, (idx, ids) in sorted(by_length.items())}

    def _scores(self, splits: list, groups: dict, width: int):
        """Scores (queries x candidates, float32 on the CPU; -inf for unranked names) of split queries."""
        import torch  # torch only when a model runs

        scores = torch.full((len(splits), width), float("-inf"))
        for n, (columns, ids) in groups.items():
            rows, positions = [], []
            for split in splits:
                row, start = self.lm.template(split, n)
                rows.append(row)
                positions.append(range(start, start + n))
            steps = torch.arange(n, device=self.lm.device)
            scores[:, columns] = self.lm.log_probs(
                rows, positions, lambda lp, _: lp[:, steps, ids].mean(-1).cpu())
        return scores

    def _blocks(self, queries: QuerySet):
        """(query indices, their scores) per batch of queries that share a tokenisation of the candidates."""
        if not queries.candidates:
            raise MedlamaInputError(f"query set {queries.name!r} has no candidates")
        splits = [self.lm.split(text) for text in queries.texts]
        for space_before in (True, False):
            members = [i for i, split in enumerate(splits) if split.space_before == space_before]
            if not members:
                continue
            groups = self._groups(queries.candidates, space_before)
            step = self.settings_.batch_size
            for start in range(0, len(members), step):
                block = members[start:start + step]
                yield block, self._scores([splits[i] for i in block], groups, len(queries.candidates))

    def scores(self, queries: QuerySet):
        """Every candidate's score for every query (queries x candidates float32 tensor; -inf: unranked)."""
        import torch  # torch only when a model runs

        out = torch.full((len(queries), len(queries.candidates)), float("-inf"))
        for block, scores in self._blocks(queries):
            out[block] = scores
        return out

    scores_pool = True

    @property
    def score_meaning(self) -> str:
        return "mean token log-probability at the masks"

    def rank_scored(self, queries: QuerySet, top_k: int = 10, *, all_scores: bool = False) -> Ranking:
        """The ``top_k`` best candidates of each query with their scores, best first (ties in candidate
        order), the gold ranked among every candidate; one block of queries in memory at a time (every
        score kept only with ``all_scores``). ``inputs``: the query with the model's mask token in the slot
        (the prober widens it to as many masks as a candidate has tokens)."""
        import torch  # torch only when a model runs

        inputs = queries.with_mask(self.lm.tokenizer.mask_token)
        rows: list = [None] * len(queries)
        for block, scores in self._blocks(queries):
            values, order = torch.sort(scores, dim=1, descending=True, stable=True)
            values, order = values[:, :top_k].tolist(), order[:, :top_k].tolist()
            top = [[c for v, c in zip(vals, cols) if v != float("-inf")] for vals, cols in zip(values, order)]
            part = Ranking.from_pool([queries.gold[q] for q in block], queries.candidates, scores.double().numpy(),
                                     top, inputs=[inputs[q] for q in block], all_scores=all_scores)
            for q, row in zip(block, part.rows()):
                rows[q] = row
        return Ranking.from_rows(rows)
