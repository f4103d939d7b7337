"""What the parts that time peers share: best-of-N timing (the machine is noisy), top-k lists and their agreement."""

from __future__ import annotations

import numpy as np
from gpu_common import timed

#: Timed runs per measurement; the fastest counts (other work on the machine only ever slows a run down).
REPEATS = 3


def best_of(device, ours, theirs, repeats: int = REPEATS) -> tuple[float, float]:
    """The fastest of ``repeats`` timed runs of ``ours`` and of ``theirs`` (each a full run, warm-ups done by the
    caller), the two alternated so that both meet the same load of a shared machine."""
    times = [(timed(device, ours), timed(device, theirs)) for _ in range(repeats)]
    return min(t for t, _ in times), min(t for _, t in times)


def agreement(ours: list[list[str]], theirs: list[list[str]]) -> float:
    """The share of queries whose top-k lists (names, in order) are equal."""
    return sum(a == b for a, b in zip(ours, theirs)) / max(1, len(ours))


def top_names(scores, names: list[str], k: int) -> list[str]:
    """The ``k`` best names by ``scores`` (ties in candidate order, as medlama ranks)."""
    return [names[j] for j in np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")[:k]]
