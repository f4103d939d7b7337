"""The Python API: probe, load, rewire and score UCM from a notebook, with the CLI's defaults.

``import medlama`` stays light: these functions are re-exported lazily by ``medlama/__init__.py``, and each
imports the heavy libraries (torch, transformers, datasets) only when called.

>>> import medlama
>>> result = medlama.probe(relations=["may_treat"], limit=50)      # the bundled encoder, MedLAMA hard
>>> result.acc(10), result.acc_ci(10)                              # acc@10 and its 95% bootstrap interval
>>> result.to_pandas().head()                                      # one row per query
>>> result.save("out/may_treat")                                   # as `medlama probe --out` writes it
"""

from __future__ import annotations

import functools
from dataclasses import replace
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from medlama.annotation import ExportSettings, ScoreSettings, export_sheet, score_sheet
from medlama.annotation.estimate import EstimateSettings, estimate_sheet
from medlama.core.errors import MedlamaInputError
from medlama.core.models import LoadOptions, resolve_model
from medlama.core.progress import showing
from medlama.core.settings import settings_from
from medlama.datasets.folders import folder_configs, load_config, resolve_folder
from medlama.runs.arguments import ProbeArguments, check_relations, check_release_relations, relation_names
from medlama.runs.benchmarks import benchmark, resolve_data
from medlama.analysis import CompareSettings, compare_folders
from medlama.analysis.consistency import ConsistencyOutput, write_consistency
from medlama.analysis.frequency import FrequencySettings, frequency_folder
from medlama.analysis.frequency_report import FrequencyOutput
from medlama.runs.queries import QuerySource, check_rule
from medlama.probers.registry import METHODS, method_name, settings_for
from medlama.runs.workflow import ProbeModels, ProbeScoring, run_probe
from medlama.reports import ReportSettings, write_report
from medlama.trainers.cloze import check_corpus_files
from medlama.trainers.config import QUICK_PRESET, RewireConfig
from medlama.ucm_eval.evaluation import UcmModels, UcmRun, run as run_ucm
from medlama.ucm_eval.evaluation import settings_by_name as ucm_settings_by_name

__all__ = ["annotate_estimate", "annotate_export", "annotate_score", "compare", "consistency", "frequency",
           "load_medlama", "mteb_task", "optiprompt", "probe", "report", "rewire", "ucm"]


F = TypeVar("F", bound=Callable[..., Any])


def _progress_as_the_cli(function: F) -> F:
    """Run ``function`` under the CLI's rule for progress bars (medlama.core.progress): shown on a terminal
    or in a notebook, never into a redirected stderr (a log file), never against ``TQDM_DISABLE``."""
    @functools.wraps(function)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        with showing():
            return function(*args, **kwargs)

    return wrapped  # type: ignore[return-value]


@_progress_as_the_cli
def load_medlama(config: str = "hard", *, data: str | Path | None = None, source: str | Path | None = None,
                 relations: Sequence[str] | None = None, split: str | None = "test"):
    """MedLAMA as a ``datasets`` object: ``config`` (``hard``, ``full``, ``candidates_hard``, ``hard_<relation>``,
    ...) of ``data`` (a built folder, ``medlama build medlama --out DIR``; a ``push-dataset`` dry run; or a Hub
    dataset id, ``you/medlama`` or ``you/medlama@REVISION``) or, without ``data``, of the build kept in the
    cache (built once from ``source`` / ``$MEDLAMA_SOURCE`` / the pinned download, as the CLI).

    Returns the ``split`` (a ``Dataset``; ``split=None``: the ``DatasetDict`` of the config's splits), keeping
    only ``relations`` when given (a list of names, or one name; an unknown one is an error). The folder is
    found as ``medlama probe --data`` finds it (resolve_folder) and its
    Parquet files are read by their absolute paths
    (load_config), never as ``load_dataset(<folder>, config)``: ``datasets``
    caches a local folder by its name, so another folder called ``medlama`` could come back instead.
    """

    relations = relation_names(relations)
    check_release_relations("medlama", data, relations)  # before MedLAMA is built from its release
    if data is not None:
        folder = resolve_folder(Path(data).expanduser(), dataset="medlama").path
    else:
        folder = resolve_data(QuerySource(source=None if source is None else str(source))).path
    if split is None:
        # datasets loads when this runs, not when medlama.api is imported
        from datasets import DatasetDict

        splits = folder_configs(folder).get(config)
        if splits is None:  # load_config words the error, with the configs there are
            load_config(folder, config)
        loaded = DatasetDict({name: load_config(folder, config, name) for name in splits})
    else:
        loaded = load_config(folder, config, split)
    if relations:
        parts = list(loaded.values()) if split is None else [loaded]
        check_relations(relations, {r for part in parts for r in part.unique("relation")}, file=folder)
        wanted = set(relations)
        keep = lambda batch: [r in wanted for r in batch["relation"]]  # noqa: E731
        loaded = loaded.filter(keep, batched=True)
    return loaded


