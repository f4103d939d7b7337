"""``medlama export lm-eval --config hard --few-shot 2 --few-shot-as-multiturn``: the ranking and generation tasks
run by lm-evaluation-harness itself with ``--apply_chat_template --fewshot_as_multiturn`` (and a system message)
on a tiny GPT-2 whose tokenizer is given a small chat template read what ``medlama probe --chat-template
--few-shot 2 --few-shot-as-multiturn`` reads: lm-eval's rendered context of every request is medlama's turns and
tokenises to medlama's prefix; every candidate's log-likelihood is causal-likelihood's score, the top 10s and
acc@k are medlama's, and the greedy answers are causal-generate's."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from lm_eval_extra import require_lm_eval  # tests/helpers (pytest pythonpath)

require_lm_eval()  # the optional extra medlama[harness]; CI installs it

from fp32 import fp32_sum_atol  # tests/helpers (pytest pythonpath)
from tiny_causal import save_causal  # tests/helpers: tiny causal LMs with locally trained tokenizers

from medlama.cli import main

pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.slow]

RELATION = "associated_morphology_of"  # a pool of 734 names
PICKED = [0, 9]  # with the tiny GPT-2 below, one has a gold name in its top 10 and one has none (asserted)
SHOTS = {"few_shot": 2, "few_shot_seed": 3}
SYSTEM = "Answer as a physician."
#: A small chat template: each turn its role tag, content and end tag; the reply opens with the assistant's tag.
CHAT = ("{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>\n{% endif %}")
TURNS = {**SHOTS, "chat_template": True, "few_shot_as_multiturn": True, "system_prompt": SYSTEM}


@pytest.fixture(scope="module")
def setup(tmp_path_factory, medlama_dir):
    from transformers import AutoTokenizer

    from medlama.runs.queries import load_medlama_queries

    root = tmp_path_factory.mktemp("lm-eval-chat-turns")
    tasks = root / "tasks"
    assert main(["export", "lm-eval", "--data", str(medlama_dir), "--out", str(tasks), "--relations", RELATION,
                 "--few-shot", "2", "--few-shot-seed", "3", "--few-shot-as-multiturn", "--system-prompt", SYSTEM]) == 0
    model = save_causal(root / "gpt2", "gpt2", positions=1024)
    tokenizer = AutoTokenizer.from_pretrained(model)
    tokenizer.chat_template = CHAT
    tokenizer.save_pretrained(model)
    queries = load_medlama_queries(medlama_dir, "hard", relations=[RELATION], candidates="relation").subset(PICKED)
    return tasks, model, tokenizer, queries


def lm_eval_run(tasks, model, task):
    import lm_eval
    from lm_eval.tasks import TaskManager

    return lm_eval.simple_evaluate(
        model="hf", model_args=f"pretrained={model},dtype=float32", tasks=[task],
        task_manager=TaskManager(include_path=str(tasks), include_defaults=False), samples={task: PICKED},
        batch_size=64, device="cpu", log_samples=True, apply_chat_template=True, fewshot_as_multiturn=True,
        system_instruction=SYSTEM)


def check_contexts(logged, tokenizer, lm, texts):
    """Every request's context is medlama's rendered turns, and tokenises to medlama's prefix."""
    for sample, text in zip(logged, texts):
        prefix = list(lm.split(text).prefix)
        for arguments in sample["arguments"]:
            assert tokenizer(arguments[0], add_special_tokens=False)["input_ids"] == prefix
            assert arguments[0].startswith(f"<|system|>\n{SYSTEM}<|end|>\n<|user|>\nFill in the blank: ")
            assert arguments[0].count("<|assistant|>") == 3  # two examples' replies, then the query's started


def test_ranking_with_chat_turns_equals_causal_likelihood(setup):
    import medlama
    from medlama.probers.causal.prober import CausalLikelihoodProber, LikelihoodSettings

    tasks, model, tokenizer, queries = setup
    out = lm_eval_run(tasks, model, f"medlama_hard_{RELATION}")
    logged = sorted(out["samples"][f"medlama_hard_{RELATION}"], key=lambda s: s["doc_id"])
    assert [s["doc"]["id"] for s in logged] == queries.ids
    settings = LikelihoodSettings(batch_size=256, **TURNS)
    prober = CausalLikelihoodProber(str(model), settings)
    check_contexts(logged, tokenizer, prober.lm, prober.prompted(queries).texts)
    result = medlama.probe(str(model), data=queries, method="causal-likelihood", candidates="relation",
                           settings=settings)
    pool = queries.pools[RELATION]
    for q, sample in enumerate(logged):
        got = np.array([resp[0] for resp in sample["filtered_resps"]])
        one = queries.subset([q])
        expected = prober.scores(replace(one, candidates=list(pool), rule="evaluated", pools=None))[0]
        terms = max(len(name) for name in pool) + 3 * len(one.texts[0])
        np.testing.assert_allclose(got, expected, rtol=0, atol=fp32_sum_atol(got, expected, terms=terms))
        top = [pool[i] for i in sorted(range(len(pool)), key=lambda i: (-got[i], i))[:10]]
        assert top == result.predictions[q]
        for k in (1, 10):
            assert sample[f"acc@{k}"] == float(result.hits(k)[q])
    assert 0 < result.acc(10) < 1, "the picked queries give no hit or no miss: pick others"
    assert result.settings["few_shot_as_multiturn"] is True


def test_generation_with_chat_turns_equals_causal_generate(setup):
    from medlama.probers.causal.prober import CausalGenerateProber, GenerateSettings

    tasks, model, tokenizer, queries = setup
    out = lm_eval_run(tasks, model, "medlama_hard_gen")
    logged = sorted(out["samples"]["medlama_hard_gen"], key=lambda s: s["doc_id"])
    assert [s["doc"]["id"] for s in logged] == queries.ids
    prober = CausalGenerateProber(str(model), GenerateSettings(num_beams=1, to_candidates=False, **TURNS))
    check_contexts(logged, tokenizer, prober.lm, prober.prompted(queries).texts)
    answers = prober.generate(queries, top_k=1)
    assert all(answer.strip() for (answer,) in answers), "an empty answer would make the comparison trivial"
    normalize = " ".join
    for sample, (answer,) in zip(logged, answers):
        assert normalize(sample["filtered_resps"][0].split()) == normalize(answer.split())
