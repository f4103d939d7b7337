"""The one interface every prober implements, scoring through the acc@k metric module, and the result a
paper can cite (:class:`ProbeResult`: scores, confidence intervals, per-relation table, provenance,
``results.json`` + ``predictions.jsonl``)."""

from __future__ import annotations

import json
import time
from abc import ABC
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

from medlama.core.errors import MedlamaInputError
from medlama.probers.benchmarks import ALWAYS_SCORED
from medlama.probers.queries import QuerySet
from medlama.probers.ranking import PoolScores, Ranking, finite_or_none
from medlama.core.settings import check, choices_of, did_you_mean, fields_of, type_hints

S = TypeVar("S")

#: The cut-offs every report shows (every probe scores them: :data:`~medlama.probers.benchmarks.ALWAYS_SCORED`).
REPORT_KS = ALWAYS_SCORED
#: How :meth:`ProbeResult.acc` averages: over queries, or the mean over relations.
AVERAGES = ("micro", "macro")


class Prober(ABC):
    """Ranks answers for cloze queries. Implementations differ only in how they rank.

    A prober implements :meth:`rank_scored` (its predictions with their scores, the text fed to the model,
    the gold answer's rank and score: a :class:`~medlama.probers.ranking.Ranking`) or, if it has no scores
    to give, :meth:`rank` alone; each is derived from the other. Methods that score every candidate of the
    pool build their ranking with :meth:`Ranking.from_pool <medlama.probers.ranking.Ranking.from_pool>`
    (the gold ranked among all candidates; ``all_scores`` keeps every candidate's score for
    ``scores.parquet``), methods that generate answers with :meth:`Ranking.from_names
    <medlama.probers.ranking.Ranking.from_names>` (the gold ranked among the answers returned only).
    :attr:`score_meaning` says what the scores are; it is recorded in the run's settings (``score``).
    """

    #: Short method name, as ``medlama probe --method`` spells it.
    method: str = "prober"
    #: Whether a query's ranking is the same whatever other queries are ranked in the same call (no batching
    #: of queries together): a probe may then be cut into blocks of queries, resumed and split across processes
    #: block by block (:mod:`medlama.probers.sharding`); otherwise each candidate pool's queries are one shard.
    independent_queries: bool = False
    #: Whether :meth:`rank_scored` scores every candidate of the pool (so ``all_scores`` can be given).
    scores_pool: bool = False

    @property
    def score_meaning(self) -> str | None:
        """What the ranking's scores are (``"cosine similarity"``, ``"sum of token log-probabilities"``);
        ``None`` when the method gives no scores (its order is the decoder's beam order)."""
        return None

    def rank(self, queries: QuerySet, top_k: int = 10) -> list[list[str]]:
        """Ranked predictions (best first, at most ``top_k``) for each query, in query order."""
        if type(self).rank_scored is Prober.rank_scored:
            raise NotImplementedError(f"{type(self).__name__} implements neither rank nor rank_scored")
        return self.rank_scored(queries, top_k).names

    def rank_scored(self, queries: QuerySet, top_k: int = 10, *, all_scores: bool = False) -> Ranking:
        """The :class:`~medlama.probers.ranking.Ranking` of ``queries`` (at most ``top_k`` names each).
        ``all_scores``: also every candidate's score (only where :attr:`scores_pool`). By default: the names
        of :meth:`rank`, without scores, the gold ranked among them."""
        if type(self).rank is Prober.rank:
            raise NotImplementedError(f"{type(self).__name__} implements neither rank nor rank_scored")
        check_all_scores(self, all_scores)
        return Ranking.from_names(queries.gold, self.rank(queries, top_k))

    def settings(self) -> dict:
        """Everything that determines the predictions, for the JSON output and model cards."""
        return {"method": self.method}


@dataclass(frozen=True)
class ProberNote:
    """What a result records of the prober that ranked it: its :meth:`~Prober.settings`, the device it
    computed on, what its scores mean (:attr:`~Prober.score_meaning`) and how its model was loaded
    (``loaded``: :func:`~medlama.core.models.loading_with`'s record, for a prober the probe workflow made).
    Kept beside a probe's resume shards, so a resumed run records it without loading the model again."""

    settings: dict
    device: str | None = None
    score: str | None = None
    loaded: dict = field(default_factory=dict)

    @classmethod
    def of(cls, prober: "Prober") -> "ProberNote":
        return cls(prober.settings(), device_of(prober), prober.score_meaning, dict(getattr(prober, "loaded", {})))

    def record(self) -> dict:
        """As JSON (a resume shard's note)."""
        return asdict(self)


