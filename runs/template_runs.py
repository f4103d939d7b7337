"""Probing every template of a :class:`~medlama.runs.templates.TemplateSet`, and what results say across them.

* :func:`check_template_probe`: what a template probe cannot be combined with, refused before anything loads
  (BioLAMA, a layer or checkpoint sweep, a hand-made ``QuerySet``).
* :func:`template_rows`: the rows the probed queries come from (their head names and query columns);
  :func:`template_parts`: each template's query set made from them.
* :func:`probe_templates`: each template's query set probed as its own run (label ``<run> <template>``: the
  same call a probe of that template alone makes, so its numbers are that probe's), model run by model run,
  each model loaded once for all its templates (its prober handed from template to template:
  :class:`~medlama.runs.resume.Held`); into ``--out``, every template's shards are kept in the one store of
  the run (:func:`template_shards`: its units, and the templates a resumed run must repeat), so a killed run
  continues with the templates left; then per model run: the ensemble (when every candidate's score was
  kept: per query, each candidate's scores summed over the templates, ranked, ties by pool order, and scored
  as any run: label ``<run> ensemble``) and the summary over templates (:func:`template_summary`) in each of
  the model's results' ``extra["templates"]``.

The summary, per cut-off k (acc in [0, 1]; micro: over queries, macro: mean over relations):
``per_template`` (each template's acc@k), ``best_of`` (per relation the best template's acc@k, the template
named; chosen on the probed queries themselves, so optimistic: recorded as ``caveat``), ``mean`` (per relation
the mean over its templates), ``ensemble`` and ``spread`` (per relation min, max and sample std over the
templates).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from medlama.core import distributed
from medlama.core.display import print_table
from medlama.core.errors import MedlamaInputError
from medlama.datasets.choices import is_mc, mc_config
from medlama.datasets.folders import load_config
from medlama.datasets.prompts import DEFAULT_PROMPT_COLUMN
from medlama.probers.query_set import QuerySet
from medlama.probers.ranking import Ranking
from medlama.runs.benchmarks import resolve_data
from medlama.runs.queries import QuerySource, medlama_config
from medlama.runs.result import ProbeResult
from medlama.runs.resume import Held
from medlama.runs.scores import score
from medlama.runs.tables import percent, sample_mean_std
from medlama.loaders.medlama_release import RELATIONS
from medlama.runs.arguments import relation_names
from medlama.runs.templates import TemplateSet, query_rows, resolve_templates, template_queries

#: The name of the run whose candidates' scores are summed over the templates.
ENSEMBLE = "ensemble"
#: Recorded beside ``best_of``.
BEST_OF_CAVEAT = ("each relation's best template is chosen on the probed queries themselves (the test set), so "
                  "best_of is an optimistic upper bound, not a held-out score")
#: What each aggregate is, recorded beside the numbers.
METHOD = {
    "best_of": "per relation, the largest acc@k over its templates (chosen per k; ties: the first template); "
               "micro: weighted by the relation's queries; macro: mean over relations",
    "mean": "per relation, the mean acc@k over its templates; micro: weighted by the relation's queries; macro: "
            "mean over relations",
    "ensemble": "per query, every candidate's scores summed over the templates, ranked by the sum (ties: pool "
                "order), scored as any run",
    "spread": "per relation, min, max and sample standard deviation of acc@k over its templates",
}


def check_template_probe(*, dataset: str, data: Any, runs: Sequence[Any], checkpoints: bool,
                         source: QuerySource | None = None) -> None:
    """Refuse what a template probe cannot be combined with, before any data is read or model loaded."""
    if source is not None and source.prompt_column != DEFAULT_PROMPT_COLUMN:
        raise MedlamaInputError("--prompt-column picks the one prompt of a plain probe; with --templates each "
                                "template makes the queries (the release's two: --templates release)")
    if dataset != "medlama":
        raise MedlamaInputError(f"templates are MedLAMA's ([X]: the head name); {dataset} queries keep their own")
    if checkpoints or any(getattr(run.settings, "layers", None) for run in runs):
        raise MedlamaInputError("templates are a run dimension of their own: probe them without a layer or "
                                "checkpoint sweep")
    if distributed.world_size() > 1:
        raise MedlamaInputError("templates are probed in one process: run the probe without torchrun / accelerate "
                                "launch")
    if isinstance(data, QuerySet):
        raise MedlamaInputError("templates fill [X] with each query's head name, which a QuerySet does not hold: "
                                "give the data as a folder, a Hub id or a Dataset")


def checked_templates(source: QuerySource, runs: Sequence[Any], checkpoints: bool, dataset: str) -> TemplateSet:
    """The :class:`TemplateSet` of ``source.templates``, checked before any data is read or model loaded: what
    it cannot be combined with (:func:`check_template_probe`), the file's every row, and, where the relations
    are given, that each has templates, as many as the others."""
    check_template_probe(dataset=dataset, data=source.loaded, runs=runs, checkpoints=checkpoints, source=source)
    templates = resolve_templates(source.templates)
    if source.relations:  # a relation MedLAMA does not have is the data's to refuse, by its own message
        templates.names([relation for relation in relation_names(source.relations) if relation in RELATIONS])
    return templates


def template_rows(source: QuerySource, queries: QuerySet) -> dict[str, dict[str, str]]:
    """The head names and query columns of ``queries`` and of the set they were cut from (``whole``), from the
    rows they were read from: the config of ``source`` (a folder, a Hub id, the cached build, or a loaded
    Dataset)."""
    queries = queries.whole or queries
    if hasattr(source.loaded, "column_names"):  # a loaded Dataset or DatasetDict: its own rows
        rows = source.loaded
        if not hasattr(rows, "features"):  # a DatasetDict: the split queries_from_dataset probes
            rows = rows["test"] if "test" in rows else next(iter(rows.values()))
        return query_rows(rows, queries)
    config = source.config or "hard"
    set_name, _ = medlama_config(config)
    folder = resolve_data(source)
    return query_rows(load_config(folder.path, mc_config(set_name) if is_mc(config) else set_name, "test"), queries)


def template_parts(templates: TemplateSet, source: QuerySource, queries: QuerySet) -> list[tuple[str, QuerySet]]:
    """``(template name, its query set)`` of every template of ``templates`` (checked), made from the rows
    ``queries`` were read from (``source``): :func:`~medlama.runs.templates.template_queries`."""
    return template_queries(queries, template_rows(source, queries), templates)


def template_labelled(runs: Sequence[Any], parts: Sequence[tuple[str, QuerySet]]) -> list[Any]:
    """Every model run of every template (``parts``: :func:`template_parts`), labelled ``<run> <template>``, in
    the order :func:`probe_templates` ranks them: the units of the run's shard store."""
    return [replace(run, label=f"{run.label} {name}") for run in runs for name, _ in parts]


