"""``medlama compare``: compare probe runs of the same queries and candidate pool, as a paper must.

Each RUN is the output folder of `medlama probe` or `medlama recipe`; a folder holding several runs (several
models, methods or layers; the recipe's un-rewired and rewired models) gives each of them. The first run is
the baseline. Prints, for every cut-off k the runs share:

* a leaderboard: each run's micro and macro acc@k with its 95% bootstrap interval (queries resampled; macro:
  within each relation);
* each other run minus the baseline: the difference in acc@k with its paired bootstrap interval (both runs
  scored on the same resampled queries) and McNemar's exact p-value (a two-sided binomial test of the queries
  only one of the two runs gets right);
* the same per relation, with the p-values Holm-corrected across the relations.

Runs of other queries, another candidate pool, another data fingerprint or another answer matching are
refused, naming what differs. --format markdown or latex prints the tables for a paper; --json prints the
record (with the inputs' names and SHA-256, and how every number was computed); --plot FILE writes the
leaderboard with its intervals as error bars.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from medlama.commands.flags import add_command, add_settings_flags, given_settings
from medlama.commands.output import check_plot_file
from medlama.core.settings import settings_from
from medlama.analysis import CompareSettings, compare_folders
from medlama.analysis.report import CompareOutput, plot_leaderboard, render


def register(subparsers) -> None:
    parser = add_command(subparsers, "compare", run, doc=__doc__,
                         help="compare probe runs of the same queries: leaderboard with intervals, paired "
                              "differences, McNemar's exact test (Holm-corrected per relation), tables for a "
                              "paper, a plot")
    add_settings_flags(parser, CompareOutput)
    add_compared_runs(parser)


def add_compared_runs(parser: argparse.ArgumentParser) -> None:
    """The runs read as ``compare`` reads them (``RUN ...``, the first the baseline) and the flags of their
    intervals (``--resamples``, ``--seed``, ``--level``): ``compare``'s and every command showing its numbers."""
    parser.add_argument("runs", nargs="+", type=Path, metavar="RUN",
                        help="output folders of `medlama probe` or `medlama recipe`; the first run is the baseline")
    add_settings_flags(parser, CompareSettings, title="intervals")


def run(args: argparse.Namespace) -> int:
    settings = settings_from(CompareSettings, given_settings(args, CompareSettings))
    output = settings_from(CompareOutput, given_settings(args, CompareOutput))
    fmt, plot = output.chosen_format, output.plot
    check_plot_file(plot, overwrite=output.overwrite)  # before any work
    record = compare_folders(args.runs, settings)
    if plot is not None:
        plot_leaderboard(record, plot)
    if fmt == "json":
        print(json.dumps(record, indent=2, ensure_ascii=False))
    else:
        text = render(record, fmt)
        if text is not None:
            sys.stdout.write(text)
    if plot is not None:
        print(f"wrote {plot}", file=sys.stderr)
    return 0
