"""Every probe plot names its data and shows its uncertainty: the answer-length figure's bins carry their query
counts and bootstrap intervals on an axis from 0, the layer and step figures their intervals and the data."""

from __future__ import annotations

import pytest

from medlama.core.intervals import bootstrap_group_cis
from medlama.runs import plots
from probe_outputs import toy_queries, toy_result  # tests/helpers


@pytest.fixture
def drawn(monkeypatch):
    figures = []
    monkeypatch.setattr(plots, "save_figure", lambda fig, path, **_: figures.append(fig) or path)
    return figures


def test_answer_length_bins_show_their_size_and_interval(drawn, tmp_path):
    names = tuple("x" * (i % 35 + 1) + str(i) for i in range(40))
    queries = toy_queries(60, candidates=names)
    runs = [toy_result(queries, "base", 0.3, 1), toy_result(queries, "rewired", 0.6, 2)]
    plots.plot_answer_length(runs, None, tmp_path / "a.png")
    ax = drawn[0].axes[0]
    assert ax.get_ylim()[0] == 0 and "hard: acc@10 per answer length" in ax.get_title()
    bins = [plots.length_bin(g) for g in queries.gold]
    labels = [tick.get_text() for tick in ax.get_xticklabels()]
    assert labels == [f"{b}\n(n={bins.count(b):,})" for b in sorted(set(bins))]
    line, caps, (bars,) = ax.containers[1]  # the rewired run: its error bars are its bins' intervals
    intervals = bootstrap_group_cis([float(h) for h in runs[1].hits(10)], bins)
    for segment, b in zip(bars.get_segments(), sorted(set(bins))):
        assert [y for _, y in segment] == pytest.approx([100 * v for v in intervals[b]])


def test_layer_and_step_figures_name_the_data_and_show_intervals(drawn, tmp_path):
    queries = toy_queries(30)
    by_layer = {layer: toy_result(queries, f"L{layer}", skill, layer) for layer, skill in ((1, 0.2), (2, 0.5))}
    plots.plot_series({"my-model": by_layer}, tmp_path / "l.png", "layer")
    ax = drawn[0].axes[0]
    assert ax.get_title().startswith("hard: acc@k per layer of my-model") and ax.get_ylim()[0] == 0
    assert len(ax.containers) == 2 and all(len(c.lines[2]) == 1 for c in ax.containers)  # error bars per k


def test_runs_are_drawn_with_their_intervals_and_sizes(drawn, tmp_path):
    queries = toy_queries(30)
    runs = [toy_result(queries, "base", 0.2, 1), toy_result(queries, "rewired", 0.5, 2)]
    plots.plot_runs(runs, tmp_path / "h.png", ks=(1, 10), title="held-out cloze")
    ax = drawn[0].axes[0]
    assert ax.get_title() == "held-out cloze" and ax.get_ylim()[0] == 0
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["base (n=90)", "rewired (n=90)"]
    bars = [patch.get_height() for patch in ax.patches]
    assert bars == pytest.approx([100 * runs[0].acc(1), 100 * runs[0].acc(10), 100 * runs[1].acc(1),
                                  100 * runs[1].acc(10)])
