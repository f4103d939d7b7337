"""``medlama probe``: probe models on MedLAMA or BioLAMA and report acc@k as a table, JSON and plots."""

from __future__ import annotations

import argparse
import contextlib
import os
from pathlib import Path

from medlama.commands.flags import add_settings_flags, given_settings
from medlama.commands.method_flags import PRESET_HELP, add_method_arguments, method_settings
from medlama.commands.output import (BATCH_SIZE_LEAD, add_output_arguments, check_device, check_output,
                                     claimed_output, human_output, print_results)
from medlama.probers.base import RESULTS_FILE, check_all_scores
from medlama.probers.queries import QuerySource
from medlama.probers.retrieval import RetrievalSettings
from medlama.probers.registry import METHODS, OLD_NAMES, current_names, settings_for
from medlama.core.models import LoadOptions
from medlama.core.settings import settings_from


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the queries come from (:class:`~medlama.probers.queries.QuerySource`); shared by every command
    that probes MedLAMA or BioLAMA."""
    add_settings_flags(parser, QuerySource)


def query_source(args: argparse.Namespace) -> QuerySource:
    return settings_from(QuerySource, given_settings(args, QuerySource))


def add_scoring_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--match", choices=["exact", "normalized"],
                        help="answer matching: exact (MedLAMA's default) or normalized (SQuAD-style, "
                             "BioLAMA's default)")
    parser.add_argument("--ks", type=int, nargs="+", metavar="K",
                        help="cut-offs to report (default: 1 5 10 for MedLAMA, 1 5 for BioLAMA)")


def add_retrieval_arguments(parser: argparse.ArgumentParser) -> None:
    """Retrieval settings alone (``medlama recipe``, which probes by retrieval only)."""
    method = METHODS["retrieval"]
    parser.add_argument("--preset", choices=list(method.presets), default=argparse.SUPPRESS,
                        help="a named bundle of the probe's retrieval settings; the flags given replace its values. "
                             + PRESET_HELP["retrieval"] + " (default: reference)")
    add_settings_flags(parser, method.settings, exclude=("layers",), helps={"batch_size": lambda _: BATCH_SIZE_LEAD})


def retrieval_settings(args: argparse.Namespace) -> RetrievalSettings:
    """The retrieval settings that :func:`add_retrieval_arguments`' flags give."""
    settings = settings_for("retrieval", given_settings(args, METHODS["retrieval"].settings),
                            preset=vars(args).get("preset"))
    if settings.batch_size == "auto":
        from medlama.core.errors import MedlamaInputError

        raise MedlamaInputError("--batch-size auto is for medlama probe and medlama ucm; give this command a number")
    return settings


def register(subparsers) -> None:
    parser = subparsers.add_parser("probe", help="probe models on MedLAMA or BioLAMA: acc@k table, JSON and plots",
                                   description="Probe one or more models with one or more methods on MedLAMA or "
                                               "BioLAMA. Without --model, the bundled all-MiniLM-L6-v2 encoder is "
                                               "probed.")
    parser.add_argument("--model", nargs="+", help="model folders or names (default: the bundled encoder)")
    parser.add_argument("--label", nargs="+", help="names for the models in tables and plots (default: the model "
                                                                     "folders' names; bundled for the bundled encoder)")
    parser.add_argument("--method", nargs="+", default=["retrieval"], metavar="METHOD",
                        help=f"probing method(s): {', '.join(METHODS)} (default: retrieval; "
                             f"{', '.join(f'{old} is now {new}' for old, new in OLD_NAMES.items())}); several run "
                             "one after the other")
    add_data_arguments(parser)
    add_scoring_arguments(parser)
    add_method_arguments(parser)
    add_settings_flags(parser.add_argument_group("model loading"), LoadOptions)
    parser.add_argument("--log-all-scores", action="store_true",
                        help="also write scores.parquet: every candidate's score and rank for every query (run, "
                             "id, relation, candidate, score, rank), to recompute MRR or other cut-offs without "
                             "rerunning; large (queries x candidates rows); only for methods that score the whole "
                             "pool: retrieval, mask-average, causal-likelihood")
    parser.add_argument("--checkpoints", action="store_true",
                        help="also probe every checkpoint-N inside each model folder and plot acc per step "
                             "(figure 4)")
    add_output_arguments(parser, default_out=Path("out/probe"), writes="results.json and plots",
                         limit="probe only the first N queries of each relation")
    parser.set_defaults(func=run)


