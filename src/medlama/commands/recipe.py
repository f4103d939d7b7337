"""``medlama recipe``: Rewire-then-Probe end to end, the toolkit's main job.

Probes an encoder (default: the bundled one) on MedLAMA, rewires it with Contrastive-Probe on each
corpus, probes every rewired model, and prints them side by side (mean and standard deviation over
corpora, as table 5 of the paper), with JSON and plots in --out.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from medlama.commands.flags import add_command, given_settings
from medlama.commands.output import (add_output_arguments, check_device, check_folder_output, human_output,
                                     print_results)
from medlama.commands.probe import add_retrieval_probe_arguments, load_queries, retrieval_settings
from medlama.core.settings import settings_from
from medlama.runs.outputs import RESULTS_FILE
from medlama.recipe.settings import RecipeSettings
import shutil
from medlama.core.atomic import OWNER_NAME, lock_directory, write_owner
from medlama.core.errors import MedlamaInputError
from medlama.core.models import resolve_model
from medlama.trainers.config import RewireConfig
from medlama.runs import plots, tables


def register(subparsers) -> None:
    parser = add_command(subparsers, "recipe", run, doc=__doc__,
                         help="probe, rewire with Contrastive-Probe, probe again: before/after table, JSON, plots")
    add_retrieval_probe_arguments(parser, RecipeSettings)
    add_output_arguments(
        parser, default_out=Path("out/recipe"), writes="rewired models, results.json and plots",
        limit="probe only the first N queries of each relation (the rewiring is not shortened: see --steps)",
        device="the probes",
        overwrite="replace the results of a finished run in OUT (rewired models already there are reused: a "
                  "rewiring with the same settings resumes or is kept, one with other settings is refused); "
                  "without it, a rerun into a folder that holds results.json is refused before any work; an "
                  "interrupted run always resumes (default: refuse)")


def run(args: argparse.Namespace) -> int:
    # trainers.cloze loads when this runs, not when the CLI parses its flags
    from medlama.trainers.cloze import check_corpus_files

    recipe = settings_from(RecipeSettings, given_settings(args, RecipeSettings))
    corpora = list(recipe.corpus)
    if recipe.repeat is not None:
        if not 1 <= recipe.repeat <= len(corpora):
            raise MedlamaInputError(f"--repeat {recipe.repeat} needs 1 to {len(corpora)} corpora; "
                                    f"{len(corpora)} given")
        corpora = corpora[:recipe.repeat]
    check_corpus_files([*corpora, *([recipe.heldout] if recipe.heldout else [])])
    resolve_model(recipe.model)  # a missing model folder is an error now, not after the queries are read
    # The released corpora hold lines of 1-3 words (89 in pubmed_sents_no_punkt_10k_0) whose masked span
    # could swallow the whole sentence; the recipe leaves them out and the rewire record counts them.
    config = RewireConfig.preset(recipe.rewire_preset, steps=recipe.steps, batch_size=recipe.rewire_batch_size,
                                 save_steps=recipe.save_steps, temperature=recipe.tau,
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
                _recipe(args, recipe, corpora, config, settings)
        except BaseException:
            if new and [p.name for p in args.out.iterdir()] == [OWNER_NAME]:
                shutil.rmtree(args.out, ignore_errors=True)  # a run that wrote nothing leaves nothing
            raise
    if args.json:
        print_results(args.out / RESULTS_FILE)
    return 0


def _recipe(args: argparse.Namespace, recipe: RecipeSettings, corpora: list[Path], config, settings) -> None:
    # recipe.workflow loads (it imports sentence_transformers, torch) when this runs, not when the CLI parses its flags
    from medlama.recipe.workflow import rewire_then_probe

    queries = load_queries(args)
    result = rewire_then_probe(queries, corpora, args.out, model=recipe.model, rewire_config=config,
                               probe_settings=settings, probe_checkpoints=recipe.probe_checkpoints,
                               heldout=recipe.heldout, device=args.device, rewire_preset=recipe.rewire_preset,
                               checkpoint_choice=recipe.checkpoint_choice)

    summary = result.summary()
    spread = ("mean ± sample std over the rewiring corpora" if len(result.rewired) > 1 else
              "one rewiring corpus: its scores (a spread needs --repeat 2 or more)")
    rows = [["un-rewired"] + [tables.percent(summary["base"][f"acc@{k}"]) for k in (1, 5, 10)]
            + [tables.percent(summary["base"][f"acc@{k}_macro"]) for k in (1, 5, 10)]]
    rows.append([f"rewired (n={len(result.rewired)})"]
                + [tables.mean_std_text(summary['rewired_mean'][key], summary['rewired_std'][key])
                   for key in ("acc@1", "acc@5", "acc@10", "acc@1_macro", "acc@5_macro", "acc@10_macro")])
    tables.print_table(f"MedLAMA {queries.name}: before and after rewiring (%)",
                       ["model", "acc@1", "acc@5", "acc@10", "macro acc@1", "macro acc@5", "macro acc@10"], rows,
                       caption=(f"{spread}; micro over queries, macro over relations"))
    if "heldout_cloze" in summary:
        cloze = summary["heldout_cloze"]
        tables.print_table(  # a short title: rich wraps a long one into the table's narrow width
            "Held-out cloze self-retrieval (%)",
            ["model", "acc@1", "acc@10"],
            [["un-rewired"] + [tables.percent(cloze["base"][f"acc@{k}"]) for k in (1, 10)],
             [f"rewired (n={len(result.rewired)})"]
             + [tables.mean_std_text(cloze['rewired_mean'][f'acc@{k}'], cloze['rewired_std'][f'acc@{k}'])
                for k in (1, 10)]],
            # short: rich wraps a caption to this narrow table's width (the README says what the check is)
            caption=f"{cloze['pairs']:,} pairs of {recipe.heldout.name}")
    tables.print_per_relation([result.base] + result.rewired[:3])
    out = args.out
    runs = [result.base] + result.rewired[:3]
    figures = [plots.plot_relations(runs, out / "relations.png"),
               plots.plot_answer_length(runs, queries, out / "answer_length.png")]
    if result.checkpoints:
        series = {Path(model).name: by_step for model, by_step in zip(result.models, result.checkpoints)}
        figures.append(plots.plot_series(series, out / "steps.png", "rewiring step"))
    if result.heldout_base is not None:  # the check that tells a failed rewiring from a model that knows little
        figures.append(plots.plot_runs([result.heldout_base, *result.heldout_rewired[:3]], out / "heldout.png"))
    # Last: results.json marks a finished run (a rerun then needs --overwrite).
    result.save(out)  # predictions.jsonl, then results.json (summary, scores, intervals, provenance)
    print(f"wrote {out / 'results.json'} and {', '.join(p.name for p in figures)}; rewired models in {out}")
