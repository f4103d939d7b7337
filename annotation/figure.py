"""What ``medlama annotate score`` shows of its record: the tables per run and rater, and Figure 8 (the confusion
matrices of the experts' levels against the UMLS gold answers) as a PNG."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from medlama.annotation.sheet import LEVELS
from medlama.core.display import print_table
from medlama.core.settings import Checked, setting
from medlama.runs.plots import save_figure


@dataclass(frozen=True)
class ScoreOutput(Checked):
    """How ``medlama annotate score`` shows its record."""

    json: bool = setting(False, switch=True, show_default=False, help="print the whole record as JSON")
    plot: Path | None = setting(None, metavar="PNG", show_default="no plot",
                                help="also draw Figure 8 (a confusion matrix per run and rater) to PNG")
    overwrite: bool = setting(False, switch=True, show_default="refuse", help="replace an existing --plot PNG")


def _with_ci(value: float, interval: list[float] | None, signed: bool = False) -> str:
    text = f"{value:+.2f}" if signed else f"{value:.2f}"
    return text if not interval else f"{text} [{interval[0]:.2f}, {interval[1]:.2f}]"


def _answers(title: str, entries: list[dict], out: TextIO) -> None:
    """Names listed as plain lines (never through rich, whose markup a name could hold)."""
    print(f"{title}: {len(entries)}", file=out)
    for entry in entries:
        print(f"  query {entry['query_id']} ({entry['query']}): {entry['prediction']!r}, rank {entry['rank']}, "
              f"rated {entry['rating']}", file=out)


def render(record: dict, out: TextIO | None = None) -> None:
    """The tables of ``record`` (:func:`medlama.annotation.scoring.score_sheet`); names and notes to ``out``
    (default: standard output)."""
    out = out or sys.stdout
    # rich loads when the tables print, not when the CLI parses its flags
    from rich.markup import escape

    threshold, levels = record["threshold"], [str(level) for level in sorted(LEVELS)]
    for label, by_rater in record["runs"].items():
        for rater, entry in by_rater.items():
            where = escape(f"run {label}, rater {rater}")  # a name's [brackets] are text, not rich markup
            print_table(f"{where}: UMLS gold x level (Figure 8)", ["", *levels, "all"],
                        [[name.replace("_", " "), *(entry["confusion"][name][lv] for lv in levels),
                          sum(entry["confusion"][name].values())] for name in ("gold", "not_gold")],
                        caption=f"{entry['predictions']} predictions of {record['queries']} queries")
            rows = []
            for unit, acc, interval, test in (("slots", "acc", "acc_interval", "umls_vs_expert"),
                                              ("queries", "acc_queries", "acc_queries_interval",
                                               "queries_umls_vs_expert")):
                for k in map(str, record["ks"]):
                    paired = entry[test][k]
                    rows.append([f"acc@{k} ({unit})", _with_ci(entry[acc]["umls"][k], entry[interval]["umls"][k]),
                                 _with_ci(entry[acc]["expert"][k], entry[interval]["expert"][k]),
                                 _with_ci(paired["difference"], paired["interval"], signed=True),
                                 f"{paired['umls_only']}/{paired['expert_only']}", f"{paired['p_value']:.3g}"])
            print_table(f"{where}: acc@k (%) under UMLS and expert answers (rated >= {threshold})",
                        ["", "UMLS", "expert", "expert - UMLS", "b/c", "McNemar p"], rows,
                        caption="slots: share of the top-k predictions correct (the paper's count); queries: share of "
                                "queries with a correct answer in the top k; b/c: UMLS-only / expert-only")
            _answers(f"UMLS answers rated below {threshold}", entry["umls_below_threshold"], out)
            _answers(f"answers rated {threshold} or more that UMLS lacks", entry["expert_not_umls"], out)
    agreement = record["agreement"]
    value = agreement["value"]
    print(f"agreement of {len(agreement['raters'])} rater(s) over {agreement['items']} predictions: "
          + (agreement.get("note") if value is None else f"{agreement['measure']} = {value:.3f}"), file=out)


def plot_confusion(record: dict, path: Path) -> Path:
    """Figure 8: one confusion matrix (gold / not gold x level) per run and rater, counts written in the cells."""
    # matplotlib only when the figure is drawn
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # matplotlib only when the figure is drawn

    panels = [(label, rater, entry) for label, by_rater in record["runs"].items() for rater, entry in by_rater.items()]
    columns = min(3, len(panels))
    rows = -(-len(panels) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4.6 * columns, 2.6 * rows), squeeze=False)
    levels = [str(level) for level in sorted(LEVELS)]
    for ax in axes.flat[len(panels):]:
        ax.axis("off")
    for ax, (label, rater, entry) in zip(axes.flat, panels):
        counts = [[entry["confusion"][name][level] for level in levels] for name in ("gold", "not_gold")]
        ax.imshow(counts, cmap="Blues", aspect="auto")
        peak = max(max(row) for row in counts) or 1
        for i, row in enumerate(counts):
            for j, count in enumerate(row):
                ax.text(j, i, str(count), ha="center", va="center", color="white" if count > peak / 2 else "black")
        ax.set_xticks(range(len(levels)), levels)
        ax.set_yticks([0, 1], ["UMLS gold", "not gold"])
        ax.set_xlabel("expert level")
        ax.set_title(f"{label} \u00b7 {rater}".replace("$", r"\$"), fontsize=10)  # a name's $ is no math
    fig.suptitle(f"Expert levels vs UMLS answers (top {record['k']} of {record['queries']} queries)", fontsize=11)
    return save_figure(fig, path)
