"""acc@k by the number of gold answers a query has (its cardinality), beside the breakdown by answer length
(:func:`medlama.runs.plots.acc_by_answer_length`): a query with many gold answers is easier to hit in the top
k, so a score is read better knowing how many of its queries have one answer, a few, or many.

* :func:`cardinality_bin`: ``1``, ``2-5`` or ``>5`` (:data:`CARDINALITY_BINS`) of a query's gold answers,
  counted as distinct names (MedLAMA: the answer names; BioLAMA: the labels with their aliases, every name a
  match is made against, as :data:`COUNTED` records).
* :func:`acc_by_cardinality`: acc@k per bin, through the acc@k metric module with the bins as groups (the
  run's own cut-offs and matching), as ``results.json``'s ``by_cardinality`` records it.
* :func:`print_cardinality`: the table of it, the runs side by side.
"""

from __future__ import annotations

from collections.abc import Sequence

from medlama.core.display import print_table
from medlama.runs.scores import acc_at_k_module
from medlama.runs.tables import percent

#: The bins, in order: one gold answer, two to five, more than five.
CARDINALITY_BINS = ("1", "2-5", ">5")
#: What the count is of, recorded beside the numbers.
COUNTED = ("distinct gold names per query (MedLAMA: its answer names; BioLAMA: the labels with their aliases); "
           "bins 1, 2-5, >5")


def gold_count(gold: Sequence[str]) -> int:
    """The number of distinct gold names of a query."""
    return len(set(gold))


def cardinality_bin(gold: Sequence[str]) -> str:
    """The bin of a query with the gold answers ``gold`` (:data:`CARDINALITY_BINS`)."""
    count = gold_count(gold)
    return CARDINALITY_BINS[0] if count <= 1 else CARDINALITY_BINS[1] if count <= 5 else CARDINALITY_BINS[2]


def acc_by_cardinality(predictions: Sequence[Sequence[str]], gold: Sequence[Sequence[str]], *, ks: Sequence[int],
                       match: str) -> dict:
    """``{"counted": ..., "bins": {bin: {"queries": n, "acc@k": ...}}}``, the bins in order (only those with
    queries), acc@k in [0, 1] by the acc@k metric module with ``match``."""
    bins = [cardinality_bin(g) for g in gold]
    groups = acc_at_k_module().compute(predictions=list(predictions), references=list(gold), groups=bins,
                                       k=list(ks), match=match)["groups"]
    return {"counted": COUNTED,
            "bins": {name: {"queries": groups[name]["num_queries"], **{f"acc@{k}": groups[name][f"acc@{k}"]
                                                                        for k in ks}}
                     for name in CARDINALITY_BINS if name in groups}}


def print_cardinality(results: Sequence["ProbeResult"], ks: Sequence[int]) -> None:
    """acc@k per number of gold answers (bins as rows), the ``results`` side by side."""
    records = [acc_by_cardinality(r.predictions, r.gold, ks=ks, match=r.metrics["match"]) for r in results]
    rows = [[name, records[0]["bins"][name]["queries"]]
            + [percent(record["bins"].get(name, {}).get(f"acc@{k}")) for record in records for k in ks]
            for name in records[0]["bins"]]
    print_table("acc@k per number of gold answers (%)",
                ["gold answers", "queries"] + [f"{r.label} acc@{k}" for r in results for k in ks], rows,
                caption="distinct gold names per query (BioLAMA: labels with their aliases)")


__all__ = ["CARDINALITY_BINS", "COUNTED", "acc_by_cardinality", "cardinality_bin", "gold_count",
           "print_cardinality"]
