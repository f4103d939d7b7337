"""``medlama export lm-eval --config hard_mc --few-shot N``: the multiple-choice tasks read each query after the
examples ``medlama probe --config hard_mc --few-shot N --few-shot-seed S`` draws, run by lm-evaluation-harness
itself on a tiny GPT-2.

* Plain text: lm-eval's prompt of every choice is medlama's (the filled examples, a blank line between them,
  then the query with the choice in its slot), its log-likelihood is causal-likelihood's score (sum) of the same
  query and choice, its ``acc`` medlama's acc@1 hit, and the group's ``acc`` medlama's micro acc@1.
* Chat turns (``--few-shot-as-multiturn``, exported for lm-eval's ``--apply_chat_template --fewshot_as_multiturn``,
  with a system message): the tiny GPT-2's tokenizer gets a small chat template; lm-eval's rendered context of
  every request tokenises to medlama's prefix (system turn, each example as a user and an assistant turn, the
  query as the last user turn, the assistant's reply started with the text before ``[Y]``), and the
  log-likelihoods, ``acc`` and the group's ``acc`` are medlama's again.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from lm_eval_extra import require_lm_eval  # tests/helpers (pytest pythonpath)

require_lm_eval()  # the optional extra medlama[harness]; CI installs it

from fp32 import fp32_sum_atol  # tests/helpers (pytest pythonpath)
from tiny_causal import save_causal  # tests/helpers: tiny causal LMs with locally trained tokenizers

from medlama.cli import main

pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.slow]

RELATIONS = ("may_treat", "occurs_after")
FIRST = 6  # queries of each relation run (lm-eval's `samples`: the first FIRST documents of each task)
SHOTS = {"few_shot": 2, "few_shot_seed": 5}
SYSTEM = "Answer as a physician."
#: A small chat template: each turn its role tag, content and end tag; the reply opens with the assistant's tag.
CHAT = ("{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>\n{% endif %}")


def export(medlama_dir, out, *flags):
    assert main(["export", "lm-eval", "--data", str(medlama_dir), "--out", str(out), "--config", "hard_mc",
                 "--relations", *RELATIONS, "--few-shot", str(SHOTS["few_shot"]), "--few-shot-seed",
                 str(SHOTS["few_shot_seed"]), *flags]) == 0
    return out


def check_equal(tasks, model, medlama_dir, settings: dict, **run):
    """lm-eval's run of the exported tasks against medlama's probe with ``settings``; returns lm-eval's samples
    and the queries (each as medlama reads it)."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    import medlama
    from medlama.probers.causal.prober import CausalLikelihoodProber, LikelihoodSettings
    from medlama.probers.pools import one_choice_pool
    from medlama.runs.queries import load_medlama_queries

    queries = load_medlama_queries(medlama_dir, "hard_mc", relations=list(RELATIONS)).limit_per_relation(FIRST)
    out = lm_eval.simple_evaluate(
        model="hf", model_args=f"pretrained={model},dtype=float32", tasks=["medlama_hard_mc"],
        task_manager=TaskManager(include_path=str(tasks), include_defaults=False), num_fewshot=SHOTS["few_shot"],
        samples={f"medlama_hard_mc_{r}": list(range(FIRST)) for r in RELATIONS}, batch_size=64, device="cpu",
        log_samples=True, **run)
    settings = LikelihoodSettings(batch_size=256, **settings)  # the sum reduction, as lm-eval's log-likelihood
    result = medlama.probe(str(model), data=queries, method="causal-likelihood", settings=settings)
    prober = CausalLikelihoodProber(str(model), settings)
    read = prober.prompted(queries)
    position, logged_all = 0, []
    for relation in RELATIONS:
        logged = sorted(out["samples"][f"medlama_hard_mc_{relation}"], key=lambda s: s["doc_id"])
        assert [s["doc"]["id"] for s in logged] == queries.ids[position:position + FIRST]
        for sample in logged:
            choices = queries.choices[position]
            got = np.array([resp[0] for resp in sample["filtered_resps"]])
            expected = prober.scores(one_choice_pool(queries, position))[0]
            terms = max(len(name) for name in choices) + len(read.texts[position])
            np.testing.assert_allclose(got, expected, rtol=0, atol=fp32_sum_atol(got, expected, terms=terms))
            assert choices[int(np.argmax(got))] == result.predictions[position][0]
            assert sample["acc"] == float(result.hits(1)[position])
            logged_all.append((sample, read.texts[position], prober.lm.split(read.texts[position])))
            position += 1
    assert 0 < result.acc(1) < 1, "the queries run give no hit or no miss: change FIRST or the seed"
    assert out["results"]["medlama_hard_mc"]["acc,none"] == pytest.approx(result.acc(1, "micro"), abs=1e-12)
    assert {key: result.settings[key] for key in settings_keys(settings)} == \
        {key: getattr(settings, key) for key in settings_keys(settings)}
    return logged_all


