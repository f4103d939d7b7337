"""``medlama compare``'s tables (terminal, Markdown, LaTeX) and its plot with error bars, from the record of
:func:`medlama.analysis.comparison.compare_runs`. Every figure is in percent; an interval is ``[low, high]``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from medlama.core.display import latex_table, markdown_table, print_table
from medlama.core.settings import Checked, setting
from medlama.runs.plots import bar_with_errors, save_figure
from medlama.analysis.calibration import calibration_tables

#: The output formats of the tables.
FORMATS = ("table", "markdown", "latex", "json")


@dataclass(frozen=True)
class CompareOutput(Checked):
    """How ``medlama compare`` shows its record: the tables' format, and the plot."""

    format: str = setting("table", choices=FORMATS,
                          help="table: the terminal's; markdown or latex: the tables as text for a paper; json: the "
                               "whole record")
    json: bool = setting(False, help="the same as --format json", switch=True, show_default=False)
    plot: Path | None = setting(None, metavar="FILE", show_default="no plot",
                                help="also write the leaderboard with its intervals as error bars to FILE (a PNG; an "
                                     "existing FILE is replaced only with --overwrite)")
    overwrite: bool = setting(False, help="replace an existing --plot FILE", switch=True, show_default="refuse")

    @property
    def chosen_format(self) -> str:
        """The format asked for (``--json`` is ``--format json``)."""
        return "json" if self.json else self.format


@dataclass(frozen=True)
class Table:
    title: str
    columns: list[str]
    rows: list[list[object]]
    caption: str


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f}"


def _with_ci(entry: dict, signed: bool = False) -> str:
    value, interval = entry.get("value", entry.get("difference")), entry.get("interval")
    if signed and abs(value) < 5e-5:  # a difference that rounds to zero is shown unsigned, never "-0.00"
        value = 0.0
    text = f"{100 * value:+.2f}" if signed else _pct(value)
    return text if not interval else f"{text} [{_pct(interval[0])}, {_pct(interval[1])}]"


def _p(value: float) -> str:
    return f"{value:.2g}" if value < 0.001 else f"{value:.3f}"


def _pairing(comparisons: list[dict]) -> bool:
    """Whether the differences need their baseline and templates shown: the runs carry templates, or not
    every run is paired with the same baseline."""
    return any("templates" in c for c in comparisons) or len({c["baseline"] for c in comparisons}) > 1


def _pair_cells(comparison: dict) -> list[str]:
    """The baseline and ``run template vs baseline template`` (``-``: the plain prompt column; ``*``: another
    template set than the run's)."""
    templates = comparison.get("templates") or {}
    run, base = templates.get("run"), templates.get("baseline")
    other = run is not None and base is not None and run.get("sha256") != base.get("sha256")
    names = [t["name"] if t else "-" for t in (run, base)]
    return [comparison["baseline"], f"{names[0]} vs {names[1]}{'*' if other else ''}"]


def tables(record: dict) -> list[Table]:
    """The leaderboard, the differences from the baseline, and one per-relation table per comparison."""
    ks, level = record["ks"], record["method"]["settings"]["level"]
    percent = f"{100 * level:g}%"
    out = [Table("Leaderboard: acc@k (%)", ["run"] + [f"acc@{k}" for k in ks] + [f"macro acc@{k}" for k in ks],
                 [[entry["label"]] + [_with_ci(entry[f"acc@{k}"]) for k in ks]
                  + [_with_ci(entry[f"acc@{k}_macro"]) for k in ks] for entry in record["leaderboard"]],
                 f"{record['queries']:,} queries, {len(record['relations'])} relation{'' if len(record['relations']) == 1 else 's'}; [{percent} bootstrap "
                 "interval]; micro: over queries, macro: mean over relations (stratified bootstrap)")]
    if not record["comparisons"]:
        return out
    baseline = record["comparisons"][0]["baseline"]
    paired = _pairing(record["comparisons"])
    out.append(Table(
        f"Difference from {baseline} (percentage points)" if not paired else
        "Difference from each run's baseline (percentage points)",
        ["run"] + (["baseline", "templates"] if paired else []) + [f"{name} acc@{k}" for k in ks
                                                                    for name in ("Δ", "p")]
        + [f"Δ macro acc@{k}" for k in ks],
        [[c["run"]] + (_pair_cells(c) if paired else [])
         + [cell for k in ks for cell in (_with_ci(c[f"acc@{k}"], True), _p(c[f"acc@{k}"]["p_value"]))]
         + [_with_ci(c[f"acc@{k}_macro"], True) for k in ks] for c in record["comparisons"]],
        (f"run minus {baseline}" if not paired else "run minus its baseline: the first run of its template (the "
         "same template of the same set), else the first run")
        + f" on the same queries; [{percent} paired bootstrap interval]; p: McNemar's exact test"))
    for c in record["comparisons"]:
        out.append(Table(
            f"{c['run']} minus {c['baseline']} per relation (percentage points)",
            ["relation", "queries"] + [f"{name} acc@{k}" for k in ks for name in ("Δ", "b/c", "p Holm")],
            [[relation, record["relations"][relation]]
             + [cell for k in ks for cell in (_with_ci(per[f"acc@{k}"], True),
                                              f"{per[f'acc@{k}']['a_only']}/{per[f'acc@{k}']['b_only']}",
                                              _p(per[f"acc@{k}"]["p_holm"]))]
             for relation, per in c["per_relation"].items()],
            f"b/c: queries only {c['baseline']} / only {c['run']} hits; p Holm: McNemar's exact p, Holm-corrected "
            "across the relations"))
    return out


def render(record: dict, fmt: str) -> str | None:
    """The tables as Markdown or LaTeX text; ``table`` prints them to the terminal and returns ``None``."""
    if fmt == "table":
        for table in [*tables(record), *calibration_tables(record, Table)]:
            print_table(table.title, table.columns, table.rows, caption=table.caption)
        return None
    parts = []
    for table in [*tables(record), *calibration_tables(record, Table)]:
        if fmt == "markdown":
            parts.append(f"**{table.title}**\n\n{markdown_table(table.columns, table.rows)}\n{table.caption}\n")
        elif fmt == "latex":
            parts.append(latex_table(table.columns, table.rows, caption=f"{table.title}. {table.caption}"))
        else:
            raise ValueError(f"unknown format {fmt!r}")
    return "\n".join(parts)


def plot_leaderboard(record: dict, path: str | Path) -> Path:
    """acc@k of every run (micro, left; macro, right) with its bootstrap interval as error bars."""
    import matplotlib  # only when a plot is asked for: matplotlib stays out of the tables' path

    matplotlib.use("Agg")
    # matplotlib loads when this runs, not when the CLI parses its flags
    import matplotlib.pyplot as plt

    ks, runs = record["ks"], record["leaderboard"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
    width = 0.8 / len(runs)
    x = np.arange(len(ks))
    for ax, suffix, name in ((axes[0], "", "micro"), (axes[1], "_macro", "macro")):
        for i, entry in enumerate(runs):
            cells = [entry[f"acc@{k}{suffix}"] for k in ks]
            bar_with_errors(ax, x + i * width, [c["value"] for c in cells], [c["interval"] for c in cells], width,
                            label=entry["label"])
        ax.set_xticks(x + 0.4 - width / 2, [f"acc@{k}" for k in ks])
        ax.set_title(f"{name} acc@k ({100 * record['method']['settings']['level']:g}% bootstrap interval)")
    axes[0].set_ylabel("acc (%)")
    axes[0].legend(fontsize=8)
    return save_figure(fig, Path(path))
