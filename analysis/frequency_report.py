"""``medlama frequency``'s outputs from the record of :func:`medlama.analysis.frequency.frequency_runs`: the
terminal tables (one per run and window: each bin's facts and acc@k with its interval, in percent) and the plot
(acc@k against the bins, the intervals as error bars; sentence left, segment right)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from medlama.analysis.frequency import WINDOWS, write_record
from medlama.core.display import print_table
from medlama.core.errors import MedlamaInputError
from medlama.core.settings import Checked, setting
from medlama.runs.plots import save_figure


@dataclass(frozen=True)
class FrequencyOutput(Checked):
    """Where ``medlama frequency`` writes its record and plot, and how it prints."""

    out: Path | None = setting(None, metavar="FILE", show_default="none",
                               help="write the record (each fact's counts; each bin's acc@k and interval; the "
                                    "matching rule; the index's fingerprint) as JSON to FILE, atomically")
    plot: Path | None = setting(None, metavar="FILE", show_default="no plot",
                                help="also plot acc@k against the frequency bins with their intervals to FILE (a PNG)")
    overwrite: bool = setting(False, help="replace an existing --out or --plot FILE", switch=True,
                              show_default="refuse")
    json: bool = setting(False, help="print the record as JSON instead of the tables", switch=True,
                         show_default=False)

    def check_files(self) -> None:
        """Refuse, before any work, an ``out`` that is no .json or a ``plot`` that is no .png, a folder, an existing
        file (unless ``overwrite``) or a file whose folder does not exist (the CLI and the Python API alike)."""
        for path, suffix, what in ((self.out, ".json", "the record is written as JSON"),
                                   (self.plot, ".png", "the plot is written as PNG")):
            if path is None:
                continue
            if Path(path).suffix.lower() != suffix:
                raise MedlamaInputError(f"{what}: give a FILE ending in {suffix}", file=path)
            if Path(path).is_dir() or (Path(path).exists() and not self.overwrite):
                raise MedlamaInputError("exists; give --overwrite to replace it, or another file", file=path)
            if not Path(path).parent.is_dir():
                raise MedlamaInputError("its folder does not exist", file=path)
        if self.out is not None and self.plot is not None and Path(self.out).resolve() == Path(self.plot).resolve():
            raise MedlamaInputError("--out and --plot name one file", file=self.out)

    def write(self, record: dict) -> None:
        """Write the record to ``out`` and its plot to ``plot`` (each when given)."""
        if self.out is not None:
            write_record(record, self.out)
        if self.plot is not None:
            plot_frequency(record, self.plot)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f}"


def _cell(entry: dict) -> str:
    value, interval = _pct(entry["value"]), entry["interval"]
    return value if not interval else f"{value} [{_pct(interval[0])}, {_pct(interval[1])}]"


def print_tables(record: dict) -> None:
    """One table per run and window: each bin's facts and acc@k (%) with its interval."""
    level = record["method"]["settings"]["level"]
    summary = record["summary"]
    for run in record["runs"]:
        for window in WINDOWS:
            rows = [[cell["bin"], cell["facts"], *(_cell(cell[f"acc@{k}"]) for k in run["ks"])] for cell in run[window]]
            print_table(f"{run['label']}: acc@k (%) by {window} co-occurrence count", ["count", "facts",
                        *(f"acc@{k}" for k in run["ks"])], rows,
                        caption=f"{summary['counted']:,} of {summary['facts']:,} facts counted "
                                f"({summary['uncounted']:,} with a name the index never matched); "
                                f"[{100 * level:g}% bootstrap interval over the bin's facts]; index "
                                f"{record['index']['folder']} (corpus {record['index']['corpus_fingerprint']})")


def plot_frequency(record: dict, path: str | Path) -> Path:
    """acc@k of every run against the frequency bins, intervals as error bars; sentence left, segment right."""
    import matplotlib  # only when a plot is asked for: matplotlib stays out of the tables' path

    matplotlib.use("Agg")
    # matplotlib loads when this runs, not when the CLI parses its flags
    import matplotlib.pyplot as plt

    labels = [cell["bin"] for cell in record["bins"]]
    fig, axes = plt.subplots(1, len(WINDOWS), figsize=(11, 4.5), sharey=True)
    for ax, window in zip(axes, WINDOWS):
        for run in record["runs"]:
            for k in run["ks"]:
                cells = [cell[f"acc@{k}"] for cell in run[window]]
                x = [i for i, cell in enumerate(cells) if cell["value"] is not None]
                values = [100 * cells[i]["value"] for i in x]
                low = [v - 100 * cells[i]["interval"][0] if cells[i]["interval"] else 0.0 for v, i in zip(values, x)]
                high = [100 * cells[i]["interval"][1] - v if cells[i]["interval"] else 0.0 for v, i in zip(values, x)]
                ax.errorbar(x, values, yerr=[[max(v, 0) for v in low], [max(v, 0) for v in high]], marker="o",
                            capsize=3, label=f"{run['label']} acc@{k}")
        ax.set_xticks(range(len(labels)), labels)
        ax.set_xlabel(f"{window}s holding the subject and a gold object")
        ax.set_title(f"by {window} ({100 * record['method']['settings']['level']:g}% bootstrap interval)")
    axes[0].set_ylabel("acc (%)")
    axes[0].legend(fontsize=8)
    return save_figure(fig, Path(path))
