"""``medlama ucm``: score context-variance sets with models; UCM tables 1-3, acc@k, JSON and a plot."""

from __future__ import annotations

import argparse
from pathlib import Path

from medlama.commands.flags import add_renamed_flag, add_settings_flags, given_settings, renamed_value
from medlama.commands.output import (BATCH_SIZE_LEAD, add_output_arguments, check_device, claimed_output,
                                     human_output, print_results)
from medlama.probers.outputs import RESULTS_FILE
from medlama.probers.causal import LikelihoodSettings
from medlama.probers.mask_average import MaskAverageSettings
from medlama.probers.registry import method_names
from medlama.ucm.evaluation import UcmSettings
from medlama.ucm.rankers import METHODS, RetrievalRankerSettings

#: What ``--method`` takes: a ranker or ``auto``.
CHOICES = ["auto", *METHODS]


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "ucm", help="UCM of models on context-variance sets: rank changes, UCM_k / UCM_m, acc@k with and "
                    "without context",
        description="Rank every pool entity at the mask of each incremental context input of a set built by "
                    "`medlama build context-variance`, with a masked LM (mask average over the pool), an "
                    "encoder (retrieval, as Contrastive-Probe) or a decoder-only causal LM (exact likelihood of "
                    "every pool name), and report the paper's tables 1-3. Writes "
                    "OUT/results.json and OUT/ucm.png. Without --model, the bundled all-MiniLM-L6-v2 encoder.")
    parser.add_argument("--sets", required=True, type=Path, help="folder written by medlama build context-variance")
    parser.add_argument("--model", nargs="+", help="model folders (default: the bundled encoder)")
    parser.add_argument("--label", nargs="+",
                        help="names for the models in tables and plots (default: the model folders' names)")
    parser.add_argument("--method", nargs="+", choices=CHOICES, metavar="METHOD",
                        help="mask-average: mask average with the MLM head; retrieval: [CLS] distance to the pool "
                             "names; causal-likelihood: a causal LM's log-probability of each pool name in the slot; "
                             "auto: causal-likelihood for a decoder-only causal LM (GPT-2, Llama style), else "
                             "mask-average when the model has an MLM head, else retrieval. One value, or one per "
                             "model (default: auto)")
    add_renamed_flag(parser, "--ranker", nargs="+", choices=CHOICES)
    add_settings_flags(parser, UcmSettings, title="what to score")
    add_settings_flags(parser, MaskAverageSettings, exclude=("batch_size",), title="mask-average ranker",
                       helps={"max_tokens": lambda _: "mask-average: most masks per name, longer names are scored "
                                                      "on their first N tokens; none: the longest name's token count"})
    add_settings_flags(parser, RetrievalRankerSettings, exclude=("batch_size",), title="retrieval ranker")
    add_settings_flags(parser, LikelihoodSettings, exclude=("batch_size", "search"),
                       title="causal-likelihood ranker")
    parser.add_argument("--batch-size", type=int, metavar="N",
                        help=f"{BATCH_SIZE_LEAD} (default: mask-average {MaskAverageSettings().batch_size}"
                             f", retrieval {RetrievalRankerSettings().batch_size}); causal-likelihood: candidate "
                             f"continuations per forward pass (default {LikelihoodSettings().batch_size})")
    # --limit (first N triples per relation) is a field of UcmSettings, among "what to score".
    add_output_arguments(parser, default_out=Path("out/ucm"), writes="results.json and ucm.png (and records.jsonl)")
    parser.set_defaults(func=run)


def _methods(args: argparse.Namespace) -> list[str]:
    """The methods asked for, in today's names; old spellings say on stderr what replaced them."""
    methods = renamed_value(args, "--ranker", exclusive=True) or args.method or ["auto"]
    return method_names(methods, ("auto", *METHODS))


def run(args: argparse.Namespace) -> int:
    from medlama.core.atomic import atomic_directory
    from medlama.core.resume import discard_work_folder
    from medlama.core.defaults import default_model_path
    from medlama.core.errors import MedlamaInputError
    from medlama.core.models import resolve_model
    from medlama.core.progress import enabled as progress_enabled
    from medlama.core.settings import settings_from
    from medlama.ucm.evaluation import run_ucm
    from medlama.ucm.rankers import RankerSettings, make_ranker
    from medlama.ucm.sets import read_build_info

    models = args.model or [str(default_model_path())]
    labels = args.label or (["bundled"] if not args.model else [Path(m).name or m for m in models])
    if len(labels) != len(models):
        raise MedlamaInputError(f"{len(labels)} --label values for {len(models)} --model values")
    methods = _methods(args)
    kinds = methods if len(methods) > 1 else methods * len(models)
    if len(kinds) != len(models):
        raise MedlamaInputError(f"{len(methods)} --method values for {len(models)} --model values")
    settings = settings_from(UcmSettings, given_settings(args, UcmSettings))
    batch = {"batch_size": args.batch_size} if args.batch_size is not None else {}
    ranker_settings = RankerSettings(
        mask_average=settings_from(MaskAverageSettings, {**given_settings(args, MaskAverageSettings), **batch}),
        retrieval=settings_from(RetrievalRankerSettings, {**given_settings(args, RetrievalRankerSettings), **batch}),
        causal_likelihood=settings_from(LikelihoodSettings, {**given_settings(args, LikelihoodSettings), **batch}))
    read_build_info(args.sets)  # a wrong folder fails before any model loads
    for model in models:
        resolve_model(model)  # a missing second model is an error before the first one loads
    check_device(args.device)
    with claimed_output(args.out, kind="ucm", overwrite=args.overwrite, reads=[*models, args.sets]), \
            human_output(args):
        rankers = [(label, make_ranker(kind, model, ranker_settings, device=args.device))
                   for label, kind, model in zip(labels, kinds, models)]
        # Written into a staging folder that replaces OUT whole once everything is there.
        with atomic_directory(args.out, marker=RESULTS_FILE, kind="ucm") as staging:
            results, written = run_ucm(rankers, args.sets, staging, settings, progress=progress_enabled(),
                                       resume=(args.out, args.overwrite, "give --overwrite to start over"))
        discard_work_folder(args.out, kind="ucm")  # written: the completed pools kept for a rerun are done
        for result in results:
            cut = (f" ({result.num_records_truncated:,} more left out: an input over the model's length limit)"
                   if result.num_records_truncated else "")
            print(f"{result.label}: {result.settings.get('method')} ranker, {result.num_sequences:,} sequences, "
                  f"{result.num_records:,} records{cut}, {result.seconds:.1f} s")
        print(f"wrote {', '.join(str(args.out / p.name) for p in written)}")
    if args.json:
        print_results(args.out / RESULTS_FILE)
    return 0
