"""The probe workflow: one path from queries and models to scores, tables and files, for ``medlama probe`` and
``medlama.probe`` alike (as :mod:`medlama.ucm_eval.evaluation` is for UCM), so the two cannot disagree.

* :func:`run_probe`: the one entry point. It takes the data (:class:`~medlama.runs.queries.QuerySource`), what
  is probed, how it is scored and where it goes (:mod:`medlama.runs.request`), as the CLI's flags, the Python
  API's arguments and the trainer callback ask for them, and owns the row labels
  (:func:`medlama.core.models.unique_labels`),
  every check before the queries are read, the one claim of the output folder, the shard plan, the ranking,
  scoring, the benchmark's aggregation, the tables and the output folder.
* :func:`checkpoint_folders`: the ``checkpoint-N`` folders of a ``--checkpoints`` sweep, checked before any
  probing (a model without them fails at once, not after its base probe).
* :func:`probe_models`: every (method, model) run, its layer sweep and checkpoint sweep, each ranked against
  the pool its query set's rule gives, shard by shard (:mod:`medlama.runs.resume`: kept by
  :func:`shard_store` beside the output, so a rerun continues a killed probe; split across the processes of
  a ``torchrun`` run; in memory without an output folder), and scored as the benchmark declares
  (:mod:`medlama.runs.benchmarks`).
* :func:`print_report`: the tables; the output folder is :func:`medlama.runs.outputs.write_outputs`'.
* :func:`probe`: a prober made by hand, ranked through the same shard plan (the rewiring evaluator's path).
"""

from __future__ import annotations

import contextlib
import os
from functools import partial
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from medlama.core import distributed
from medlama.core.atomic import check_finished, claimed_output
from medlama.core.batching import is_auto, starting_size
from medlama.core.checkpoints import checkpoint_step, list_checkpoints
from medlama.core.defaults import default_model_path
from medlama.core.errors import MedlamaInputError
from medlama.core.loaded import LoadedModel
from medlama.core.models import LoadOptions, check_label, loading_with, resolve_model, unique_labels
from medlama.core.resume import check_work_folder, ShardStore
from medlama.core.settings import as_dict
from medlama.runs import tables
from medlama.runs.benchmarks import Benchmark, benchmark
from medlama.runs.biolama_queries import print_source_table
from medlama.probers.causal.fewshot import drawn_record
from medlama.runs.cardinality import print_cardinality
from medlama.probers.learned_prompts import PromptSet
from medlama.runs.calibration import print_calibration
from medlama.runs.outputs import KEEP_PREDICTIONS, OUTPUT_KIND, RESULTS_FILE, write_outputs
from medlama.runs.preflight import check_units
from medlama.probers.prober import check_all_scores, Prober, ProberNote
from medlama.runs import queries as sources  # looked up on each call: tests patch its loader
from medlama.runs.queries import QuerySource
from medlama.probers.query_set import QuerySet
from medlama.probers import registry  # looked up on each call: tests patch make_prober
from medlama.probers.registry import METHODS
from medlama.runs.result import ProbeResult, result_of
from medlama.runs.request import ProbeModels, ProbeOutput, ProbeScoring
from medlama.runs.resume import manifest, rank_prober, rank_units, resumed, Unit
from medlama.probers.retrieval import RetrievalProber
from medlama.runs.scores import REPORT_KS
from medlama.runs.template_runs import (checked_templates, print_template_tables, probe_templates, template_parts,
                                        template_shards)


