"""Probe results for people: the terminal tables (acc@k per run, per relation) and the mean ± std of
repeated runs."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from medlama.core.display import print_table
from medlama.runs.benchmarks import benchmark
from medlama.runs.scores import REPORT_KS


def percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f}"


def print_summary(results: Sequence["ProbeResult"], title: str = "acc@k (%)", ks: Sequence[int] = REPORT_KS) -> None:
    """One row per result: micro and macro acc@k, queries, seconds."""
    columns = ["run"] + [f"acc@{k}" for k in ks] + [f"macro acc@{k}" for k in ks] + ["queries", "seconds"]
    rows = [[r.label] + [percent(r.acc(k)) for k in ks] + [percent(r.acc(k, "macro")) for k in ks]
            + [len(r.ids), f"{r.seconds:.1f}"] for r in results]
    print_table(title, columns, rows, caption="micro: over queries; macro: mean over relations")


def print_per_relation(results: Sequence["ProbeResult"], k_values: Sequence[int] = (1, 10)) -> None:
    """acc@k per relation, the results side by side."""
    relations = sorted(results[0].metrics["groups"])
    columns = ["relation", "queries"] + [f"{r.label} acc@{k}" for r in results for k in k_values]
    rows = [[rel, results[0].metrics["groups"][rel]["num_queries"]]
            + [percent(r.metrics["groups"][rel][f"acc@{k}"]) for r in results for k in k_values] for rel in relations]
    print_table("acc@k per relation (%)", columns, rows)


def scoring_plan(dataset: str = "medlama", ks: Sequence[int] | None = None,
                 match: str | None = None) -> tuple[tuple[int, ...], tuple[int, ...], str]:
    """``(cut-offs to report, cut-offs to score, matching)`` of a probe of ``dataset``: its declaration's
    :meth:`~medlama.runs.benchmarks.Benchmark.scoring_plan`."""
    return benchmark(dataset).scoring_plan(ks, match)


def sample_mean_std(values: Sequence[float]) -> tuple[float, float | None]:
    """Mean and sample standard deviation of ``values``; the standard deviation is ``None`` for a single value
    (a sample std needs two)."""
    values = [float(v) for v in values]
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else None


def mean_std(results: Sequence["ProbeResult"], k: int, average: str = "micro") -> tuple[float, float | None]:
    """Mean and sample standard deviation of acc@k over repeated runs (table 5 of the paper)."""
    return sample_mean_std([r.acc(k, average) for r in results])


def mean_std_text(mean: float | None, std: float | None) -> str:
    """``"12.34 ± 0.56"`` in percent, or ``"12.34"`` alone when there is no std (one run)."""
    if mean is None:
        return "-"
    return percent(mean) if std is None else f"{percent(mean)} ± {percent(std)}"
