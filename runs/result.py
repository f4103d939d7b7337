"""The result a paper can cite (:class:`ProbeResult`: scores, confidence intervals, per-relation table,
provenance; saved as ``results.json`` + ``predictions.jsonl`` by :mod:`medlama.runs.outputs`), and
:func:`result_of`, which scores a prober's ranking into one."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from medlama.core.defaults import default_model_path
from medlama.core.errors import MedlamaInputError
from medlama.core.intervals import bootstrap_group_cis, bootstrap_mean_ci, DEFAULT_LEVEL, DEFAULT_RESAMPLES, DEFAULT_SEED
from medlama.core.provenance import provenance
from medlama.core.public_paths import with_public_model
from medlama.core.settings import did_you_mean
from medlama.runs.cardinality import acc_by_cardinality
from medlama.runs.outputs import KEEP_PREDICTIONS, SCORES_FILE, write_outputs
from medlama.probers.causal.fewshot import drawn_record
from medlama.probers.prober import ProberNote
from medlama.probers.query_set import QuerySet
from medlama.probers.ranking import PoolScores, Ranking, finite_or_none
from medlama.runs.scores import REPORT_KS, acc_at_k_module, score
from medlama.runs.calibration import calibration

#: How :meth:`ProbeResult.acc` averages: over queries, or the mean over relations.
AVERAGES = ("micro", "macro")


@dataclass
class ProbeResult:
    """Predictions for a query set and their scores.

    ``metrics`` is the acc@k module's result (micro and macro acc@k, per relation under ``groups``);
    ``data`` identifies the queries (:attr:`QuerySet.info <medlama.runs.queries.QuerySet.info>`),
    ``model`` names the model probed (folder, Hub id, or a loaded model's name) and ``device`` where it ran:
    with ``settings`` they make the provenance block of :meth:`save`. ``ranking``: the prober's scored
    ranking (:class:`~medlama.probers.ranking.Ranking`: each query's input text, the top scores, the gold
    answer's rank and score; with ``all_scores``, every candidate's score), written to ``predictions.jsonl``
    and ``scores.parquet``; not part of :meth:`to_json`.
    """

    label: str
    query_set: str
    settings: dict
    ids: list[str]
    relations: list[str]
    gold: list[list[str]]
    predictions: list[list[str]]
    metrics: dict
    seconds: float
    extra: dict = field(default_factory=dict)
    data: dict = field(default_factory=dict)
    model: str | None = None
    device: str | None = None
    ranking: Ranking | None = field(default=None, repr=False, compare=False)
    #: More per-query columns of ``predictions.jsonl`` (``{field: one value per query}``): the fact a query
    #: names (:attr:`QuerySet.facts <medlama.probers.query_set.QuerySet.facts>`), the ids of its few-shot
    #: examples; not part of :meth:`to_json`.
    query_fields: dict = field(default_factory=dict, repr=False, compare=False)

    def acc(self, k: int, average: str = "micro") -> float:
        """acc@k in [0, 1]; ``average`` is ``micro`` (over queries) or ``macro`` (mean over relations). ``k``
        must be one of the cut-offs scored (:attr:`ks`)."""
        if average not in AVERAGES:
            raise MedlamaInputError(f"unknown average {did_you_mean(str(average), AVERAGES)}; choose 'micro' (over "
                                    "queries) or 'macro' (mean over relations)")
        if isinstance(k, bool) or not isinstance(k, int) or k not in self.ks:
            raise MedlamaInputError(f"acc@{k} was not scored; the scored cut-offs are {self.ks} (probe with "
                                    f"ks=[..., {k}] to score it)")
        return self.metrics[f"acc@{k}" if average == "micro" else f"acc@{k}_macro"]

    @property
    def ks(self) -> list[int]:
        """The cut-offs scored."""
        return list(self.metrics["k"])

    def hits(self, k: int) -> list[bool]:
        """Whether each query has a gold answer in its top ``k`` (query order), by the acc@k module with the
        run's matching mode: each query scored as its own group, so a hit means what acc@k counts."""
        cache = self.__dict__.setdefault("_hits", {})
        if k not in cache:
            groups = [str(i) for i in range(len(self.ids))]
            scored = acc_at_k_module().compute(predictions=self.predictions, references=self.gold, groups=groups,
                                                k=sorted({*self.ks, k}), match=self.metrics.get("match", "exact"))
            for cutoff in scored["k"]:
                cache[cutoff] = [scored["groups"][g][f"acc@{cutoff}"] == 1.0 for g in groups]
        return cache[k]

    def acc_ci(self, k: int, *, resamples: int = 1000, seed: int = 0, level: float = 0.95
               ) -> tuple[float, float] | None:
        """Percentile-bootstrap confidence interval of the micro acc@k: queries resampled with replacement
        (seeded, so the interval is reproducible); ``None`` with fewer than two queries. See
        :mod:`medlama.core.intervals`. Macro averages get no interval."""
        return bootstrap_mean_ci([float(h) for h in self.hits(k)], resamples=resamples, seed=seed, level=level)

    @property
    def intervals(self) -> dict:
        """``{"acc@k": [low, high] or None, ...}`` for every scored k (95%, 1,000 resamples, seed 0), with the
        method spelt out under ``"method"``."""
        cached = self.__dict__.get("_intervals")
        if cached is None:
            cached = {f"acc@{k}": (list(ci) if (ci := self.acc_ci(k)) else None) for k in self.ks}
            cached["method"] = {"kind": "percentile bootstrap over queries (micro acc@k)", "level": DEFAULT_LEVEL,
                                "resamples": DEFAULT_RESAMPLES, "seed": DEFAULT_SEED}
            self.__dict__["_intervals"] = cached
        return cached

    def relation_intervals(self, k: int) -> dict[str, tuple[float, float] | None]:
        """``{relation: (low, high) or None}``: each relation's acc@k interval, by the percentile bootstrap
        over that relation's queries (95%, 1,000 resamples, seed 0, as :attr:`intervals`)."""
        return bootstrap_group_cis([float(h) for h in self.hits(k)], self.relations)

    def per_relation(self) -> dict[str, dict]:
        """``{relation: {"queries": n, "acc@1": ..., "acc@5": ..., ...}}`` (acc in [0, 1]), relations sorted."""
        groups = self.metrics.get("groups") or {}
        return {relation: {"queries": entry["num_queries"], **{f"acc@{k}": entry[f"acc@{k}"] for k in self.ks}}
                for relation, entry in sorted(groups.items())}

    def to_pandas(self, per: str = "query"):
        """A ``pandas.DataFrame``. ``per="query"`` (default): one row per query with ``id``, ``relation``,
        ``gold`` (list), ``predictions`` (top ``top_k``), ``hit@k`` (bool) per scored k, ``subject`` (the subject's
        name, where the data names it), and the sample log's ``input``, ``scores``, ``gold_rank``, ``gold_score``
        and ``confidence`` (:meth:`prediction_rows`). ``per="relation"``: one
        row per relation (the index) with ``queries`` and ``acc@k`` per scored k."""
        import pandas as pd  # pandas only for to_pandas

        if per == "relation":
            return pd.DataFrame.from_dict(self.per_relation(), orient="index").rename_axis("relation")
        if per != "query":
            raise MedlamaInputError(f"to_pandas(per={per!r}): choose 'query' or 'relation'")
        return pd.DataFrame(list(self.prediction_rows()))

    def prediction_rows(self) -> Iterator[dict]:
        """One dict per query: ``id``, ``relation``, ``gold``, ``predictions`` (the top :attr:`kept`: the
        ``top_k`` asked for), ``hit@k`` per k (of the whole ranking, which may be deeper), and
        from the :attr:`ranking`: ``input`` (the text as fed to the model), ``scores`` (aligned with
        ``predictions``; ``null`` where the method gives none), ``gold_rank`` (1-based; ``null``: not in the
        pool, or not among a generation method's answers) and ``gold_score``. Without a ranking (a result
        built by hand) those four are ``null``. ``subject``: the subject's name, where the data names it; where the
        queries name their facts (MedLAMA), ``head_cui``,
        ``head_name`` and ``answer_cuis`` (aligned with ``gold``) too. ``confidence``: the top-1 confidence
        (:mod:`medlama.runs.calibration`), only where the method scores the whole pool."""
        hits = {k: self.hits(k) for k in self.ks}
        rows = self.ranking.rows() if self.ranking is not None else [None] * len(self.ids)
        for i, (qid, relation, gold, ranked) in enumerate(zip(self.ids, self.relations, self.gold, self.predictions)):
            names, scores, text, gold_rank, gold_score, _, confidence = rows[i] or (None,) * 7
            kept = list(ranked[:self.kept])
            yield {"id": qid, "relation": relation, "gold": list(gold), "predictions": kept,
                   **{f"hit@{k}": hits[k][i] for k in self.ks},
                   "input": text,
                   "scores": [finite_or_none(s) for s in scores[:len(kept)]] if scores is not None else None,
                   "gold_rank": gold_rank, "gold_score": finite_or_none(gold_score),
                   **{name: values[i] for name, values in self.query_fields.items()},
                   **({"confidence": confidence} if confidence is not None else {})}

    @property
    def kept(self) -> int:
        """Predictions kept per query in :meth:`prediction_rows` (``predictions.jsonl``): the ``top_k`` the
        probe was asked for, recorded in :attr:`settings` (:data:`KEEP_PREDICTIONS` for a result without it)."""
        return int(self.settings.get("top_k", KEEP_PREDICTIONS))

    def pool_scores(self) -> Iterator[tuple[str, str, PoolScores]]:
        """``(query id, relation, every candidate's score and rank)`` per query, when the run kept them."""
        if self.ranking is None or self.ranking.pools is None:
            return iter(())
        return iter(zip(self.ids, self.relations, self.ranking.pools))

    def to_json(self, *, queries: bool = True) -> dict:
        """Everything as plain JSON: scores, ``intervals``, and (``queries``) each query's top 10. A model
        given as a local path is named by its folder's name in ``settings["model"]`` (a path means nothing on
        another machine; :meth:`provenance` identifies the model by its content hash)."""
        data = asdict(replace(self, ranking=None))
        data.pop("model")
        data.pop("ranking")
        data.pop("query_fields")  # per query, as the predictions are: in predictions.jsonl
        data["settings"] = with_public_model(data["settings"])
        data["intervals"] = self.intervals
        ids, relations, gold, predictions = (data.pop(key) for key in ("ids", "relations", "gold", "predictions"))
        if queries:
            data["queries"] = [{"id": i, "relation": r, "gold": g, "top10": p[:KEEP_PREDICTIONS]}
                               for i, r, g, p in zip(ids, relations, gold, predictions)]
        return data

    def provenance(self, *, argv: Sequence[str] | None = None) -> dict:
        """The :func:`medlama.core.provenance.provenance` block: versions, data, model identity (never a local
        path), the full settings, command line, date and device."""
        model = self.model or self.settings.get("model")
        return provenance(settings=with_public_model(self.settings), data=self.data or {"query_set": self.query_set},
                          model=None if is_bundled(model) else model, device=self.device, argv=argv,
                          revision=self.settings.get("revision"))

    def results_json(self, *, argv: Sequence[str] | None = None) -> dict:
        """What ``results.json`` holds for this run: :meth:`to_json` without the per-query predictions, with
        ``per_relation``, ``by_cardinality`` (acc@k per number of gold answers:
        :func:`~medlama.runs.cardinality.acc_by_cardinality`), ``calibration``
        (:func:`medlama.runs.calibration.calibration`) and ``provenance``."""
        return {**self.to_json(queries=False), "per_relation": self.per_relation(),
                "by_cardinality": acc_by_cardinality(self.predictions, self.gold, ks=self.ks,
                                                     match=self.metrics.get("match", "exact")),
                "calibration": calibration(self), "provenance": self.provenance(argv=argv)}

    def save(self, folder: str | Path, *, argv: Sequence[str] | None = None, overwrite: bool = False) -> Path:
        """Write this result into ``folder`` as ``medlama probe --out`` writes its runs, by the same writer
        (:func:`medlama.runs.outputs.write_outputs`): ``results.json`` (a list of runs, this one),
        ``predictions.jsonl`` and the plots, atomically, recording ``probe`` as the folder's owner. A folder
        some other command or person wrote is refused, and so is a finished run's unless ``overwrite``.
        Returns ``folder``."""
        write_outputs(folder, [self], overwrite=overwrite, argv=argv)
        return Path(folder)


def step_record(result: ProbeResult) -> dict:
    """What a figure needs of one probe of a model (a checkpoint, a layer): its micro and macro acc@k, its
    number of queries, the 95% bootstrap interval of each micro acc@k (:attr:`~medlama.runs.result.ProbeResult.
    intervals`) and acc@k per relation (:meth:`~medlama.runs.result.ProbeResult.per_relation`)."""
    return {**{key: value for key, value in result.metrics.items() if key.startswith("acc@")},
            "queries": len(result.ids), "intervals": result.intervals, "per_relation": result.per_relation()}


def is_bundled(model: str | None) -> bool:
    """Whether ``model`` is the bundled encoder's folder (provenance then names it by its Hub id)."""
    try:
        return model is not None and Path(model).resolve() == Path(default_model_path()).resolve()
    except (OSError, ValueError):
        return False


def result_of(prober: ProberNote, queries: QuerySet, predictions: list[list[str]] | Ranking, seconds: float, *,
              label: str, ks=REPORT_KS, match: str = "exact", **more_settings) -> ProbeResult:
    """The scored :class:`ProbeResult` of the ``predictions`` (names, or the scored
    :class:`~medlama.probers.ranking.Ranking`) for ``queries`` of the prober ``prober`` notes, with its
    provenance (data and its candidate pool, model, device); ``more_settings`` are recorded beside the
    prober's (e.g. the ``layer`` probed), and so is what the scores mean (``score``) and, for a prober built
    by the probe workflow, how its model was loaded (``revision``: the commit loaded; ``peft``;
    ``trust_remote_code``)."""
    ranking = predictions if isinstance(predictions, Ranking) else None
    names = ranking.names if ranking is not None else predictions
    settings = {**prober.settings, **more_settings, "score": prober.score, **prober.loaded}
    # where every candidate's score goes, when the ranking kept them (their pool: data["candidates"])
    extra = {"all_scores": SCORES_FILE} if ranking is not None and ranking.pools is not None else {}
    return ProbeResult(label=label, query_set=queries.name, settings=settings,
                       ids=queries.ids, relations=queries.relations, gold=queries.gold, predictions=names,
                       metrics=score(queries, names, ks=ks, match=match), seconds=seconds, extra=extra,
                       data={**queries.info, "candidates": queries.pool_record()}, model=settings.get("model"),
                       device=prober.device, ranking=ranking,
                       query_fields={**({"subject": queries.subject_names} if queries.subject_names is not None else {}),
                                     **_fact_fields(queries), **drawn_record(queries, settings)})


def _fact_fields(queries: QuerySet) -> dict[str, list]:
    """The queries' facts (``head_cui``, ``head_name``, ``answer_cuis``) as per-query columns, where known."""
    if queries.facts is None:
        return {}
    return {name: [fact[name] for fact in queries.facts] for name in queries.facts[0]} if queries.facts else {}
