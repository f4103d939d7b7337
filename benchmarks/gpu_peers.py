"""What the parts that time peers share: best-of-N timing (the machine is noisy), top-k lists and their agreement."""

from __future__ import annotations

import time

import numpy as np
from gpu_common import timed

def cpu_seconds(work) -> float:
    """The process's CPU seconds of ``work`` (on a CPU with one torch thread, its own work whatever else runs)."""
    start = time.process_time()
    work()
    return time.process_time() - start


def best_of(device, works: dict, repeats: int, clock: str = "wall") -> tuple[dict[str, float], dict]:
    """Each of ``works`` (name -> callable, warm-ups done by the caller) run ``repeats`` times, the works in turn
    within a round so that all meet the same load of a shared machine: the least seconds per name (other work
    on the machine only ever slows a run down), and each work's last return value. ``clock`` ``cpu``: this
    process's CPU seconds (a CPU device only), else wall seconds."""
    seconds, results = {name: float("inf") for name in works}, {}
    for _ in range(max(1, repeats)):
        for name, work in works.items():
            box = []
            run = lambda: box.append(work())  # noqa: E731 - the return value kept beside the timing
            seconds[name] = min(seconds[name], cpu_seconds(run) if clock == "cpu" else timed(device, run))
            results[name] = box[0]
    return seconds, results


def agreement(ours: list[list[str]], theirs: list[list[str]]) -> float:
    """The share of queries whose top-k lists (names, in order) are equal."""
    return sum(a == b for a, b in zip(ours, theirs)) / max(1, len(ours))


def top_names(scores, names: list[str], k: int) -> list[str]:
    """The ``k`` best names by ``scores`` (ties in candidate order, as medlama ranks)."""
    return [names[j] for j in np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")[:k]]
