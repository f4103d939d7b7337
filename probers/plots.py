"""The paper's figures of probe results: per relation (figure 5), per answer length in characters (figure 3),
per layer (figure 6), per checkpoint step (figure 4). Every number comes from the acc@k metric module."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path

from medlama.probers.query_set import QuerySet
from medlama.probers.scores import acc_at_k_module

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
    (:meth:`~medlama.probers.result.ProbeResult.relation_intervals`) as error bars."""
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
    ax.set_title(f"acc@{k} per relation (error bars: 95% bootstrap interval)")
    ax.legend()
    return save_figure(fig, Path(path))


def plot_answer_length(results: Sequence["ProbeResult"], queries: QuerySet | None, path: str | Path,
                       k: int = 10) -> Path:
    """Figure 3: acc@k per answer length in characters."""
    fig, ax = _figure()
    k = k if all(k in r.metrics["k"] for r in results) else max(results[0].metrics["k"])
    for result in results:
        groups = acc_by_answer_length(result, queries)
        bins = sorted(groups)
        ax.plot(bins, [100 * groups[b][f"acc@{k}"] for b in bins], marker="o", label=result.label)
    ax.set_xlabel("mean length of the gold answers (characters)")
    ax.set_ylabel(f"acc@{k} (%)")
    ax.set_title("acc@k per answer length")
    ax.legend()
    return save_figure(fig, Path(path))


def plot_series(series: Mapping[str, Mapping[int, "ProbeResult"]], path: str | Path, xlabel: str,
                ks: Sequence[int] = (1, 10)) -> Path:
    """Figures 4 and 6: acc@k against layer or training step, one line per series and k."""
    fig, ax = _figure()
    for name, by_x in series.items():
        xs = sorted(by_x)
        for k in ks:
            ax.plot(xs, [100 * by_x[x].acc(k) for x in xs], marker="o", label=f"{name} acc@{k}")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("acc (%)")
    ax.legend()
    return save_figure(fig, Path(path))
