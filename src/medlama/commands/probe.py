"""``medlama probe``: probe models on MedLAMA or BioLAMA and report acc@k as a table, JSON and plots."""

from __future__ import annotations

import argparse
from pathlib import Path

from medlama.commands.flags import add_settings_flags, given_settings
from medlama.commands.method_flags import PRESET_HELP, add_method_arguments, method_settings
from medlama.commands.output import (BATCH_SIZE_LEAD, add_output_arguments, check_device, claimed_output, human_output,
                                     print_results)
from medlama.probers.queries import QuerySource
from medlama.probers.retrieval import RetrievalSettings
from medlama.probers.registry import METHODS, OLD_NAMES, current_names, settings_for
from medlama.settings import settings_from


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
    return settings_for("retrieval", given_settings(args, METHODS["retrieval"].settings),
                        preset=vars(args).get("preset"))


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
    """(cut-offs to report, cut-offs to score, matching) for the dataset (``probers.report.scoring_plan``)."""
    from medlama.probers.report import scoring_plan

    return scoring_plan(query_source(args).dataset, args.ks, args.match)


def run(args: argparse.Namespace) -> int:
    from medlama.defaults import default_model_path
    from medlama.errors import MedlamaInputError
    from medlama.models import resolve_model

    models = args.model or [str(default_model_path())]
    labels = args.label or (["bundled"] if not args.model else [Path(m).name or m for m in models])
    if len(labels) != len(models):
        raise MedlamaInputError(f"{len(labels)} --label values for {len(models)} --model values")
    # Before the queries: loading them may build MedLAMA first, minutes lost to a typo.
    methods = list(dict.fromkeys(current_names(args.method)))
    settings = method_settings(args, methods)
    scoring(args)  # --ks, before the data is read
    check_device(args.device)
    for model in models:
        resolve_model(model)  # a missing model folder is an error now, not after the queries are built
    if args.checkpoints:  # before the first model is probed, not after
        from medlama.trainers.checkpoints import list_checkpoints

        for model in models:
            if not list_checkpoints(model):
                raise MedlamaInputError("no checkpoint-N folders to probe", file=model)
    reads = [*models, *([args.data] if getattr(args, "data", None) else [])]
    with claimed_output(args.out, kind="probe", overwrite=args.overwrite, reads=reads):
        with human_output(args):
            _probe(args, methods, settings, labels, models)
    if args.json:
        print_results(args.out / "results.json")
    return 0


def _probe(args: argparse.Namespace, methods: list[str], settings: dict, labels: list[str], models: list[str]
           ) -> None:
    """Probe, print the tables, and write OUT (replaced whole once everything is written)."""
    from medlama.atomic import atomic_directory
    from medlama.probers import report
    from medlama.probers.base import probe, result_of
    from medlama.probers.registry import make_prober

    queries = load_queries(args)
    ks, scored, match = scoring(args)
    top_k = max(scored)
    print(f"{queries.name}: {len(queries):,} queries, {len(queries.candidates):,} candidates")
    runs = [(method, label if len(methods) == 1 else f"{method}:{label}", model)
            for method in methods for label, model in zip(labels, models)]
    results, by_layer, by_step = [], {}, {}
    for method, label, model in runs:
        prober = make_prober(method, model, settings[method], device=args.device)
        if isinstance(settings[method], RetrievalSettings) and settings[method].layers:
            import time

            start = time.perf_counter()
            ranked = prober.rank_layers(queries, top_k)
            seconds = time.perf_counter() - start
            by_layer[label] = {}
            for layer, predictions in ranked.items():
                result = result_of(prober, queries, predictions, seconds, label=f"{label} L{layer}", ks=scored,
                                   match=match, layer=layer)
                by_layer[label][layer] = result
                results.append(result)
        else:
            results.append(probe(prober, queries, label=label, top_k=top_k, ks=scored, match=match))
        if args.checkpoints:
            from medlama.trainers.checkpoints import checkpoint_step, list_checkpoints

            steps = {checkpoint_step(path): path for path in list_checkpoints(model)}  # some: checked in run
            by_step[label] = {step: probe(make_prober(method, path, settings[method], device=args.device), queries,
                                          label=f"{label}@{step}", top_k=top_k, ks=scored, match=match)
                              for step, path in steps.items()}
            results += list(by_step[label].values())
    report.print_summary(results, ks=ks)
    if len(results) <= 4:
        report.print_per_relation(results, k_values=tuple(dict.fromkeys((ks[0], ks[-1]))))
    if query_source(args).dataset == "biolama":
        from medlama.probers.biolama_queries import by_source, print_source_table

        for result in results:
            result.extra["by_source"] = by_source(result.metrics, ks)
        print_source_table(results, ks)
    with atomic_directory(args.out, marker="results.json", kind="probe",
                          reads=[*models, *([args.data] if getattr(args, "data", None) else [])]) as out:
        # results.json (scores, intervals, provenance) + predictions.jsonl
        report.write_probe_results(out, results)
        plots = [report.plot_relations(results[:4], out / "relations.png", k=ks[-1])]
        if match == "exact":  # the answer-length figure rescores with exact matching
            plots.append(report.plot_answer_length(results[:4], queries, out / "answer_length.png"))
        if by_layer:
            plots.append(report.plot_series(by_layer, out / "layers.png", "layer"))
        if by_step:
            plots.append(report.plot_series(by_step, out / "steps.png", "rewiring step"))
    print(f"wrote {args.out / 'results.json'} and {', '.join(p.name for p in plots)}")
