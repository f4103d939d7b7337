"""``medlama rewire``: Contrastive-Probe rewiring of an encoder (``medlama push-model`` uploads the result)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from medlama.commands.flags import add_command, add_settings_flags, given_settings
from medlama.core.settings import fields_of, settings_from
from medlama.trainers.config import DEFAULT_PRESET, PRESETS, RewireConfig, RewireRun
from medlama.trainers.config import PRESETS, RewireConfig
from medlama.core.models import resolve_model
from medlama.trainers.config import RewireRun
from medlama.core.atomic import check_output_place
from medlama.core.distributed import is_main_process


def register(subparsers) -> None:
    parser = add_command(subparsers, "rewire", run_rewire,
                         help="rewire an encoder for probing (Contrastive-Probe self-retrieval training)")
    add_settings_flags(parser, RewireRun, only=("corpus", "out", "preset"), filled=True)
    settings = parser.add_argument_group(
        "rewiring settings", "each defaults to the preset's value (shown: the paper preset's); an optional "
                             "setting takes 'none'")
    add_settings_flags(settings, RewireConfig, exclude=("dropout",), defaults=PRESETS[DEFAULT_PRESET], helps={
        "batch_size": lambda text: text.replace("pairs per optimiser step", "pairs per optimiser step (not inputs "
                                                "per forward pass as in probe, ucm and recipe)", 1)})
    dropout = settings.add_mutually_exclusive_group()
    add_settings_flags(dropout, RewireConfig, defaults=PRESETS[DEFAULT_PRESET],
                       exclude=tuple(f.name for f in fields_of(RewireConfig) if f.name != "dropout"))
    dropout.add_argument("--keep-model-dropout", dest="dropout", action="store_const", const=None,
                         default=argparse.SUPPRESS, help="keep the model's own dropout (same as --dropout none)")
    add_settings_flags(parser.add_mutually_exclusive_group(), RewireRun, only=("no_resume", "resume_from"),
                       filled=True)
    parser.add_argument("--json", action="store_true", help="print the run record as JSON")


def config_from_args(args: argparse.Namespace):
    """The :class:`~medlama.trainers.config.RewireConfig` the parsed flags ask for: the preset, with the
    settings the user typed replacing its values (``--max-sentences 0`` means all lines, as ``none``)."""
    given = given_settings(args, RewireConfig)
    if given.get("max_sentences") == 0:
        given["max_sentences"] = None
    return settings_from(RewireConfig, given, base=PRESETS[args.preset], what="rewire")


def run_rewire(args: argparse.Namespace) -> int:
    """Train an encoder on cloze pairs made from corpus sentences (Contrastive-Probe, Meng et al. 2022). OUT receives
    the final model (SentenceTransformer(OUT), AutoModel.from_pretrained(OUT)), README.md, rewire_config.json and
    checkpoints/checkpoint-<step>. Running again into the same OUT resumes from its last complete checkpoint.
    Settings left out come from the preset."""
    # trainers.cloze loads when this runs, not when the CLI parses its flags
    from medlama.trainers.cloze import check_corpus_files

    # Checked before torch is imported (the trainer's modules import it) and before the model loads.
    config = config_from_args(args)
    run = settings_from(RewireRun, given_settings(args, RewireRun))
    check_corpus_files(run.corpus)
    if config.model is not None:
        resolve_model(config.model)

    # Before the model loads: an OUT that is the current directory, or holds the corpus or the model, is
    # refused now rather than when the trained model is swapped in.
    check_output_place(run.out, reads=[*run.corpus, *([args.model] if getattr(args, "model", None) else [])])
    # trainers.trainer loads (it imports sentence_transformers, torch) when this runs, not when the CLI parses its flags
    from medlama.trainers.trainer import rewire

    result = rewire(list(run.corpus), run.out, config, resume=run.resume, preset=run.preset)
    if not is_main_process():  # under torchrun, one report
        return 0
    if args.json:
        json.dump(result.record, sys.stdout, indent=2)
        print()
        return 0
    record, training = result.record, result.record["training"]
    cloze = record["cloze"]
    print(f"rewired {record['base_model']['name']} (layers {record['base_model']['layers_used']}/"
          f"{record['base_model']['layers_total']}) -> {result.path}")
    print(f"  cloze pairs: {cloze['pairs']:,} from {cloze['sentences']:,} lines"
          + (f", {cloze['skipped_short']:,} too short to mask left out" if cloze["skipped_short"] else ""))
    if cloze.get("mask_truncated") is not None:
        print(f"  masks cut off: {cloze['mask_truncated']:,} of {cloze['pairs']:,} queries "
              f"({100 * cloze['mask_truncated'] / cloze['pairs']:.1f}%) lose their mask token at "
              f"--max-length {cloze['max_length']} and train without it (as in the reference)")
    if result.already_trained:
        print(f"  already trained: {result.global_step} steps, nothing trained or written by this run")
    print(f"  steps: {result.global_step} (this run: {result.steps_this_run}"
          + (f", resumed from {result.resumed_from}" if result.resumed_from else "") + ")"
          + (f", {result.pairs_per_second:.1f} pairs/s on {training['device']} ({training['precision']})"
             if result.pairs_per_second else ""))
    print(f"  checkpoints: {', '.join(p.name for p in result.checkpoints) or 'none'}")
    return 0
