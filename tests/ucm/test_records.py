"""Rank-change records on figure 1 of the paper, scored with the UCM module."""

from __future__ import annotations

import numpy as np

from medlama.ucm_eval.records import sequence_records
from medlama.ucm_eval.scores import ucm


def figure_1_sequence() -> tuple[dict, np.ndarray, dict]:
    """Figure 1 of the paper up to input5 (S1 = the target, then sick feeling, postnasal drip, heartburn,
    nasal stuffiness), with the ranks its table prints for output4 and output5."""
    entities = ["discolored nasal", "nasal stuffiness", "postnasal drip", "sick feeling", "heartburn", "runny nose"]
    column = {entity: i for i, entity in enumerate(entities)}
    row = {"id": "fig1", "triple_id": "nasal polyp|has|discolored nasal", "relation": "has symptom",
           "source": "ehr", "context_type": "real", "negative": False, "center_id": "discolored nasal",
           "target_id": "discolored nasal",
           "correct_ids": ["discolored nasal", "nasal stuffiness", "postnasal drip", "runny nose"],
           "inputs": [f"input{k} [Y]" for k in range(6)],
           "added_entities": [None, "discolored nasal", "sick feeling", "postnasal drip", "heartburn",
                              "nasal stuffiness"],
           "added_is_correct": [None, True, False, True, False, True]}
    ranks = np.array([  # columns as `entities`
        [5, 6, 4, 2, 3, 1],
        [1, 6, 5, 2, 4, 3],
        [2, 6, 5, 1, 4, 3],
        [3, 6, 2, 1, 5, 4],
        [2, 20, 6, 3, 5, 1],  # output4 (figure 1's table)
        [1, 2, 3, 10, 6, 4],  # output5
    ])
    return row, ranks, column


def test_rank_change_records_on_figure_1():
    row, ranks, column = figure_1_sequence()
    records = sequence_records(row, ranks, column)
    assert [r["k"] for r in records] == [1, 2, 3, 4, 5]
    first = records[0]  # S1 brings the target itself
    assert (first["target_rank_before"], first["target_rank_after"]) == (5, 1)
    assert (first["added_rank_before"], first["added_rank_after"]) == (5, 1) and first["added_is_correct"]
    assert first["correct_ranks_before"] == first["incorrect_ranks_before"] == []
    third = records[2]  # postnasal drip added to input2 (target, sick feeling)
    assert third["incorrect_ranks_before"] == [1] and third["incorrect_ranks_after"] == [1]
    assert third["correct_ranks_before"] == []
    fifth = records[4]
    assert {key: fifth[key] for key in ("target_rank_before", "target_rank_after", "added_is_correct",
                                        "added_rank_before", "added_rank_after", "correct_ranks_before",
                                        "correct_ranks_after", "incorrect_ranks_before", "incorrect_ranks_after")} == {
        "target_rank_before": 2, "target_rank_after": 1, "added_is_correct": True,
        "added_rank_before": 20, "added_rank_after": 2, "correct_ranks_before": [6], "correct_ranks_after": [3],
        "incorrect_ranks_before": [3, 5], "incorrect_ranks_after": [10, 6]}
    change = ucm([fifth])["rank_change"]["added_correct"]
    assert (change["target"], change["added"], change["correct"], change["incorrect"]) == (-1.0, -18.0, -3.0, 4.0)
    result = ucm(records)
    # correct O_a at k = 1, 3, 5: target 5->1, 2->3, 2->1
    assert (result["num_understand"], result["num_confuse"], result["num_misunderstand"]) == (2, 0, 1)
    assert result["per_relation"]["has symptom"]["num_records"] == 5

    # the negative-target counterpart: the centre is an O_incor and O_t counts among the correct objects
    negative = dict(row, negative=True, center_id="sick feeling",
                    added_entities=[None, "sick feeling", "discolored nasal", "heartburn", "postnasal drip",
                                    "nasal stuffiness"], added_is_correct=[None, False, True, False, True, True])
    records = sequence_records(negative, ranks, column)
    assert records[4]["correct_ranks_before"] == [2, 6] and records[4]["incorrect_ranks_before"] == [5]
    assert (records[4]["target_rank_before"], records[4]["target_rank_after"]) == (3, 10)


def test_figure_1_records_flag_cut_inputs():
    row, ranks, column = figure_1_sequence()
    records = sequence_records(row, ranks, column, whole=[True, True, True, True, True, False])
    assert [r["whole"] for r in records] == [True, True, True, True, False]
    assert all(r["whole"] for r in sequence_records(row, ranks, column))
