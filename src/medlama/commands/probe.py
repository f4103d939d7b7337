"""``medlama probe``: probe one or more models with one or more methods on MedLAMA or BioLAMA and report acc@k
as a table, JSON and plots. Without --model, the bundled all-MiniLM-L6-v2 encoder is probed."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from medlama.commands.flags import add_command, add_settings_flags, given_settings
from medlama.commands.method_flags import PRESET_HELP, add_method_arguments, method_defaults, method_settings
from medlama.commands.output import add_output_arguments, check_device, human_output, limit_word, print_results
from medlama.core.batching import BatchSizeFlag
from medlama.runs.outputs import KEEP_PREDICTIONS, RESULTS_FILE
from medlama.runs.queries import QuerySource
from medlama.runs.templates import TemplateOptions
from medlama.probers.retrieval import RetrievalSettings
from medlama.probers.registry import METHODS, method_names, settings_for
from medlama.core import distributed
from medlama.core.models import LoadOptions
from medlama.core.settings import settings_from
from medlama.runs.queries import load_queries as load


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the queries come from (:class:`~medlama.runs.queries.QuerySource`); shared by every command
    that probes MedLAMA or BioLAMA."""
    add_settings_flags(parser, QuerySource)


def query_source(args: argparse.Namespace) -> QuerySource:
    """The data flags (and ``--limit``, where the command has it) as the one :class:`QuerySource`."""
    return settings_from(QuerySource, given_settings(args, QuerySource))


def add_scoring_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--match", choices=["exact", "normalized"],
                        help="answer matching: exact (MedLAMA's default) or normalized (SQuAD-style, "
                             "BioLAMA's default)")
    parser.add_argument("--ks", type=int, nargs="+", metavar="K",
                        help="cut-offs to report (default: 1 5 10 for MedLAMA, 1 5 for BioLAMA)")
    parser.add_argument("--top-k", type=limit_word, default=KEEP_PREDICTIONS, metavar="K",
                        help="predictions kept per query in predictions.jsonl (recorded as settings.top_k; the "
                             f"ranking goes as deep as the largest k scored) (default: {KEEP_PREDICTIONS})")


def add_retrieval_probe_arguments(parser: argparse.ArgumentParser, settings: type) -> None:
    """A command that rewires then probes by retrieval (``recipe``, ``sweep``): its own ``settings`` (every
    field shown with its default), where the queries come from, and the retrieval settings."""
    add_settings_flags(parser, settings, filled=True)
    add_data_arguments(parser)
    add_retrieval_arguments(parser)


def add_retrieval_arguments(parser: argparse.ArgumentParser) -> None:
    """Retrieval settings alone (``medlama recipe``, which probes by retrieval only)."""
    method = METHODS["retrieval"]
    parser.add_argument("--preset", choices=list(method.presets), default=argparse.SUPPRESS,
                        help="a named bundle of the probe's retrieval settings; the flags given replace its values. "
                             + PRESET_HELP["retrieval"] + " (default: reference)")
    add_settings_flags(parser, method.settings, exclude=("layers", "batch_size"))
    add_settings_flags(parser, BatchSizeFlag, helps={
        "batch_size": lambda lead: f"{lead}; " + method_defaults("batch_size", {"retrieval": method.settings})})


def retrieval_settings(args: argparse.Namespace) -> RetrievalSettings:
    """The retrieval settings that :func:`add_retrieval_arguments`' flags give."""
    return settings_for("retrieval", given_settings(args, METHODS["retrieval"].settings),
                        preset=vars(args).get("preset"))


def register(subparsers) -> None:
    parser = add_command(subparsers, "probe", run, doc=__doc__,
                         help="probe models on MedLAMA or BioLAMA: acc@k table, JSON and plots")
    parser.add_argument("--model", nargs="+", help="model folders or names (default: the bundled encoder)")
    parser.add_argument("--label", nargs="+", help="names for the models in tables and plots (default: the model "
                                                                     "folders' names; bundled for the bundled encoder)")
    parser.add_argument("--method", nargs="+", default=["retrieval"], metavar="METHOD",
                        help=f"probing method(s): {', '.join(METHODS)} (default: retrieval); several run one "
                             "after the other")
    add_data_arguments(parser)
    add_settings_flags(parser, TemplateOptions)
    add_scoring_arguments(parser)
    add_method_arguments(parser)
    add_settings_flags(parser.add_argument_group("model loading"), LoadOptions)
    parser.add_argument("--log-all-scores", action="store_true",
                        help="also write scores.parquet: every candidate's score and rank for every query (run, "
                             "id, relation, candidate, score, rank), to recompute MRR or other cut-offs without "
                             "rerunning; large (queries x candidates rows); only for methods that score the whole "
                             "pool: retrieval, mask-average, masked-likelihood, causal-likelihood")
    parser.add_argument("--checkpoints", action="store_true",
                        help="also probe every checkpoint-N inside each model folder and plot acc per step "
                             "(figure 4)")
    add_output_arguments(parser, default_out=Path("out/probe"), writes="results.json and plots",
                         limit="probe only the first N queries of each relation")


def load_queries(args: argparse.Namespace):
    """The ``QuerySet`` the data arguments describe (the first ``--limit`` of each relation, if given)."""
    return load(query_source(args))


def run(args: argparse.Namespace) -> int:
    """Turn the flags into the data (:class:`QuerySource`), the models, the scoring and the output, and run them
    (:func:`~medlama.runs.workflow.run_probe`, the path ``medlama.probe`` takes too): the checks, one claim
    of OUT, the shards kept beside it (a rerun of a killed probe continues it; under torchrun / accelerate
    launch every process ranks its share), the tables, and OUT written once everything is done."""
    # the probers (torch) only once flags parse
    from medlama.runs.workflow import ProbeModels, ProbeOutput, ProbeScoring, run_probe

    methods = list(dict.fromkeys(method_names(args.method)))
    settings = method_settings(args, methods)
    check_device(args.device)
    load = settings_from(LoadOptions, given_settings(args, LoadOptions))
    probed = ProbeModels(methods=methods, settings=settings, models=args.model or (), labels=args.label, load=load,
                         device=args.device, checkpoints=args.checkpoints)
    scoring = ProbeScoring(ks=tuple(args.ks) if args.ks else None, match=args.match, top_k=args.top_k,
                           all_scores=args.log_all_scores)
    output = ProbeOutput(out=args.out, overwrite=args.overwrite, reads=reads_of(args), report=True,
                         hint="give --overwrite to replace them, or choose another --out")
    templates = settings_from(TemplateOptions, given_settings(args, TemplateOptions)).templates
    with human_output(args):
        run_probe(replace(query_source(args), templates=templates), probed, scoring, output)
    if args.json and distributed.is_main_process():
        print_results(args.out / RESULTS_FILE)
    return 0


def reads_of(args: argparse.Namespace) -> list[str]:
    """What the probe reads (models and data), which its --out may not be, nor hold."""
    return [*(args.model or []), *([args.data] if getattr(args, "data", None) else [])]