@_progress_as_the_cli
def probe(model: Any = None, data: Any = None, *, config: str | None = None, method: str = "retrieval",
          preset: str | None = None, relations: Sequence[str] | None = None, dataset: str = "medlama",
          settings: Mapping[str, Any] | Any = None, device: str | None = None, limit: int | None = None,
          top_k: int = 10, ks: Sequence[int] | None = None, match: str | None = None, tokenizer: Any = None,
          label: str | None = None, candidates: str = "evaluated", checkpoints: bool = False,
          log_all_scores: bool = False, revision: str | None = None, peft: str | None = None,
          trust_remote_code: bool = False, prompts: str | Path | None = None,
          templates: str | Path | None = None):
    """Probe ``model`` on MedLAMA (or BioLAMA) as ``medlama probe`` does; returns a
    ProbeResult (``acc(k)``, ``acc_ci(k)``, ``intervals``, ``per_relation()``,
    ``to_pandas()``, ``save(folder)``).

    * ``model``: ``None`` (the bundled all-MiniLM-L6-v2 encoder), a folder or Hub id, or a loaded
      ``SentenceTransformer`` or ``transformers.PreTrainedModel`` (with ``tokenizer=``). A loaded model is
      probed as it is (its device, precision and mode): by retrieval, its own pooling head is not used
      (``settings["pooling"]`` is); a masked, causal or seq2seq LM needs the matching method.
    * ``data``: ``None`` (the build kept in the cache, as the CLI), a built folder, a ``push-dataset`` dry run
      or a Hub dataset id (``you/medlama``, ``you/medlama@REVISION``), all read as ``medlama probe --data``
      reads them (queries_from), a ``datasets.Dataset`` / ``DatasetDict`` of
      MedLAMA queries (``load_medlama(...)``), or a ``QuerySet``.
    * ``config``: ``hard`` (default), ``full`` or a per-relation config such as ``hard_may_treat`` (BioLAMA:
      ``all``, ``ctd``, ...); ``relations``: a subset (a list of names, or one name).
    * ``method``: any of medlama.probers.registry.METHODS, as ``medlama probe --method`` spells it:
      ``retrieval`` (default; encoders), ``mask-average``, ``mask-predict`` and ``masked-likelihood`` (masked
      LMs), ``generative`` (seq2seq LMs such as T5), ``causal-likelihood``, ``causal-constrained`` and
      ``causal-generate`` (decoder-only causal LMs: exact ranking, fast constrained ranking, free text).
      ``preset``: the method's named settings (retrieval: ``reference`` by default, ``cosine``, or
      ``sentence-transformers``: ``SentenceTransformer.encode`` with cosine, as sentence-transformers' retrieval
      evaluator; mask-predict: ``paper`` by default, ``paper-order+order``, ``biolama``, or ``fill-mask``: the
      single-token fill-mask baseline of the paper's table 3, recorded as ``settings["preset"]``);
      ``settings``: fields that replace the preset's (e.g. ``{"pooling": "mean"}``) or the method's settings
      dataclass.
    * ``limit``: probe only the first ``limit`` queries of each relation (the candidates stay the whole set's).
    * ``candidates``: the pool each query is ranked against, as ``medlama probe --candidates``: ``evaluated``
      (the union of the probed relations' pools, the reference's rule), ``relation`` (each relation's own:
      its score does not depend on what else is probed) or ``config`` (the config's whole pool). A part of a
      loaded Dataset (``load_medlama(...).select(...)``) is ranked against its config's pools, never its rows'.
      The result records the rule, the pool's size and its SHA-256 (``result.data["candidates"]``).
    * ``checkpoints``: also probe every ``checkpoint-N`` folder of ``model`` (checked before anything runs);
      with it, or with ``settings={"layers": [...]}``, a list of results is returned, one per row of
      ``medlama probe``'s table.
    * ``log_all_scores``: keep every candidate's score (``result.ranking.pools``; ``result.save(folder)``
      writes them to ``scores.parquet``), as ``medlama probe --log-all-scores``; only methods that score the
      whole pool (retrieval, mask-average, masked-likelihood, causal-likelihood) can.
    * ``revision``: the revision of a Hub model to load (``result.settings["revision"]``: the commit loaded;
      refused for a local folder); ``peft``: a LoRA adapter applied to ``model``, its base (needs
      ``medlama[peft]``); ``trust_remote_code``: run a model repository's own code (off unless given). As
      ``medlama probe --revision / --peft / --trust-remote-code``.
    * ``prompts``: mask-predict only: decode with the learned prompts of this folder (``medlama.optiprompt``,
      ``medlama optiprompt``) or Hub repo id, trained for ``model``, as ``medlama probe --prompts``.
    * ``templates``: a template file (CSV ``relation,template`` or JSON lines) or ``"release"`` (the release's
      ``default_prompt`` and ``human_prompt``), as ``medlama probe --templates``: each template is probed as its
      own run (the results in a list: per template, then the ensemble when ``log_all_scores``; one alone as it
      is), each with the summary over templates (best-of, mean, ensemble, spread) in
      ``result.extra["templates"]``.
    * ``ks``: cut-offs to score (default 1, 5, 10; BioLAMA 1, 5; acc@1/5/10 are always scored too); ``match``: ``exact`` (MedLAMA) or
      ``normalized`` (BioLAMA's default). ``top_k``: predictions kept per query (``prediction_rows()``,
      ``save``'s ``predictions.jsonl``; recorded as ``settings["top_k"]``, the ranking's depth, at least the
      largest k scored, as ``settings["ranked_top_k"]``). ``device``: ``cpu``,
      ``cuda``, ``cuda:N`` or ``mps`` (default: CUDA when there is one).

    Every argument is checked (ProbeArguments) before any data is read or
    model loaded; a bad one is a MedlamaInputError naming it.
    """
    # Every argument checked before any data is read or model loaded (torch comes with the probers).
    ks = tuple(ks) if isinstance(ks, range) else ks
    device = ProbeArguments(ks=ks, top_k=top_k, match=match, limit=limit, device=device).device
    relations = relation_names(relations)

    name = method_name(method)
    if prompts is not None:
        if name != "mask-predict":
            raise MedlamaInputError(f"prompts (learned prompts) are decoded by mask-predict, not {name}")
        if settings is not None and not isinstance(settings, Mapping):
            settings = replace(settings, prompts=str(prompts))
        else:
            settings = {**(settings or {}), "prompts": str(prompts)}
    if settings is None or isinstance(settings, Mapping):
        settings = settings_for(name, settings, preset=preset)
    elif not isinstance(settings, METHODS[name].settings):
        raise MedlamaInputError(f"{name} takes {METHODS[name].settings.__name__} settings, not "
                                f"{type(settings).__name__}")
    benchmark(dataset).scoring_plan(ks, match)
    check_rule(candidates)
    source = QuerySource.of(data, dataset=dataset, config=config, relations=relations, candidates=candidates,
                            limit=limit, templates=templates)

    outcome = run_probe(source, ProbeModels(
        methods=[name], settings={name: settings}, models=[] if model is None else [model],
        labels=None if label is None else [label], tokenizer=tokenizer, device=device, checkpoints=checkpoints,
        load=LoadOptions(revision=revision, peft=peft, trust_remote_code=trust_remote_code)),
        ProbeScoring(ks=ks, match=match, top_k=top_k, all_scores=bool(log_all_scores)))
    return outcome.results[0] if len(outcome.results) == 1 else outcome.results


