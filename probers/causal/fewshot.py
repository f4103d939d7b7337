"""Few-shot prompting for the causal methods (``--few-shot N --few-shot-seed S``): each query is read after ``N``
examples, filled prompts of other facts of its relation.

* The examples of a query are drawn (:func:`draw`) from the queries of its relation in the whole query set it
  was cut from (:attr:`QuerySet.whole <medlama.probers.query_set.QuerySet.whole>`: a ``--limit`` or a subset
  draws what the whole set would), never the query itself nor any fact sharing its subject
  (:attr:`QuerySet.subjects <medlama.probers.query_set.QuerySet.subjects>`: MedLAMA's head concept, BioLAMA's
  ``sub_uri``), nor a fact with no gold name to fill in. The draw is ``random.Random(f"{seed}:{query id}").sample`` of the eligible
  facts in query-set order: the same examples for a query however the run is split, resumed or limited.
* An example is its prompt with ``[Y]`` filled by its first gold name (:func:`filled`: the text before the
  slot, trailing spaces removed, one space where the slot followed one, the name, the text after the slot:
  the sentence as the causal methods score a candidate in it); the examples and then the query are joined
  by :data:`DELIMITER` (a blank line, lm-eval's default ``fewshot_delimiter``); with ``few_shot_as_multiturn``
  (and ``chat_template``) each example is two chat turns instead (:mod:`medlama.probers.causal.chat`).
* The drawn ids are recorded per query (:func:`drawn_record`: ``few_shot_examples`` in ``predictions.jsonl``);
  ``medlama export lm-eval --few-shot N`` writes the same draw into each exported document, which its lm-eval
  sampler reads, so both harnesses read the same prompts.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import replace

from medlama.core.defaults import MASK_PLACEHOLDER
from medlama.core.errors import MedlamaInputError
from medlama.probers.causal.chat import user_message, with_turns
from medlama.probers.query_set import QuerySet

__all__ = ["DELIMITER", "draw", "drawn_record", "filled", "with_examples"]

#: Between two examples, and between the last example and the query (lm-eval's default ``fewshot_delimiter``).
DELIMITER = "\n\n"
#: The per-query field of ``predictions.jsonl`` that lists a query's example ids.
RECORD_FIELD = "few_shot_examples"


def filled(text: str, answer: str) -> str:
    """``text`` with its ``[Y]`` slot filled by ``answer``, as the causal methods read a candidate in the slot."""
    left, right = text.split(MASK_PLACEHOLDER)
    delimiter = " " if left.strip() and left[-1:].isspace() else ""
    return left.rstrip() + delimiter + answer + right


def draw(queries: QuerySet, shots: int, seed: int) -> list[tuple[str, ...]]:
    """The ids of each query's ``shots`` examples (see the module docstring), in query order."""
    if shots < 1:
        return [() for _ in queries.ids]
    facts = queries.whole or queries
    if facts.subjects is None:
        raise MedlamaInputError(f"few-shot prompting needs each query's subject (an example never shares the "
                                f"query's), and the query set {queries.name!r} has none (MedLAMA's head_cui)")
    by_relation: dict[str, list[int]] = {}
    for j, relation in enumerate(facts.relations):
        if facts.gold[j] and facts.gold[j][0]:
            by_relation.setdefault(relation, []).append(j)
    subject_of = dict(zip(facts.ids, facts.subjects))
    out = []
    for query_id, relation, subject in zip(queries.ids, queries.relations,
                                           queries.subjects or [subject_of.get(i) for i in queries.ids]):
        eligible = [facts.ids[j] for j in by_relation.get(relation, ())
                    if facts.ids[j] != query_id and facts.subjects[j] != subject]
        if len(eligible) < shots:
            raise MedlamaInputError(f"query {query_id!r} of relation {relation!r} has {len(eligible)} facts with "
                                    f"another subject to draw examples from, fewer than --few-shot {shots}")
        out.append(tuple(random.Random(f"{seed}:{query_id}").sample(eligible, shots)))
    return out


def with_examples(queries: QuerySet, shots: int, seed: int, as_turns: bool = False) -> QuerySet:
    """``queries`` with each text read after its drawn examples (:func:`draw`); unchanged when ``shots`` is 0.

    ``as_turns`` (``few_shot_as_multiturn``): each example as two chat turns, its user message and its filled
    sentence (:func:`medlama.probers.causal.chat.with_turns`), instead of text before the query's."""
    if shots < 1:
        return queries
    facts = queries.whole or queries
    at = {query_id: j for j, query_id in enumerate(facts.ids)}
    texts = []
    for query_id, text, drawn in zip(queries.ids, queries.texts, draw(queries, shots, seed)):
        if not text.split(MASK_PLACEHOLDER)[0].strip():
            raise MedlamaInputError(f"query {query_id!r} opens with {MASK_PLACEHOLDER}: few-shot examples before it "
                                    "would change how its slot reads; probe it without --few-shot")
        examples = [(facts.texts[at[i]], facts.gold[at[i]][0]) for i in drawn]
        if as_turns:
            texts.append(with_turns([(user_message(shown), filled(shown, answer)) for shown, answer in examples],
                                    text, query_id))
        else:
            texts.append(DELIMITER.join([*(filled(shown, answer) for shown, answer in examples), text]))
    return replace(queries, texts=texts)


def drawn_record(queries: QuerySet, settings: Mapping) -> dict[str, list]:
    """The per-query fields a result records of a run with ``settings`` (a prober's settings record): each
    query's example ids under :data:`RECORD_FIELD` when the run drew few-shot examples, else nothing."""
    shots = settings.get("few_shot") or 0
    if shots < 1:
        return {}
    return {RECORD_FIELD: [list(ids) for ids in draw(queries, shots, settings.get("few_shot_seed") or 0)]}
