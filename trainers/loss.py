"""The rewiring loss: :class:`ClozeInfoNCELoss`, InfoNCE over all 2N texts of a batch of cloze pairs
(paper equation 1), computed by sentence-transformers' ``MultipleNegativesRankingLoss``."""

from __future__ import annotations

from typing import Any

from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
from sentence_transformers.util import cos_sim
from torch import Tensor

from medlama.core.distributed import world_size
from medlama.trainers.model_card import CITATION


class ClozeInfoNCELoss(MultipleNegativesRankingLoss):
    """InfoNCE over the 2N texts of a batch of (query, answer) pairs (paper equation 1).

    Every query and every answer is an anchor; its partner is the positive and the other 2N-2 texts of the
    batch are the negatives; similarity is cosine, scaled by 1/temperature; the loss is the mean over the 2N
    anchors (the reference code's NT-Xent).

    Why a subclass: sentence-transformers 6.2 has no single configuration of ``MultipleNegativesRankingLoss``
    that does this. ``directions=("query_to_doc", "query_to_query")`` with ``partition_mode="joint"`` gives
    exactly the N query-anchored terms (all answers plus the other queries in the denominator, the query
    itself excluded); adding ``"doc_to_query"`` and ``"doc_to_doc"`` puts both anchors of a pair into ONE
    softmax with one numerator (the GTE loss), and ``partition_mode="per_direction"`` (the symmetric loss)
    drops the same-type negatives. So this class runs the library's own computation twice, the second time
    with the columns swapped so that the answers are the anchors, and averages the two. Gathering negatives
    across devices is the library's own (``gather_across_devices``): each device's anchors meet every
    device's texts, and the gradients flow back to the device that embedded them.

    Args:
        model: the SentenceTransformer being rewired.
        temperature: tau of equation 1; the similarity is ``cos_sim / temperature`` (default 0.04, the
            upstream README's; table 8 of the paper stars 0.03).
        gather_across_devices: also take the other devices' texts as negatives (what
            :func:`make_loss` turns on when training is distributed).

    Requirements:
        1. (query, answer) pairs: a masked sentence and the span its mask replaced
           (:func:`medlama.trainers.cloze.build_cloze_dataset` makes them from a corpus)
        2. no two equal texts in a batch, ideally: an equal text is counted as a negative (the rewiring's
           ``batch_sampler="no_duplicates"`` is sentence-transformers' ``BatchSamplers.NO_DUPLICATES``)

    Inputs:
        +---------------------------------------------+--------+
        | Texts                                       | Labels |
        +=============================================+========+
        | (query, answer) pairs: columns ``query``,   | none   |
        | ``answer``, in that order                   |        |
        +---------------------------------------------+--------+

    Relations:
        - Built on :class:`~sentence_transformers.losses.MultipleNegativesRankingLoss` (query-anchored
          InfoNCE with in-batch negatives), run once with each column as the anchors.

    Example:
        ::

            from datasets import Dataset
            from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer

            from medlama.trainers.loss import ClozeInfoNCELoss

            model = SentenceTransformer("sentence-transformers/all-MiniLM-L6-v2")
            train_dataset = Dataset.from_dict({
                "query": ["aspirin may treat a [MASK] in adults", "metformin lowers [MASK] glucose"],
                "answer": ["headache", "blood"],
            })
            loss = ClozeInfoNCELoss(model, temperature=0.04)
            trainer = SentenceTransformerTrainer(model=model, train_dataset=train_dataset, loss=loss)
            trainer.train()

        ``medlama rewire`` (:func:`medlama.trainers.trainer.rewire`) does this with the paper's settings,
        checkpoints and a run record.
    """

    def __init__(self, model: SentenceTransformer, temperature: float = 0.04,
                 gather_across_devices: bool = False) -> None:
        super().__init__(model, scale=1.0 / temperature, similarity_fct=cos_sim,
                         gather_across_devices=gather_across_devices,
                         directions=("query_to_doc", "query_to_query"), partition_mode="joint")

    def compute_loss_from_embeddings(self, embeddings: list[Tensor], labels: Tensor | None) -> Tensor:
        if len(embeddings) != 2:
            raise ValueError(f"ClozeInfoNCELoss takes (query, answer) pairs, got {len(embeddings)} columns")
        queries, answers = embeddings
        query_anchored = super().compute_loss_from_embeddings([queries, answers], labels)
        answer_anchored = super().compute_loss_from_embeddings([answers, queries], labels)
        return (query_anchored + answer_anchored) / 2

    def get_config_dict(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "scale": self.scale, "similarity_fct": "cos_sim",
                "anchors": "all 2N texts (every query and every answer)",
                "gather_across_devices": self.gather_across_devices}

    @property
    def citation(self) -> str:
        return CITATION


def make_loss(model: SentenceTransformer, temperature: float = 0.04,
              gather_across_devices: bool | None = None) -> ClozeInfoNCELoss:
    """The rewiring loss for ``model``; gathering across devices is on by default when distributed."""
    if gather_across_devices is None:
        gather_across_devices = world_size() > 1
    return ClozeInfoNCELoss(model, temperature=temperature, gather_across_devices=gather_across_devices)
