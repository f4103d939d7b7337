"""Retrieval scoring, the one place that says how an embedded query is compared with embedded names.

Three views of the same comparison:

* :func:`rank_pool`: the top names per query and the exact rank of its gold over the whole pool, without the
  whole score matrix (FAISS's top on a CPU, torch's on a GPU). MedLAMA and BioLAMA probing use it.
* :func:`search`: the ``top_k`` nearest names per query by an exact FAISS search (``IndexFlatL2`` on the
  raw vectors, as the reference implementation, or inner product on L2-normalised vectors for
  ``cosine``).
* :func:`score_matrix`: every query against every name, as scores where higher is nearer (the negated
  squared L2 distance, or the cosine), in float64. UCM ranking uses it, since it needs the rank of every
  pool member, not only the top few, and its pools are small.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from medlama.core.errors import MedlamaInputError

Distance = Literal["l2", "cosine"]
DISTANCES: tuple[str, ...] = ("l2", "cosine")


def check_distance(distance: str) -> str:
    if distance not in DISTANCES:
        raise MedlamaInputError(f"unknown distance {distance!r}; choose from {list(DISTANCES)}")
    return distance


def search(name_vectors: np.ndarray, query_vectors: np.ndarray, top_k: int, distance: Distance) -> np.ndarray:
    """Indices of the ``top_k`` nearest names per query (nearest first), by exact FAISS search."""
    import faiss  # faiss only when searching

    check_distance(distance)
    names = np.ascontiguousarray(name_vectors, dtype=np.float32)
    queries = np.ascontiguousarray(query_vectors, dtype=np.float32)
    if distance == "cosine":
        names, queries = names.copy(), queries.copy()
        faiss.normalize_L2(names)
        faiss.normalize_L2(queries)
        index = faiss.IndexFlatIP(names.shape[1])
    else:
        index = faiss.IndexFlatL2(names.shape[1])
    index.add(names)
    _, indices = index.search(queries, min(top_k, len(names)))
    return indices


def score_matrix(name_vectors: np.ndarray, query_vectors: np.ndarray, distance: Distance) -> np.ndarray:
    """``(queries, names)`` scores, higher is nearer: ``-||q - n||^2`` for ``l2``, the cosine for ``cosine``."""
    check_distance(distance)
    names = np.asarray(name_vectors, dtype=np.float64)
    queries = np.asarray(query_vectors, dtype=np.float64)
    if distance == "cosine":
        names = names / np.maximum(np.linalg.norm(names, axis=1, keepdims=True), 1e-12)
        queries = queries / np.maximum(np.linalg.norm(queries, axis=1, keepdims=True), 1e-12)
        return queries @ names.T
    return -((queries ** 2).sum(1)[:, None] - 2 * queries @ names.T + (names ** 2).sum(1)[None, :])


@dataclass(frozen=True)
class PoolRanks:
    """What :func:`rank_pool` returns, per query in order: the top candidates' indices (nearest first) and
    their scores, and the best-ranked gold's 1-based rank over the whole pool and its score (``None``: no gold
    in the pool), and the log-sum-exp of its scores over the whole pool (``log_normalizers``: the softmax's
    normaliser, for the top-1 confidence). Scores are :func:`score_matrix`'s, in float64."""

    top: list[list[int]]
    top_scores: list[list[float]]
    gold_ranks: list[int | None]
    gold_scores: list[float | None]
    log_normalizers: list[float] = field(default_factory=list)


#: Scores held at once per block of queries (float32 elements): 64 MiB on a CPU, 512 MiB on a GPU.
BLOCK_ELEMENTS = {"cpu": 1 << 24}
GPU_BLOCK_ELEMENTS = 1 << 27
#: Names beyond the top taken by float32 (torch) and ordered again by float64: names within float32's rounding
#: of the k-th cross the cut only in the float64 order (unless more than this many tie there).
MARGIN = 16


