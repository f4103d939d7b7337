"""U/C/M records: the ranks of each context sequence's candidates at every input, and the rank changes
between consecutive inputs that the UCM metric scores.

For each row of a set built by ``medlama build context-variance`` (one context sequence) a ranker
(:mod:`medlama.ucm_eval.rankers`) ranks the row's candidates (its pool without the subject, plus any correct
object missing from the pool) at every input (:func:`rank_sequences`; the row's inputs rebuilt from its
segments and layout by :func:`medlama.datasets.context_variance.row_inputs`, added to the row as ``inputs``).
Ranks are 1-based positions in the ranking of all candidates at that input; a decoding ranker
(mask-predict) ranks only the candidates it decoded, and gives every other one the rank ``len(candidates) + 1``.

Rank-change records (:func:`sequence_records`): for every input ``k > 0`` of a sequence, one record with

* ``target_rank_before`` / ``target_rank_after``: the rank of the sequence's centre at inputs ``k-1`` and
  ``k`` (``O_t``; for a negative-target sequence the negative target, an ``O_incor``);
* ``added_is_correct`` and ``added_rank_before`` / ``added_rank_after``: the entity ``O_a`` of the
  segment added at ``k`` (at ``k = 1`` that is the centre itself);
* ``correct_ranks_before/after`` and ``incorrect_ranks_before/after``: every ``O_cor`` / ``O_incor``
  present in input ``k-1`` (neither the centre nor ``O_a``), paired before/after, in order of arrival;
* ``triple_id`` and ``relation``.

The record of ``k = 1`` (S1, whose entity is the centre itself) is left out by default: the paper's
O_cor are the *other* entities equally correct for the subject (figure 1: "red entities represents other
entities that are equally correct"), so adding the centre is not an "O_a in O_cor" event. Counting it
would also tilt the control of table 3: on the O_t side S1 adds a correct entity (it would always enter
UCM, as a copy of the target), on the negative side an incorrect one (it never would).
``skip_first_segment=False`` (``medlama ucm --include-first-segment``) keeps it.

Inputs a model cannot see whole (over its length limit: a long note or article) are cut by the ranker,
far context first. A rank change across a cut input is not the effect of the added segment (which may
have been cut away: the change is then 0, a spurious "Confuse"), so a record is kept only when the
model saw both of its inputs whole; the others are counted (``num_records_truncated``). Bound the
contexts at build time (``--max-segments``) to keep more of them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from medlama.core.errors import MedlamaInputError
from medlama.datasets.context_variance.rows import row_inputs
from medlama.ucm_eval.rankers import ContextRanker, ranks_from_scores
from medlama.ucm_eval.sets import ContextSets
from medlama.core.progress import bar as progress_bar

#: The metric module's input columns (the records carry a few more, for breakdowns).
UCM_COLUMNS = ("target_rank_before", "target_rank_after", "added_is_correct", "added_rank_before",
               "added_rank_after", "correct_ranks_before", "correct_ranks_after", "incorrect_ranks_before",
               "incorrect_ranks_after", "triple_id", "relation")


@dataclass
class RankedSequence:
    """One row with the ranks of its candidates at each input."""

    row: dict
    ranks: np.ndarray  # (inputs, candidates), 1-based
    column: dict[str, int]  # entity id -> column of ranks
    candidate_ids: list[str]
    whole: np.ndarray  # (inputs,) bool: the model saw the input whole


def rank_sequences(ranker: ContextRanker, sets: ContextSets, *, block_rows: int = 64, progress: str | None = None,
                   store: Any = None, unit: str = "") -> Iterator[RankedSequence]:
    """Rank every selected row's candidates at each of its inputs, pool by pool, in blocks of rows.

    Within a pool the rows are taken triple by triple; the distinct inputs of a block are scored in one
    call, and each triple's ``input0`` (shared by all its sequences) is scored once. With a ``store``
    (:class:`~medlama.core.resume.ShardStore`), each pool's ranks are kept as a shard of ``unit`` (the
    model's label) once the pool is done, and a pool already kept is read back instead of ranked: a
    rerun of a killed evaluation continues from its completed pools.
    """

    frame = sets.rows.select_columns(["pool_id", "triple_id", "negative", "context_type", "subject_id",
                                      "correct_ids", "correct_names"]).to_pandas()
    frame["position"] = np.arange(len(frame))
    bar = progress_bar(total=len(frame), desc=progress, unit="sequence", leave=False)
    for key, group in frame.groupby("pool_id", sort=True):
        if key not in sets.pools:
            raise MedlamaInputError(f"pool {key!r} missing from the pools config", file=sets.directory)
        ids, names = list(sets.pools[key][0]), list(sets.pools[key][1])
        where = {entity_id: i for i, entity_id in enumerate(ids)}
        pool_size = len(ids)
        for correct_ids, correct_names in zip(group["correct_ids"], group["correct_names"]):
            for entity_id, name in zip(correct_ids, correct_names):
                if entity_id not in where:  # a correct object outside the pool is a candidate of its triple
                    where[entity_id] = len(ids)
                    ids.append(entity_id)
                    names.append(name)
        # (scores, seen whole) of each triple's input0, the prompt alone: shared by all its rows, scored once
        prompts: dict[str, tuple[np.ndarray, bool]] = {}
        group = group.sort_values(["triple_id", "negative", "context_type", "position"], kind="stable")
        positions = group["position"].tolist()
        identity = {"unit": unit, "pool": str(key), "rows": len(positions),
                    "positions": hashlib.sha256(",".join(map(str, positions)).encode()).hexdigest()}
        if store is not None and store.has(identity):  # ranked by an earlier run of this evaluation
            items, _ = store.read(identity)
            for row, item in zip(sets.rows.select(positions).to_list(), items):
                candidate_ids = item["candidate_ids"]
                yield RankedSequence(row, np.asarray(item["ranks"], dtype=np.int64),
                                     {entity_id: j for j, entity_id in enumerate(candidate_ids)}, candidate_ids,
                                     np.asarray(item["whole"], dtype=bool))
                bar.update(1)
            continue
        kept: list[dict] = []
        for start in range(0, len(positions), block_rows):
            block = sets.rows.select(positions[start:start + block_rows]).to_list()
            for row in block:  # the stored row holds its segments once: its inputs are rebuilt here
                row["inputs"] = row_inputs(row)
            unique = list(dict.fromkeys(text for row in block for text in row["inputs"] if text not in prompts))
            scored = {} if not unique else dict(zip(unique, zip(ranker.scores(unique, names),
                                                                ranker.whole(unique, names))))
            for row in block:
                prompt = row["inputs"][0]
                if prompt not in prompts:
                    prompts[prompt] = scored[prompt]
                inputs = [prompts[text] if text in prompts else scored[text] for text in row["inputs"]]
                matrix = np.stack([scores for scores, _ in inputs])
                correct = set(row["correct_ids"])
                keep = [i for i, entity_id in enumerate(ids)
                        if entity_id != row["subject_id"] and (i < pool_size or entity_id in correct)]
                ranks = ranks_from_scores(matrix[:, keep], unranked=not ranker.ranks_all)
                candidate_ids = [ids[i] for i in keep]
                whole = np.array([fits for _, fits in inputs], dtype=bool)
                if store is not None:
                    kept.append({"ranks": ranks.tolist(), "candidate_ids": candidate_ids, "whole": whole.tolist()})
                yield RankedSequence(row, ranks, {entity_id: j for j, entity_id in enumerate(candidate_ids)},
                                     candidate_ids, whole)
                bar.update(1)
        if store is not None:
            store.write(identity, kept)
    bar.close()


def sequence_records(row: dict, ranks: np.ndarray, column: dict[str, int],
                     whole: Sequence[bool] | None = None) -> list[dict]:
    """The rank-change records of one sequence (see the module docstring), every ``k`` from 1.

    ``whole``: per input, whether the model saw it whole; each record says in ``whole`` whether both of
    its inputs were (None: all were).
    """
    center = row["center_id"]
    correct = set(row["correct_ids"])
    if center not in column:
        raise MedlamaInputError(f"sequence {row['id']!r}: its centre {center!r} is not a candidate")
    records = []
    present: list[str] = []  # pool entities in the previous input, in order of arrival
    for k in range(1, len(row["added_entities"])):  # one per input after input0
        added = row["added_entities"][k]
        if added not in column:
            raise MedlamaInputError(f"sequence {row['id']!r}: added entity {added!r} is not a candidate")
        before, after = ranks[k - 1], ranks[k]
        others = [e for e in present if e != center and e != added]
        good = [column[e] for e in others if e in correct]
        bad = [column[e] for e in others if e not in correct]
        records.append({
            "target_rank_before": int(before[column[center]]), "target_rank_after": int(after[column[center]]),
            "added_is_correct": bool(row["added_is_correct"][k]),
            "added_rank_before": int(before[column[added]]), "added_rank_after": int(after[column[added]]),
            "correct_ranks_before": [int(before[c]) for c in good],
            "correct_ranks_after": [int(after[c]) for c in good],
            "incorrect_ranks_before": [int(before[c]) for c in bad],
            "incorrect_ranks_after": [int(after[c]) for c in bad],
            "triple_id": row["triple_id"], "relation": row["relation"],
            # not metric inputs: for breakdowns and the records file
            "source": row["source"], "context_type": row["context_type"], "negative": bool(row["negative"]),
            "sequence_id": row["id"], "k": k, "added_entity": added, "center_id": center,
            "whole": whole is None or bool(whole[k - 1] and whole[k]),
        })
        if added not in present:
            present.append(added)
    return records
