"""What ``medlama build medlama`` and ``medlama build biolama`` run, given their settings: the folder built,
then its statistics and build report printed (a table, or JSON with ``--json``). Their declarations
(:mod:`medlama.datasets.declared`) name these; the command line only turns flags into the settings."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

from medlama.core.atomic import check_output_place
from medlama.core.display import print_table
from medlama.core.progress import enabled as progress_enabled
from medlama.datasets.build_settings import BiolamaBuildSettings, MedlamaBuildSettings


def run_medlama(settings: MedlamaBuildSettings, as_json: bool = False) -> int:
    """``medlama build medlama``: the folder built, its statistics and build report printed."""
    # datasets.hardness, datasets.medlama and datasets.medlama_folder load (they import datasets, pyarrow) when this runs, not when the CLI parses its flags
    from medlama.datasets.hardness import HardnessRule
    from medlama.datasets.medlama import check_threshold
    from medlama.datasets.medlama_folder import write_medlama

    # Checked here too, so that the message names the option the user typed.
    rule = HardnessRule(check_threshold(settings.match_threshold, "--match-threshold"),
                        check_threshold(settings.rouge_threshold, "--rouge-threshold"))
    out, source = settings.out, settings.source
    check_output_place(out, reads=[source] if source else [])  # before the release is read
    build, stats = write_medlama(out, source, rule=rule, verify_checksums=settings.verify_checksums,
                                 progress=progress_enabled(), choices=settings.choices,
                                 choices_seed=settings.choices_seed)
    report = build.report
    if as_json:
        return _print_json(out, stats, report, build.choices_record)
    print_table(
        "MedLAMA", ["relation", "full", "hard", "answers/query", "distinct answers", "single-token (distinct)",
                     "single-token (all)"],
        [(r["relation"], r["full"], r["hard"], f"{r['answers_per_query_full']:.2f}", r["distinct_answers"],
          f"{100 * r['single_token_answers']:.1f}%", f"{100 * r['single_token_answer_occurrences']:.1f}%")
         for r in stats],
        caption=f"written to {out} (configs 'hard' (default), 'full', per relation, candidates_*, *_mc)")
    _print_choices(build.choices_record)
    print(f"hardness scores recomputed: {len(report.score_mismatches)} differ from the release by more than 1e-6")
    for mismatch in report.score_mismatches[:20]:
        print(f"  {mismatch.id} ({mismatch.file}, row {mismatch.row}): {mismatch.score} released "
              f"{mismatch.released:.6f}, recomputed {mismatch.recomputed:.6f}")
    if report.released_hard_checked:
        print(f"hard set derived from the full set: {len(report.hard_only_derived)} query(ies) not in the "
              f"released hard set, {len(report.hard_only_released)} released ones not derived"
              + (" (different thresholds)" if rule != HardnessRule() else ""))
    else:
        print("released hard files not found: derived hard set not compared with the release")
    if report.empty_configs:
        print(f"no rows under these thresholds, so left out of the folder (with their candidates_ configs): "
              f"{', '.join(report.empty_configs)}")
    if not report.checksums_verified:  # also in the card, build_info.json and every result's provenance
        print(f"input: NOT the pinned release (--no-verify): {len(report.checksum_mismatches)} file(s) differ from "
              f"commit {report.commit[:12]}, {len(report.checksums_unchecked)} were not there to check")
    return 0


def run_biolama(settings: BiolamaBuildSettings, as_json: bool = False) -> int:
    """``medlama build biolama``: the folder built, its statistics and build report printed."""
    # datasets.biolama_folder loads (it imports datasets) when this runs, not when the CLI parses its flags
    from medlama.datasets.biolama_folder import write_biolama

    out, source = settings.out, settings.source
    check_output_place(out, reads=[source] if source else [])  # before the release is read
    build, stats = write_biolama(out, source, sources=settings.sources, sha256=settings.sha256,
                                 verify_checksums=settings.verify_checksums, progress=progress_enabled(),
                                 choices=settings.choices, choices_seed=settings.choices_seed)
    report = build.report
    if as_json:
        return _print_json(out, stats, report, build.choices_record)
    print_table(
        "BioLAMA", ["source", "relation", "train", "dev", "test", "objects/query", "answers/query", "prompt"],
        [(r["source"], r["relation"] if r["relation"] != "all" else f"all ({r['relations']})", r["train"], r["dev"],
          r["test"], f"{r['objects_per_query']:.2f}", f"{r['answers_per_query']:.2f}", r["template"]) for r in stats],
        caption=f"written to {out} (configs 'all' (default), {', '.join(report.sources)}, <source>_<PID>, *_mc)")
    _print_choices(build.choices_record)
    print(f"input: {report.verification}" + ("" if report.checksums_verified else " -- NOT verified")
          + (f" (digest_source: {report.digest_source})" if report.digest_source else ""))
    if report.empty_splits:
        print(f"test-only build: the release has no {' or '.join(report.empty_splits)} records, so the folder has "
              f"no {' or '.join(report.empty_splits)} split (recorded in its card and build_info.json)")
    if report.split_overlaps:
        print(f"{len(report.split_overlaps)} record(s) appear in more than one split of a relation, e.g. "
              f"{report.split_overlaps[0]}")
    for source, relations in report.prompts_without_data.items():
        print(f"{source}: manual prompts without data (ignored): {', '.join(relations)}")
    return 0


def _print_choices(record) -> None:
    """The multiple-choice draw: N, the seed, and the queries that got fewer distractors (their pool too small)."""
    print(f"multiple-choice configs (*_mc): {record.distractors} distractors per query, seed {record.seed}")
    if record.note():
        print(f"medlama: {record.note()}", file=sys.stderr)


def _print_json(out: Path, stats: list[dict], report, choices=None) -> int:
    """``--json``: the statistics, the build report and the multiple-choice draw on stdout, for machines."""
    json.dump({"out": str(out), "statistics": stats, "report": asdict(report),
               **({"choices": choices.as_dict()} if choices is not None else {})}, sys.stdout, indent=2)
    print()
    return 0