def rank_pool(name_vectors: np.ndarray, query_vectors: np.ndarray, top_k: int, distance: Distance,
              gold_at: Sequence[Sequence[int]], *, device: Any = None, top_by: str | None = None) -> PoolRanks:
    """The ``top_k`` nearest names per query and the rank of its best gold (``gold_at[q]``: the gold answers'
    indices among the names) over the whole pool, without the whole score matrix.

    The top (``top_by``: ``faiss`` or ``torch``; default FAISS on a CPU, torch elsewhere): FAISS's exact search
    (:func:`search`, as always), or ``torch.topk`` over float32 scores computed on ``device`` (TF32 off) of
    :data:`MARGIN` more than ``top_k``, the first ``top_k`` of those by their float64 scores (ties by pool
    order): the whole matrix's float64 order. A gold outside the top is ranked as
    :class:`~medlama.probers.ranking.Ranking` ranks it (after the top, counting the others that score higher,
    or equal and earlier in the pool) by a float32 matrix product a block of queries at a time on ``device``: a
    name whose float32 score is above the gold's by more than the product's rounding bound counts, one within
    the bound is scored again in float64 and compared exactly.
    """
    import torch  # torch only when ranking; the vectors come from a model that torch ran

    check_distance(distance)
    if top_by not in (None, "faiss", "torch"):
        raise MedlamaInputError(f"unknown top_by {top_by!r}; choose from ['faiss', 'torch']")
    device = torch.device(device if device is not None else "cpu")
    names64 = torch.from_numpy(np.asarray(name_vectors, dtype=np.float64)).to(device)
    queries64 = torch.from_numpy(np.asarray(query_vectors, dtype=np.float64)).to(device)
    if distance == "cosine":  # score_matrix's normalisation
        names64 = names64 / names64.norm(dim=1, keepdim=True).clamp_min(1e-12)
        queries64 = queries64 / queries64.norm(dim=1, keepdim=True).clamp_min(1e-12)
    exact = _ExactScores(names64, queries64, distance)
    count, dim = names64.shape
    k = min(top_k, count)
    by_faiss = (top_by or ("faiss" if device.type == "cpu" else "torch")) == "faiss"
    top = torch.from_numpy(search(name_vectors, query_vectors, top_k, distance).astype(np.int64)).to(device) \
        if by_faiss else None
    names32 = names64.float()
    offset = exact.names_sq.float() if distance == "l2" else None
    if offset is not None:  # the product with twice the names is twice the product, exactly: one pass fewer
        names32 = names32.mul_(2)
    # float32 rounding of a product over ``dim`` terms, its operands' rounding, the offset and the subtraction
    slack = 2 * (dim + 8) * 2.0 ** -24
    largest = float(exact.names_sq.max()) ** 0.5 if count and distance == "l2" else 0.0  # cosine: unit vectors
    block = max(1, BLOCK_ELEMENTS.get(device.type, GPU_BLOCK_ELEMENTS) // max(count, 1))
    ranks: PoolRanks = PoolRanks([], [], [], [])
    precision = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")  # no TF32: the bound below is float32's
    try:
        for start in range(0, len(queries64), block):
            rows = torch.arange(start, min(start + block, len(queries64)), device=device)
            # float32 scores plus the query's squared norm (higher is nearer): one product of the block serves the
            # torch top, the gold ranks and the softmax's normaliser
            block_keys = queries64[rows].float() @ names32.T
            if offset is not None:
                block_keys.sub_(offset)
            # torch: a few more than the top by float32, then the top of those by float64, ties by pool order
            picked = top[rows] if by_faiss else block_keys.topk(min(k + MARGIN, count), dim=1).indices
            picked_scores = exact.scores(rows[:, None], picked)
            if not by_faiss:
                order = torch.sort(picked, dim=1, stable=True).indices
                order = order.gather(1, torch.sort(-picked_scores.gather(1, order), dim=1, stable=True).indices)
                order = order[:, :k]
                picked, picked_scores = picked.gather(1, order), picked_scores.gather(1, order)
            block_keys.scatter_(1, picked, float("-inf"))  # the top is ranked already, and summed in float64
            _rank_block(ranks, exact, block_keys, rows, picked, picked_scores, gold_at, slack, largest)
            ranks.log_normalizers.extend(_log_normalizers(exact, rows, block_keys, picked, picked_scores))
    finally:
        torch.set_float32_matmul_precision(precision)
    return ranks


class _ExactScores:
    """:func:`score_matrix`'s float64 scores of chosen (query, name) pairs, each summed in one fixed order
    (:func:`_dot`): the same pair gives the same bits in any call, whatever else it holds, so equal
    vectors tie exactly, as in the whole matrix."""

    def __init__(self, names: Any, queries: Any, distance: Distance) -> None:
        self.names, self.queries, self.distance = names, queries, distance
        # squared norms once per vector (every pair reads the same one): a plain sum serves; l2's only
        self.names_sq, self.queries_sq = ((names * names).sum(-1), (queries * queries).sum(-1)) \
            if distance == "l2" else (None, None)
        # on a CPU numpy sums the pairs (:func:`_dot_pairs`, _dot's order and bits): torch's gathers of every
        # pair's vectors and its whole-size temporaries took most of rank_pool's time there
        self.arrays = (queries.numpy(), names.numpy()) if names.device.type == "cpu" else None

    def scores(self, query: Any, name: Any) -> Any:
        """The scores of the pairs ``(query, name)``: index tensors of shapes that broadcast (a block's rows
        as a column against its picked names: each query's vector is read once, not once per name)."""
        import torch  # as rank_pool

        if self.arrays is None:
            product = _dot(self.queries[query], self.names[name])
        else:
            query, name = torch.broadcast_tensors(query, name)
            product = torch.from_numpy(_dot_pairs(*self.arrays, query.reshape(-1).numpy(),
                                                  name.reshape(-1).numpy())).reshape(query.shape)
        if self.distance == "l2":
            product = -((self.queries_sq[query] - 2 * product) + self.names_sq[name])
        return product


def _log_normalizers(exact: _ExactScores, rows: Any, outside: Any, picked: Any, picked_scores: Any) -> list[float]:
    """The log-sum-exp over the whole pool of each query of ``rows``' scores (the softmax's normaliser, which the
    top alone does not give). The top's terms are their float64 scores; every other name's is its float32 key
    (``outside``: the product :func:`rank_pool` already made for the gold ranks, the top's keys ``-inf``; consumed
    here). A float32 key is off by about 1e-7 of the vectors' squared norms, and only the names outside the top
    carry that error, weighted by their share of the softmax: the log-normaliser is off by about 3e-7 on scores
    of magnitude 170 (random vectors, against a float64 product of the whole block), a relative 3e-7 of the
    confidence, at no second product of the block."""
    import torch  # as rank_pool

    far = _log_sum_exp_(outside).double()
    if exact.distance == "l2":  # a key leaves out the query's squared norm: the score is the key minus it
        far -= exact.queries_sq[rows]
    near = torch.logsumexp(picked_scores, dim=1) if picked.shape[1] else torch.full_like(far, float("-inf"))
    return torch.logaddexp(near, far).tolist()


#: exp() of a float32 below this is subnormal (under 1.2e-38), which a CPU computes many times slower.
_SUBNORMAL_EXP = -87.0


def _log_sum_exp_(keys: Any) -> Any:
    """``torch.logsumexp(keys, dim=1)`` of a float32 block, in place (``keys`` is consumed), the same operations in
    the same order, but with the exponents raised to :data:`_SUBNORMAL_EXP` at least: on a CPU, the exp() of
    the far names (subnormal results) took most of the normaliser's time. Each row's sum holds its largest term,
    1, and a term under 1.7e-38 (whether it is that or less) is far below that sum's rounding: the same bits (a
    test compares them with ``torch.logsumexp``'s); a row whose largest key is infinite is left to
    ``torch.logsumexp``."""
    import torch  # as rank_pool

    largest = keys.amax(dim=1, keepdim=True)
    infinite = largest.abs() == float("inf")
    rows = infinite[:, 0].nonzero()[:, 0]
    exact = torch.logsumexp(keys[rows], dim=1) if len(rows) else None
    largest.masked_fill_(infinite, 0)
    total = keys.sub_(largest).clamp_min_(_SUBNORMAL_EXP).exp_().sum(1).log_().add_(largest[:, 0])
    if exact is not None:
        total[rows] = exact
    return total


def _dot(a: Any, b: Any) -> Any:
    """Dot products along the last dimension of two float64 tensors (broadcast), the products summed by
    halving (an odd column folded into the first; elementwise additions only: no reduction kernel whose order
    could depend on the number of rows or the device)."""
    terms = a * b
    return _halve(terms)[..., 0].clone()


def _halve(terms: Any) -> Any:
    """``terms`` (a tensor or array) summed along its last dimension in place, into its first column, by
    :func:`_dot`'s halving."""
    width = terms.shape[-1]
    while width > 1:
        if width % 2:
            width -= 1
            terms[..., 0] += terms[..., width]
        width //= 2
        terms[..., :width] += terms[..., width:2 * width]
    return terms


#: Pairs summed at once by :func:`_dot_pairs`: their terms (256 x 384 float64, 768 KiB) stay in the CPU's cache.
PAIR_CHUNK = 256


def _dot_pairs(left: np.ndarray, right: np.ndarray, left_at: np.ndarray, right_at: np.ndarray) -> np.ndarray:
    """:func:`_dot` of the pairs ``(left[left_at[i]], right[right_at[i]])`` (float64 arrays), bit for bit, a
    cache-sized chunk of pairs at a time."""
    out = np.empty(len(left_at), dtype=np.float64)
    for start in range(0, len(left_at), PAIR_CHUNK):
        terms = left[left_at[start:start + PAIR_CHUNK]]
        terms *= right[right_at[start:start + PAIR_CHUNK]]
        out[start:start + PAIR_CHUNK] = _halve(terms)[:, 0]
    return out


def _rank_block(ranks: PoolRanks, exact: _ExactScores, outside: Any, rows: Any, picked: Any, picked_scores: Any,
                gold_at: Sequence[Sequence[int]], slack: float, largest: float) -> None:
    """Append the block ``rows``' entries to ``ranks`` (see :func:`rank_pool`; ``outside``: the block's float32
    keys, the top's ``-inf``)."""
    import torch  # as rank_pool

    device = rows.device
    tops, top_scores = picked.tolist(), picked_scores.tolist()
    counted, golds, start = [], [], int(rows[0]) if len(rows) else 0
    gold_ranks: list[int | None] = []
    gold_scores: list[float | None] = []
    for local, (row, row_scores) in enumerate(zip(tops, top_scores)):
        answers = gold_at[start + local]
        place = next((i for i, j in enumerate(row) if j in answers), None)
        gold_ranks.append(None if place is None else place + 1)
        gold_scores.append(None if place is None else row_scores[place])
        if place is None and answers:
            counted.append(local)
            golds.append(answers)
    if counted:
        # the best gold of each counted query: the highest float64 score, the earliest in the pool among equals
        which = torch.tensor([c for c, answers in zip(counted, golds) for _ in answers], device=device)
        answer = torch.tensor([j for answers in golds for j in answers], device=device)
        scores = exact.scores(rows[which], answer).tolist()
        best: dict[int, tuple[float, int]] = {}
        for c, j, s in zip(which.tolist(), answer.tolist(), scores):
            if c not in best or (-s, j) < (-best[c][0], best[c][1]):
                best[c] = (s, j)
        local = torch.tensor(counted, device=device)
        query = rows[local]
        gold = torch.tensor([best[c][0] for c in counted], dtype=torch.float64, device=device)
        gold_index = torch.tensor([best[c][1] for c in counted], device=device)
        # the gold's float32 key, and how far any float32 key may be from its float64 score
        centre = gold + exact.queries_sq[query] if exact.distance == "l2" else gold
        bound = slack * (2 * exact.queries_sq[query].sqrt() * largest + largest ** 2) \
            if exact.distance == "l2" else torch.full_like(gold, 2 * slack)
        bound = bound + centre.abs() * 2.0 ** -22  # the float32 rounding of the limits themselves
        # the limits of every row of the block (+inf: a row not counted, nothing above or within), so that the
        # comparisons read the block itself rather than a copy of its counted rows
        high = torch.full((len(rows), 1), float("inf"), device=device)
        low = high.clone()
        high[local, 0], low[local, 0] = (centre + bound).float(), (centre - bound).float()
        ahead = outside > high
        within = (outside >= low) ^ ahead  # high >= low: those above are also at or above the low limit
        ahead = ahead.sum(1, dtype=torch.int32)  # int32: on a CPU twice as fast as the default int64
        unsure = within.nonzero()
        if len(unsure):
            at, name = unsure[:, 0], unsure[:, 1]
            place = torch.zeros(len(rows), dtype=torch.long, device=device)
            place[local] = torch.arange(len(counted), device=device)
            again = exact.scores(rows[at], name)
            beats = (again > gold[place[at]]) | ((again == gold[place[at]]) & (name < gold_index[place[at]]))
            ahead = ahead.index_add(0, at, beats.to(ahead.dtype))
        for c, rank, score in zip(counted, (ahead[local] + picked.shape[1] + 1).tolist(), gold.tolist()):
            gold_ranks[c], gold_scores[c] = rank, score
    ranks.top.extend(tops)
    ranks.top_scores.extend(top_scores)
    ranks.gold_ranks.extend(gold_ranks)
    ranks.gold_scores.extend(gold_scores)