@_progress_as_the_cli
def rewire(corpus: Any, out: str | Path, model: str | Path | None = None, *, preset: str = QUICK_PRESET,
           resume: bool | str | Path = True, **settings: Any):
    """Rewire ``model`` (default: the bundled encoder) with Contrastive-Probe on ``corpus`` (a sentence file,
    a list of them, or a ``datasets.Dataset`` with a ``text`` column) into ``out``.

    ``preset``: ``demo`` (CPU-sized, default) or ``paper`` (the published run); ``settings``: fields of
    RewireConfig that replace the preset's (``steps=20``,
    ``eval_steps=10``, ...). Returns the RewireResult.
    """

    # As the CLI: the settings, the corpus files and the model checked before torch and the model load.
    config = RewireConfig.preset(preset, **({"model": str(model)} if model is not None else {}), **settings)
    if isinstance(corpus, (str, Path)) or (isinstance(corpus, (list, tuple))
                                           and all(isinstance(c, (str, Path)) for c in corpus)):
        check_corpus_files([corpus] if isinstance(corpus, (str, Path)) else corpus)
    if config.model is not None:
        resolve_model(config.model)
    # trainers.trainer loads (it imports sentence_transformers, torch) when this runs, not when medlama.api is imported
    from medlama.trainers.trainer import rewire as run_rewire
    return run_rewire(corpus, out, config, resume=resume, preset=preset)


