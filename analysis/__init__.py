"""Comparing probe runs as a paper must (``medlama compare``): the runs, checked to be comparable, and their
leaderboard, paired differences and per-relation tests.

* :mod:`~medlama.analysis.runs`: reading the runs of output folders and checking that they can be
  paired (same data, pool, matching, queries and gold answers);
* :mod:`~medlama.analysis.comparison`: the leaderboard, the paired differences and the per-relation
  tests, with how every number was computed;
* :mod:`~medlama.analysis.statistics`: the paired bootstrap, McNemar's exact test and Holm's correction;
* :mod:`~medlama.analysis.report`: the tables (terminal, Markdown, LaTeX) and the plot;
* :mod:`~medlama.analysis.consistency`: inverse consistency of one run (``medlama consistency``), facts of the
  release's inverse relation pairs right in both, one or neither direction;
* :mod:`~medlama.analysis.frequency` (``medlama frequency``): acc@k against each fact's corpus co-occurrence count
  (:mod:`~medlama.analysis.cooccurrence`: the counts and their matching rule; :mod:`~medlama.analysis.frequency_report`:
  tables and plot).
"""

from medlama.analysis.comparison import (CompareSettings, compare_folders, compare_runs, input_record,
                                                method_record)
from medlama.analysis.runs import Run, check_comparable, load_runs

__all__ = ["CompareSettings", "Run", "check_comparable", "compare_folders", "compare_runs", "input_record",
           "load_runs", "method_record"]
