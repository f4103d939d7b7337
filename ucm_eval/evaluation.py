"""The UCM evaluation workflow: score context-variance sets with models and report UCM (tables 1-3 of the
paper), acc@k, JSON and a plot.

:func:`run` is the one UCM run, behind ``medlama ucm`` and :func:`medlama.ucm` alike (each only turns its
arguments into a :class:`UcmRun`): it checks every argument, claims the output folder once, builds the rankers
(:mod:`~medlama.ucm_eval.rankers`) and calls :func:`run_ucm`, which loads the sets (:mod:`~medlama.ucm_eval.sets`) and
for each ``(label, ranker)`` :func:`evaluate_model` ranks every sequence and builds its rank-change records
(:mod:`~medlama.ucm_eval.records`), scores them with the metric modules (:mod:`~medlama.ucm_eval.scores`); then the
report (:mod:`~medlama.ucm_eval.report`) prints the tables and writes ``results.json`` and ``ucm.png``. What to
score and report is :class:`UcmSettings`; which models, :class:`UcmModels`.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

import medlama.ucm_eval.rankers as ranker_module
from medlama.core.atomic import claim_directory, staged_directory
from medlama.core.defaults import default_model_path
from medlama.core.errors import MedlamaInputError
from medlama.core.models import check_device, resolve_model, unique_labels
from medlama.core.provenance import folder_hash, model_identity
from medlama.core.settings import check, did_you_mean, fields_of, setting, settings_from
from medlama.core.resume import ShardStore, discard_work_folder
from medlama.runs.outputs import RESULTS_FILE
from medlama.datasets.declared.context_variance import CONTEXT_VARIANCE
from medlama.ucm_eval.context_ranker import ContextRanker
from medlama.ucm_eval.rankers import RankerSettings, canonical_method
from medlama.ucm_eval.records import rank_sequences, sequence_records
from medlama.ucm_eval.report import print_tables, write_outputs
from medlama.ucm_eval.scores import ModelResult, accuracy, by_context, share_intervals, ucm, ucm_k_macro
from medlama.ucm_eval.sets import ContextSets, load_sets, read_build_info

#: The UCM cut-offs (acc@k of table 2): the context-variance benchmark's declaration
#: (medlama.datasets.declared.context_variance),
#: not the probe reports' :data:`medlama.runs.scores.REPORT_KS`.
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
                                                      "whose entity is the centre itself; see medlama.ucm_eval.records)")
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
    (:mod:`medlama.ucm_eval.records`). Records over an input the model saw cut are left out and counted.
    ``store``: keeps each completed pool's ranks (:func:`~medlama.ucm_eval.records.rank_sequences`), so that a
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
            # a candidate ranked past the last (a decoding ranker did not return it) is no prediction
            firsts = [[ranked.candidate_ids[j] for j in np.argsort(ranked.ranks[i], kind="stable")[:top]
                       if ranked.ranks[i][j] <= len(ranked.candidate_ids)] for i in (0, -1)]
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
    except BaseException as error:
        if store is not None:
            store.stopped(error, resume[0], kind=OUTPUT_KIND)
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
    manifest = {"sets": folder_hash(sets_dir), "selection": sets.selection,
                "rankers": {label: {"model": model_identity(ranker.model_path or label),
                                    "settings": {k: v for k, v in ranker.settings().items()
                                                 if k not in ("batch_size", "resolved_batch_size", "model")}}
                            for label, ranker in rankers}}
    store = ShardStore.open(out, kind=OUTPUT_KIND, manifest=manifest, overwrite=overwrite, hint=hint)
    if not store.empty():
        print(f"medlama: continuing an interrupted UCM run from the pools it completed ({store.folder.name})",
              file=sys.stderr)
    return store


# ------------------------------------------------------------------------------------------ one run
@dataclass(frozen=True)
class UcmModels:
    """Which models a UCM run scores, under which names, by which method (``medlama ucm``'s ``--model``,
    ``--label`` and ``--method``). Empty: the default (the bundled encoder, each model folder's name, auto);
    a model ``None`` (from Python) is the bundled encoder, named ``bundled``."""

    model: tuple[str, ...] = setting((), show_default=False, help="model folders (default: the bundled encoder)")
    label: tuple[str, ...] = setting((), show_default=False, help="names for the models in tables and plots (default: the model folders' "
                                          "names)")
    method: tuple[Literal["auto", "mask-predict", "mask-average", "retrieval", "causal-likelihood"], ...] = setting(
        (), show_default=False, metavar="METHOD",
        help="mask-predict: X-FACTR confidence decoding with the MLM head, as BioLAMA decodes (the UCM paper's); "
             "mask-average: every pool name by its mean token log-probability with the MLM head (not the paper's); "
             "retrieval: [CLS] distance to the pool names; "
             "causal-likelihood: a causal LM's log-probability of each pool name in the slot; auto: "
             "causal-likelihood for a decoder-only causal LM (GPT-2, Llama style), else mask-predict when the model "
             "has an MLM head, else retrieval. One value, or one per model (default: auto)")


def settings_by_name(values: Mapping[str, Any]) -> tuple[UcmSettings, RankerSettings]:
    """What to score and the rankers' settings from ``values``, named as ``medlama ucm``'s flags (the fields of
    :class:`UcmSettings` and :data:`~medlama.ucm_eval.rankers.FLAT_NAMES`): the one reading of them, by the
    command line and :func:`medlama.ucm` alike, with the same checks and defaults (the paper's decoding,
    :data:`~medlama.ucm_eval.rankers.DEFAULTS`). A name of neither is an error naming the nearest."""
    own = [field.name for field in fields_of(UcmSettings)]
    known = [*own, *ranker_module.FLAT_NAMES]
    unknown = [name for name in values if name not in known]
    if unknown:
        raise MedlamaInputError(f"unknown ucm setting(s): {', '.join(did_you_mean(name, known) for name in unknown)}"
                                f"; known: {', '.join(known)}")
    return (settings_from(UcmSettings, {name: value for name, value in values.items() if name in own}),
            ranker_module.flat_ranker_settings({name: value for name, value in values.items() if name not in own}))


@dataclass(frozen=True)
class Spelling:
    """How a run's messages name its arguments: as the command line spells them, or as the Python API does."""

    label: str = "labels"
    model: str = "models"
    method: str = "methods"
    device: str = "device"
    #: how to start over when a kept partial run's settings differ
    restart: str = "delete that folder to start over"
    #: how to proceed when a finished run's output is refused (``UcmRun.refuse_finished``)
    replace: str = "choose another out"


#: The command line's spelling of the arguments (``medlama ucm``).
FLAGS = Spelling(label="--label values", model="--model values", method="--method values", device="--device",
                 restart="give --overwrite to start over",
                 replace="give --overwrite to replace them, or choose another --out")


@dataclass(frozen=True)
class UcmRun:
    """One UCM run: what :func:`run` scores and where the results go.

    ``out``: the output folder (``None``: a temporary one, nothing kept); ``overwrite``: start over, replacing a
    finished run's output and the pools a killed one kept; ``refuse_finished``: refuse a finished run's output
    unless ``overwrite`` (the command line), instead of replacing it (the Python API). ``show``: print tables 1-3;
    ``progress``: progress bars.
    """

    sets: Path
    models: UcmModels = UcmModels(model=(), label=(), method=())
    settings: UcmSettings = UcmSettings()
    rankers: RankerSettings = RankerSettings()
    device: str | None = None
    out: Path | None = None
    overwrite: bool = False
    refuse_finished: bool = False
    show: bool = True
    progress: bool = True
    spelling: Spelling = Spelling()


def _models_and_labels(models: UcmModels, spelling: Spelling) -> tuple[list[str], list[str], list[str]]:
    """Each model's path, label and method, or an error naming the arguments whose counts differ."""
    given = list(models.model) or [None]
    paths = [str(default_model_path()) if m is None else str(m) for m in given]
    if models.label and len(models.label) != len(paths):
        raise MedlamaInputError(f"{len(models.label)} {spelling.label} for {len(paths)} {spelling.model}")
    # the probe's rule: given labels must differ; else folder names, same-named folders told apart
    labels = unique_labels(paths, list(models.label) or None, bundled=given == [None])
    if not models.label:
        labels = ["bundled" if m is None else label for m, label in zip(given, labels)]
    methods = list(models.method) or ["auto"]
    kinds = methods if len(methods) > 1 else methods * len(paths)
    if len(kinds) != len(paths):
        raise MedlamaInputError(f"{len(methods)} {spelling.method} for {len(paths)} {spelling.model}")
    return paths, labels, kinds


def run(request: UcmRun) -> tuple[list[ModelResult], list[Path]]:
    """The one UCM run, behind ``medlama ucm`` and :func:`medlama.ucm`: every argument checked before the output
    is claimed or any model loads; the output claimed once, before the models load; the rankers built, the sets
    scored (:func:`run_ucm`, continuing the pools a killed run into the same ``out`` completed), tables 1-3
    printed (``show``) and ``results.json`` and ``ucm.png`` swapped into ``out`` whole."""
    paths, labels, kinds = _models_and_labels(request.models, request.spelling)
    sets_dir = Path(request.sets)
    read_build_info(sets_dir)  # a wrong folder fails before any model loads
    for kind in kinds:
        canonical_method(kind)
    for path in paths:
        resolve_model(path)  # a missing second model is an error before the first one loads
    device = check_device(request.device, name=request.spelling.device)

    def rankers() -> list[tuple[str, ContextRanker]]:  # the models load here, once the output is claimed
        return [(label, ranker_module.make_ranker(kind, path, request.rankers, device=device))
                for label, kind, path in zip(labels, kinds, paths)]

    if request.out is None:
        with tempfile.TemporaryDirectory(prefix="medlama-ucm-") as folder:
            return run_ucm(rankers(), sets_dir, folder, request.settings, show=request.show,
                           progress=request.progress)
    finished = request.spelling.replace if request.refuse_finished and not request.overwrite else None
    with claim_directory(request.out, marker=RESULTS_FILE, kind=OUTPUT_KIND, reads=[*paths, sets_dir],
                         finished=finished):  # the one claim of the output, held until its work folder is gone
        loaded = rankers()
        # Written into a staging folder that replaces OUT whole once everything is there.
        with staged_directory(request.out, marker=RESULTS_FILE, kind=OUTPUT_KIND) as staging:
            outcome = run_ucm(loaded, sets_dir, staging, request.settings, show=request.show,
                              progress=request.progress,
                              resume=(request.out, request.overwrite, request.spelling.restart))
        discard_work_folder(request.out, kind=OUTPUT_KIND)  # written: the completed pools kept for a rerun are done
    results, written = outcome
    return results, [Path(request.out) / path.name for path in written]