@dataclass(frozen=True)
class ModelRun:
    """One model probed by one method: its row ``label``, the ``model`` (a folder or Hub id, or a loaded
    object for retrieval), the method's ``settings``, the ``tokenizer`` of a loaded model, and how the model
    is loaded (``load``: revision, LoRA adapter, remote code)."""

    label: str
    method: str
    model: Any
    settings: Any
    tokenizer: Any = None
    load: LoadOptions | None = None

    def prober(self, device: str | None = None, model: Any = None, settings: Any = None) -> Prober:
        """The prober of this run (of ``model``, a checkpoint folder, instead of the run's own model; with
        ``settings`` in place of its own: a resolved batch size). Its ``loaded`` attribute records what was
        loaded (:func:`~medlama.core.models.loading_with`), which :func:`~medlama.runs.result.result_of` puts
        in the run's settings. This is the :data:`~medlama.runs.resume.ProberFactory` of its units."""
        model = self.model if model is None else model
        settings = self.settings if settings is None else settings
        with loading_with(self.load) as loaded:
            if isinstance(model, (str, Path)):
                prober = registry.make_prober(self.method, str(model), settings, device=device)
            elif self.method == "retrieval":
                prober = RetrievalProber(model, settings, device=device, tokenizer=self.tokenizer)
            else:  # a model in memory (one being trained), probed as it is
                prober = registry.make_prober(self.method, LoadedModel(model, self.tokenizer), settings,
                                              device=device)
        prober.loaded = loaded
        return prober

    def unit(self, model: Any = None, step: int | None = None) -> Unit:
        """The result row of this run (of ``model``, its checkpoint of ``step``), as the shard plan ranks it."""
        return Unit(self.label if step is None else f"{self.label}@{step}", self.label, self.method,
                    self.model if model is None else model, self.settings, self.prober, load=self.load,
                    layers=step is None and bool(getattr(self.settings, "layers", None)), step=step)


@dataclass
class ProbeOutcome:
    """Every result of a probe, in row order, with the layer and checkpoint sweeps by run label."""

    results: list[ProbeResult] = field(default_factory=list)
    by_layer: dict[str, dict[int, ProbeResult]] = field(default_factory=dict)
    by_step: dict[str, dict[int, ProbeResult]] = field(default_factory=dict)


def run_probe(source: QuerySource, probed: ProbeModels, scoring: ProbeScoring = ProbeScoring(),
              output: ProbeOutput = ProbeOutput()) -> ProbeOutcome | None:
    """The one probe path, for ``medlama probe``, ``medlama.probe`` and the trainer callback alike: the
    queries ``source`` names, the ``probed`` models and methods, ranked and scored as ``scoring`` says,
    written and printed as ``output`` says. It owns the row labels and every check (before the queries are
    read: loading them may build MedLAMA first, minutes lost to a typo), the output folder claimed once for
    the whole run, the queries, the shard plan and its ranking (:func:`probe_models`), the scores and the
    benchmark's aggregation, the tables (``output.report``) and the output folder (:func:`write_outputs`).
    Under several processes, the main process gets the outcome, the others ``None``."""
    bundled = not probed.models
    models = list(probed.models) or [str(default_model_path())]
    loaded = [model for model in models if not isinstance(model, (str, Path))]
    probers: dict[str, Prober] = {}
    names = [model if isinstance(model, (str, Path)) else None for model in models]
    if loaded:  # a loaded model is named by what its prober reads (and inspected once)
        method = probed.methods[0]
        check_all_scores(METHODS[method].prober, scoring.all_scores)
        if method != "retrieval" and probed.tokenizer is None:  # a loaded object (its loader checks which)
            raise MedlamaInputError(f"a loaded model object probed by {method} needs its tokenizer (tokenizer=)")
        settings = probed.settings[method]
        sized = replace(settings, batch_size=starting_size(settings)) if is_auto(settings) else settings
        prober = ModelRun("", method, loaded[0], sized, probed.tokenizer).prober(probed.device)
        names = [Path(str(prober.settings().get("model", method))).name if name is None else name for name in names]
    labels = unique_labels(names, probed.labels, bundled=bundled and probed.labels is None)
    for method in probed.methods:
        check_all_scores(METHODS[method].prober, scoring.all_scores)
    bench = benchmark(source.dataset)
    plan = _Plan(source, scoring, output, probed.device, bench, *bench.scoring_plan(scoring.ks, scoring.match))
    for model in models:
        if isinstance(model, (str, Path)):
            resolve_model(model)  # a missing model folder is an error now, not after the queries are built
    runs = model_runs(probed.methods, labels, models, probed.settings, tokenizer=probed.tokenizer,
                      load=probed.load)  # checks the loading options
    if loaded:
        probers = {runs[0].label: prober}
    if source.templates is not None:  # a bad template file is refused before anything loads
        plan = replace(plan, templates=checked_templates(source, runs, probed.checkpoints, bench.name))
    checkpoints = checkpoint_folders(runs) if probed.checkpoints else None  # before any probing
    probers.update(check_units(units_of(runs, checkpoints), distributed.device_for(probed.device)))  # before ranking
    if output.out is None:
        return _probe(plan, runs, checkpoints, probers)
    out = Path(output.out)
    claim = dict(marker=RESULTS_FILE, kind=OUTPUT_KIND, overwrite=output.overwrite, hint=output.hint,
                 reads=list(output.reads))
    if not distributed.is_main_process():  # under torchrun: the same checks, then a share of the work, silently
        check_finished(out, **claim)
        with open(os.devnull, "w", encoding="utf-8") as sink, contextlib.redirect_stdout(sink):
            return _probe(plan, runs, checkpoints, probers)
    with claimed_output(out, **claim):  # the one claim of the folder, held until it is written
        return _probe(plan, runs, checkpoints, probers)