def template_shards(runs: Sequence[Any], parts: Sequence[tuple[str, QuerySet]],
                    queries: QuerySet) -> tuple[list[Any], QuerySet]:
    """What the one shard store of a templates run into ``--out`` is made of: every model run of every template
    (:func:`template_labelled`), and ``queries`` with every template's record (set, SHA-256, texts) in its
    ``info["templates"]``, so the manifest a resumed run must repeat holds them (another template file, or
    the same file edited, is refused, naming the template)."""
    info = {**queries.info, "templates": {name: part.info["template"] for name, part in parts}}
    return template_labelled(runs, parts), replace(queries, info=info)


def probe_templates(parts: Sequence[tuple[str, QuerySet]], runs: Sequence[Any], probers: dict[str, Any] | None,
                    probe: Callable[..., Any]) -> list[ProbeResult]:
    """Every template's run of every model run (``parts``: :func:`template_parts`; module docstring), in table
    order: per model run, its templates, then its ensemble. ``probe(queries, runs, probers=...)`` probes one
    template's queries (the workflow's :func:`~medlama.runs.workflow.probe_models`, returning its outcome);
    ``probers``: probers made already (a loaded model's, the preflight's), by run label, taken from it. A model
    run's prober goes from template to template (:class:`~medlama.runs.resume.Held`): its model loads once."""
    by_run: dict[str, list[ProbeResult]] = {run.label: [] for run in runs}
    for run in runs:
        held = Held(probers.pop(run.label, None) if probers else None)
        for (_, part), named in zip(parts, template_labelled([run], parts)):
            by_run[run.label].extend(probe(part, [named], probers={named.label: held}).results)
        held.prober = None  # let go of before the next model loads
    results = []
    for label, template_results in by_run.items():
        ensemble = ensemble_result(template_results, label) if all(
            r.ranking is not None and r.ranking.pools is not None for r in template_results) else None
        summary = template_summary(template_results, ensemble)
        for result in (*template_results, *([ensemble] if ensemble else [])):
            result.extra["templates"] = summary
            results.append(result)
    return results


