"""The paper's figures of probe results: per relation (figure 5), per answer length in characters (figure 3)
and per number of gold answers beside it, per layer (figure 6), per checkpoint step (figure 4). Every number
comes from the acc@k metric module."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path

from medlama.core.intervals import bootstrap_group_cis
from medlama.probers.query_set import QuerySet
from medlama.runs.cardinality import CARDINALITY_BINS, acc_by_cardinality, cardinality_bin
from medlama.runs.scores import acc_at_k_module

#: Answer-length bins in characters (figure 3): [0, 10), [10, 20), ... and 60 or more.
LENGTH_EDGES = (10, 20, 30, 40, 50, 60)


def length_bin(gold: Sequence[str]) -> str:
    """The figure-3 bin of a query: mean character length of its gold answers."""
    length = statistics.fmean(len(name) for name in gold)
    lower = 0
    for edge in LENGTH_EDGES:
        if length < edge:
            return f"{lower:02d}-{edge - 1:02d}"
        lower = edge
    return f"{LENGTH_EDGES[-1]}+"


def acc_by_answer_length(result: "ProbeResult", queries: QuerySet | None = None) -> dict:
    """acc@k per answer-length bin, through the metric module with the bins as groups.

    The bins are scored with the run's own matching mode and cut-offs (``result.metrics``); the gold answers
    are the result's own (or ``queries``', the same ones).
    """
    gold = queries.gold if queries is not None else result.gold
    return acc_at_k_module().compute(predictions=result.predictions, references=gold,
                                      groups=[length_bin(g) for g in gold], k=list(result.metrics["k"]),
                                      match=result.metrics["match"])["groups"]


def _figure(width: float = 9, height: float = 4.5):
    import matplotlib  # matplotlib only when a figure is drawn

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # matplotlib only when a figure is drawn

    return plt.subplots(figsize=(width, height))


def save_figure(fig, path: Path, *, dpi: int = 130) -> Path:
    """Lay out ``fig``, write it to ``path`` atomically (a reader never sees half a PNG) and close it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.tight_layout()
    fig.savefig(tmp, dpi=dpi)
    tmp.replace(path)
    import matplotlib.pyplot as plt  # matplotlib only when a figure is drawn

    plt.close(fig)
    return path


def bar_with_errors(ax, x: Sequence[float], values: Sequence[float], intervals: Sequence[Sequence[float] | None],
                    width: float, **options) -> None:
    """Bars of ``values`` (in [0, 1], drawn in percent) with error bars from their ``intervals`` (none where
    an interval is ``None``): the one way every probing plot draws an interval."""
    import numpy as np  # numpy only when this runs

    heights = 100 * np.asarray(values, dtype=float)
    low = np.array([h - 100 * ci[0] if ci else 0.0 for h, ci in zip(heights, intervals)])
    high = np.array([100 * ci[1] - h if ci else 0.0 for h, ci in zip(heights, intervals)])
    ax.bar(x, heights, width, yerr=np.vstack([np.maximum(low, 0), np.maximum(high, 0)]), capsize=2,
           error_kw={"elinewidth": 0.8}, **options)


