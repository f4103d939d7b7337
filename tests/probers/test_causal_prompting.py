"""Few-shot prompting and the system prompt of the causal methods.

* The draw (:mod:`medlama.probers.causal.fewshot`): on a built query set with shared subjects, for every query,
  every seed of a range and every number of shots, the examples are distinct facts of the query's relation,
  never the query nor a fact with its subject, and every such fact is drawn by some seed; a part of the set
  draws what the whole draws; too few facts, or no subjects, is refused.
* Scores: with ``few_shot`` the tiny GPT-2 and Llama score each candidate as a plain forward pass scores it in
  the concatenated text (the filled examples, blank lines, the query with the name in its slot).
* Records: ``medlama probe --few-shot`` writes each query's example ids in ``predictions.jsonl``, its input
  starts with those examples filled, and ``results.json`` records the setting.
* ``--system-prompt`` is the chat template's system message (the prefix is the template's own rendering with
  it); without ``--chat-template`` it is refused, as is a template that refuses a system turn.
* BioLAMA: its subjects are the `sub_uri` of each triple; a probe with ``--few-shot`` draws by the same rule.
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from medlama.cli import main
from medlama.core.errors import MedlamaInputError
from medlama.probers.causal.fewshot import DELIMITER, draw, filled, with_examples
from medlama.probers.query_set import QuerySet

from fp32 import fp32_sum_atol  # tests/helpers (pytest pythonpath)
from probe_outputs import predictions  # tests/helpers: per-query rows of predictions.jsonl
from tiny_causal import NAMES, reference_log_prob, save_causal  # tests/helpers: tiny causal LMs

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread (tests/conftest.py)


def built_set() -> QuerySet:
    """Two relations; subjects shared inside a relation (s1 twice in r1) and across relations (s2)."""
    rows = [("a1", "r1", "s1"), ("a2", "r1", "s1"), ("a3", "r1", "s2"), ("a4", "r1", "s3"), ("a5", "r1", "s4"),
            ("a6", "r1", "s5"), ("b1", "r2", "s2"), ("b2", "r2", "s6"), ("b3", "r2", "s7"), ("b4", "r2", "s6")]
    return QuerySet([i for i, _, _ in rows], [r for _, r, _ in rows],
                    [f"{s} of {r} is [Y] ." for _, r, s in rows], [[f"gold {i}", "other"] for i, _, _ in rows],
                    ["x"], "built", subjects=[s for _, _, s in rows])


def test_draw_follows_the_exclusion_rule_exhaustively():
    queries = built_set()
    for q, (query_id, relation, subject) in enumerate(zip(queries.ids, queries.relations, queries.subjects)):
        allowed = {j for j in range(len(queries)) if queries.relations[j] == relation and j != q
                   and queries.subjects[j] != subject}
        allowed_ids = {queries.ids[j] for j in allowed}
        alone = queries.subset([q])  # drawn from the whole set all the same
        for shots in range(1, len(allowed) + 1):
            seen = set()
            for seed in range(40):
                (drawn,) = draw(alone, shots, seed)
                assert len(drawn) == len(set(drawn)) == shots
                assert set(drawn) <= allowed_ids, (query_id, drawn)
                assert draw(alone, shots, seed) == [drawn]  # reproducible
                seen |= set(drawn)
            assert seen == allowed_ids, (query_id, shots)  # every eligible fact can be drawn
        with pytest.raises(MedlamaInputError, match=f"query '{query_id}' of relation '{relation}' has "
                                                    f"{len(allowed)} facts"):
            draw(alone, len(allowed) + 1, 0)


def test_a_part_draws_what_the_whole_draws():
    queries = built_set()
    part = queries.subset([4, 7]).limit_per_relation(1)
    assert part.whole is queries
    assert draw(part, 2, 5) == [draw(queries, 2, 5)[4], draw(queries, 2, 5)[7]]
    texts = with_examples(part, 2, 5).texts
    for text, query, drawn in zip(texts, [4, 7], draw(part, 2, 5)):
        at = [queries.ids.index(i) for i in drawn]
        assert text == DELIMITER.join([*(filled(queries.texts[j], queries.gold[j][0]) for j in at),
                                       queries.texts[query]])


def test_no_subjects_is_refused():
    queries = replace(built_set(), subjects=None)
    with pytest.raises(MedlamaInputError, match="needs each query's subject.*'built' has none"):
        draw(queries, 1, 0)
    assert with_examples(queries, 0, 0) is queries  # nothing asked, nothing needed


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_few_shot_scores_equal_the_concatenated_text(kind, tmp_path):
    from medlama.probers.causal.prober import CausalLikelihoodProber, LikelihoodSettings

    model = save_causal(tmp_path / kind, kind)
    texts = ["aspirin may treat [Y] .", "insulin may treat [Y] .", "asthma may cause [Y] .", "the cold may cause [Y] ."]
    queries = QuerySet(["t1", "t2", "c1", "c2"], ["treat", "treat", "cause", "cause"], texts,
                       [["pain"], ["diabetes"], ["cough"], ["fever"]], NAMES[:6], "q",
                       subjects=["aspirin", "insulin", "asthma", "cold"])
    prober = CausalLikelihoodProber(model, LikelihoodSettings(few_shot=1, few_shot_seed=2))
    got = prober.scores(queries)
    for q, (text, (example,)) in enumerate(zip(texts, draw(queries, 1, 2))):
        j = queries.ids.index(example)
        whole = filled(texts[j], queries.gold[j][0]) + DELIMITER + text
        expected = np.array([reference_log_prob(model, whole, name) for name in queries.candidates])
        np.testing.assert_allclose(got[q], expected, rtol=0, atol=fp32_sum_atol(got[q], expected, terms=40))
    plain = CausalLikelihoodProber(model, LikelihoodSettings()).scores(queries)
    assert not np.allclose(plain, got)  # the examples changed the scores


def test_probe_records_each_querys_examples(tmp_path, medlama_tiny, tiny_gpt2):
    from medlama.runs.queries import load_medlama_queries

    out = tmp_path / "out"
    assert main(["probe", "--data", str(medlama_tiny), "--config", "full", "--model", str(tiny_gpt2),
                 "--method", "causal-likelihood", "--few-shot", "1", "--few-shot-seed", "7", "--out", str(out)]) == 0
    (result,) = json.loads((out / "results.json").read_text())
    assert (result["settings"]["few_shot"], result["settings"]["few_shot_seed"]) == (1, 7)
    queries = load_medlama_queries(medlama_tiny, "full")
    rows = predictions(out)
    assert [row["few_shot_examples"] for row in rows] == [list(ids) for ids in draw(queries, 1, 7)]
    for row in rows:
        (example,) = row["few_shot_examples"]
        j = queries.ids.index(example)
        assert queries.relations[j] == row["relation"] and example != row["id"]
        assert queries.subjects[j] != queries.subjects[queries.ids.index(row["id"])]
        assert row["input"].startswith(filled(queries.texts[j], queries.gold[j][0]) + DELIMITER)


def test_system_prompt_is_the_chat_templates_system_message(tmp_path):
    from medlama.probers.causal.scoring import CHAT_INSTRUCTION, CausalLM, CausalModelSettings

    model = save_causal(tmp_path / "llama", "llama")
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)
    tokenizer.chat_template = ("{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                               "{% if add_generation_prompt %}assistant:{% endif %}")
    tokenizer.save_pretrained(model)
    lm = CausalLM(model, "causal-likelihood", CausalModelSettings(chat_template=True, system_prompt="Be exact."))
    text = "aspirin may treat [Y] ."
    message = CHAT_INSTRUCTION.format(query="aspirin may treat ___ .")
    rendered = tokenizer.apply_chat_template([{"role": "system", "content": "Be exact."},
                                              {"role": "user", "content": message}], tokenize=True,
                                             add_generation_prompt=True, return_dict=False)
    assert list(lm.split(text).prefix) == list(rendered) + lm.ids("aspirin may treat")
    with pytest.raises(MedlamaInputError, match="give chat_template too"):
        CausalModelSettings(system_prompt="Be exact.")
    tokenizer.chat_template = ("{% for m in messages %}{% if m['role'] == 'system' %}"
                               "{{ raise_exception('no system role') }}{% endif %}{{ m['content'] }}{% endfor %}")
    tokenizer.save_pretrained(model)
    refusing = CausalLM(model, "causal-likelihood", CausalModelSettings(chat_template=True, system_prompt="x"))
    with pytest.raises(MedlamaInputError, match="refuses a system message"):
        refusing.split(text)


def test_biolama_queries_draw_by_their_subject(biolama_dir, tiny_gpt2, tmp_path):
    """BioLAMA's subjects are its ``sub_uri``: few-shot works there too, by the same rule."""
    from medlama.runs.biolama_queries import load_biolama_queries

    built = biolama_dir
    queries = load_biolama_queries(built, "wikidata")
    assert queries.subjects is not None and len(set(queries.subjects)) > 1
    out = tmp_path / "out"
    assert main(["probe", "--dataset", "biolama", "--data", str(built), "--config", "wikidata", "--model",
                 str(tiny_gpt2), "--method", "causal-likelihood", "--few-shot", "1", "--out", str(out)]) == 0
    rows = predictions(out)
    assert [row["few_shot_examples"] for row in rows] == [list(ids) for ids in draw(queries, 1, 0)]
    for row in rows:
        (example,) = row["few_shot_examples"]
        j, q = queries.ids.index(example), queries.ids.index(row["id"])
        assert queries.relations[j] == queries.relations[q] and queries.subjects[j] != queries.subjects[q]


def test_multiple_choice_queries_keep_their_subjects_for_the_draw(medlama_dir):
    """A ``*_mc`` config names each query's subject (its head CUI) as the plain config does: few-shot draws on
    it by the same rule."""
    from medlama.runs.queries import load_medlama_queries

    relations = ["associated_morphology_of"]
    choices = load_medlama_queries(medlama_dir, "hard_mc", relations=relations)
    plain = load_medlama_queries(medlama_dir, "hard", relations=relations)
    assert dict(zip(choices.ids, choices.subjects)) == {q: s for q, s in zip(plain.ids, plain.subjects)
                                                        if q in set(choices.ids)}
    subject = dict(zip(choices.ids, choices.subjects))
    for query, examples in zip(choices.ids, draw(choices, 2, 0)):
        assert len(examples) == 2 and all(subject[e] != subject[query] and e != query for e in examples)