@_progress_as_the_cli
def optiprompt(model: str | Path, data: str | Path, out: str | Path, *, config: str = "all",
               relations: Sequence[str] | str | None = None, device: str | None = None, overwrite: bool = False,
               decoding: Mapping[str, Any] | None = None, **settings: Any):
    """Learn OptiPrompt prompts for the masked LM ``model`` on the BioLAMA folder (or Hub dataset id) ``data``
    and write them to ``out``, as ``medlama optiprompt`` does: per relation of ``config`` (``relations``: a
    subset), trained on ``train``, chosen on ``dev``; a killed run continues at the next relation.
    ``settings``: fields of OptiPromptSettings (``init="random"``, ``epochs=3``, ``lr``, ``batch_size``,
    ``seed``, ``prompt_tokens``); ``decoding``: fields of the dev decoding (mask predict's settings, BioLAMA's
    by default). Returns the OptiPromptResult (``path``, ``record``, ``identity``); probe with
    ``medlama.probe(model, data, dataset="biolama", method="mask-predict", prompts=out)``."""
    # the trainer's modules load (torch, transformers) when this runs, not when medlama.api is imported
    from medlama.trainers.optiprompt.trainer import OptiPromptSettings
    # (as above)
    from medlama.trainers.optiprompt.run import DECODING, OptiPromptRun, train_prompts

    relations = relation_names(relations)
    run = OptiPromptRun(model=str(model), data=str(data), out=Path(out), config=config,
                        relations=tuple(relations) if relations else None, device=device, overwrite=overwrite)
    return train_prompts(run, settings_from(OptiPromptSettings, settings, what="optiprompt"),
                         settings_from(type(DECODING), decoding, base=DECODING, what="decoding"), report=False)