def check_all_scores(prober: "Prober | type[Prober]", all_scores: bool) -> None:
    """Refuse every candidate's score from a method that does not score the pool (it generates answers)."""
    if all_scores and not prober.scores_pool:
        raise MedlamaInputError(f"--method {prober.method} generates its answers and does not score every "
                                "candidate: it cannot log all scores (log_all_scores); methods that can: "
                                "retrieval, mask-average, causal-likelihood")


def check_settings(settings: S) -> S:
    """Check a prober's settings dataclass (:func:`medlama.core.settings.check`), wording a value outside its
    choices or bounds as the probers always have: "unknown initial fill 'left'; choose from [...]", "beam
    size must be >= 1, got 0" (the noun is the field's ``noun`` metadata, else its name)."""
    hints = type_hints(settings)
    for field in fields_of(settings):
        value = getattr(settings, field.name)
        noun = field.metadata.get("noun") or field.name.replace("_", " ")
        allowed = choices_of(field, hints.get(field.name))
        if allowed is not None and isinstance(value, str) and value not in allowed:
            raise MedlamaInputError(f"unknown {noun} {value!r}; choose from {list(allowed)}")
        low = field.metadata.get("min")
        if low is not None and isinstance(value, (int, float)) and not isinstance(value, bool) and value < low:
            raise MedlamaInputError(f"{noun} must be >= {low}, got {value}")
    return check(settings)


#: Files :meth:`ProbeResult.save` writes into its folder. ``RESULTS_FILE`` is also the file every output of
#: ``probe``, ``ucm`` and ``recipe`` holds once its run finished (their ownership marker), and the one
#: ``push-model --results`` reads.
RESULTS_FILE, PREDICTIONS_FILE = "results.json", "predictions.jsonl"
#: Every candidate's score per query (``--log-all-scores``), beside them.
SCORES_FILE = "scores.parquet"
#: Top predictions kept per query in JSON outputs.
KEEP_PREDICTIONS = 10


