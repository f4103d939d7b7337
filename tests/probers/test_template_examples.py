"""A template's run draws its few-shot examples from the set its queries were cut from (``whole``, whatever
``--limit`` cut), and those examples read as the template makes its queries."""

from __future__ import annotations

from medlama.probers.causal.fewshot import with_examples
from medlama.probers.query_set import QuerySet
from medlama.runs.templates import TemplateSet, release_templates, template_queries

IDS = ["r-1", "r-2", "r-3"]
HEADS = {"r-1": "asthma", "r-2": "gout", "r-3": "flu"}
ROWS = {qid: {"head_name": head, "query_default": f"{head} default [Y] .", "query_human": f"{head} human [Y] ."}
        for qid, head in HEADS.items()}


def _limited() -> QuerySet:
    whole = QuerySet(IDS, ["rel"] * 3, [ROWS[q]["query_human"] for q in IDS], [["a"], ["b"], ["c"]], ["a", "b", "c"],
                     "hard", subjects=["C1", "C2", "C3"])
    return whole.limit_per_relation(1)  # the first query only; its whole is the three


def test_the_whole_set_takes_the_template_too():
    limited = _limited()
    assert limited.whole is not None and len(limited) == 1
    for name, part in template_queries(limited, ROWS, release_templates()):
        column = {"default_prompt": "query_default", "human_prompt": "query_human"}[name]
        assert part.texts == [ROWS["r-1"][column]]
        assert part.whole.texts == [ROWS[q][column] for q in IDS]  # examples are filled from these
    files = TemplateSet("t.csv", "0" * 64, {"rel": ("[X] causes [Y] .", "[X] leads to [Y] .")})
    (_, first), (_, second) = template_queries(limited, ROWS, files)
    assert first.whole.texts == [f"{HEADS[q]} causes [Y] ." for q in IDS]
    assert second.whole.texts == [f"{HEADS[q]} leads to [Y] ." for q in IDS]


def test_a_templates_examples_read_as_its_queries():
    (_, default), _ = template_queries(_limited(), ROWS, release_templates())
    (text,) = with_examples(default, 2, 0).texts
    assert "human" not in text and text.count("default") == 3  # two examples and the query, one template