@dataclass(frozen=True)
class _Plan:
    """A checked probe: what :func:`run_probe` was given, with its benchmark, the cut-offs reported (``ks``)
    and scored (``scored``) and the matching (``match``) the benchmark's scoring plan gives."""

    source: QuerySource
    scoring: ProbeScoring
    output: ProbeOutput
    device: str | None
    bench: Benchmark
    ks: Sequence[int]
    scored: Sequence[int]
    match: str
    #: The checked template set (:func:`~medlama.runs.template_runs.checked_templates`) of ``source.templates``.
    templates: Any = None


def _probe(plan: _Plan, runs: list[ModelRun], checkpoints: dict | None,
           probers: dict[str, Prober]) -> ProbeOutcome | None:
    """Read the queries, rank (shard by shard, kept beside ``plan.output.out`` so a rerun of a killed probe
    continues it; under torchrun / accelerate launch, every process ranks its share), score, aggregate, and
    (main process) print the tables and write the output folder."""
    output = plan.output
    queries = sources.load_queries(plan.source)
    queries.check_gold(plan.match)  # a query acc@k cannot score, refused before anything is ranked
    probed = _check_prompts(runs, queries)  # before any model loads
    for run in runs:  # a few-shot draw that cannot be made: refused before any model loads
        drawn_record(queries, as_dict(run.settings))
    if output.report:
        print(describe_pool(queries))
    parts = template_parts(plan.templates, plan.source, queries) if plan.templates is not None else None
    outcome = (_rank(plan, queries, runs, checkpoints, probers, parts, device=plan.device) if output.out is None
               else _probe_sharded(plan, queries, runs, checkpoints, probers, parts))
    if outcome is None:  # another process's share: the main process writes OUT
        return None
    _record_probed(outcome, probed)
    aggregate(outcome.results, plan.bench, plan.ks)
    if output.report:
        print_report(outcome, plan.bench, plan.ks)
    if output.out is not None:
        plots = write_outputs(output.out, outcome.results, by_layer=outcome.by_layer, by_step=outcome.by_step,
                              overwrite=output.overwrite, reads=output.reads, hint=output.hint, k=plan.ks[-1],
                              argv=output.argv, claimed=True)
        if output.report:
            print(f"wrote {Path(output.out) / RESULTS_FILE} and {', '.join(p.name for p in plots)}")
    return outcome


def _check_prompts(runs: list[ModelRun], queries: QuerySet) -> dict[str, dict]:
    """Check the queries against every run's learned prompts (relations, split, facts they were trained on) and
    warn where the scores will be optimistic; ``{prompts identity: what results record of the probe}``."""
    probed = {}
    for run in runs:
        prompts = getattr(run.settings, "prompts", None)
        if prompts is None:
            continue
        learned = PromptSet.read(prompts)
        if learned.identity not in probed:
            probed[learned.identity] = learned.check_queries(
                queries, allow_train_overlap=getattr(run.settings, "allow_train_overlap", False))
            for line in learned.warnings(probed[learned.identity]):
                print(f"medlama: warning: {line}", file=sys.stderr)
    return probed


