"""``medlama probe``: probe models on MedLAMA and report acc@k as a table, JSON and plots."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the queries come from; shared by every command that probes MedLAMA."""
    parser.add_argument("--data", type=Path, help="a built MedLAMA folder (default: build once into the cache "
                                                  "from --source / $MEDLAMA_SOURCE / the pinned download)")
    parser.add_argument("--source", help="MedLAMA release folder or archive, used when --data is not given")
    parser.add_argument("--config", default="hard", choices=["hard", "full"], help="query set (default: hard)")
    parser.add_argument("--relations", nargs="+", metavar="REL", help="probe only these relations")
    parser.add_argument("--prompt-column", default="query_human", choices=["query_human", "query_default"],
                        help="which prompt builds the query (default: the human prompt, as the reference)")


def add_retrieval_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--preset", default="reference", choices=["reference", "cosine"],
                        help="retrieval settings; 'reference' = the reference implementation's ([CLS] of the "
                             "last layer, L2, names 25 / queries 50 tokens)")
    parser.add_argument("--layer", type=int, help="hidden layer to probe (0 = embeddings, -1 = last)")
    parser.add_argument("--pooling", choices=["cls", "mean"], help="override the preset's pooling")
    parser.add_argument("--distance", choices=["l2", "cosine"], help="override the preset's distance")
    parser.add_argument("--batch-size", type=int, help="encoding batch size (default 128)")


def register(subparsers) -> None:
    parser = subparsers.add_parser("probe", help="probe models on MedLAMA: acc@k table, JSON and plots",
                                   description="Probe one or more models on MedLAMA. Without --model, the "
                                               "bundled all-MiniLM-L6-v2 encoder is probed.")
    parser.add_argument("--model", nargs="+", help="model folders or names (default: the bundled encoder)")
    parser.add_argument("--label", nargs="+", help="names for the models in tables and plots")
    parser.add_argument("--method", default="contrastive", help="probing method (default: contrastive)")
    add_data_arguments(parser)
    add_retrieval_arguments(parser)
    parser.add_argument("--layers", type=int, nargs="+",
                        help="probe several layers from one encoding pass and plot acc per layer (figure 6)")
    parser.add_argument("--checkpoints", action="store_true",
                        help="also probe every checkpoint-N inside each model folder and plot acc per step "
                             "(figure 4)")
    parser.add_argument("--out", type=Path, default=Path("out/probe"), help="folder for results.json and plots")
    parser.set_defaults(func=run)


def resolve_data(args: argparse.Namespace) -> Path:
    from medlama.datasets.medlama import cached_build

    return args.data if args.data else cached_build(args.source)


def checkpoints_of(model: Path) -> dict[int, Path]:
    """``checkpoint-N`` folders (complete ones: with a config.json) under a rewired model, by step."""
    found = {}
    for path in model.rglob("checkpoint-*"):
        step = path.name.rsplit("-", 1)[-1]
        if step.isdigit() and (path / "config.json").is_file():
            found[int(step)] = path
    return dict(sorted(found.items()))


def run(args: argparse.Namespace) -> int:
    from medlama.defaults import default_model_path
    from medlama.errors import MedlamaInputError
    from medlama.probers import report
    from medlama.probers.base import probe
    from medlama.probers.queries import load_medlama_queries
    from medlama.probers.registry import make_prober

    models = args.model or [str(default_model_path())]
    labels = args.label or (["bundled"] if not args.model else [Path(m).name or m for m in models])
    if len(labels) != len(models):
        raise MedlamaInputError(f"{len(labels)} --label values for {len(models)} --model values")
    queries = load_medlama_queries(resolve_data(args), args.config, relations=args.relations,
                                   prompt_column=args.prompt_column)
    print(f"{queries.name}: {len(queries):,} queries, {len(queries.candidates):,} candidates")
    results, by_layer, by_step = [], {}, {}
    for label, model in zip(labels, models):
        prober = make_prober(args.method, model, args)
        if args.layers:
            import time

            start = time.perf_counter()
            ranked = prober.rank_layers(queries)
            seconds = time.perf_counter() - start
            by_layer[label] = {}
            for layer, predictions in ranked.items():
                result = report.ProbeResult(f"{label} L{layer}", queries.name, {**prober.settings(), "layer": layer},
                                            queries.ids, queries.relations, queries.gold, predictions,
                                            report.score(queries, predictions), seconds)
                by_layer[label][layer] = result
                results.append(result)
        else:
            results.append(probe(prober, queries, label=label))
        if args.checkpoints:
            steps = checkpoints_of(Path(model))
            if not steps:
                raise MedlamaInputError("no checkpoint-N folders to probe", file=model)
            by_step[label] = {step: probe(make_prober(args.method, path, args), queries, label=f"{label}@{step}")
                              for step, path in steps.items()}
            results += list(by_step[label].values())
    report.print_summary(results)
    if len(results) <= 4:
        report.print_per_relation(results)
    out = args.out
    report.write_json(out / "results.json", [r.to_json() for r in results])
    plots = [report.plot_relations(results[:4], out / "relations.png"),
             report.plot_answer_length(results[:4], queries, out / "answer_length.png")]
    if by_layer:
        plots.append(report.plot_series(by_layer, out / "layers.png", "layer"))
    if by_step:
        plots.append(report.plot_series(by_step, out / "steps.png", "rewiring step"))
    print(f"wrote {out / 'results.json'} and {', '.join(p.name for p in plots)}")
    return 0
