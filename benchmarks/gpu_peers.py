"""What the parts that time peers share: best-of-N timing (the machine is noisy), top-k lists and their agreement."""

from __future__ import annotations

import numpy as np
from gpu_common import timed

#: Timed runs per measurement; the fastest counts (other work on the machine only ever slows a run down).
REPEATS = 3


def best_of(device, work, repeats: int = REPEATS) -> float:
    """The fastest of ``repeats`` timed runs of ``work`` (each a full run, warm-up done by the caller)."""
    return min(timed(device, work) for _ in range(repeats))


def agreement(ours: list[list[str]], theirs: list[list[str]]) -> float:
    """The share of queries whose top-k lists (names, in order) are equal."""
    return sum(a == b for a, b in zip(ours, theirs)) / max(1, len(ours))


def top_names(scores, names: list[str], k: int) -> list[str]:
    """The ``k`` best names by ``scores`` (ties in candidate order, as medlama ranks)."""
    return [names[j] for j in np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")[:k]]
