"""``medlama frequency``: acc@k against how often each probed fact's subject and object occur together in a corpus.

RUN is the output folder of `medlama probe`; INDEX is the corpus index `medlama build context-variance` built
(kept under its --index-dir, one folder per corpus). Every query of the run is a fact (its subject's name and
its gold answers' names, from predictions.jsonl); its co-occurrences are counted in the index's documents per
sentence and per segment (a document of the index), the counts binned (0, 1, 2-10, 11-100, >100 by default:
--bins), and each run's acc@k in each bin printed with its bootstrap interval over the bin's facts. --out FILE
writes the record (every fact's counts, every bin's acc@k and interval, the matching rule, the index's corpus
fingerprint) as JSON; --plot FILE draws it. A fact whose subject or a gold name the index never matched is
not counted (the index cannot say how often it occurs) and is in no bin; the tables say how many.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from medlama.analysis.frequency import FrequencySettings, frequency_folder
from medlama.analysis.frequency_report import FrequencyOutput, print_tables
from medlama.commands.flags import add_command, add_settings_flags, given_settings
from medlama.core.settings import settings_from


def register(subparsers) -> None:
    parser = add_command(subparsers, "frequency", run, doc=__doc__,
                         help="acc@k against corpus frequency: each fact's subject-object co-occurrences counted in a "
                          "context-variance index, binned, with bootstrap intervals")
    parser.add_argument("run", type=Path, metavar="RUN", help="the output folder of `medlama probe`")
    parser.add_argument("--index", required=True, type=Path, metavar="INDEX",
                        help="a context-variance corpus index (a folder holding manifest.json)")
    add_settings_flags(parser, FrequencySettings, title="counting and intervals")
    add_settings_flags(parser, FrequencyOutput, title="outputs")


def run(args: argparse.Namespace) -> int:
    settings = settings_from(FrequencySettings, given_settings(args, FrequencySettings))
    output = settings_from(FrequencyOutput, given_settings(args, FrequencyOutput))
    output.check_files()  # before any work
    record = frequency_folder(args.run, args.index, settings)
    output.write(record)
    if output.json:
        print(json.dumps(record, indent=2, ensure_ascii=False))
    else:
        print_tables(record)
    return 0