def load_queries(args: argparse.Namespace):
    """The ``QuerySet`` the data arguments describe (the first ``--limit`` of each relation, if given)."""
    from medlama.probers.queries import load_queries as load

    queries = load(query_source(args))
    limit = vars(args).get("limit")
    return queries.limit_per_relation(limit) if limit else queries


def scoring(args: argparse.Namespace) -> tuple[tuple[int, ...], tuple[int, ...], str]:
    """(cut-offs to report, cut-offs to score, matching): the benchmark's declaration
    (:meth:`~medlama.probers.benchmarks.Benchmark.scoring_plan`)."""
    from medlama.probers.benchmarks import benchmark

    return benchmark(query_source(args).dataset).scoring_plan(args.ks, args.match)


def run(args: argparse.Namespace) -> int:
    from medlama.core.defaults import default_model_path
    from medlama.core.errors import MedlamaInputError
    from medlama.core.models import resolve_model
    from medlama.probers.workflow import checkpoint_folders, model_runs, unique_labels

    models = args.model or [str(default_model_path())]
    labels = unique_labels(models, args.label, bundled=not args.model and not args.label)
    # Before the queries: loading them may build MedLAMA first, minutes lost to a typo.
    methods = list(dict.fromkeys(current_names(args.method)))
    settings = method_settings(args, methods)
    for method in methods:
        check_all_scores(METHODS[method].prober, args.log_all_scores)
    scoring(args)  # --ks, before the data is read
    check_device(args.device)
    for model in models:
        resolve_model(model)  # a missing model folder is an error now, not after the queries are built
    load = settings_from(LoadOptions, given_settings(args, LoadOptions))
    runs = model_runs(methods, labels, models, settings, load=load)  # checks the loading options
    checkpoints = checkpoint_folders(runs) if args.checkpoints else None  # before any probing
    from medlama.core import distributed

    if not distributed.is_main_process():  # under torchrun: the same checks, then a share of the work, silently
        check_output(args.out, kind="probe", overwrite=args.overwrite, reads=reads_of(args))
        with open(os.devnull, "w", encoding="utf-8") as sink, contextlib.redirect_stdout(sink):
            _probe(args, runs, checkpoints)
        return 0
    with claimed_output(args.out, kind="probe", overwrite=args.overwrite, reads=reads_of(args)):
        with human_output(args):
            _probe(args, runs, checkpoints)
    if args.json:
        print_results(args.out / RESULTS_FILE)
    return 0


def reads_of(args: argparse.Namespace) -> list[str]:
    """What the probe reads (models and data), which its --out may not be, nor hold."""
    return [*(args.model or []), *([args.data] if getattr(args, "data", None) else [])]


def _probe(args: argparse.Namespace, runs: list, checkpoints: dict | None) -> None:
    """Probe, print the tables, and write OUT (replaced whole once everything is written), by the workflow
    ``medlama.probe`` runs too (:mod:`medlama.probers.workflow`). Each completed shard is kept beside OUT, so a
    rerun of a killed probe continues it; under torchrun / accelerate launch, every process ranks its share
    on its own device and the main process writes OUT."""
    from medlama.core import distributed
    from medlama.probers import workflow
    from medlama.probers.benchmarks import benchmark

    queries = load_queries(args)
    bench = benchmark(query_source(args).dataset)
    ks, scored, match = bench.scoring_plan(args.ks, args.match)
    print(workflow.describe_pool(queries))
    device = distributed.device_for(args.device)
    distributed.start(device)
    store = None
    try:
        store = workflow.shard_store(args.out, queries, runs, top_k=max(scored), checkpoints=checkpoints,
                                     overwrite=args.overwrite, hint="give --overwrite to start over",
                                     all_scores=args.log_all_scores)
        outcome = workflow.probe_models(queries, runs, scored=scored, match=match, device=device,
                                        checkpoints=checkpoints, store=store, all_scores=args.log_all_scores)
    except BaseException:
        if store is not None and distributed.is_main_process() and store.empty():
            workflow.discard_shards(args.out)  # nothing done to continue: leave nothing beside OUT
        raise
    finally:
        distributed.stop()  # nothing to leave alone
    if outcome is None:  # another process's share: the main process writes OUT
        return
    workflow.aggregate(outcome.results, bench, ks)
    workflow.print_report(outcome, bench, ks)
    plots = workflow.write_outputs(args.out, outcome.results, by_layer=outcome.by_layer, by_step=outcome.by_step,
                                   overwrite=args.overwrite, reads=reads_of(args), hint="give --overwrite to replace them, or choose "
                                   "another --out", k=ks[-1])
    print(f"wrote {args.out / 'results.json'} and {', '.join(p.name for p in plots)}")
