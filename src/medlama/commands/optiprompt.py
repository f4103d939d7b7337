"""``medlama optiprompt``: learn BioLAMA's OptiPrompt prompts for a masked LM (``medlama probe --prompts`` decodes
with them)."""

from __future__ import annotations

import argparse
import json
import sys

from medlama.commands.flags import add_command, add_settings_flags, given_settings
from medlama.core.settings import settings_from
from medlama.probers.mask_predict import MaskPredictSettings
from medlama.trainers.optiprompt.trainer import OptiPromptSettings
from medlama.trainers.optiprompt.run import DECODING, OptiPromptRun

DECODE_PREFIX = "decode-"
_NOT_DECODING = ("batch_size", "prompts", "allow_train_overlap")  # a probe's, not the dev decoding's


def register(subparsers) -> None:
    parser = add_command(subparsers, "optiprompt", run,
                         help="learn OptiPrompt prompts for a masked LM on BioLAMA's train split, chosen on dev")
    add_settings_flags(parser, OptiPromptRun)
    add_settings_flags(parser, OptiPromptSettings, title="training (BioLAMA's defaults)")
    add_settings_flags(parser, MaskPredictSettings, exclude=_NOT_DECODING, defaults=DECODING, prefix=DECODE_PREFIX,
                       title="dev decoding (mask predict; BioLAMA's settings: use the same with probe --preset "
                             "biolama)")
    parser.add_argument("--json", action="store_true", help="print prompts.json's record as JSON")


def run(args: argparse.Namespace) -> int:
    """Per relation, the manual template's words become trainable vectors (the model stays frozen), trained on the
    train split and kept at the epoch with the best dev acc@1 of mask-predict decoding (BioLAMA's
    run_optiprompt.py). PROMPTS receives prompts.json, the vectors (safetensors) and a README; probe with them:
    medlama probe --method mask-predict --model MODEL --prompts PROMPTS. A killed run continues at the next relation
    when rerun."""
    # the trainer (torch, transformers) loads when this runs, not when the CLI parses its flags
    from medlama.trainers.optiprompt.run import train_prompts

    request = settings_from(OptiPromptRun, given_settings(args, OptiPromptRun))
    settings = settings_from(OptiPromptSettings, given_settings(args, OptiPromptSettings))
    decoding = settings_from(MaskPredictSettings, given_settings(args, MaskPredictSettings,
                                                                 prefix=DECODE_PREFIX), base=DECODING)
    result = train_prompts(request, settings, decoding, report=not args.json)
    if args.json:
        json.dump(result.record, sys.stdout, indent=2)
        print()
    return 0