@_progress_as_the_cli
def ucm(sets: str | Path, model: str | Path | Sequence[str | Path] | None = None, *, method: str = "auto",
        out: str | Path | None = None, label: str | Sequence[str] | None = None, device: str | None = None,
        **settings: Any):
    """UCM of ``model`` on the context-variance ``sets`` (a folder of ``medlama build context-variance``), as
    ``medlama ucm`` computes it: a ModelResult (a list for several models), with
    U/C/M shares, their bootstrap ``intervals``, rank changes and acc@k with and without context.

    ``method``: ``auto`` (causal-likelihood for a decoder-only causal LM, else mask-predict with an MLM head:
    the UCM paper's confidence decoding, as BioLAMA decodes; else retrieval), ``mask-predict``,
    ``mask-average`` (every pool name by its mean token log-probability: not the paper's), ``retrieval`` or
    ``causal-likelihood``; the results' ``settings["method"]`` records which;
    ``settings``: what ``medlama ucm``'s flags set, by the same names, with the same checks and defaults: what to
    score (UcmSettings: ``ks``, ``relations``, ...) and the rankers' settings (``max_masks``, ``beam_size``,
    ``init``, ... of mask-predict, default the paper's decoding; ``max_tokens`` of mask-average; ``layer``,
    ``pooling``, ``distance`` ... of retrieval; ``reduction``, ``dtype`` ... of causal-likelihood;
    ``batch_size`` for every ranker: the names of ``medlama.ucm_eval.rankers.FLAT_NAMES``);
    ``out``: also write ``results.json`` and ``ucm.png`` there, atomically, as ``medlama ucm --out`` does
    (default: nothing is kept).
    """
    several = isinstance(model, (list, tuple))
    labels = tuple(label) if isinstance(label, (list, tuple)) else () if label is None else (label,)
    scored, rankers = ucm_settings_by_name(settings)
    request = UcmRun(sets=Path(sets), models=UcmModels(model=tuple(model) if several else (model,), label=labels,
                                                       method=(method,)),
                     settings=scored, rankers=rankers, device=device, out=None if out is None else Path(out),
                     show=False)
    results, _ = run_ucm(request)
    return results if several else results[0]


def compare(*runs: str | Path, **settings: Any) -> dict:
    """``medlama compare RUN ...``'s record of the runs in the output folders ``runs`` (``medlama probe`` or
    ``medlama recipe``; the first run is the baseline): the leaderboard with bootstrap intervals, each run's
    paired difference from the baseline with McNemar's exact p-value, per relation with Holm-corrected
    p-values, how each number was computed and each input's identity
    (compare_folders). Runs of other queries, other data or another candidate
    pool are refused, and so are hits edited by hand. ``settings``: fields of CompareSettings (``resamples``,
    ``seed``, ``level``)."""
    return compare_folders(runs, settings_from(CompareSettings, settings))


def consistency(run: str | Path, *, out: str | Path | None = None, overwrite: bool = False,
                **intervals: Any) -> dict:
    """``medlama consistency RUN --json``'s record: per run of the probe output folder ``run`` and per k, the
    facts of each inverse relation pair probed both ways (paired by CUI), the share right in both directions, in
    one, in neither, and the conditional accuracies, with bootstrap intervals (medlama.analysis.consistency).
    Written, as the command writes it, to ``RUN/consistency.json`` or ``out`` (an existing file is replaced
    only with ``overwrite``). ``intervals``: fields of CompareSettings (``resamples``, ``seed``, ``level``)."""
    output = settings_from(ConsistencyOutput, {"overwrite": overwrite, "out": None if out is None else Path(out)})
    record, _ = write_consistency(run, settings_from(CompareSettings, intervals), output)
    return record


def frequency(run: str | Path, index: str | Path, *, out: str | Path | None = None, plot: str | Path | None = None,
              overwrite: bool = False, **settings: Any) -> dict:
    """``medlama frequency RUN --index INDEX``'s record: every query of the probe output folder ``run`` as a fact,
    its subject-object co-occurrences counted per sentence and per segment in the context-variance index
    ``index``, the counts binned and each run's acc@k per bin with its bootstrap interval, with the matching rule
    and the index's fingerprint (frequency_folder). ``out``: also write the record as JSON
    (atomically); ``plot``: a PNG of it; an existing file is replaced only with ``overwrite``. ``settings``:
    fields of FrequencySettings (``bins``, ``aliases``, ``resamples``, ``seed``, ``level``). A bad run
    folder, index or setting is refused before any counting, as the command refuses it."""
    output = FrequencyOutput(out=None if out is None else Path(out), plot=None if plot is None else Path(plot),
                             overwrite=overwrite)
    output.check_files()
    record = frequency_folder(run, index, settings_from(FrequencySettings, settings, what="frequency"))
    output.write(record)
    return record


