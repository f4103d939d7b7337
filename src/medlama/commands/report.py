"""``medlama report``: one self-contained HTML page of probe runs, to look through their predictions.

Each RUN is the output folder of `medlama probe` or `medlama recipe` (every run it holds is shown); several
runs must be of the same queries and candidate pool, as for `medlama compare`, and the first is the
baseline. The page (one file; no network, opens from file://) shows:

* the leaderboard with its bootstrap intervals and each run minus the baseline with McNemar's p (the numbers
  of `medlama compare`);
* acc@k per relation as a chart, with each relation's bootstrap interval;
* a browser of the queries: the input, the gold answers and each run's top predictions side by side, with
  their scores and the gold's rank; filters by relation and by hit or miss of each run, and a text search.

Names are shown as text, whatever they hold. --resamples, --seed and --level change the intervals.
"""

from __future__ import annotations

import argparse
import sys

from medlama.commands.compare import add_compared_runs
from medlama.commands.flags import add_command, add_settings_flags, given_settings
from medlama.core.settings import settings_from
from medlama.analysis import CompareSettings
from medlama.reports import ReportSettings, write_report


def register(subparsers) -> None:
    parser = add_command(subparsers, "report", run, doc=__doc__,
                         help="one self-contained HTML page of probe runs: leaderboard with intervals, acc@k per "
                              "relation, and a browser of every query's predictions side by side")
    add_settings_flags(parser, ReportSettings)
    add_compared_runs(parser)


def run(args: argparse.Namespace) -> int:
    settings = settings_from(ReportSettings, given_settings(args, ReportSettings))
    intervals = settings_from(CompareSettings, given_settings(args, CompareSettings))
    page = write_report(args.runs, settings, intervals)
    print(f"wrote {page}", file=sys.stderr)
    return 0
