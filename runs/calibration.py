"""Calibration of a probe's top-1 predictions: is a method's confidence in its first answer worth its word?

* The **confidence** of a query's top-1 prediction is the softmax over the query's scored pool (every
  candidate of its pool, or its own choices in a multiple-choice set) of the method's scores, at the top-1
  candidate, temperature 1: the scores as the method gives them (log-probabilities for the likelihood
  methods, so the softmax renormalises the model's probability over the pool; cosine similarities or negated
  squared L2 distances for retrieval, where the scale is the encoder's). It is computed where the scores are
  (:func:`medlama.probers.ranking.top1_confidence`) and logged per query (``predictions.jsonl``:
  ``confidence``).
* The outcome is the query's hit@1 (the run's acc@1, with its matching mode).
* **Brier score**, top-1 binary form: the mean over queries of ``(confidence - hit@1)^2`` (scikit-learn's
  ``brier_score_loss`` of the hits against the confidences), not the multi-class form over the pool.
* **ECE**: 15 equal-width bins of the confidence, bin m holding ``(m/15, (m+1)/15]`` (a confidence of 0 in the
  first); the sum over bins of the bin's share of queries times ``|its acc@1 - its mean confidence|``.
* The reliability diagram (``reliability.png`` beside the other plots) draws each bin's acc@1 against its
  mean confidence, with the diagonal of perfect calibration.

A method that does not score every candidate (it generates its answers, or searches the pool best-first)
has no softmax to take: its ``calibration`` records why instead of a number (:func:`calibration`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from medlama.core.display import print_table
from medlama.runs.plots import _figure, save_figure
from medlama.runs.tables import percent

#: Equal-width confidence bins of the ECE and the reliability diagram.
BINS = 15
#: What the numbers are, recorded beside them in ``results.json`` (and in ``medlama compare``'s record).
METHOD = {
    "confidence": "softmax over the query's scored pool (or its choices) of the method's scores, temperature 1, "
                  "at the top-1 candidate",
    "outcome": "hit@1",
    "brier": "top-1 binary form: mean over queries of (confidence - hit@1)^2 (sklearn brier_score_loss), not the "
             "multi-class form over the pool",
    "ece": f"{BINS} equal-width bins of the confidence, bin m = (m/{BINS}, (m+1)/{BINS}] (0 in the first): sum over "
           "bins of the bin's share of queries x |acc@1 - mean confidence|",
    "bins": BINS,
}


def _arrays(confidences: Sequence[float], correct: Sequence[bool]) -> tuple[np.ndarray, np.ndarray]:
    conf = np.asarray(confidences, dtype=np.float64).reshape(-1)
    hits = np.asarray(correct, dtype=np.float64).reshape(-1)
    if len(conf) != len(hits):
        raise ValueError(f"{len(conf)} confidences but {len(hits)} outcomes")
    if len(conf) and (not np.isfinite(conf).all() or conf.min() < 0 or conf.max() > 1):
        raise ValueError("a confidence must be a probability in [0, 1]")
    return conf, hits


def bin_of(confidences: np.ndarray, bins: int = BINS) -> np.ndarray:
    """Each confidence's bin, 0 to ``bins - 1``: bin m holds ``(m/bins, (m+1)/bins]``, 0 the first."""
    edges = np.arange(1, bins) / bins
    return np.digitize(confidences, edges, right=True)


def brier_score(confidences: Sequence[float], correct: Sequence[bool]) -> float:
    """The top-1 binary Brier score: the mean of ``(confidence - correct)^2``."""
    conf, hits = _arrays(confidences, correct)
    return float(np.mean((conf - hits) ** 2)) if len(conf) else float("nan")


def reliability(confidences: Sequence[float], correct: Sequence[bool], bins: int = BINS) -> list[dict]:
    """Per bin (in order): its ``range``, ``queries``, mean ``confidence`` and ``accuracy`` (``None`` when
    empty)."""
    conf, hits = _arrays(confidences, correct)
    which = bin_of(conf, bins)
    out = []
    for m in range(bins):
        inside = which == m
        n = int(inside.sum())
        out.append({"range": [m / bins, (m + 1) / bins], "queries": n,
                    "confidence": float(conf[inside].mean()) if n else None,
                    "accuracy": float(hits[inside].mean()) if n else None})
    return out


def expected_calibration_error(confidences: Sequence[float], correct: Sequence[bool], bins: int = BINS) -> float:
    """ECE over ``bins`` equal-width bins (module docstring)."""
    conf, hits = _arrays(confidences, correct)
    if not len(conf):
        return float("nan")
    return float(sum(entry["queries"] / len(conf) * abs(entry["accuracy"] - entry["confidence"])
                     for entry in reliability(conf, hits, bins) if entry["queries"]))


