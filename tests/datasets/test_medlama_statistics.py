"""The MedLAMA statistics table (card and `medlama build` output) on rows small enough to count by hand."""

from __future__ import annotations


import pytest
from datasets import Dataset

from medlama.datasets.statistics import medlama_statistics, single_token_share


class WordTokenizer:
    """A stand-in tokenizer with one token per space-separated word, so token counts are plain to see."""

    def __call__(self, names, add_special_tokens=True):
        # With special tokens ([CLS] ... [SEP]) nothing would ever be a single token.
        assert add_special_tokens is False
        return {"input_ids": [list(range(len(name.split()))) for name in names]}


def queries(rows):
    return Dataset.from_dict({"relation": [r for r, _ in rows], "answer_names": [a for _, a in rows]})


FULL = [("may_treat", ["aspirin", "heart attack"]),
        ("may_treat", ["aspirin"]),
        ("occurs_after", ["blood pressure", "x", "y"])]
HARD = [FULL[1]]


def test_single_token_share():
    assert single_token_share(["aspirin", "heart attack", "x"], WordTokenizer()) == pytest.approx(2 / 3)
    assert single_token_share([], WordTokenizer()) is None


def test_statistics_hand_computed():
    may_treat, occurs_after, everything = medlama_statistics({"full": queries(FULL), "hard": queries(HARD)},
                                                             tokenizer=WordTokenizer())
    # may_treat: 2 queries with 2 and 1 answers; 1 hard (1 answer). Distinct answers: aspirin, heart attack,
    # one of them a single token; occurrences: aspirin, heart attack, aspirin: 2 of 3.
    assert may_treat == {"relation": "may_treat", "full": 2, "hard": 1, "answers_per_query_full": 1.5,
                         "answers_per_query_hard": 1.0, "distinct_answers": 2, "single_token_answers": 0.5,
                         "single_token_answer_occurrences": pytest.approx(2 / 3)}
    # occurs_after: 1 query with 3 answers, no hard one; x and y are single tokens, "blood pressure" is not.
    assert occurs_after.pop("answers_per_query_hard") is None
    assert occurs_after == {"relation": "occurs_after", "full": 1, "hard": 0, "answers_per_query_full": 3.0,
                            "distinct_answers": 3, "single_token_answers": pytest.approx(2 / 3),
                            "single_token_answer_occurrences": pytest.approx(2 / 3)}
    # all: 6 answers over 3 queries; 5 distinct (aspirin counted once), 3 of them single tokens
    # (aspirin, x, y); occurrences: aspirin twice, x, y out of 6.
    assert everything == {"relation": "all", "full": 3, "hard": 1, "answers_per_query_full": 2.0,
                          "answers_per_query_hard": 1.0, "distinct_answers": 5, "single_token_answers": 0.6,
                          "single_token_answer_occurrences": pytest.approx(4 / 6)}