def _summed(pools: Sequence[Any]) -> tuple[list[str], np.ndarray]:
    """One query's candidates and their scores summed over the templates' pools (the same candidates)."""
    candidates = list(pools[0].candidates)
    for pool in pools[1:]:
        if list(pool.candidates) != candidates:
            raise ValueError("the templates ranked a query against different candidate pools")
    total = np.sum([np.asarray(pool.scores, dtype=np.float64) for pool in pools], axis=0)
    return candidates, np.where(np.isnan(total), -np.inf, total)


def ensemble_result(results: Sequence[ProbeResult], label: str) -> ProbeResult:
    """The ensemble of one model run's template ``results`` (module docstring), as a run labelled
    ``<label> ensemble`` keeping every candidate's summed score."""
    first = results[0]
    top_k = max((len(names) for r in results for names in r.predictions), default=0)
    rows = []
    for q, gold in enumerate(first.gold):
        candidates, total = _summed([r.ranking.pools[q] for r in results])
        finite = np.flatnonzero(np.isfinite(total))
        order = finite[np.argsort(-total[finite], kind="stable")][:top_k]
        rows.extend(Ranking.from_pool([gold], candidates, [total], [order], all_scores=True).rows())
    ranking = Ranking.from_rows(rows)
    queries = QuerySet(first.ids, first.relations, ["[Y]"] * len(first.ids), first.gold, [])
    metrics = score(queries, ranking.names, ks=first.ks, match=first.metrics["match"])
    template = {key: value for key, value in first.data["template"].items() if key in ("set", "sha256")}
    template.update(name=ENSEMBLE, of=[r.data["template"]["name"] for r in results])
    return replace(first, label=f"{label} {ENSEMBLE}", predictions=ranking.names, metrics=metrics,
                   seconds=sum(r.seconds for r in results), extra=dict(first.extra),
                   data={**first.data, "template": template}, ranking=ranking, settings=dict(first.settings))


def _accs(result: ProbeResult, k: int) -> dict[str, tuple[int, float]]:
    """``{relation: (queries, acc@k)}`` of ``result``."""
    return {relation: (entry["num_queries"], entry[f"acc@{k}"]) for relation, entry in result.metrics["groups"].items()}


def _averages(values: Mapping[str, tuple[int, float]]) -> dict[str, float]:
    """Micro (weighted by queries) and macro (mean over relations) of per-relation ``(queries, acc)``."""
    total = sum(n for n, _ in values.values())
    return {"micro": sum(n * acc for n, acc in values.values()) / total,
            "macro": float(np.mean([acc for _, acc in values.values()]))}