@dataclass
class ProbeResult:
    """Predictions for a query set and their scores.

    ``metrics`` is the acc@k module's result (micro and macro acc@k, per relation under ``groups``);
    ``data`` identifies the queries (:attr:`QuerySet.info <medlama.probers.queries.QuerySet.info>`),
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
            scored = _acc_at_k_module().compute(predictions=self.predictions, references=self.gold, groups=groups,
                                                k=sorted({*self.ks, k}), match=self.metrics.get("match", "exact"))
            for cutoff in scored["k"]:
                cache[cutoff] = [scored["groups"][g][f"acc@{cutoff}"] == 1.0 for g in groups]
        return cache[k]

    def acc_ci(self, k: int, *, resamples: int = 1000, seed: int = 0, level: float = 0.95
               ) -> tuple[float, float] | None:
        """Percentile-bootstrap confidence interval of the micro acc@k: queries resampled with replacement
        (seeded, so the interval is reproducible); ``None`` with fewer than two queries. See
        :mod:`medlama.core.intervals`. Macro averages get no interval."""
        from medlama.core.intervals import bootstrap_mean_ci

        return bootstrap_mean_ci([float(h) for h in self.hits(k)], resamples=resamples, seed=seed, level=level)

    @property
    def intervals(self) -> dict:
        """``{"acc@k": [low, high] or None, ...}`` for every scored k (95%, 1,000 resamples, seed 0), with the
        method spelt out under ``"method"``."""
        from medlama.core.intervals import DEFAULT_LEVEL, DEFAULT_RESAMPLES, DEFAULT_SEED

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
        from medlama.core.intervals import bootstrap_group_cis

        return bootstrap_group_cis([float(h) for h in self.hits(k)], self.relations)

    def per_relation(self) -> dict[str, dict]:
        """``{relation: {"queries": n, "acc@1": ..., "acc@5": ..., ...}}`` (acc in [0, 1]), relations sorted."""
        groups = self.metrics.get("groups") or {}
        return {relation: {"queries": entry["num_queries"], **{f"acc@{k}": entry[f"acc@{k}"] for k in self.ks}}
                for relation, entry in sorted(groups.items())}

    def to_pandas(self, per: str = "query"):
        """A ``pandas.DataFrame``. ``per="query"`` (default): one row per query with ``id``, ``relation``,
        ``gold`` (list), ``predictions`` (top 10), ``hit@k`` (bool) per scored k, and the sample log's ``input``,
        ``scores``, ``gold_rank`` and ``gold_score`` (:meth:`prediction_rows`). ``per="relation"``: one
        row per relation (the index) with ``queries`` and ``acc@k`` per scored k."""
        import pandas as pd

        if per == "relation":
            return pd.DataFrame.from_dict(self.per_relation(), orient="index").rename_axis("relation")
        if per != "query":
            raise MedlamaInputError(f"to_pandas(per={per!r}): choose 'query' or 'relation'")
        return pd.DataFrame(list(self.prediction_rows()))

    def prediction_rows(self) -> Iterator[dict]:
        """One dict per query: ``id``, ``relation``, ``gold``, ``predictions`` (top 10), ``hit@k`` per k, and
        from the :attr:`ranking`: ``input`` (the text as fed to the model), ``scores`` (aligned with
        ``predictions``; ``null`` where the method gives none), ``gold_rank`` (1-based; ``null``: not in the
        pool, or not among a generation method's answers) and ``gold_score``. Without a ranking (a result
        built by hand) those four are ``null``."""
        hits = {k: self.hits(k) for k in self.ks}
        rows = self.ranking.rows() if self.ranking is not None else [None] * len(self.ids)
        for i, (qid, relation, gold, ranked) in enumerate(zip(self.ids, self.relations, self.gold, self.predictions)):
            names, scores, text, gold_rank, gold_score, _ = rows[i] or (None, None, None, None, None, None)
            kept = list(ranked[:KEEP_PREDICTIONS])
            yield {"id": qid, "relation": relation, "gold": list(gold), "predictions": kept,
                   **{f"hit@{k}": hits[k][i] for k in self.ks},
                   "input": text,
                   "scores": [finite_or_none(s) for s in scores[:len(kept)]] if scores is not None else None,
                   "gold_rank": gold_rank, "gold_score": finite_or_none(gold_score)}

    def pool_scores(self) -> Iterator[tuple[str, str, PoolScores]]:
        """``(query id, relation, every candidate's score and rank)`` per query, when the run kept them."""
        if self.ranking is None or self.ranking.pools is None:
            return iter(())
        return iter(zip(self.ids, self.relations, self.ranking.pools))

    def to_json(self, *, queries: bool = True) -> dict:
        """Everything as plain JSON: scores, ``intervals``, and (``queries``) each query's top 10. A model
        given as a local path is named by its folder's name in ``settings["model"]`` (a path means nothing on
        another machine; :meth:`provenance` identifies the model by its content hash)."""
        from medlama.core.public_paths import with_public_model

        data = asdict(replace(self, ranking=None))
        data.pop("model")
        data.pop("ranking")
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
        from medlama.core.provenance import provenance
        from medlama.core.public_paths import with_public_model

        model = self.model or self.settings.get("model")
        return provenance(settings=with_public_model(self.settings), data=self.data or {"query_set": self.query_set},
                          model=None if _is_bundled(model) else model, device=self.device, argv=argv,
                          revision=self.settings.get("revision"))

    def results_json(self, *, argv: Sequence[str] | None = None) -> dict:
        """What ``results.json`` holds for this run: :meth:`to_json` without the per-query predictions, with
        ``per_relation`` and ``provenance``."""
        return {**self.to_json(queries=False), "per_relation": self.per_relation(),
                "provenance": self.provenance(argv=argv)}

    def save(self, folder: str | Path, *, argv: Sequence[str] | None = None, overwrite: bool = False) -> Path:
        """Write this result into ``folder`` as ``medlama probe --out`` writes its runs, by the same writer
        (:func:`medlama.probers.workflow.write_outputs`): ``results.json`` (a list of runs, this one),
        ``predictions.jsonl`` and the plots, atomically, recording ``probe`` as the folder's owner. A folder
        some other command or person wrote is refused, and so is a finished run's unless ``overwrite``.
        Returns ``folder``."""
        from medlama.probers.workflow import write_outputs

        write_outputs(folder, [self], overwrite=overwrite, argv=argv)
        return Path(folder)


def write_results(path: str | Path, payload: Any) -> Path:
    """``payload`` as indented JSON, written atomically."""
    from medlama.core.atomic import atomic_write_text

    atomic_write_text(path, json.dumps(payload, indent=2, ensure_ascii=False, default=_plain) + "\n")
    return Path(path)


def write_predictions(path: str | Path, results: Sequence[ProbeResult]) -> Path:
    """Per-query predictions of ``results`` as JSON lines (with a ``run`` key: the result's label), atomically."""
    from medlama.core.atomic import atomic_write_text

    lines = (json.dumps({"run": result.label, **row}, ensure_ascii=False) for result in results
             for row in result.prediction_rows())
    atomic_write_text(path, "".join(line + "\n" for line in lines))
    return Path(path)


def write_all_scores(path: str | Path, results: Sequence[ProbeResult]) -> Path | None:
    """Every candidate's score of the ``results`` that kept them (``all_scores``) as Parquet, one row per run,
    query and candidate: ``run``, ``id``, ``relation``, ``candidate``, ``score`` (float64, higher is better;
    null where not finite) and ``rank`` (1-based, the run's own order; null: not ranked). Written atomically;
    ``None`` (nothing written) when no result kept them."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from medlama.core.atomic import atomic_write_bytes

    columns: dict[str, list] = {name: [] for name in ("run", "id", "relation", "candidate", "score", "rank")}
    for result in results:
        for qid, relation, pool in result.pool_scores():
            n = len(pool.candidates)
            columns["run"].append(np.full(n, result.label, dtype=object))
            columns["id"].append(np.full(n, qid, dtype=object))
            columns["relation"].append(np.full(n, relation, dtype=object))
            columns["candidate"].append(np.asarray(pool.candidates, dtype=object))
            columns["score"].append(pool.scores)
            columns["rank"].append(pool.ranks)
    if not columns["run"]:
        return None
    scores = np.concatenate(columns["score"])
    ranks = np.concatenate(columns["rank"])
    table = pa.table({
        **{name: pa.array(np.concatenate(columns[name]), type=pa.string())
           for name in ("run", "id", "relation", "candidate")},
        "score": pa.array(scores, type=pa.float64(), mask=~np.isfinite(scores)),
        "rank": pa.array(ranks, type=pa.int64(), mask=ranks == 0)})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    atomic_write_bytes(path, sink.getvalue().to_pybytes())
    return Path(path)


def _is_bundled(model: str | None) -> bool:
    """Whether ``model`` is the bundled encoder's folder (provenance then names it by its Hub id)."""
    from medlama.core.defaults import default_model_path

    try:
        return model is not None and Path(model).resolve() == Path(default_model_path()).resolve()
    except (OSError, ValueError):
        return False


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


@lru_cache(maxsize=None)
def _acc_at_k_module():
    from medlama.metrics import load

    return load("acc_at_k")


def score(queries: QuerySet, predictions: list[list[str]], *, ks=REPORT_KS, match: str = "exact") -> dict:
    """acc@k of ``predictions`` per relation, micro and macro, computed by the acc@k metric module."""
    return _acc_at_k_module().compute(predictions=predictions, references=queries.gold, groups=queries.relations,
                                      k=list(ks), match=match)


def pool_parts(queries: QuerySet) -> list[tuple[list[int], QuerySet]]:
    """``(positions, query set)`` per ranking call: the whole set with one pool; with per-relation pools (the
    ``relation`` rule), each relation's queries with their own pool as candidates."""
    if queries.pools is None:
        return [(list(range(len(queries))), queries)]
    parts = []
    for relation in dict.fromkeys(queries.relations):
        pick = [i for i, r in enumerate(queries.relations) if r == relation]
        part = queries.subset(pick)
        parts.append((pick, QuerySet(part.ids, part.relations, part.texts, part.gold, list(queries.pools[relation]),
                                     part.name, part.info)))
    return parts


def probe(prober: Prober, queries: QuerySet, *, label: str | None = None, top_k: int = 10, ks=REPORT_KS,
          match: str = "exact", all_scores: bool = False) -> ProbeResult:
    """Run ``prober`` on ``queries`` (against the pool their rule gives) and score its top ``top_k``
    predictions; ``all_scores``: keep every candidate's score (``scores.parquet``)."""
    check_all_scores(prober, all_scores)
    if getattr(getattr(prober, "settings_", None), "batch_size", None) == "auto":
        raise MedlamaInputError("batch size 'auto' is resolved by medlama probe and medlama.probe (the largest that "
                                "fits); a prober used on its own needs a number")
    from medlama.probers.sharding import rank_prober

    start = time.perf_counter()
    ranking = rank_prober(prober, queries, top_k=top_k, all_scores=all_scores)
    return result_of(ProberNote.of(prober), queries, ranking, time.perf_counter() - start,
                     label=label or prober.method, ks=ks, match=match)


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
                       device=prober.device, ranking=ranking)


def device_of(prober: Prober) -> str | None:
    """The device a prober computes on (its encoder's, language model's or own ``device``), as a string."""
    for owner in (getattr(prober, "encoder", None), getattr(prober, "lm", None), prober):
        device = getattr(owner, "device", None)
        if device is not None:
            return str(device)
    return None
