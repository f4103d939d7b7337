"""``medlama annotate``: have experts judge the predictions of probe runs, as the paper's section 5.3.

``medlama annotate export RUN [RUN ...] --out SHEET``: a seeded sample of queries (stratified by relation), the
top-k predictions of every run pooled, deduplicated and shuffled (blind: neither run, rank nor gold status
shows), written as annotate.html (a self-contained rating page: the five levels, keys 1-5 and arrows, progress,
autosave in the browser, an export button), sheet.csv (for spreadsheets), Label Studio tasks with their labeling
config, and manifest.json (the sample, and the runs' files' SHA-256).

``medlama annotate score RUN [RUN ...] --sheet SHEET RATINGS...``: one ratings file per rater (the page's JSON,
the filled CSV or Label Studio's export). Prints per run and rater Figure 8's confusion matrix (UMLS gold or not
x level), acc@k under UMLS and under the experts' answers (rated >= --threshold) with paired bootstrap intervals
and McNemar's exact test, the UMLS answers rated below the threshold, and the raters' agreement (quadratic-
weighted Cohen's kappa for two, ordinal Krippendorff's alpha for more). Ratings of another sheet, or missing,
duplicated or out-of-range ones, are refused, naming the query and prediction.

``medlama annotate estimate RUN [RUN ...] --sheet SHEET RATINGS...``: the whole run's expert-judged acc@k
(a top-k prediction rated >= --threshold), estimated from the rated sample by prediction-powered inference
(Angelopoulos et al. 2023): the UMLS hits of every query as the prediction, the ratings as its correction on the
sample; per relation on a stratified sheet, weighted by the recorded probabilities on an uncertainty sheet
(`annotate export --strategy uncertainty` draws more of the queries the model is least sure of). Prints the
estimate with its CLT interval at --level beside the UMLS acc@k; --json the record (method, design, sample
size, level, each ratings file's SHA-256).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from medlama.annotation import ExportSettings, ScoreSettings, export_sheet, score_sheet
from medlama.annotation.estimate import EstimateOutput, EstimateSettings, estimate_sheet, render_estimate
from medlama.annotation.figure import ScoreOutput, plot_confusion, render
from medlama.annotation.sheet import CSV_SHEET, LS_TASKS, PAGE
from medlama.commands.flags import add_settings_flags, given_settings, plain_text
from medlama.commands.output import check_plot_file
from medlama.core.errors import MedlamaInputError
from medlama.core.settings import settings_from
from medlama.analysis import CompareSettings

RUNS_HELP = "output folders of `medlama probe` or `medlama recipe` (every run in each)"


def register(subparsers) -> None:
    parser = subparsers.add_parser("annotate", help="blind rating sheets of probe predictions for experts, and "
                                                    "their scoring against the UMLS answers (Figure 8)",
                                   description=plain_text(__doc__), formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    export = actions.add_parser("export", help="write a blind rating sheet (page, CSV, Label Studio) of runs' top-k",
                                description=plain_text(__doc__), formatter_class=argparse.RawDescriptionHelpFormatter)
    export.add_argument("runs", nargs="+", type=Path, metavar="RUN", help=RUNS_HELP)
    export.add_argument("--out", required=True, type=Path, metavar="SHEET", help="the sheet's folder to write")
    add_settings_flags(export, ExportSettings)
    export.set_defaults(func=run_export)
    score = actions.add_parser("score", help="score the raters' ratings against the UMLS answers (Figure 8)",
                               description=plain_text(__doc__), formatter_class=argparse.RawDescriptionHelpFormatter)
    add_rated_runs(score)
    add_settings_flags(score, ScoreSettings)
    add_settings_flags(score, ScoreOutput)
    add_settings_flags(score, CompareSettings, title="intervals")
    score.set_defaults(func=run_score)
    estimate = actions.add_parser("estimate", help="estimate the whole run's expert-judged acc@k from the rated "
                                                   "sample (prediction-powered inference)",
                                  description=plain_text(__doc__), formatter_class=argparse.RawDescriptionHelpFormatter)
    add_rated_runs(estimate)
    add_settings_flags(estimate, ScoreSettings)
    add_settings_flags(estimate, EstimateSettings)
    add_settings_flags(estimate, EstimateOutput)
    estimate.set_defaults(func=run_estimate)


def add_rated_runs(parser: argparse.ArgumentParser) -> None:
    """``RUN ... --sheet SHEET RATINGS...``: the runs a sheet was made from, the sheet and its ratings files
    (``score``'s and ``estimate``'s)."""
    parser.add_argument("runs", nargs="+", type=Path, metavar="RUN", help=RUNS_HELP + ", as given to export")
    parser.add_argument("--sheet", required=True, nargs="+", type=Path, metavar=("SHEET", "RATINGS"),
                        help="the sheet's folder, then one ratings file per rater (the page's .json export, the "
                             "filled .csv, or Label Studio's .json export)")


def run_export(args: argparse.Namespace) -> int:
    settings = settings_from(ExportSettings, given_settings(args, ExportSettings))
    manifest = export_sheet(args.runs, args.out, settings)
    print(f"wrote a sheet of {len(manifest['queries'])} queries and {manifest['items']} predictions "
          f"(sheet {manifest['sheet'][:12]}) to {args.out}: give raters {PAGE} (or {CSV_SHEET}, or import {LS_TASKS} "
          "into Label Studio), then run `medlama annotate score` on their files")
    return 0


def run_score(args: argparse.Namespace) -> int:
    settings = settings_from(ScoreSettings, given_settings(args, ScoreSettings))
    output = settings_from(ScoreOutput, given_settings(args, ScoreOutput))
    intervals = settings_from(CompareSettings, given_settings(args, CompareSettings))
    sheet, *ratings = args.sheet
    if not ratings:
        raise MedlamaInputError("--sheet SHEET RATINGS...: give one ratings file per rater after the sheet's folder")
    check_plot_file(output.plot, overwrite=output.overwrite)  # before any work
    record = score_sheet(args.runs, sheet, ratings, settings, intervals)
    if output.plot is not None:
        plot_confusion(record, output.plot)
    if output.json:
        print(json.dumps(record, indent=2, ensure_ascii=False))
    else:
        render(record)
    if output.plot is not None:
        print(f"wrote {output.plot}", file=sys.stderr)
    return 0


def run_estimate(args: argparse.Namespace) -> int:
    settings = settings_from(ScoreSettings, given_settings(args, ScoreSettings))
    estimate = settings_from(EstimateSettings, given_settings(args, EstimateSettings))
    sheet, *ratings = args.sheet
    if not ratings:
        raise MedlamaInputError("--sheet SHEET RATINGS...: give one ratings file per rater after the sheet's folder")
    output = settings_from(EstimateOutput, given_settings(args, EstimateOutput))
    record = estimate_sheet(args.runs, sheet, ratings, settings, estimate, argv=sys.argv)
    if output.json:
        print(json.dumps(record, indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(render_estimate(record))
    return 0
