"""avg-match, ROUGE-L and the hard-set rule: hand-computed values, the rouge package, the release."""

from __future__ import annotations

import csv

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from medlama.datasets.hardness import HardnessRule, avg_match, avg_rouge_l, rouge_l, split_answers


def f1(overlap: int, n_hyp: int, n_ref: int) -> float:
    p, r = overlap / n_hyp, overlap / n_ref
    return 2 * p * r / (p + r + 1e-8)


def test_rouge_l_hand_computed():
    # LCS of "a b c" and "a c" is "a c": P = 2/3, R = 1.
    assert rouge_l("a b c", "a c") == pytest.approx(f1(2, 3, 2), abs=1e-12)
    # Words count once: "of the of" has 2 distinct words, and "of" matches once.
    assert rouge_l("of the of", "of") == pytest.approx(f1(1, 2, 1), abs=1e-12)
    # Summary level: the union of the LCS with each hypothesis sentence ("a" from one, "c" from the other).
    assert rouge_l("a b. c d", "c a") == pytest.approx(f1(2, 4, 2), abs=1e-12)
    # The 1e-8 term: identical texts give slightly less than 1.
    assert rouge_l("x y", "x y") == pytest.approx(1 - 5e-9, abs=1e-12)
    assert rouge_l("x y", "x y") < 1.0
    assert rouge_l("abc", "xyz") == 0.0
    assert rouge_l("...", "abc") == 0.0


def test_avg_match_keeps_surrounding_spaces():
    # The release splits tail_names on "||" and keeps the spaces around each answer.
    answers = split_answers("Bacterial Infections || Mycoses")
    assert answers == ["Bacterial Infections ", " Mycoses"]
    assert avg_match("mycoses of the skin", answers) == 0.0  # " mycoses" needs a space before it
    assert avg_match("skin mycoses", answers) == 0.5
    assert avg_match("Bacterial Infections of Mycoses", answers) == 1.0


def test_rule_is_strict():
    rule = HardnessRule()
    assert rule.is_hard(0.0, 0.0999999)
    assert not rule.is_hard(0.1, 0.0)
    assert not rule.is_hard(0.0, 0.1)
    assert HardnessRule(0.5, 0.5).is_hard(0.4, 0.4)


def test_empty_answers_rejected():
    with pytest.raises(ValueError, match="at least one answer"):
        avg_match("x", [])
    with pytest.raises(ValueError, match="at least one answer"):
        avg_rouge_l("x", [])


WORDS = st.sampled_from(["a", "b", "c", "of", "the", "cell", "Gene", "x"])
TEXT = st.lists(st.tuples(WORDS, st.sampled_from([" ", " ", ". ", "  ", "."])), min_size=1, max_size=9).map(
    lambda parts: "".join(word + sep for word, sep in parts).strip(" .") or "a")


@settings(max_examples=300, deadline=None)
@given(TEXT, TEXT)
def test_equals_the_rouge_package(hypothesis_text, reference_text):
    rouge = pytest.importorskip("rouge")  # the package the released scores were made with (test extra)
    expected = rouge.Rouge(metrics=["rouge-l"]).get_scores(hypothesis_text, reference_text)[0]["rouge-l"]["f"]
    assert rouge_l(hypothesis_text, reference_text) == pytest.approx(expected, abs=1e-12)


def test_released_scores_reproduced(medlama_source):
    """Every one of the 19,000 released avg_match / avg_rouge_l values, to 1e-6."""
    files = sorted((medlama_source / "2021AA").glob("*_1000.csv"))
    assert len(files) == 19
    rows = 0
    for path in files:
        with open(path, newline="", encoding="utf-8") as handle:
            for record in csv.DictReader(handle):
                answers = split_answers(record["tail_names"])
                assert avg_match(record["head_name"], answers) == pytest.approx(float(record["avg_match"]), abs=1e-6)
                assert avg_rouge_l(record["head_name"], answers) == pytest.approx(float(record["avg_rouge_l"]), abs=1e-6)
                rows += 1
    assert rows == 19_000
