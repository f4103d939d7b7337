"""``medlama probe``: probe models on MedLAMA or BioLAMA and report acc@k as a table, JSON and plots."""

from __future__ import annotations

import argparse
from pathlib import Path


DATASETS = ("medlama", "biolama")
#: Query sets each dataset offers (BioLAMA also has one config per relation, ``<source>_<PID>``).
CONFIGS = {"medlama": ("hard", "full"), "biolama": ("all", "ctd", "umls", "wikidata")}


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the queries come from; shared by every command that probes MedLAMA or BioLAMA."""
    parser.add_argument("--dataset", default="medlama", choices=DATASETS,
                        help="benchmark to probe (default: medlama); biolama is scored as BioLAMA does: "
                             "normalised match against labels and aliases, acc@1 and acc@5")
    parser.add_argument("--data", type=Path, help="a built folder of the dataset (default: build once into the "
                                                  "cache from --source / $MEDLAMA_SOURCE or $BIOLAMA_SOURCE / the "
                                                  "pinned download)")
    parser.add_argument("--source", help="the dataset's release (folder or archive), used when --data is not given")
    parser.add_argument("--config", help="query set: MedLAMA hard (default) or full; BioLAMA all (default), ctd, "
                                         "umls, wikidata or <source>_<PID>")
    parser.add_argument("--split", default="test", help="BioLAMA split to probe: train, dev or test (default)")
    parser.add_argument("--relations", nargs="+", metavar="REL", help="probe only these relations")
    parser.add_argument("--prompt-column", default="query_human", choices=["query_human", "query_default"],
                        help="MedLAMA: which prompt builds the query (default: the human prompt, as the reference)")


def add_scoring_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--match", choices=["exact", "normalized"],
                        help="answer matching: exact (MedLAMA's default) or normalized (SQuAD-style, "
                             "BioLAMA's default)")
    parser.add_argument("--ks", type=int, nargs="+", metavar="K",
                        help="cut-offs to report (default: 1 5 10 for MedLAMA, 1 5 for BioLAMA)")


def add_retrieval_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--preset", default="reference", choices=["reference", "cosine"],
                        help="retrieval settings; 'reference' = the reference implementation's ([CLS] of the "
                             "last layer, L2, names 25 / queries 50 tokens)")
    parser.add_argument("--layer", type=int, help="hidden layer to probe (0 = embeddings, -1 = last)")
    parser.add_argument("--pooling", choices=["cls", "mean"], help="override the preset's pooling")
    parser.add_argument("--distance", choices=["l2", "cosine"], help="override the preset's distance")
    parser.add_argument("--batch-size", type=int,
                        help="texts per forward pass (default: the method's own: retrieval 128, mask-average 32, "
                             "mask-predict 16 queries x beam, generative 16)")


def add_baseline_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of the baseline probers (--method mask-average, mask-predict, generative); others ignore them."""
    group = parser.add_argument_group("mask-average, mask-predict and generative options")
    group.add_argument("--max-tokens", type=int, metavar="N",
                       help="mask-average: most masks per candidate (default: the longest candidate's token "
                            "count); longer candidates are scored on their first N tokens")
    group.add_argument("--mask-predict-preset", choices=["paper", "paper-order+order"],
                       help="mask-predict: the paper's X-FACTR settings (beam 5, up to 5 masks, 10 rounds) with "
                            "the independent fill (paper, the default) or order fill + order refinement")
    group.add_argument("--max-masks", type=int, metavar="M", help="mask-predict: decode answers of 1..M tokens")
    group.add_argument("--beam-size", type=int, metavar="B", help="mask-predict: beam size")
    group.add_argument("--init", choices=["independent", "order", "confidence"],
                       help="mask-predict: initial fill of the masks")
    group.add_argument("--refine", choices=["none", "order", "confidence"],
                       help="mask-predict: iterative refinement after the initial fill")
    group.add_argument("--max-iterations", type=int, metavar="N",
                       help="mask-predict: most decoding rounds per mask count, initial fill rounds included")
    group.add_argument("--rescore", action="store_true",
                       help="mask-predict: score the final answers by pseudo-log-likelihood instead of the "
                            "log-probabilities at fill time")
    group.add_argument("--max-answer-tokens", type=int, metavar="N",
                       help="generative: most tokens generated for the answer (default 32)")
    group.add_argument("--raw-predictions", action="store_true",
                       help="mask-predict, generative: report decoded strings as they are, not as the candidate "
                            "names with the same token ids")


def register(subparsers) -> None:
    parser = subparsers.add_parser("probe", help="probe models on MedLAMA or BioLAMA: acc@k table, JSON and plots",
                                   description="Probe one or more models with one or more methods on MedLAMA or "
                                               "BioLAMA. Without --model, the bundled all-MiniLM-L6-v2 encoder is "
                                               "probed.")
    parser.add_argument("--model", nargs="+", help="model folders or names (default: the bundled encoder)")
    parser.add_argument("--label", nargs="+", help="names for the models in tables and plots")
    parser.add_argument("--method", nargs="+", default=["contrastive"], metavar="METHOD",
                        help="probing method(s) (default: contrastive); several run one after the other")
    add_data_arguments(parser)
    add_scoring_arguments(parser)
    add_retrieval_arguments(parser)
    add_baseline_arguments(parser)
    parser.add_argument("--layers", type=int, nargs="+",
                        help="probe several layers from one encoding pass and plot acc per layer (figure 6)")
    parser.add_argument("--checkpoints", action="store_true",
                        help="also probe every checkpoint-N inside each model folder and plot acc per step "
                             "(figure 4)")
    parser.add_argument("--out", type=Path, default=Path("out/probe"), help="folder for results.json and plots")
    parser.set_defaults(func=run)


