"""The rewiring loss is the paper's InfoNCE over all 2N texts of a batch (equation 1, every text an anchor)."""

from __future__ import annotations

import math

import pytest
import torch

from medlama.trainers.loss import ClozeInfoNCELoss, make_loss


def infonce_over_2n_by_hand(queries: torch.Tensor, answers: torch.Tensor, tau: float) -> float:
    """Equation (1) with N_i = all other texts of the batch, averaged over the 2N anchors, in plain Python."""
    texts = [t.tolist() for t in torch.cat([queries, answers]).double()]
    n = len(queries)

    def cos(u, v):
        return sum(a * b for a, b in zip(u, v, strict=True)) / math.sqrt(sum(a * a for a in u) * sum(b * b for b in v))

    total = 0.0
    for i in range(2 * n):
        partner = (i + n) % (2 * n)
        denominator = sum(math.exp(cos(texts[i], texts[j]) / tau) for j in range(2 * n) if j != i)
        total += -math.log(math.exp(cos(texts[i], texts[partner]) / tau) / denominator)
    return total / (2 * n)


@pytest.fixture()
def embeddings():
    generator = torch.Generator().manual_seed(0)
    queries = torch.randn(5, 7, generator=generator, dtype=torch.float64)
    answers = queries + 0.8 * torch.randn(5, 7, generator=generator, dtype=torch.float64)
    return queries, answers


@pytest.mark.parametrize("tau", [0.04, 0.03, 1.0])
def test_library_loss_equals_equation_1_over_2n_texts(embeddings, tau):
    queries, answers = embeddings
    loss = ClozeInfoNCELoss(torch.nn.Identity(), temperature=tau)
    assert loss.scale == pytest.approx(1 / tau)
    value = loss.compute_loss_from_embeddings([queries, answers], None)
    assert value.item() == pytest.approx(infonce_over_2n_by_hand(queries, answers, tau), rel=1e-10)


def test_loss_is_symmetric_in_queries_and_answers_and_has_gradients(embeddings):
    queries, answers = (t.clone().requires_grad_(True) for t in embeddings)
    loss = ClozeInfoNCELoss(torch.nn.Identity(), temperature=0.04)
    value = loss.compute_loss_from_embeddings([queries, answers], None)
    swapped = loss.compute_loss_from_embeddings([answers, queries], None)
    assert value.item() == pytest.approx(swapped.item(), rel=1e-12)
    value.backward()
    assert queries.grad.abs().sum() > 0 and answers.grad.abs().sum() > 0


def test_gathering_across_devices_is_the_same_loss_on_one_process(embeddings):
    queries, answers = embeddings
    plain = make_loss(torch.nn.Identity(), 0.04, gather_across_devices=False)
    gathered = make_loss(torch.nn.Identity(), 0.04, gather_across_devices=True)
    assert gathered.gather_across_devices and not plain.gather_across_devices
    assert gathered.compute_loss_from_embeddings([queries, answers], None).item() == pytest.approx(
        plain.compute_loss_from_embeddings([queries, answers], None).item(), rel=1e-12)


def test_no_single_library_configuration_is_equation_1(embeddings):
    """Why ClozeInfoNCELoss exists: the closest one-call configurations of the library loss differ."""
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    queries, answers = embeddings
    expected = infonce_over_2n_by_hand(queries, answers, 0.04)
    gte = MultipleNegativesRankingLoss(torch.nn.Identity(), scale=25.0, partition_mode="joint",
                                       directions=("query_to_doc", "query_to_query", "doc_to_query", "doc_to_doc"))
    symmetric = MultipleNegativesRankingLoss(torch.nn.Identity(), scale=25.0, partition_mode="per_direction",
                                             directions=("query_to_doc", "doc_to_query"))
    for loss in (gte, symmetric):
        assert abs(loss.compute_loss_from_embeddings([queries, answers], None).item() - expected) > 1e-3
    # ... while the query-anchored half is exactly the library's joint query_to_doc + query_to_query
    half = MultipleNegativesRankingLoss(torch.nn.Identity(), scale=25.0, partition_mode="joint",
                                        directions=("query_to_doc", "query_to_query"))
    other_half = half.compute_loss_from_embeddings([answers, queries], None)
    assert ((half.compute_loss_from_embeddings([queries, answers], None) + other_half) / 2).item() == \
        pytest.approx(expected, rel=1e-10)


def test_config_and_citation_for_the_model_card():
    loss = ClozeInfoNCELoss(torch.nn.Identity(), temperature=0.04)
    config = loss.get_config_dict()
    assert config["temperature"] == pytest.approx(0.04) and config["scale"] == pytest.approx(25.0)
    assert "Rewire-then-Probe" in loss.citation
