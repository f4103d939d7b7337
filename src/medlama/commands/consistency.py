"""``medlama consistency``: does the model know a fact both ways? Inverse consistency of a probe run.

RUN is the output folder of `medlama probe` on MedLAMA data holding both relations of an inverse pair (the
release's: gene_encodes_gene_product <-> gene_product_encoded_by_gene, disease_mapped_to_gene <->
gene_associated_with_disease). Each fact (s, r, o) whose inverse (o, r', s) was probed too is paired by CUI, and
is right in r when o's name is among the top k of the query (s, r) (the run's answer matching), right in r' when
s's name is among the top k of (o, r'). Prints, per run, k and pair: the facts, the share right in both, in r
only, in r' only and in neither, and P(right in r' | right in r) and the reverse, each with its bootstrap
interval (the facts resampled). The record (how it was computed, every fact, the run's files' SHA-256) is
written atomically to RUN/consistency.json (or --out), which `medlama report` shows; --json prints it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from medlama.analysis import CompareSettings
from medlama.analysis.consistency import ConsistencyOutput, render, write_consistency
from medlama.commands.flags import add_command, add_settings_flags, given_settings
from medlama.core.settings import settings_from


def register(subparsers) -> None:
    parser = add_command(subparsers, "consistency", run, doc=__doc__,
                         help="inverse consistency of a probe run: facts right in both directions of an inverse "
                            "relation pair, and the conditional accuracies, with intervals")
    parser.add_argument("run", type=Path, metavar="RUN", help="the output folder of `medlama probe`")
    add_settings_flags(parser, ConsistencyOutput)
    add_settings_flags(parser, CompareSettings, title="intervals")


def run(args: argparse.Namespace) -> int:
    settings = settings_from(CompareSettings, given_settings(args, CompareSettings))
    output = settings_from(ConsistencyOutput, given_settings(args, ConsistencyOutput))
    record, file = write_consistency(args.run, settings, output, argv=sys.argv)
    if output.json:
        print(json.dumps(record, indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(render(record))
    print(f"wrote {file}", file=sys.stderr)
    return 0