def summary(confidences: Sequence[float], correct: Sequence[bool]) -> dict:
    """``queries``, ``mean_confidence``, ``acc@1``, ``brier`` and ``ece`` of one set of queries."""
    conf, hits = _arrays(confidences, correct)
    return {"queries": len(conf), "mean_confidence": float(conf.mean()), "acc@1": float(hits.mean()),
            "brier": brier_score(conf, hits), "ece": expected_calibration_error(conf, hits)}


def absent_reason(settings: dict, has_ranking: bool = True) -> str:
    """Why a run has no calibration: its method gives no score to every candidate (what it is instead)."""
    method = settings.get("method")
    if not has_ranking:
        return "the result holds no ranking (built without the method's scores)"
    if method == "causal-likelihood":
        return ("causal-likelihood's best-first search scores only the candidates it reaches, and a softmax over "
                "the pool needs every candidate's score; probe with --search exhaustive for calibration")
    return (f"--method {method} does not score every candidate of the pool (it generates or searches its "
            "answers), and the confidence is a softmax over the whole pool's scores")


def query_confidences(result: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray] | str:
    """``(confidences, hit@1, relations)`` of the queries of ``result`` (a :class:`~medlama.runs.result.
    ProbeResult`) that have a confidence, or the reason there is none."""
    ranking = result.ranking
    confidences = ranking.confidences if ranking is not None else None
    if confidences is None:
        return absent_reason(result.settings, ranking is not None)
    keep = [i for i, c in enumerate(confidences) if c is not None]
    hits = result.hits(1)
    return (np.array([confidences[i] for i in keep], dtype=np.float64), np.array([hits[i] for i in keep]),
            np.array([result.relations[i] for i in keep], dtype=object))


def calibration(result: Any) -> dict:
    """``results.json``'s ``calibration`` of one run: :func:`summary` over its queries, ``per_relation``, the
    ``reliability`` bins and the ``method`` (:data:`METHOD`); ``queries_without_confidence`` counts the
    queries with nothing ranked. A run whose method scores no pool: ``{"absent": why}``."""
    found = query_confidences(result)
    if isinstance(found, str):
        return {"absent": found}
    conf, hits, relations = found
    if not len(conf):
        return {"absent": "no query has a ranked candidate"}
    per_relation = {str(r): summary(conf[relations == r], hits[relations == r]) for r in sorted(set(relations))}
    return {**summary(conf, hits), "queries_without_confidence": len(result.ids) - len(conf),
            "per_relation": per_relation, "reliability": reliability(conf, hits), "method": METHOD}


def print_calibration(results: Sequence[Any]) -> None:
    """The terminal table: each run's mean top-1 confidence, acc@1, Brier score and ECE (or why absent)."""
    rows = []
    for result in results:
        record = calibration(result)
        if "absent" in record:
            rows.append([result.label, "-", "-", "-", "-", record["absent"]])
        else:
            rows.append([result.label, percent(record["mean_confidence"]), percent(record["acc@1"]),
                         f"{record['brier']:.4f}", f"{record['ece']:.4f}", ""])
    print_table("calibration of the top-1 prediction", ["run", "confidence (%)", "acc@1 (%)", "Brier", "ECE", "note"],
                rows, caption=f"confidence: softmax over the pool's scores; Brier: top-1 binary form; ECE: {BINS} "
                              "equal-width bins")


def plot_reliability(results: Sequence[Any], path: str | Path) -> Path | None:
    """The reliability diagram of the runs that have a calibration (each bin's acc@1 against its mean
    confidence, the diagonal, each run's ECE in the legend); ``None`` (nothing drawn) when none has one."""
    records = [(result, calibration(result)) for result in results]
    records = [(result, record) for result, record in records if "absent" not in record]
    if not records:
        return None
    fig, ax = _figure(6, 5.5)
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", label="perfect calibration")
    for result, record in records:
        bins = [entry for entry in record["reliability"] if entry["queries"]]
        ax.plot([entry["confidence"] for entry in bins], [entry["accuracy"] for entry in bins], marker="o",
                label=f"{result.label} (ECE {record['ece']:.3f}, Brier {record['brier']:.3f}, "
                      f"n={record['queries']:,})")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel(f"mean top-1 confidence in the bin ({BINS} equal-width bins)")
    ax.set_ylabel("acc@1 in the bin")
    ax.set_title(f"{records[0][0].query_set}:\nreliability of the top-1 prediction", fontsize=8)  # long set names
    ax.legend(fontsize=7)
    return save_figure(fig, Path(path))
