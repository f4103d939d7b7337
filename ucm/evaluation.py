"""The UCM evaluation workflow: score context-variance sets with models and report UCM (tables 1-3 of the
paper), acc@k, JSON and a plot.

:func:`run_ucm` loads the sets (:mod:`~medlama.ucm.sets`), and for each ``(label, ranker)``
(:mod:`~medlama.ucm.rankers`) :func:`evaluate_model` ranks every sequence and builds its rank-change
records (:mod:`~medlama.ucm.records`), scores them with the metric modules (:mod:`~medlama.ucm.scores`);
then the report (:mod:`~medlama.ucm.report`) prints the tables and writes ``results.json`` and
``ucm.png``. What to score and report is :class:`UcmSettings`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from medlama.core.errors import MedlamaInputError
from medlama.core.resume import discard_work_folder
from medlama.probers.outputs import RESULTS_FILE
from medlama.probers.benchmarks import CONTEXT_VARIANCE
from medlama.core.settings import check, setting
from medlama.ucm.rankers import ContextRanker
from medlama.ucm.records import rank_sequences, sequence_records
from medlama.ucm.report import print_tables, write_outputs
from medlama.ucm.scores import ModelResult, accuracy, by_context, share_intervals, ucm, ucm_k_macro
from medlama.ucm.sets import ContextSets, load_sets

#: The UCM cut-offs (acc@k of table 2): the context-variance benchmark's declaration (medlama.probers.benchmarks),
#: not the probe reports' :data:`medlama.probers.scores.REPORT_KS`.
UCM_KS = CONTEXT_VARIANCE.ks


@dataclass(frozen=True)
class UcmSettings:
    """What a UCM evaluation scores (which sequences, which records) and reports."""

    ks: tuple[int, ...] = setting(UCM_KS, min=1, metavar="K", help="acc@k cut-offs, as table 2")
    sources: tuple[str, ...] | None = setting(None, metavar="SOURCE",
                                              help="score only these sources; none: every source")
    context_types: tuple[str, ...] | None = setting(None, metavar="TYPE",
                                                    help="score only these context types (real, knowledge-only, "
                                                         "knowledge-sorted, knowledge-random); none: every type")
    relations: tuple[str, ...] | None = setting(None, metavar="REL",
                                                help="score only these relations; none: every relation")
    negative: bool = setting(True, help="also score the negative-target sequences (table 3's control)")
    include_first_segment: bool = setting(False, help="also count each sequence's first record (input1 adds S1, "
                                                      "whose entity is the centre itself; see medlama.ucm.records)")
    records: bool = setting(False, help="also write OUT/records.jsonl (every rank-change record)")
    limit: int | None = setting(None, min=1, metavar="N",
                                help="score only the sequences of the first N triples of each relation, for a quick "
                                     "check; the scores are not the benchmark's (none: all)")

    def __post_init__(self) -> None:
        check(self)
        if not self.ks:
            raise MedlamaInputError("setting 'ks' needs at least one cut-off")


def evaluate_model(ranker: ContextRanker, sets: ContextSets, *, label: str, ks: Sequence[int] = UCM_KS,
                   keep_records: bool = False, skip_first_segment: bool = True, progress: bool = True,
                   store: Any = None) -> ModelResult:
    """Rank, build the records, and score them with the UCM and acc@k modules.

    ``skip_first_segment`` (default) leaves out each sequence's first record (input1: S1, whose entity is
    the centre itself), so that UCM only counts segments that bring another entity
    (:mod:`medlama.ucm.records`). Records over an input the model saw cut are left out and counted.
    ``store``: keeps each completed pool's ranks (:func:`~medlama.ucm.records.rank_sequences`), so that a
    rerun continues a killed evaluation.
    """
    started = time.perf_counter()
    top = max(ks)
    records: list[dict] = []
    acc_rows = []
    count = truncated = 0
    for ranked in rank_sequences(ranker, sets, progress=label if progress else None, store=store, unit=label):
        count += 1
        new = sequence_records(ranked.row, ranked.ranks, ranked.column, ranked.whole)
        for record in new[1:] if skip_first_segment else new:
            if record["whole"]:
                records.append(record)
            else:
                truncated += 1
        if not ranked.row["negative"]:
            firsts = [[ranked.candidate_ids[j] for j in np.argsort(ranked.ranks[i], kind="stable")[:top]]
                      for i in (0, -1)]
            acc_rows.append(({"relation": ranked.row["relation"], "target_id": ranked.row["target_id"],
                              "correct_ids": ranked.row["correct_ids"]}, firsts[0], firsts[1]))
    seconds = time.perf_counter() - started
    target = [r for r in records if not r["negative"]]
    negative = [r for r in records if r["negative"]]
    target_result, negative_result = ucm(target), ucm(negative)
    return ModelResult(label=label, settings={**ranker.settings(), "skip_first_segment": skip_first_segment},
                       seconds=round(seconds, 3), num_sequences=count, num_records=len(records),
                       num_records_truncated=truncated, target=target_result, negative=negative_result,
                       ucm_k_macro={"target": ucm_k_macro(target_result), "negative": ucm_k_macro(negative_result)},
                       accuracy=accuracy(acc_rows, ks), by_context=by_context(target, negative),
                       records=records if keep_records else [], intervals=share_intervals(target, negative))


def run_ucm(rankers: Sequence[tuple[str, ContextRanker]], sets_dir: str | Path, out: str | Path,
            settings: UcmSettings | None = None, *, show: bool = True, progress: bool = True,
            resume: tuple[str | Path, bool, str] | None = None) -> tuple[list[ModelResult], list[Path]]:
    """Score the sets with each ``(label, ranker)``; print tables 1-3 and write JSON and the plot.
    ``resume``: ``(final output folder, overwrite, how to start over)``: keep each completed pool's ranks beside
    it (:func:`shard_store`), continuing an earlier run's with the same settings; the caller removes them
    (:func:`~medlama.core.resume.discard_work_folder`) once the output is in place."""
    settings = settings if settings is not None else UcmSettings()
    ks = tuple(sorted(set(settings.ks)))
    sets = load_sets(sets_dir, sources=settings.sources, context_types=settings.context_types,
                     negative=settings.negative, relations=settings.relations, limit=settings.limit)
    store = shard_store(resume[0], sets_dir, sets, rankers, overwrite=resume[1], hint=resume[2]) if resume else None
    try:
        results = [evaluate_model(ranker, sets, label=label, ks=ks, keep_records=settings.records,
                                  skip_first_segment=not settings.include_first_segment, progress=progress,
                                  store=store) for label, ranker in rankers]
    except BaseException:
        if store is not None and store.empty():  # nothing done to continue: leave nothing beside the output
            discard_work_folder(resume[0], kind=OUTPUT_KIND)
        raise
    if show:
        print_tables(results, ks)
    return results, write_outputs(results, sets, out, ks, records=settings.records)


#: The owner of a UCM output (``.medlama-output.json``) and of its shards.
OUTPUT_KIND = "ucm"


def shard_store(out: str | Path, sets_dir: str | Path, sets: ContextSets, rankers: Sequence[tuple[str, ContextRanker]],
                *, overwrite: bool = False, hint: str = "give --overwrite to start over"):
    """The store of the completed pools of a UCM run into ``out`` (:class:`~medlama.core.resume.ShardStore`),
    keyed by what decides the ranks: the sets' content and selection, each ranker's settings (but its batch
    size) and model."""
    import sys

    from medlama.core.provenance import folder_hash, model_identity
    from medlama.core.resume import ShardStore

    manifest = {"sets": folder_hash(sets_dir), "selection": sets.selection,
                "rankers": {label: {"model": model_identity(getattr(ranker, "model_path", None) or label),
                                    "settings": {k: v for k, v in ranker.settings().items()
                                                 if k not in ("batch_size", "model")}}
                            for label, ranker in rankers}}
    store = ShardStore.open(out, kind=OUTPUT_KIND, manifest=manifest, overwrite=overwrite, hint=hint)
    if not store.empty():
        print(f"medlama: continuing an interrupted UCM run from the pools it completed ({store.folder.name})",
              file=sys.stderr)
    return store


def score_sets(sets: str | Path, model=None, *, method: str = "auto", out: str | Path | None = None,
               label=None, device: str | None = None, **settings):
    """The body of :func:`medlama.api.ucm` (see there): rankers for ``model`` (one or several), scored on
    ``sets``; ``out``, when given, is written as ``medlama ucm --out`` writes it (atomically, refusing a
    folder that is not an earlier UCM output)."""
    import tempfile

    from medlama.core.atomic import atomic_directory
    from medlama.core.defaults import default_model_path
    from medlama.core.models import check_device, resolve_model
    from medlama.core.settings import settings_from
    from medlama.ucm.rankers import canonical_method, make_ranker
    from medlama.ucm.sets import read_build_info

    several = isinstance(model, (list, tuple))
    models = list(model) if several else [model]
    paths = [str(default_model_path()) if m is None else str(m) for m in models]
    labels = list(label) if isinstance(label, (list, tuple)) else [label] if label else \
        ["bundled" if m is None else Path(str(m)).name for m in models]
    if len(labels) != len(paths):
        raise MedlamaInputError(f"{len(labels)} labels for {len(paths)} models")
    config = settings_from(UcmSettings, settings, what="ucm")
    # As the CLI: every argument checked before the output is claimed or any model loads.
    read_build_info(Path(sets))
    canonical_method(method)
    for path in paths:
        resolve_model(path)
    device = check_device(device, name="device")
    target = (atomic_directory(out, marker=RESULTS_FILE, kind="ucm") if out is not None
              else tempfile.TemporaryDirectory(prefix="medlama-ucm-"))
    with target as folder:  # the output is claimed before any model loads
        rankers = [(name, make_ranker(method, path, device=device)) for name, path in zip(labels, paths)]
        results, _ = run_ucm(rankers, sets, folder, config, show=False, resume=None if out is None else (
            out, False, "delete that folder to start over"))
    if out is not None:
        discard_work_folder(out, kind=OUTPUT_KIND)
    return results if several else results[0]
