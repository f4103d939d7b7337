"""Hardness scores of a MedLAMA query and the hard-set rule (paper appendix A.1).

A query is *easy* when its answers can be read off the head name. Two scores measure that:

* ``avg_match``: the share of answers whose lower-cased text is a substring of the lower-cased head name;
* ``avg_rouge_l``: the mean over answers of ROUGE-L F1 with hypothesis = head name, reference = answer.

The released scores were made with the ``rouge`` PyPI package's *summary-level* ROUGE-L: text split
into sentences on ``.``, sentences into words on single spaces, words counted as a **set** (a repeated
word counts once), the union LCS across sentences, and ``F = 2PR / (P + R + 1e-8)``. ``rouge-score``'s
own scorers tokenise and count differently (see ``reference/method-notes.md``), so here only its LCS
primitives are used, arranged to follow the same backtracking path as the ``rouge`` package; the
result reproduces every released value of the 19,000 full-set rows.

The hard set is the full-set rows with ``avg_match < match_threshold`` **and**
``avg_rouge_l < rouge_threshold`` (strictly less; both 0.1 in the release).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rouge_score.rouge_scorer import _backtrack_norec, _lcs_table

#: Thresholds of the released hard set.
MATCH_THRESHOLD = 0.1
ROUGE_THRESHOLD = 0.1


def split_answers(tail_names: str) -> list[str]:
    """Answers of a release row as the released scores saw them: ``tail_names`` split on ``||``.

    Surrounding spaces are kept on purpose (``"Mycoses "``): they take part in the substring test
    of ``avg_match`` exactly as they did when the release was made.
    """
    return tail_names.split("||")


def avg_match(head_name: str, answers: Sequence[str]) -> float:
    """Share of ``answers`` whose lower-cased text occurs in the lower-cased ``head_name``."""
    if not answers:
        raise ValueError("avg_match needs at least one answer")
    head = head_name.lower()
    return sum(answer.lower() in head for answer in answers) / len(answers)


def _sentences(text: str) -> list[str]:
    # The rouge package's split: on '.', drop empty pieces, fold runs of whitespace.
    # A whitespace-only piece survives as "" and then counts as one (empty) word, as upstream.
    return [" ".join(piece.split()) for piece in text.split(".") if len(piece) > 0]


def _words(sentences: Sequence[str]) -> list[str]:
    return [word for sentence in sentences for word in sentence.split(" ")]


def rouge_l(hypothesis: str, reference: str) -> float:
    """Summary-level ROUGE-L F1 as the ``rouge`` package (``exclusive=True``) computes it.

    Returns 0.0 where either side has no sentence at all (``""`` or only dots), a case on which the
    ``rouge`` package raises; no MedLAMA row has one.
    """
    hyp_sentences = _sentences(hypothesis)
    ref_sentences = _sentences(reference)
    if not hyp_sentences or not ref_sentences:
        return 0.0
    n_ref = len(set(_words(ref_sentences)))
    n_hyp = len(set(_words(hyp_sentences)))
    union: set[str] = set()
    for ref_sentence in ref_sentences:
        ref_words = ref_sentence.split(" ")
        for hyp_sentence in hyp_sentences:
            hyp_words = hyp_sentence.split(" ")
            # The rouge package walks its table with ties moving along the hypothesis; rouge-score's
            # backtracking moves along its first argument on ties, so the hypothesis goes first.
            table = _lcs_table(hyp_words, ref_words)
            union.update(hyp_words[k] for k in _backtrack_norec(table, hyp_words, ref_words))
    overlap = len(union)
    recall = overlap / n_ref
    precision = overlap / n_hyp
    return 2.0 * ((precision * recall) / (precision + recall + 1e-8))


def avg_rouge_l(head_name: str, answers: Sequence[str]) -> float:
    """Mean ROUGE-L F1 of the lower-cased head name (hypothesis) against each lower-cased answer."""
    if not answers:
        raise ValueError("avg_rouge_l needs at least one answer")
    head = head_name.lower()
    return sum(rouge_l(head, answer.lower()) for answer in answers) / len(answers)


@dataclass(frozen=True)
class HardnessRule:
    """The hard-set rule: both scores strictly below their thresholds."""

    match_threshold: float = MATCH_THRESHOLD
    rouge_threshold: float = ROUGE_THRESHOLD

    def is_hard(self, match: float, rouge: float) -> bool:
        return match < self.match_threshold and rouge < self.rouge_threshold