def _record_probed(outcome: ProbeOutcome, probed: Mapping[str, dict]) -> None:
    """Record beside each result's learned prompts what :func:`_check_prompts` found of the probed queries."""
    sweeps = [result for runs in (*outcome.by_layer.values(), *outcome.by_step.values()) for result in runs.values()]
    for result in [*outcome.results, *sweeps]:
        note = result.settings.get("learned_prompts")
        if isinstance(note, dict) and note.get("identity") in probed:
            result.settings["learned_prompts"] = {**note, "probed": probed[note["identity"]]}


def _rank(plan: _Plan, queries: QuerySet, runs: list[ModelRun], checkpoints: dict | None, probers: dict,
          parts: list | None, *, device: str | None, store: Any = None) -> ProbeOutcome | None:
    """:func:`probe_models` of ``runs``, or with ``parts`` (templates) :func:`.template_runs.probe_templates`."""
    rank = partial(probe_models, scored=plan.scored, match=plan.match, top_k=plan.scoring.top_k, device=device,
                   store=store, all_scores=plan.scoring.all_scores)
    return (ProbeOutcome(probe_templates(parts, runs, probers, rank)) if parts is not None
            else rank(queries, runs, checkpoints=checkpoints, probers=probers))


def _probe_sharded(plan: _Plan, queries: QuerySet, runs: list[ModelRun], checkpoints: dict | None, probers: dict,
                   parts: list | None) -> ProbeOutcome | None:
    """:func:`_rank` with its completed shards kept beside ``plan.output.out`` (:func:`shard_store`)."""
    output, scoring = plan.output, plan.scoring
    device = distributed.device_for(plan.device)
    joined = distributed.start(device)  # False when alone, or inside a group already joined (a trainer's)
    store = None
    try:
        units, stored = (runs, queries) if parts is None else template_shards(runs, parts, queries)
        store = shard_store(output.out, stored, units, top_k=scoring.ranked(plan.scored), checkpoints=checkpoints,
                            overwrite=output.overwrite, hint=_start_over(output.hint), all_scores=scoring.all_scores)
        return _rank(plan, queries, runs, checkpoints, probers, parts, device=device, store=store)
    except BaseException as error:
        if store is not None and distributed.is_main_process():
            store.stopped(error, output.out, kind=OUTPUT_KIND)
        raise
    finally:
        if joined:  # the group this probe joined; a trainer's stays as it was
            distributed.stop()


def _start_over(hint: str) -> str:
    """``give --overwrite to start over`` from ``give --overwrite to replace them, ...``: how a refused resume
    is told to proceed, with the same flag or keyword."""
    return hint.split(" to ")[0] + " to start over"


def probe(prober: Prober, queries: QuerySet, *, label: str | None = None, top_k: int = 10, ks=REPORT_KS,
          match: str = "exact", all_scores: bool = False) -> ProbeResult:
    """Run a ``prober`` made by hand on ``queries`` (against the pool their rule gives, through the shard plan
    every probe takes: :func:`medlama.runs.resume.rank_prober`) and score its top ``top_k`` predictions (the
    depth ranked and kept, both recorded); ``all_scores``: keep every candidate's score (``scores.parquet``).
    Nothing is written."""
    check_all_scores(prober, all_scores)
    if label is not None:
        check_label(label, what="label")
    if is_auto(prober.settings_):
        raise MedlamaInputError("batch size 'auto' is resolved by medlama probe and medlama.probe (the largest that "
                                "fits); a prober used on its own needs a number")
    check_depth(top_k, ks)
    start = time.perf_counter()
    ranking = rank_prober(prober, queries, top_k=top_k, all_scores=all_scores)
    return result_of(ProberNote.of(prober), queries, ranking, time.perf_counter() - start,
                     label=prober.method if label is None else label, ks=ks, match=match, top_k=top_k,
                     ranked_top_k=top_k)


def check_depth(top_k: int, ks: Sequence[int]) -> None:
    """Refuse ranking a prober only ``top_k`` deep where a larger k is scored: its acc@k would count only the top
    ``top_k`` (a wrong number)."""
    if ks and top_k < max(ks):
        raise MedlamaInputError(f"top_k {top_k} ranks fewer predictions than the largest k scored ({max(ks)}); give "
                                f"top_k >= {max(ks)} or ks up to {top_k}")