def report(*runs: str | Path, out: str | Path, **settings: Any) -> Path:
    """``medlama report RUN ... --out PAGE.html``: one self-contained HTML page of the runs in the output
    folders ``runs`` (``medlama probe`` or ``medlama recipe``; one or more; the first is the baseline): the
    leaderboard with compare's intervals, acc@k per relation, and a browser of every query's predictions
    (medlama.reports.write_report). ``settings``: fields of ReportSettings (``overwrite``, ``top``, ``title``)
    and of CompareSettings (``resamples``, ``seed``, ``level``). Returns the page's path."""
    names = {field for field in CompareSettings.__dataclass_fields__}
    intervals = settings_from(CompareSettings, {k: v for k, v in settings.items() if k in names})
    page = settings_from(ReportSettings, {k: v for k, v in settings.items() if k not in names}, out=Path(out))
    return write_report(runs, page, intervals)


def annotate_export(*runs: str | Path, out: str | Path, **settings: Any) -> dict:
    """``medlama annotate export RUN ... --out OUT``: a blind rating sheet of the runs' top-k predictions for
    experts (``annotate.html``, ``sheet.csv``, Label Studio tasks and config, ``manifest.json``); returns the
    manifest. ``settings``: fields of ExportSettings (``queries``, ``seed``, ``k``, ``relations``, ``overwrite``)."""
    return export_sheet(runs, out, settings_from(ExportSettings, settings))


def annotate_score(*runs: str | Path, sheet: str | Path, ratings: Sequence[str | Path], threshold: int = 5,
                   **intervals: Any) -> dict:
    """``medlama annotate score RUN ... --sheet SHEET RATINGS... --json``'s record: per run and rater Figure 8's
    confusion matrix, acc@k under UMLS and expert answers (rated >= ``threshold``) with paired intervals and
    McNemar's test, and the raters' agreement. ``intervals``: fields of CompareSettings (``resamples``, ``seed``,
    ``level``)."""
    return score_sheet(runs, sheet, ratings, ScoreSettings(threshold=threshold),
                       settings_from(CompareSettings, intervals))


def annotate_estimate(*runs: str | Path, sheet: str | Path, ratings: Sequence[str | Path], threshold: int = 5,
                      level: float = 0.95) -> dict:
    """``medlama annotate estimate RUN ... --sheet SHEET RATINGS... --json``'s record: per run and rater, the whole
    run's expert-judged acc@k (rated >= ``threshold``) estimated from the rated sample by prediction-powered
    inference, with its CLT interval at ``level`` (medlama.annotation.estimate)."""
    return estimate_sheet(runs, sheet, ratings, ScoreSettings(threshold=threshold), EstimateSettings(level=level))


def mteb_task(data: Any = None, config: str = "hard", relations: Sequence[str] | str | None = None, *,
              limit: int | None = None, mask_token: str | None = None):
    """MedLAMA as an MTEB retrieval task, one subset per relation, main score ``hit_rate_at_10`` (acc@10):
    what ``medlama probe --preset sentence-transformers --candidates relation`` scores, for MTEB to run
    (``mteb.evaluate(model, task)``); see medlama.integrations.mteb.task. Needs the ``mteb`` extra.

    ``data``: as probe's; ``config``: ``hard`` or ``full``; ``relations``: the subsets (default all);
    ``limit``: the first ``limit`` queries of each relation; ``mask_token``: the object slot's filler
    (default: the model's mask token, else the neutral blank ``___``).
    """
    # integrations.mteb.task loads (it imports datasets, huggingface_hub) when this runs, not when medlama.api is imported
    from medlama.integrations.mteb.task import mteb_task as make_task

    return make_task(data, config, relations, limit=limit, mask_token=mask_token)
