"""``medlama export lm-eval [--data DIR_OR_HUB_ID] --out TASKS``: MedLAMA as lm-evaluation-harness tasks
(:mod:`medlama.integrations.lm_eval.tasks`), run with ``lm_eval --include_path TASKS --tasks medlama_hard``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from medlama.commands.flags import add_command, add_settings_flags, given_settings
from medlama.core.settings import settings_from
from medlama.integrations.lm_eval.readme import run_flags
from medlama.integrations.lm_eval.tasks import LmEvalExportSettings, export_lm_eval


def register(formats) -> None:
    parser = add_command(formats, "lm-eval", run,
                         help="MedLAMA as lm-evaluation-harness tasks (a group of per-relation ranking tasks and a "
                        "generation task)")
    parser.add_argument("--data", default=None,
                        help="the MedLAMA dataset: a built folder (`medlama build medlama --out DIR`), a "
                             "push-dataset dry run, or a Hub dataset id (you/medlama, you/medlama@REVISION; "
                             "gated: log in with `hf auth login` first); default: the build kept in the cache, "
                             "as `medlama probe` and `medlama export mteb` read it")
    parser.add_argument("--out", required=True, type=Path,
                        help="the task folder to write (a new or empty folder, or an earlier export, which is "
                             "replaced once the new one is complete)")
    add_settings_flags(parser, LmEvalExportSettings)
    parser.add_argument("--json", action="store_true", help="print what medlama_export.json records")


def run(args: argparse.Namespace) -> int:
    """Write a task folder for `lm_eval --include_path TASKS`: the group medlama_<config> of one log-likelihood ranking
    task per relation (medlama_<config>_<relation>, each over its relation's candidate pool; acc@1 and acc@10, micro
    and macro over relations) and medlama_<config>_gen (greedy generation, normalised match against the gold names).
    The queries and pools are written into TASKS, so lm-eval runs offline; the scores equal `medlama probe --method
    causal-likelihood --candidates relation` on the same queries."""

    settings = settings_from(LmEvalExportSettings, given_settings(args, LmEvalExportSettings))
    record = export_lm_eval(args.data, args.out, settings)
    if args.json:
        print(json.dumps(record, indent=2, ensure_ascii=False))
        return 0
    tasks = record["tasks"]
    what = (f"the group {record['group']} and {record['generation_task']}" if record["generation_task"] else
            f"the group {record['group']} (multiple choice, chance level "
            f"{100 * record['candidates']['chance_level']:.2f}%)")
    print(f"wrote {len(tasks)} ranking task(s), {what} to {args.out} ({sum(t['queries'] for t in tasks):,} queries, "
          f"{record['loglikelihood_requests']:,} log-likelihood requests for the whole group)")
    print(f"run: lm_eval --model hf --model_args pretrained=MODEL --include_path {args.out} --tasks {record['group']}"
          f"{run_flags(record['settings'])}")
    return 0
