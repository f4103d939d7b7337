"""``medlama report``'s one entry point (:func:`write_report`): the runs of probe or recipe output folders,
read and checked as ``medlama compare`` reads them (:func:`medlama.analysis.load_runs`), their comparison
(:func:`medlama.analysis.compare_runs`: the leaderboard with its intervals), and one self-contained HTML
page of both (:mod:`medlama.reports.page_data`, :mod:`medlama.reports.page`), written atomically.

Everything is checked before the runs are read: the page's file name (``.html``), its folder, and an existing
page (replaced only with ``overwrite``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from medlama.core.atomic_files import atomic_write_text
from medlama.core.errors import MedlamaInputError
from medlama.core.provenance import provenance
from medlama.core.settings import check, setting
from medlama.analysis import CompareSettings, compare_runs, input_record, load_runs
from medlama.analysis.consistency import page_entries
from medlama.runs.outputs import KEEP_PREDICTIONS
from medlama.reports.page import render_page
from medlama.reports.page_data import page_data


@dataclass(frozen=True)
class ReportSettings:
    """Where ``medlama report`` writes its page, and what the page's query browser shows."""

    out: Path = setting(metavar="PAGE.html", help="the HTML file to write (one self-contained file; opens from "
                                                     "file://, fetches nothing)")
    overwrite: bool = setting(False, help="replace an existing PAGE.html", switch=True, show_default="refuse")
    top: int = setting(KEEP_PREDICTIONS, min=1, max=KEEP_PREDICTIONS, metavar="K",
                       help="predictions of each run shown per query (the runs keep their top "
                            f"{KEEP_PREDICTIONS} in predictions.jsonl)")
    title: str | None = setting(None, metavar="TEXT", show_default="the runs' labels",
                                help="the page's title")

    def __post_init__(self) -> None:
        check(self)
        if not isinstance(self.out, Path):
            object.__setattr__(self, "out", Path(self.out))


def check_page_path(settings: ReportSettings) -> None:
    """Refuse, before any work, a page that could not be written or would replace one unasked."""
    out = settings.out
    if out.suffix.lower() not in (".html", ".htm"):
        raise MedlamaInputError("the page is written as HTML: give a file ending in .html", file=out)
    if out.is_dir():
        raise MedlamaInputError("is a folder; give the HTML file to write", file=out)
    if out.exists() and not settings.overwrite:
        raise MedlamaInputError("exists; give --overwrite to replace it, or another file", file=out)
    if not out.parent.is_dir():
        raise MedlamaInputError("its folder does not exist", file=out)


def report_record(folders: Sequence[str | Path], settings: ReportSettings,
                  intervals: CompareSettings = CompareSettings(), *, argv: Sequence[str] | None = None) -> dict:
    """The page's data (:func:`medlama.reports.page_data.page_data`) of every run of ``folders``: one run or
    more; with several, the first is the baseline of the differences, as in ``medlama compare``."""
    runs = load_runs(folders, at_least=1, purpose="a page")
    record = compare_runs(runs, intervals)
    record["inputs"] = [input_record(run) for run in runs]
    record["provenance"] = provenance(argv=argv)
    data = page_data(runs, record, top=settings.top, title=settings.title)
    data["consistency"] = page_entries(folders, runs)  # the runs' `medlama consistency` records, where written
    return data


def write_report(folders: Sequence[str | Path], settings: ReportSettings,
                 intervals: CompareSettings = CompareSettings(), *, argv: Sequence[str] | None = None) -> Path:
    """What ``medlama report RUN ... --out PAGE.html`` does (module docstring); returns the page's path."""
    if not folders:
        raise MedlamaInputError("no run given: name one or more output folders of `medlama probe` or `medlama recipe`")
    check_page_path(settings)
    data = report_record(folders, settings, intervals, argv=argv)
    atomic_write_text(settings.out, render_page(data))
    return settings.out