def template_summary(results: Sequence[ProbeResult], ensemble: ProbeResult | None) -> dict:
    """The summary over one model run's template ``results`` (module docstring)."""
    names = [r.data["template"]["name"] for r in results]
    first = results[0]
    ks = first.ks
    summary: dict[str, Any] = {
        "set": first.data["template"]["set"], "sha256": first.data["template"]["sha256"],
        "templates": [{"name": name, "run": r.label} for name, r in zip(names, results)], "ks": ks,
        "per_template": {name: {**{f"acc@{k}": r.acc(k) for k in ks}, **{f"acc@{k}_macro": r.acc(k, "macro")
                                                                            for k in ks}}
                         for name, r in zip(names, results)},
        "best_of": {"caveat": BEST_OF_CAVEAT, "per_relation": {}}, "mean": {}, "spread": {}, "method": METHOD}
    relations = sorted(first.metrics["groups"])
    for k in ks:
        per = [_accs(r, k) for r in results]
        best = {rel: max(range(len(results)), key=lambda t: (per[t][rel][1], -t)) for rel in relations}
        best_of = _averages({rel: per[best[rel]][rel] for rel in relations})
        mean = _averages({rel: (per[0][rel][0], float(np.mean([p[rel][1] for p in per]))) for rel in relations})
        summary["best_of"].update({f"acc@{k}": best_of["micro"], f"acc@{k}_macro": best_of["macro"]})
        summary["mean"].update({f"acc@{k}": mean["micro"], f"acc@{k}_macro": mean["macro"]})
        for rel in relations:
            summary["best_of"]["per_relation"].setdefault(rel, {})[f"acc@{k}"] = {
                "value": per[best[rel]][rel][1], "template": names[best[rel]]}
            values = [p[rel][1] for p in per]
            summary["spread"].setdefault(rel, {})[f"acc@{k}"] = {
                "min": min(values), "max": max(values), "std": sample_mean_std(values)[1]}
    summary["ensemble"] = ({"run": ensemble.label, **{f"acc@{k}": ensemble.acc(k) for k in ks},
                            **{f"acc@{k}_macro": ensemble.acc(k, "macro") for k in ks}} if ensemble is not None else
                           {"run": None, "note": "needs every candidate's score of every template: probe with "
                                                 "--log-all-scores (log_all_scores=True) and a method that scores "
                                                 "the whole pool"})
    return summary


def print_template_tables(results: Sequence[ProbeResult], ks: Sequence[int]) -> None:
    """Per model run with templates: each template's acc@k, best-of, mean and ensemble; and the spread across
    templates per relation at the last k."""
    shown = set()
    for result in results:
        summary = result.extra.get("templates")
        if not summary or id(summary) in shown:
            continue
        shown.add(id(summary))
        ks = [k for k in ks if k in summary["ks"]]
        rows = [[entry["name"]] + [percent(summary["per_template"][entry["name"]][f"acc@{k}{m}"])
                                   for m in ("", "_macro") for k in ks] for entry in summary["templates"]]
        for name, key in (("best-of (chosen on test)", "best_of"), ("mean over templates", "mean"),
                          (ENSEMBLE, "ensemble")):
            rows.append([name] + [percent(summary[key].get(f"acc@{k}{m}")) for m in ("", "_macro") for k in ks])
        run = summary["templates"][0]["run"].rsplit(" ", 1)[0]
        print_table(f"{run}: acc@k per template (%), {summary['set']}",
                    ["template"] + [f"acc@{k}" for k in ks] + [f"macro acc@{k}" for k in ks], rows,
                    caption="best-of: each relation's best template, chosen on the test queries (optimistic); "
                            "ensemble: candidates' scores summed over templates"
                            + ("" if summary["ensemble"]["run"] else " (not computed: needs --log-all-scores)"))
        k = ks[-1]
        spread = [[rel, percent(entry[f"acc@{k}"]["min"]), percent(entry[f"acc@{k}"]["max"]),
                   percent(entry[f"acc@{k}"]["std"]), summary["best_of"]["per_relation"][rel][f"acc@{k}"]["template"]]
                  for rel, entry in summary["spread"].items()]
        print_table(f"{run}: spread of acc@{k} across templates per relation (%)",
                    ["relation", "min", "max", "std", "best"], spread, caption="std: sample standard deviation")


__all__ = ["BEST_OF_CAVEAT", "ENSEMBLE", "check_template_probe", "checked_templates", "ensemble_result",
           "print_template_tables", "probe_templates", "template_labelled", "template_parts", "template_shards",
           "template_rows", "template_summary"]