def settings_keys(settings) -> list[str]:
    return ["few_shot", "few_shot_seed", "few_shot_as_multiturn", "chat_template", "system_prompt"]


def test_few_shot_choices_equal_causal_likelihood(tmp_path, medlama_dir):
    from medlama.probers.causal.fewshot import draw
    from medlama.runs.queries import load_medlama_queries

    tasks = export(medlama_dir, tmp_path / "tasks")
    queries = load_medlama_queries(medlama_dir, "hard_mc", relations=list(RELATIONS))
    docs = [json.loads(line) for relation in RELATIONS
            for line in (tasks / "data" / "hard_mc" / f"{relation}.jsonl").read_text().splitlines()]
    assert [doc["fewshot"] for doc in docs] == [list(ids) for ids in draw(queries, 2, 5)]
    gpt2 = save_causal(tmp_path / "gpt2", "gpt2", positions=512)
    for sample, text, _ in check_equal(tasks, gpt2, medlama_dir, SHOTS):
        for (context, continuation), name in zip(sample["arguments"], sample["doc"]["choices"]):
            assert context + continuation == text.replace("[Y]", name), \
                "the rendered prompt is the query (after its examples) with the choice in its slot"
    record = json.loads((tasks / "medlama_export.json").read_text())
    assert record["settings"]["few_shot"] == 2 and record["settings"]["few_shot_as_multiturn"] is False
    assert "`num_fewshot: 2`" in (tasks / "README.md").read_text()


def test_few_shot_as_chat_turns_equal_causal_likelihood(tmp_path, medlama_dir, capsys):
    from transformers import AutoTokenizer

    from medlama.probers.causal.chat import user_message

    tasks = export(medlama_dir, tmp_path / "tasks", "--few-shot-as-multiturn", "--system-prompt", SYSTEM)
    assert capsys.readouterr().out.rstrip().endswith(
        f"--tasks medlama_hard_mc --apply_chat_template --fewshot_as_multiturn --system_instruction \"{SYSTEM}\""), \
        "the printed lm_eval command renders the chat turns the tasks were written for"
    gpt2 = save_causal(tmp_path / "gpt2", "gpt2", positions=1024)
    tokenizer = AutoTokenizer.from_pretrained(gpt2)
    tokenizer.chat_template = CHAT
    tokenizer.save_pretrained(gpt2)
    settings = {**SHOTS, "chat_template": True, "few_shot_as_multiturn": True, "system_prompt": SYSTEM}
    logged = check_equal(tasks, gpt2, medlama_dir, settings, apply_chat_template=True, fewshot_as_multiturn=True,
                         system_instruction=SYSTEM)
    docs = {doc["id"]: doc for relation in RELATIONS
            for doc in map(json.loads, (tasks / "data" / "hard_mc" / f"{relation}.jsonl").read_text().splitlines())}
    for sample, _, split in logged:
        doc = sample["doc"]
        examples = [docs[i] for i in doc["fewshot"]]
        turns = [{"role": "system", "content": SYSTEM}]
        for example in examples:
            turns += [{"role": "user", "content": user_message(example["query"])},
                      {"role": "assistant", "content": example["query"].replace(" [Y]", " " + example["answers"][0])}]
        turns.append({"role": "user", "content": user_message(doc["query"])})
        expected = tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=True) + doc["context"]
        for context, continuation in sample["arguments"]:
            assert context == expected, "lm-eval renders medlama's turns: system, examples, query, reply started"
            assert tokenizer(context, add_special_tokens=False)["input_ids"] == list(split.prefix)
        assert [continuation for _, continuation in sample["arguments"]] == \
            [doc["delimiter"] + name + doc["suffix"] for name in doc["choices"]]
    record = json.loads((tasks / "medlama_export.json").read_text())
    assert record["settings"]["few_shot_as_multiturn"] is True
    assert "--apply_chat_template --fewshot_as_multiturn" in (tasks / "README.md").read_text()
