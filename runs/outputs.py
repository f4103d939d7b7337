"""A probe's output files and folder: ``results.json`` (a list of runs), ``predictions.jsonl`` (one line per
run and query), ``scores.parquet`` (every candidate's score, when kept) and the plots
(:mod:`medlama.runs.plots`), written atomically into a folder the probe owns (:func:`write_outputs`:
what ``medlama probe``, ``medlama.probe`` and ``ProbeResult.save`` all write through)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from medlama.core.atomic import atomic_write_bytes, atomic_write_text, claimed_output, staged_directory
from medlama.core.errors import MedlamaInputError
from medlama.core.resume import discard_work_folder
from medlama.runs import plots
from medlama.runs.calibration import plot_reliability
from medlama.runs.cardinality import gold_count

#: Files :meth:`ProbeResult.save` writes into its folder. ``RESULTS_FILE`` is also the file every output of
#: ``probe``, ``ucm`` and ``recipe`` holds once its run finished (their ownership marker), and the one
#: ``push-model --results`` reads.
RESULTS_FILE, PREDICTIONS_FILE = "results.json", "predictions.jsonl"
#: Every candidate's score per query (``--log-all-scores``), beside them.
SCORES_FILE = "scores.parquet"
#: Top predictions kept per query in JSON outputs.
KEEP_PREDICTIONS = 10


#: The owner recorded in every probe output (``.medlama-output.json``): the CLI's and ``ProbeResult.save``'s.
OUTPUT_KIND = "probe"
#: How the Python API is told to replace a finished run.
API_HINT = "give overwrite=True to replace them, or choose another folder"


def write_results(path: str | Path, payload: Any) -> Path:
    """``payload`` as indented JSON, written atomically."""
    atomic_write_text(path, json.dumps(payload, indent=2, ensure_ascii=False, default=_plain) + "\n")
    return Path(path)


def write_predictions(path: str | Path, results: Sequence[ProbeResult]) -> Path:
    """Per-query predictions of ``results`` as JSON lines (with a ``run`` key: the result's label), atomically."""
    lines = (json.dumps({"run": result.label, **row}, ensure_ascii=False) for result in results
             for row in result.prediction_rows())
    atomic_write_text(path, "".join(line + "\n" for line in lines))
    return Path(path)


def write_all_scores(path: str | Path, results: Sequence[ProbeResult]) -> Path | None:
    """Every candidate's score of the ``results`` that kept them (``all_scores``) as Parquet, one row per run,
    query and candidate: ``run``, ``id``, ``relation``, ``candidate``, ``score`` (float64, higher is better;
    null where not finite), ``rank`` (1-based, the run's own order; null: not ranked) and ``gold_answers`` (the
    query's number of distinct gold names: :func:`~medlama.runs.cardinality.gold_count`). Written atomically;
    ``None`` (nothing written) when no result kept them."""
    import numpy as np  # numpy only when this runs
    import pyarrow as pa  # pyarrow only when a run kept every score
    import pyarrow.parquet as pq  # pyarrow only when writing scores

    columns: dict[str, list] = {name: [] for name in ("run", "id", "relation", "candidate", "score", "rank",
                                                      "gold_answers")}
    for result in results:
        for gold, (qid, relation, pool) in zip(result.gold, result.pool_scores()):
            n = len(pool.candidates)
            columns["gold_answers"].append(np.full(n, gold_count(gold), dtype=np.int64))
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
        "rank": pa.array(ranks, type=pa.int64(), mask=ranks == 0),
        "gold_answers": pa.array(np.concatenate(columns["gold_answers"]), type=pa.int64())})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    atomic_write_bytes(path, sink.getvalue().to_pybytes())
    return Path(path)


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def write_probe_results(out: str | Path, results: Sequence[ProbeResult], *,
                        argv: Sequence[str] | None = None) -> tuple[Path, Path]:
    """``medlama probe``'s outputs: ``out/results.json``, a list with one entry per run (its
    :meth:`~medlama.runs.result.ProbeResult.results_json`: scores, intervals, ``per_relation`` and the
    ``provenance`` block, no per-query rows), and ``out/predictions.jsonl`` (one line per run and query, its
    ``run`` key the run's label)."""
    out = Path(out)
    write_results(out / RESULTS_FILE, [r.results_json(argv=argv) for r in results])
    return out / RESULTS_FILE, write_predictions(out / PREDICTIONS_FILE, results)


def write_outputs(out: str | Path, results: Sequence[ProbeResult], *, by_layer: dict | None = None,
                  by_step: dict | None = None, overwrite: bool = False, argv: Sequence[str] | None = None,
                  hint: str = API_HINT, k: int = 10, reads: Sequence = (), claimed: bool = False) -> list[Path]:
    """Write a probe's output folder: ``results.json`` (a list, one entry per run), ``predictions.jsonl``,
    ``scores.parquet`` (when a run kept every candidate's score) and the plots (acc@``k`` per relation; per answer
    length with exact matching; per number of gold answers; per layer and per step for the sweeps). Atomic (a staging folder replaces ``out`` when complete), owned (``.medlama-output.json`` names
    ``probe``; a folder another command or a person wrote is refused) and, unless ``overwrite``, refusing a
    finished run; nor may ``out`` be (or hold) the current directory or what the run read (``reads``).
    ``claimed``: the caller holds ``out`` already (:func:`medlama.runs.workflow.run_probe`'s one claim). Returns the plots written."""
    if not results:
        raise MedlamaInputError("no results to write")
    claim = contextlib.nullcontext() if claimed else claimed_output(out, marker=RESULTS_FILE, kind=OUTPUT_KIND,
                                                                   overwrite=overwrite, hint=hint, reads=reads)
    with claim:
        with staged_directory(out, marker=RESULTS_FILE, kind=OUTPUT_KIND) as staging:  # under the one claim
            write_probe_results(staging, results, argv=argv)  # results.json + predictions.jsonl
            write_all_scores(staging / SCORES_FILE, results)  # only runs that kept every score
            first = list(results[:4])
            drawn = [plots.plot_relations(first, staging / "relations.png", k=k)]
            if first[0].metrics.get("match", "exact") == "exact":  # the answer-length figure rescores exactly
                drawn.append(plots.plot_answer_length(first, None, staging / "answer_length.png"))
            if (reliability := plot_reliability(first, staging / "reliability.png")) is not None:
                drawn.append(reliability)  # the runs whose method scores the pool (medlama.runs.calibration)
            drawn.append(plots.plot_cardinality(first, staging / "cardinality.png"))
            if by_layer:
                drawn.append(plots.plot_series(by_layer, staging / "layers.png", "layer"))
            if by_step:
                drawn.append(plots.plot_series(by_step, staging / "steps.png", "rewiring step"))
        discard_work_folder(out, kind=OUTPUT_KIND)  # written: the shards of this (or an unfinished) run are done
    return [Path(out) / plot.name for plot in drawn]
