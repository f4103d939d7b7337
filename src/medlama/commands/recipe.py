"""``medlama recipe``: Rewire-then-Probe end to end, the toolkit's main job.

Probes an encoder (default: the bundled one) on MedLAMA, rewires it with Contrastive-Probe on each
corpus, probes every rewired model, and prints them side by side (mean and standard deviation over
corpora, as table 5 of the paper), with JSON and plots in --out.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from medlama.commands.output import (add_output_arguments, check_device, check_folder_output, human_output,
                                     print_results)
from medlama.commands.probe import add_data_arguments, add_retrieval_arguments, load_queries, retrieval_settings
from medlama.probers.outputs import RESULTS_FILE
from medlama.trainers.config import PRESETS, QUICK_PRESET


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "recipe", help="probe, rewire with Contrastive-Probe, probe again: before/after table, JSON, plots",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="encoder folder or name (default: the bundled all-MiniLM-L6-v2)")
    parser.add_argument("--corpus", nargs="+", required=True, type=Path, metavar="FILE",
                        help="sentence files to rewire on, one rewired model each (e.g. the released "
                             "elicit corpora pubmed_sents_no_punkt_10k_*)")
    parser.add_argument("--repeat", type=int, help="rewire on the first N corpora only (default: all given)")
    parser.add_argument("--rewire-preset", default=QUICK_PRESET, choices=sorted(PRESETS),
                        help="a named bundle of the rewiring's settings, as `medlama rewire --preset`; --steps and "
                             "--rewire-batch-size replace its values. demo: a CPU-sized run; paper: the published "
                             "run (batch 192, 200 steps, max length 48) (default: %(default)s)")
    parser.add_argument("--steps", type=int, help="the rewiring's optimiser steps (default: the preset's)")
    parser.add_argument("--rewire-batch-size", type=int, metavar="N",
                        help="the rewiring's pairs per optimiser step, `medlama rewire --batch-size` (not inputs per "
                             "forward pass as --batch-size) (default: the preset's)")
    parser.add_argument("--probe-checkpoints", action="store_true",
                        help="also probe every saved checkpoint and plot acc per step (figure 4)")
    parser.add_argument("--heldout", type=Path, metavar="FILE",
                        help="a sentence file not among --corpus: also score every model's cloze self-retrieval on "
                             "it (2,000 pairs), which shows whether rewiring did its job whatever the model knows "
                             "(default: none)")
    add_data_arguments(parser)
    add_retrieval_arguments(parser)
    add_output_arguments(
        parser, default_out=Path("out/recipe"), writes="rewired models, results.json and plots",
        limit="probe only the first N queries of each relation (the rewiring is not shortened: see --steps)",
        device="the probes",
        overwrite="replace the results of a finished run in OUT (rewired models already there are reused: a "
                  "rewiring with the same settings resumes or is kept, one with other settings is refused); "
                  "without it, a rerun into a folder that holds results.json is refused before any work; an "
                  "interrupted run always resumes (default: refuse)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import shutil

    from medlama.core.atomic import OWNER_NAME, lock_directory, write_owner
    from medlama.core.errors import MedlamaInputError
    from medlama.core.models import resolve_model
    from medlama.trainers.cloze import check_corpus_files
    from medlama.trainers.config import RewireConfig

    corpora = list(args.corpus)
    if args.repeat is not None:
        if not 1 <= args.repeat <= len(corpora):
            raise MedlamaInputError(f"--repeat {args.repeat} needs 1 to {len(corpora)} corpora; "
                                    f"{len(corpora)} given")
        corpora = corpora[:args.repeat]
    check_corpus_files([*corpora, *([args.heldout] if args.heldout else [])])
    resolve_model(args.model)  # a missing model folder is an error now, not after the queries are read
    # The released corpora hold lines of 1-3 words (89 in pubmed_sents_no_punkt_10k_0) whose masked span
    # could swallow the whole sentence; the recipe leaves them out and the rewire record counts them.
    config = RewireConfig.preset(args.rewire_preset, steps=args.steps, batch_size=args.rewire_batch_size,
                                 skip_short_lines=True).validate()
    settings = retrieval_settings(args)
    check_device(args.device)
    check_folder_output(args.out, kind="recipe", overwrite=args.overwrite)  # before any work
    with lock_directory(args.out):
        check_folder_output(args.out, kind="recipe", overwrite=args.overwrite)
        new = not args.out.exists()
        # Recorded first, so that an interrupted run's rewired models are resumed by the next run.
        write_owner(args.out, "recipe")
        try:
            with human_output(args):
                _recipe(args, corpora, config, settings)
        except BaseException:
            if new and [p.name for p in args.out.iterdir()] == [OWNER_NAME]:
                shutil.rmtree(args.out, ignore_errors=True)  # a run that wrote nothing leaves nothing
            raise
    if args.json:
        print_results(args.out / RESULTS_FILE)
    return 0


def _recipe(args: argparse.Namespace, corpora: list[Path], config, settings) -> None:
    from medlama.probers import plots, tables
    from medlama.recipe.workflow import rewire_then_probe

    queries = load_queries(args)
    result = rewire_then_probe(queries, corpora, args.out, model=args.model, rewire_config=config,
                               probe_settings=settings, probe_checkpoints=args.probe_checkpoints,
                               heldout=args.heldout, device=args.device, rewire_preset=args.rewire_preset)

    summary = result.summary()
    rows = [["un-rewired"] + [tables.percent(summary["base"][f"acc@{k}"]) for k in (1, 5, 10)]
            + [tables.percent(summary["base"][f"acc@{k}_macro"]) for k in (1, 5, 10)]]
    rows.append([f"rewired (n={len(result.rewired)})"]
                + [tables.mean_std_text(summary['rewired_mean'][key], summary['rewired_std'][key])
                   for key in ("acc@1", "acc@5", "acc@10", "acc@1_macro", "acc@5_macro", "acc@10_macro")])
    tables.print_table(f"MedLAMA {queries.name}: before and after rewiring (%)",
                       ["model", "acc@1", "acc@5", "acc@10", "macro acc@1", "macro acc@5", "macro acc@10"], rows,
                       caption="mean ± sample std over rewiring corpora; micro over queries, macro over relations")
    if "heldout_cloze" in summary:
        cloze = summary["heldout_cloze"]
        tables.print_table(
            f"Held-out cloze self-retrieval, {cloze['pairs']:,} pairs of {args.heldout.name} (%)",
            ["model", "acc@1", "acc@10"],
            [["un-rewired"] + [tables.percent(cloze["base"][f"acc@{k}"]) for k in (1, 10)],
             [f"rewired (n={len(result.rewired)})"]
             + [tables.mean_std_text(cloze['rewired_mean'][f'acc@{k}'], cloze['rewired_std'][f'acc@{k}'])
                for k in (1, 10)]],
            caption="the rewiring game on sentences no model trained on: each masked sentence retrieves its own "
                    "span among all spans ([CLS], L2, as the probe)")
    tables.print_per_relation([result.base] + result.rewired[:3])
    out = args.out
    runs = [result.base] + result.rewired[:3]
    plots = [plots.plot_relations(runs, out / "relations.png"),
             plots.plot_answer_length(runs, queries, out / "answer_length.png")]
    if result.checkpoints:
        series = {Path(model).name: by_step for model, by_step in zip(result.models, result.checkpoints)}
        plots.append(plots.plot_series(series, out / "steps.png", "rewiring step"))
    # Last: results.json marks a finished run (a rerun then needs --overwrite).
    result.save(out)  # predictions.jsonl, then results.json (summary, scores, intervals, provenance)
    print(f"wrote {out / 'results.json'} and {', '.join(p.name for p in plots)}; rewired models in {out}")