def model_runs(methods: Sequence[str], labels: Sequence[str], models: Sequence[Any], settings: dict[str, Any],
               *, tokenizer: Any = None, load: LoadOptions | None = None) -> list[ModelRun]:
    """One run per method and model, labelled ``label`` (one method) or ``method:label`` (several); ``load``
    (checked against every model here, before anything loads) says how the models are loaded."""
    if load is not None:
        for model in models:
            load.check(model)
    return [ModelRun(label if len(methods) == 1 else f"{method}:{label}", method, model, settings[method], tokenizer,
                     load) for method in methods for label, model in zip(labels, models)]


def checkpoint_folders(runs: Sequence[ModelRun]) -> dict[str, dict[int, Path]]:
    """``{run label: {step: checkpoint folder}}`` of every run, checked before anything is probed: a model
    without ``checkpoint-N`` folders (or a loaded model object) is an error naming it."""
    out = {}
    for run in runs:
        if not isinstance(run.model, (str, Path)):
            raise MedlamaInputError("a checkpoint sweep needs a model folder (its checkpoint-N folders), not a "
                                    "loaded model object")
        steps = {checkpoint_step(path): path for path in list_checkpoints(run.model)}
        if not steps:
            raise MedlamaInputError("no checkpoint-N folders to probe", file=run.model)
        out[run.label] = steps
    return out


def probe_models(queries: QuerySet, runs: Sequence[ModelRun], *, scored: Sequence[int], match: str,
                 top_k: int = KEEP_PREDICTIONS, device: str | None = None,
                 checkpoints: dict[str, dict[int, Path]] | None = None,
                 probers: dict[str, Prober] | None = None, store: Any = None,
                 all_scores: bool = False) -> ProbeOutcome | None:
    """Probe each run on ``queries`` (a retrieval run with ``layers`` set: one result per layer), then each of
    its ``checkpoints`` (:func:`checkpoint_folders`), scoring the cut-offs ``scored`` with ``match``; each
    ranked as deep as ``top_k`` and the largest of ``scored`` need (:meth:`ProbeScoring.ranked`), its top
    ``top_k`` kept (each result records both: ``settings.top_k``, ``settings.ranked_top_k``). ``probers``:
    probers already made, by run label (a loaded model is inspected once). ``all_scores``: keep every
    candidate's score (``scores.parquet``; refused, before any model loads, for methods that generate
    their answers). The ranking goes shard by shard (:mod:`medlama.runs.resume`): ``store`` keeps the
    completed ones (a :class:`~medlama.core.resume.ShardStore` beside the output: a rerun continues from them),
    and under several processes each ranks its share; the main process gets the outcome, the others ``None``."""
    kept, top_k = top_k, ProbeScoring(top_k=top_k).ranked(scored)  # kept per query; ranked
    for run in runs:
        check_all_scores(METHODS[run.method].prober, all_scores)
    units = units_of(runs, checkpoints)
    started = time.perf_counter()
    ranked = rank_units(queries, units, store, top_k=top_k, device=device, probers=probers, all_scores=all_scores)
    if ranked is None:
        return None
    # `seconds` of a result adds up its shards' ranking time over every process; what a reader of a parallel
    # run also needs is how many processes ranked and how long the ranking took on the clock.
    parallel = {"processes": distributed.world_size(), "wall_seconds": round(time.perf_counter() - started, 3)}
    outcome = ProbeOutcome()
    for unit in units:
        predictions, prober, seconds = ranked[unit.label]
        if unit.layers:
            sweep = outcome.by_layer.setdefault(unit.run_label, {})
            for layer, layered in predictions.items():
                sweep[layer] = result_of(prober, queries, layered, seconds, label=f"{unit.label} L{layer}", ks=scored,
                                         match=match, layer=layer, top_k=kept, ranked_top_k=top_k)
                sweep[layer].extra.update(parallel)
                outcome.results.append(sweep[layer])
            continue
        result = result_of(prober, queries, predictions, seconds, label=unit.label, ks=scored, match=match,
                           top_k=kept, ranked_top_k=top_k)
        result.extra.update(parallel)
        if unit.step is not None:
            outcome.by_step.setdefault(unit.run_label, {})[unit.step] = result
        outcome.results.append(result)
    return outcome