def plot_relations(results: Sequence["ProbeResult"], path: str | Path, k: int = 10) -> Path:
    """Figure 5: acc@k per relation, one bar per result, with each relation's 95% bootstrap interval
    (:meth:`~medlama.runs.result.ProbeResult.relation_intervals`) as error bars."""
    import numpy as np  # numpy only when this runs

    relations = sorted(results[0].metrics["groups"])
    fig, ax = _figure(11, 5)
    width = 0.8 / len(results)
    x = np.arange(len(relations))
    for i, result in enumerate(results):
        intervals = result.relation_intervals(k)
        bar_with_errors(ax, x + i * width, [result.metrics["groups"][r][f"acc@{k}"] for r in relations],
                        [intervals.get(r) for r in relations], width, label=result.label)
    ax.set_xticks(x + 0.4 - width / 2, relations, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel(f"acc@{k} (%)")
    ax.set_ylim(bottom=0)
    ax.set_title(f"{results[0].query_set}: acc@{k} per relation (error bars: 95% bootstrap interval)")
    ax.legend()
    return save_figure(fig, Path(path))


def plot_answer_length(results: Sequence["ProbeResult"], queries: QuerySet | None, path: str | Path,
                       k: int = 10) -> Path:
    """Figure 3: acc@k per answer length in characters, each bin with its 95% bootstrap interval (the bin's
    queries resampled) and its number of queries, on an axis from 0."""
    gold = queries.gold if queries is not None else results[0].gold
    return _plot_bins(results, [length_bin(g) for g in gold], lambda result: acc_by_answer_length(result, queries),
                      path, k, "mean length of the gold answers (characters)", "answer length")


def plot_cardinality(results: Sequence["ProbeResult"], path: str | Path, k: int = 10) -> Path:
    """acc@k per number of gold answers (1, 2-5, >5: :mod:`medlama.runs.cardinality`), drawn as figure 3 is:
    each bin with its 95% bootstrap interval and its number of queries."""
    def groups(result: "ProbeResult") -> dict:
        bins = acc_by_cardinality(result.predictions, result.gold, ks=result.ks, match=result.metrics["match"])
        return bins["bins"]

    order = {name: i for i, name in enumerate(CARDINALITY_BINS)}
    return _plot_bins(results, [cardinality_bin(g) for g in results[0].gold], groups, path, k,
                      "number of gold answers", "number of gold answers", order=order.get)


def _plot_bins(results: Sequence["ProbeResult"], of_query: list[str], groups_of, path: str | Path, k: int,
               xlabel: str, what: str, order=None) -> Path:
    """acc@k of each result per bin (``of_query``: each query's bin; ``groups_of(result)``: ``{bin: {"acc@k":
    ...}}``), each bin with its 95% bootstrap interval (the bin's queries resampled) and its number of queries,
    on an axis from 0; the bins sorted (by ``order``, a key, if given)."""
    import numpy as np  # numpy only when this runs

    fig, ax = _figure()
    k = k if all(k in r.metrics["k"] for r in results) else max(results[0].metrics["k"])
    bins = sorted(set(of_query), key=order)
    x = np.arange(len(bins))
    shift = 0.08 * (np.arange(len(results)) - (len(results) - 1) / 2)  # side by side, not on top of each other
    for offset, result in zip(shift, results):
        groups = groups_of(result)
        intervals = bootstrap_group_cis([float(h) for h in result.hits(k)], of_query)
        values = np.array([100 * groups[b][f"acc@{k}"] for b in bins])
        low = [v - 100 * intervals[b][0] if intervals.get(b) else 0.0 for v, b in zip(values, bins)]
        high = [100 * intervals[b][1] - v if intervals.get(b) else 0.0 for v, b in zip(values, bins)]
        ax.errorbar(x + offset, values, yerr=np.maximum([low, high], 0), marker="o", capsize=3, label=result.label)
    ax.set_xticks(x, [f"{b}\n(n={of_query.count(b):,})" for b in bins], fontsize=8)
    ax.set_xlim(-0.5, len(bins) - 0.5)
    ax.set_ylim(bottom=0)
    ax.set_xlabel(f"{xlabel}; n: queries in the bin")
    ax.set_ylabel(f"acc@{k} (%)")
    ax.set_title(f"{results[0].query_set}: acc@{k} per {what} (error bars: 95% bootstrap interval)")
    ax.legend()
    return save_figure(fig, Path(path))


def plot_series(series: Mapping[str, Mapping[int, "ProbeResult"]], path: str | Path, xlabel: str,
                ks: Sequence[int] = (1, 10)) -> Path:
    """Figures 4 and 6: acc@k against layer or training step, one line per series (a model) and k, each point
    with its 95% bootstrap interval; the title names the data."""
    fig, ax = _figure()
    data = next(iter(next(iter(series.values())).values())).query_set
    for name, by_x in series.items():
        xs = sorted(by_x)
        for k in ks:
            values = [100 * by_x[x].acc(k) for x in xs]
            intervals = [by_x[x].acc_ci(k) for x in xs]
            low = [max(v - 100 * ci[0], 0.0) if ci else 0.0 for v, ci in zip(values, intervals)]
            high = [max(100 * ci[1] - v, 0.0) if ci else 0.0 for v, ci in zip(values, intervals)]
            ax.errorbar(xs, values, yerr=[low, high], marker="o", capsize=3, label=f"{name} acc@{k}")
    ax.set_xticks(sorted({x for by_x in series.values() for x in by_x}))  # layers and steps are whole numbers
    ax.set_ylim(bottom=0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("acc (%)")
    ax.set_title(f"{data}: acc@k per {xlabel} of {', '.join(series)} (error bars: 95% bootstrap interval)",
                 fontsize=9)
    ax.legend()
    return save_figure(fig, Path(path))


def plot_runs(results: Sequence["ProbeResult"], path: str | Path, *, ks: Sequence[int] = (1, 10),
              title: str | None = None) -> Path:
    """acc@k of each run (micro, with its 95% bootstrap interval), one group of bars per k: the held-out
    cloze check of the recipe, or any runs of one query set."""
    import numpy as np  # numpy only when this runs

    fig, ax = _figure(7, 4)
    width = 0.8 / len(results)
    x = np.arange(len(ks))
    for i, result in enumerate(results):
        bar_with_errors(ax, x + i * width, [result.acc(k) for k in ks], [result.acc_ci(k) for k in ks], width,
                        label=f"{result.label} (n={len(result.ids):,})")
    ax.set_xticks(x + 0.4 - width / 2, [f"acc@{k}" for k in ks])
    ax.set_ylim(bottom=0)
    ax.set_ylabel("acc (%)")
    ax.set_title(title or f"{results[0].query_set} (error bars: 95% bootstrap interval)", fontsize=9)
    ax.legend(fontsize=8)
    return save_figure(fig, Path(path))
