"""Scores of the U/C/M records, every one from the metric modules (``medlama.metrics.load``).

UCM (``ucm``) gives UCM_m (over all records), UCM_k (per relation) and the rank changes of table 1, for
O_t-centred and negative-target-centred sequences side by side (table 3); acc@k (``acc_at_k``) gives
top-k accuracy without context (the centre ``O_t`` in the top k at ``input0``, the prompt alone) and
with context (at the last input, the whole context), over the O_t-centred sequences, micro (over
sequences) and macro (over relations); ``acc_any`` counts a hit when any ``O_cor`` is in the top k,
BioLAMA's definition. Table 2's U / C / M are UCM_k averaged over relations (macro); table 3's are UCM_m.
:class:`ModelResult` holds one model's scores, as ``results.json`` writes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from medlama.ucm_eval.records import UCM_COLUMNS
from medlama.core.intervals import DEFAULT_LEVEL, DEFAULT_RESAMPLES, DEFAULT_SEED, bootstrap_shares_ci
from medlama.metrics import load

#: The three shares of a UCM result.
SHARES = ("understand", "confuse", "misunderstand")


@lru_cache(maxsize=None)
def _metric(name: str):
    return load(name)


@dataclass
class ModelResult:
    """One model's scores on the sets (``records`` only when asked to keep them)."""

    label: str
    settings: dict
    seconds: float
    num_sequences: int
    num_records: int
    #: records left out because the model saw one of their inputs cut (over its length limit)
    num_records_truncated: int
    target: dict | None
    negative: dict | None
    ucm_k_macro: dict
    accuracy: dict
    by_context: dict
    records: list[dict] = field(default_factory=list, repr=False)
    #: 95% bootstrap interval of each UCM_m share (:func:`share_intervals`), O_t- and negative-centred
    intervals: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {key: value for key, value in self.__dict__.items() if key != "records"}


def ucm(records: Sequence[dict]) -> dict | None:
    """The UCM module's result on ``records`` (``None`` when there are none)."""
    if not records:
        return None
    columns = {name: [record[name] for record in records] for name in UCM_COLUMNS}
    return _metric("ucm").compute(**columns)


def ucm_k_macro(result: dict | None) -> dict:
    """Table 2's U / C / M: the mean over relations of UCM_k (relations with a correct-O_a record)."""
    out = {share: None for share in SHARES}
    out["num_relations"] = 0
    if not result or not result.get("per_relation"):
        return out
    defined = [entry for entry in result["per_relation"].values() if entry["num_records_correct"]]
    out["num_relations"] = len(defined)
    if defined:
        for share in SHARES:
            out[share] = float(np.mean([entry[share] for entry in defined]))
    return out


def accuracy(sequences: Sequence[tuple[dict, list[str], list[str]]], ks: Sequence[int]) -> dict:
    """acc@k without (``input0``) and with (last input) context, through the acc@k module.

    ``sequences``: (row, top candidates at input0, top candidates at the last input) of O_t-centred rows.
    """
    if not sequences:
        return {}
    module = _metric("acc_at_k")
    relations = [row["relation"] for row, _, _ in sequences]
    out = {}
    for name, references in (("target", [[row["target_id"]] for row, _, _ in sequences]),
                             ("any_correct", [list(row["correct_ids"]) for row, _, _ in sequences])):
        for when, index in (("without_context", 1), ("with_context", 2)):
            predictions = [list(item[index]) for item in sequences]
            result = module.compute(predictions=predictions, references=references, groups=relations, k=list(ks))
            out.setdefault(name, {})[when] = result
    return out


def by_context(target: Sequence[dict], negative: Sequence[dict]) -> dict:
    """UCM_m per ``source/context type``, O_t-centred (``target``) and negative-target-centred records."""
    out = {}
    for key in sorted({(r["source"], r["context_type"]) for r in (*target, *negative)}):
        entry = {}
        for side, chosen in (("target", target), ("negative", negative)):
            result = ucm([r for r in chosen if (r["source"], r["context_type"]) == key])
            entry[side] = None if result is None else {
                **{share: result[share] for share in SHARES},
                "num_records_correct": result["num_records_correct"], "num_records": result["num_records"]}
        out[f"{key[0]}/{key[1]}"] = entry
    return out


def record_label(record: dict) -> str | None:
    """The UCM category of a record, as the UCM module counts it: ``None`` when its added entity is incorrect
    (not in the denominator), else understand / confuse / misunderstand by the sign of the centre's rank
    change (up, none, down)."""
    if not record["added_is_correct"]:
        return None
    change = record["target_rank_after"] - record["target_rank_before"]
    return SHARES[0] if change < 0 else SHARES[1] if change == 0 else SHARES[2]


def share_intervals(target: Sequence[dict], negative: Sequence[dict]) -> dict:
    """95% percentile-bootstrap interval of each UCM_m share, records resampled with replacement (seeded:
    :func:`medlama.core.intervals.bootstrap_shares_ci`), for the O_t-centred and negative-centred records; a side
    with fewer than two counted records has ``None`` intervals."""

    out: dict = {}
    for side, records in (("target", target), ("negative", negative)):
        labels = [label for label in map(record_label, records) if label is not None]
        out[side] = {share: (list(ci) if ci else None) for share, ci in bootstrap_shares_ci(labels, SHARES).items()}
    out["method"] = {"kind": "percentile bootstrap over records (UCM_m shares)", "level": DEFAULT_LEVEL,
                     "resamples": DEFAULT_RESAMPLES, "seed": DEFAULT_SEED}
    return out