def units_of(runs: Sequence[ModelRun], checkpoints: Mapping[str, Mapping[int, Path]] | None = None) -> list[Unit]:
    """The result rows of ``runs`` in table order: each run (a layer sweep when its settings list ``layers``),
    then each of its ``checkpoints`` (``{run label: {step: folder}}``)."""
    return [unit for run in runs for unit in (run.unit(), *(run.unit(path, step) for step, path in
                                                            ((checkpoints or {}).get(run.label) or {}).items()))]


def shard_store(out: str | Path, queries: QuerySet, runs: Sequence[ModelRun], *, top_k: int,
                checkpoints: dict[str, dict[int, Path]] | None = None, overwrite: bool = False,
                hint: str = "give overwrite=True to start over", all_scores: bool = False):
    """The store of the completed shards of a probe into ``out`` (:class:`~medlama.core.resume.ShardStore`):
    an earlier run's with the same settings is continued (said on stderr), another's refused, ``overwrite``
    starts over. Every process checks alike; the main process, holding ``out``'s lock, opens it; a refusal any
    process meets is raised by all."""
    units = units_of(runs, checkpoints)
    record = manifest(queries, units, top_k=top_k, all_scores=all_scores)
    def together(step) -> None:  # every process raises the first refusal any of them met
        error: MedlamaInputError | None = None
        try:
            step()
        except MedlamaInputError as met:
            error = met
        message = distributed.agree(error)
        if error is not None:
            raise error
        if message is not None:
            raise MedlamaInputError(message)

    # All check (reading only) before the main process may discard or start the folder.
    together(lambda: check_work_folder(out, kind=OUTPUT_KIND, manifest=record, overwrite=overwrite, hint=hint))
    together(lambda: ShardStore.open(out, kind=OUTPUT_KIND, manifest=record, overwrite=overwrite, hint=hint)
             if distributed.is_main_process() else None)
    store = ShardStore.joined(out)
    done, total = resumed(store, queries, units)
    if done and distributed.is_main_process():
        print(f"medlama: continuing an interrupted probe: {done} of {total} shards already done "
              f"({store.folder.name})", file=sys.stderr)
    return store


def aggregate(results: Sequence[ProbeResult], benchmark: Benchmark, ks: Sequence[int]) -> None:
    """Add the benchmark's own aggregation (BioLAMA: macro acc@k per source) to each result's ``extra``."""
    if benchmark.aggregation is not None:
        name, function = benchmark.aggregation
        for result in results:
            result.extra[name] = function(result.metrics, ks)


def print_report(outcome: ProbeOutcome, benchmark: Benchmark, ks: Sequence[int]) -> None:
    """The summary table, acc@k per relation and per number of gold answers (up to four runs), the template
    tables (:func:`~medlama.runs.template_runs.print_template_tables`) and the benchmark's aggregation table."""
    results = outcome.results
    tables.print_summary(results, ks=ks)
    print_calibration(results)
    if len(results) <= 4:
        tables.print_per_relation(results, k_values=tuple(dict.fromkeys((ks[0], ks[-1]))))
        print_cardinality(results, tuple(dict.fromkeys((ks[0], ks[-1]))))
    print_template_tables(results, ks)
    if benchmark.aggregation is not None and benchmark.aggregation[0] == "by_source":
        print_source_table(results, ks)


def describe_pool(queries: QuerySet) -> str:
    """``hard: 15,329 queries, 17,532 candidates (pool: evaluated)``: what the run ranks against, printed; for a
    multiple-choice set, the choices per query and the chance level (``results.json``: ``data.candidates``)."""
    if queries.choices is not None:
        record = queries.pool_record()
        return (f"{queries.name}: {len(queries):,} queries, multiple choice: each ranked against its own choices "
                f"({record['mean_choices']:.2f} per query; chance level acc@1 {100 * record['chance_level']:.2f}%)")
    return (f"{queries.name}: {len(queries):,} queries, {len(queries.candidates):,} candidates "
            f"(pool: {queries.rule})")


__all__ = ["ModelRun", "ProbeModels", "ProbeOutcome", "ProbeOutput", "ProbeScoring", "aggregate", "check_depth",
           "checkpoint_folders", "describe_pool", "model_runs", "print_report", "probe", "probe_models", "run_probe", "shard_store", "units_of"]