def resolve_data(args: argparse.Namespace) -> Path:
    if args.data:
        return args.data
    if getattr(args, "dataset", "medlama") == "biolama":
        from medlama.datasets.biolama import cached_build as cached_biolama

        return cached_biolama(args.source)
    from medlama.datasets.medlama import cached_build

    return cached_build(args.source)


def load_queries(args: argparse.Namespace):
    """The ``QuerySet`` the data arguments describe."""
    from medlama.errors import MedlamaInputError

    dataset = getattr(args, "dataset", "medlama")
    config = args.config or CONFIGS[dataset][0]
    if dataset == "biolama":
        from medlama.probers.biolama_queries import load_biolama_queries

        if getattr(args, "prompt_column", "query_human") != "query_human":
            raise MedlamaInputError("--prompt-column is a MedLAMA option; BioLAMA queries use its manual prompts")

        return load_biolama_queries(resolve_data(args), config, split=getattr(args, "split", "test"),
                                    relations=args.relations)
    from medlama.probers.queries import load_medlama_queries

    if config not in CONFIGS["medlama"]:
        raise MedlamaInputError(f"unknown MedLAMA config {config!r}; choose from {list(CONFIGS['medlama'])}")
    if getattr(args, "split", "test") != "test":
        raise MedlamaInputError("MedLAMA has one split, test")
    return load_medlama_queries(resolve_data(args), config, relations=args.relations,
                                prompt_column=args.prompt_column)


def scoring(args: argparse.Namespace) -> tuple[tuple[int, ...], tuple[int, ...], str]:
    """(cut-offs to report, cut-offs to score, matching) for the dataset; acc@10 is always scored for the plots."""
    from medlama.errors import MedlamaInputError
    from medlama.probers.base import DEFAULT_KS
    from medlama.probers.biolama_queries import BIOLAMA_KS, BIOLAMA_MATCH

    biolama = getattr(args, "dataset", "medlama") == "biolama"
    ks = tuple(sorted(set(args.ks))) if getattr(args, "ks", None) else (BIOLAMA_KS if biolama else DEFAULT_KS)
    if ks[0] < 1:
        raise MedlamaInputError(f"every --ks value must be >= 1, got {list(ks)}")
    match = getattr(args, "match", None) or (BIOLAMA_MATCH if biolama else "exact")
    return ks, tuple(sorted(set(ks) | set(DEFAULT_KS))), match


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
    from medlama.probers.registry import METHODS, make_prober

    models = args.model or [str(default_model_path())]
    labels = args.label or (["bundled"] if not args.model else [Path(m).name or m for m in models])
    if len(labels) != len(models):
        raise MedlamaInputError(f"{len(labels)} --label values for {len(models)} --model values")
    methods = args.method if isinstance(args.method, list) else [args.method]
    # Before the queries: loading them may build MedLAMA first, minutes lost to a typo.
    unknown = [method for method in methods if method not in METHODS]
    if unknown:
        raise MedlamaInputError(f"unknown --method {', '.join(map(repr, unknown))}; known methods: "
                                f"{', '.join(sorted(METHODS))}")
    queries = load_queries(args)
    ks, scored, match = scoring(args)
    top_k = max(scored)
    print(f"{queries.name}: {len(queries):,} queries, {len(queries.candidates):,} candidates")
    runs = [(method, label if len(methods) == 1 else f"{method}:{label}", model)
            for method in methods for label, model in zip(labels, models)]
    results, by_layer, by_step = [], {}, {}
    for method, label, model in runs:
        prober = make_prober(method, model, args)
        if args.layers:
            import time

            start = time.perf_counter()
            ranked = prober.rank_layers(queries, top_k)
            seconds = time.perf_counter() - start
            by_layer[label] = {}
            for layer, predictions in ranked.items():
                result = report.ProbeResult(f"{label} L{layer}", queries.name, {**prober.settings(), "layer": layer},
                                            queries.ids, queries.relations, queries.gold, predictions,
                                            report.score(queries, predictions, ks=scored, match=match), seconds)
                by_layer[label][layer] = result
                results.append(result)
        else:
            results.append(probe(prober, queries, label=label, top_k=top_k, ks=scored, match=match))
        if args.checkpoints:
            steps = checkpoints_of(Path(model))
            if not steps:
                raise MedlamaInputError("no checkpoint-N folders to probe", file=model)
            by_step[label] = {step: probe(make_prober(method, path, args), queries, label=f"{label}@{step}",
                                          top_k=top_k, ks=scored, match=match)
                              for step, path in steps.items()}
            results += list(by_step[label].values())
    report.print_summary(results, ks=ks)
    if len(results) <= 4:
        report.print_per_relation(results, k_values=tuple(dict.fromkeys((ks[0], ks[-1]))))
    if getattr(args, "dataset", "medlama") == "biolama":
        from medlama.probers.biolama_queries import by_source, print_source_table

        for result in results:
            result.extra["by_source"] = by_source(result.metrics, ks)
        print_source_table(results, ks)
    out = args.out
    report.write_json(out / "results.json", [r.to_json() for r in results])
    plots = [report.plot_relations(results[:4], out / "relations.png", k=ks[-1])]
    if match == "exact":  # the answer-length figure rescores with exact matching
        plots.append(report.plot_answer_length(results[:4], queries, out / "answer_length.png"))
    if by_layer:
        plots.append(report.plot_series(by_layer, out / "layers.png", "layer"))
    if by_step:
        plots.append(report.plot_series(by_step, out / "steps.png", "rewiring step"))
    print(f"wrote {out / 'results.json'} and {', '.join(p.name for p in plots)}")
    return 0
