"""``medlama sweep``: rewire then probe over a grid of learning rate, tau, mask ratio and corpus size (Rewire-then-
Probe's table 8, figure 9 and appendix A.2-A.3), every point on every --corpus, each checkpoint probed.

Each finished point is recorded in OUT/points/<key>/point.json and never rerun: an interrupted sweep resumes
(a rewiring from its last checkpoint), and a larger grid runs only its new points; a rerun with other shared
settings (model, corpora, steps, batch, probe settings, data) is refused. At the end the figure is drawn from the
records into OUT/figure-sweep.png and its data into OUT/figure-sweep.json (`medlama figure sweep OUT`
draws it again). The defaults are CPU-sized: 3 mask ratios x the corpora given, 50 steps probed every 25; --limit probes
the first N queries of each relation.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from medlama.commands.flags import add_command, add_settings_flags, given_settings
from medlama.commands.output import OutputSettings, check_device, human_output
from medlama.commands.probe import add_retrieval_probe_arguments, load_queries, retrieval_settings
from medlama.core.atomic import check_replaceable
from medlama.core.models import resolve_model
from medlama.core.ownership import OWNER_NAME
from medlama.core.settings import settings_from
from medlama.figures.settings import FIGURE_FILE, SWEEP_KIND, SweepSettings


def register(subparsers) -> None:
    parser = add_command(subparsers, "sweep", run, doc=__doc__,
                         help="rewire then probe over a grid (lr, tau, mask ratio, corpus size), resumable; figure 9")
    add_retrieval_probe_arguments(parser, SweepSettings)
    # no --overwrite (a finished point is never rerun; the figure is redrawn from the records each time), no --json
    add_settings_flags(parser, OutputSettings, title="run and output", defaults=OutputSettings(out=Path("out/sweep")),
                       exclude=("overwrite", "json"), filled=True,
                       helps={"out": lambda _: "folder for the points' rewired models and records, and the figure",
                              "device": lambda text: text.replace("the models", "the probes (the rewiring picks its own)", 1),
                              "limit": lambda _: "probe only the first N queries of each relation (a quick check)"})


def run(args: argparse.Namespace) -> int:
    # trainers.cloze and the figure load when a sweep runs, not when the CLI parses its flags
    from medlama.figures.sweep import run_sweep
    from medlama.figures.sweep_plot import sweep_figure
    from medlama.trainers.cloze import check_corpus_files

    settings = settings_from(SweepSettings, given_settings(args, SweepSettings))
    check_corpus_files(list(settings.corpus))
    for point in settings.points():  # every point's rewiring checked before any work
        settings.config(point)
    resolve_model(settings.model)
    probe_settings = retrieval_settings(args)
    check_device(args.device)
    check_replaceable(args.out, marker=OWNER_NAME, kind=SWEEP_KIND)  # another command's folder is refused
    with human_output(args):
        queries = load_queries(args)
        run_sweep(settings, queries, args.out, probe_settings=probe_settings, device=args.device)
        png, record = sweep_figure(args.out, args.out / FIGURE_FILE, overwrite=True)  # redrawn from the records
        print(f"wrote {png} and {record}")
    return 0
