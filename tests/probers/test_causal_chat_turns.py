"""Few-shot examples as chat turns (``--chat-template --few-shot N --few-shot-as-multiturn``), against an
independent reference: the tokenizer's own chat template renders the turns (the example's user message and its
filled sentence, then the query's user message), and every candidate's score equals one plain forward pass over
that rendered text with the reply's start and the candidate in the slot. Through ``medlama probe``: the setting is
recorded, and each query's input shows its examples' turns."""

from __future__ import annotations

import json

import numpy as np
import pytest

from medlama.cli import main
from medlama.probers.causal.chat import user_message
from medlama.probers.causal.fewshot import draw, filled
from medlama.probers.query_set import QuerySet

from fp32 import fp32_sum_atol  # tests/helpers (pytest pythonpath)
from probe_outputs import predictions  # tests/helpers: per-query rows of predictions.jsonl
from tiny_causal import NAMES, reference_log_prob, save_causal  # tests/helpers: tiny causal LMs

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread (tests/conftest.py)

#: A small chat template: each turn its role tag, content and end tag; the reply opens with the assistant's tag.
CHAT = ("{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>\n{% endif %}")
TURNS = {"chat_template": True, "few_shot": 1, "few_shot_seed": 2, "few_shot_as_multiturn": True}


def chat_gpt2(folder):
    from transformers import AutoTokenizer

    model = save_causal(folder, "gpt2", positions=256)
    tokenizer = AutoTokenizer.from_pretrained(model)
    tokenizer.chat_template = CHAT
    tokenizer.save_pretrained(model)
    return model, tokenizer


def test_turn_scores_equal_a_plain_pass_over_the_rendered_chat(tmp_path):
    from medlama.probers.causal.prober import CausalLikelihoodProber, LikelihoodSettings

    model, tokenizer = chat_gpt2(tmp_path / "gpt2")
    texts = ["aspirin may treat [Y] .", "insulin may treat [Y] .", "asthma may cause [Y] .", "the cold may cause [Y] ."]
    queries = QuerySet(["t1", "t2", "c1", "c2"], ["treat", "treat", "cause", "cause"], texts,
                       [["pain"], ["diabetes"], ["cough"], ["fever"]], NAMES[:6], "q",
                       subjects=["aspirin", "insulin", "asthma", "cold"])
    prober = CausalLikelihoodProber(model, LikelihoodSettings(system_prompt="Be exact.", **TURNS))
    got = prober.scores(queries)
    for q, (text, (example,)) in enumerate(zip(texts, draw(queries, 1, 2))):
        j = queries.ids.index(example)
        rendered = tokenizer.apply_chat_template(
            [{"role": "system", "content": "Be exact."},
             {"role": "user", "content": user_message(texts[j])},
             {"role": "assistant", "content": filled(texts[j], queries.gold[j][0])},
             {"role": "user", "content": user_message(text)}], tokenize=False, add_generation_prompt=True)
        assert "Fill in the blank: " + texts[j].replace("[Y]", "___") in rendered
        expected = np.array([reference_log_prob(model, rendered + text, name) for name in queries.candidates])
        np.testing.assert_allclose(got[q], expected, rtol=0, atol=fp32_sum_atol(got[q], expected, terms=120))
    one_turn = CausalLikelihoodProber(model, LikelihoodSettings(chat_template=True)).scores(queries)
    assert not np.allclose(one_turn, got)  # the example turns changed the scores


def test_every_causal_method_reads_the_same_turns(tmp_path):
    """The turns are part of the prompted text that every causal method cuts (``CausalLM.split``): generation
    and constrained beams start from the very prefix the likelihood method scores after."""
    from medlama.probers.causal.prober import (CausalConstrainedProber, CausalGenerateProber, CausalLikelihoodProber,
                                               ConstrainedSettings, GenerateSettings, LikelihoodSettings)

    model, _ = chat_gpt2(tmp_path / "gpt2")
    queries = QuerySet(["t1", "t2"], ["treat", "treat"], ["aspirin may treat [Y] .", "insulin may treat [Y] ."],
                       [["pain"], ["diabetes"]], NAMES[:6], "q", subjects=["aspirin", "insulin"])
    likelihood = CausalLikelihoodProber(model, LikelihoodSettings(**TURNS))
    expected = likelihood.inputs(likelihood.prompted(queries))
    assert all(text.count("<|user|>") == 2 and text.count("<|assistant|>") == 2 for text in expected)
    for prober in (CausalGenerateProber(model, GenerateSettings(num_beams=1, **TURNS)),
                   CausalConstrainedProber(model, ConstrainedSettings(**TURNS))):
        assert prober.inputs(prober.prompted(queries)) == expected
        assert len(prober.rank(queries, top_k=3)) == 2


def test_probe_records_the_turns(tmp_path, medlama_tiny):
    from medlama.runs.queries import load_medlama_queries

    model, _ = chat_gpt2(tmp_path / "gpt2")
    out = tmp_path / "out"
    assert main(["probe", "--data", str(medlama_tiny), "--config", "full", "--model", str(model), "--method",
                 "causal-likelihood", "--chat-template", "--few-shot", "1", "--few-shot-seed", "7",
                 "--few-shot-as-multiturn", "--out", str(out)]) == 0
    (result,) = json.loads((out / "results.json").read_text())
    assert result["settings"]["few_shot_as_multiturn"] is True and result["settings"]["chat_template"] is True
    queries = load_medlama_queries(medlama_tiny, "full")
    rows = predictions(out)
    assert [row["few_shot_examples"] for row in rows] == [list(ids) for ids in draw(queries, 1, 7)]
    for row in rows:
        (example,) = row["few_shot_examples"]
        j, q = queries.ids.index(example), queries.ids.index(row["id"])
        left, right = queries.texts[q].split("[Y]")
        assert row["input"] == (f"<|user|>\n{user_message(queries.texts[j])}<|end|>\n"
                                f"<|assistant|>\n{filled(queries.texts[j], queries.gold[j][0])}<|end|>\n"
                                f"<|user|>\n{user_message(queries.texts[q])}<|end|>\n"
                                f"<|assistant|>\n{left.rstrip()}[Y]{right}")


def test_a_text_holding_the_turn_separator_is_read_whole_without_chat_turns(tmp_path):
    """Only a run with few_shot_as_multiturn carries turns in its texts: any other text holding the separator (a
    user's data) is read whole, never cut at it into made-up turns."""
    from medlama.probers.causal.chat import TURN
    from medlama.probers.causal.prober import CausalLikelihoodProber, LikelihoodSettings

    model, _ = chat_gpt2(tmp_path / "gpt2")
    for settings in (LikelihoodSettings(), LikelihoodSettings(chat_template=True)):
        lm = CausalLikelihoodProber(model, settings).lm
        whole, tail = lm.split(f"the patient had asthma and{TURN} fever [Y] ."), lm.split(" fever [Y] .")
        assert whole.prefix != tail.prefix and len(whole.prefix) > len(tail.prefix)
