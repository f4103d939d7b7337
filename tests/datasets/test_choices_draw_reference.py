"""The multiple-choice draw against the rule as its docstring reads, walked name by name (the reference): the
build's faster draw (each pool made ready once, a query's excluded names cut out) gives the same choices and
labels, including pools whose names normalise alike and queries whose answers are not in their pool."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from medlama.datasets.choices import draw_choices, normalized, with_medlama_choices

# Names that collide after normalisation (case, punctuation, articles) as well as distinct ones
NAMES = ["Aspirin", "aspirin", "Aspirin.", "the aspirin", "Codeine", "codeine!", "Insulin", "Heparin", "heparin",
         "Warfarin", "A warfarin", "Morphine", "Tamoxifen", "Ibuprofen", "ibuprofen", "Zinc", "An Iron", "iron",
         "Folic acid", "folic-acid", "B12", "b 12", "Lithium", "Digoxin"]


def reference_draw(query_id, gold, answers, pool, count, seed):
    """DRAW_RULE step by step: the distinct names of the pool, sorted; every name whose key matches a gold answer
    left out; one name per remaining key (the first in sorted order); drawn and shuffled by
    ``random.Random(f"{seed}:{id}")``."""
    excluded = {normalized(name) for name in [gold, *answers]}
    eligible, kept_keys = [], set()
    for name in sorted(set(pool)):
        key = normalized(name)
        if key in excluded or key in kept_keys:
            continue
        kept_keys.add(key)
        eligible.append(name)
    rng = random.Random(f"{seed}:{query_id}")
    choices = [gold, *rng.sample(eligible, min(count, len(eligible)))]
    rng.shuffle(choices)
    return choices, choices.index(gold)


@settings(max_examples=150, deadline=None)
@given(pool=st.lists(st.sampled_from(NAMES), max_size=24), gold=st.sampled_from(NAMES),
       answers=st.lists(st.sampled_from(NAMES), max_size=4), count=st.integers(1, 12), seed=st.integers(0, 5),
       query=st.integers(0, 10**6))
def test_draw_choices_equals_the_rule_walked_name_by_name(pool, gold, answers, count, seed, query):
    assert draw_choices(f"q-{query}", gold, [gold, *answers], pool, count, seed) == \
        reference_draw(f"q-{query}", gold, [gold, *answers], pool, count, seed)


def test_a_build_draws_every_query_as_the_rule_does():
    """Many queries drawn from one relation's shared pool (as a build draws them): each as the reference draws it
    from the same pool."""
    rng = random.Random(7)
    rows = []
    for i in range(300):
        relation = rng.choice(["may_treat", "may_prevent"])
        answer_names = rng.sample(NAMES, rng.randint(1, 3))
        rows.append({"id": f"{relation}-{i}", "relation": relation, "head_name": rng.choice(NAMES),
                     "answer_names": answer_names})
    drawn = with_medlama_choices(rows, 9, 3)
    for row, out in zip(rows, drawn):
        pool = [name for other in rows if other["relation"] == row["relation"]
                for name in (other["head_name"], *other["answer_names"])]
        assert (out["choices"], out["label"]) == reference_draw(row["id"], row["answer_names"][0],
                                                                row["answer_names"], pool, 9, 3), row["id"]
