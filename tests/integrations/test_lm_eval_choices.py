"""``medlama export lm-eval --config hard_mc``: the multiple-choice configs as lm-eval's own ``multiple_choice``
tasks, run by lm-evaluation-harness itself on a tiny GPT-2. Each choice's log-likelihood is causal-likelihood's
score (sum) of the same query and name, lm-eval's ``acc`` of every query is medlama's acc@1 hit (lm-eval's argmax
is medlama's top choice), and the group's ``acc`` is medlama's micro acc@1 on the same queries and choices."""

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
FIRST = 8  # queries of each relation run (lm-eval's `samples`: the first FIRST documents of each task)


def test_lm_eval_acc_equals_medlama_acc_at_1(tmp_path, medlama_dir, capsys):
    import lm_eval
    from lm_eval.tasks import TaskManager

    import medlama
    from medlama.probers.causal.prober import CausalLikelihoodProber, LikelihoodSettings
    from medlama.probers.pools import one_choice_pool
    from medlama.runs.queries import load_medlama_queries

    tasks = tmp_path / "tasks"
    assert main(["export", "lm-eval", "--data", str(medlama_dir), "--out", str(tasks), "--config", "hard_mc",
                 "--relations", *RELATIONS]) == 0
    assert "multiple choice, chance level 10.00%" in capsys.readouterr().out
    assert not (tasks / "medlama_hard_mc_gen.yaml").exists()
    record = json.loads((tasks / "medlama_export.json").read_text())
    assert record["loglikelihood_requests"] == 10 * sum(t["queries"] for t in record["tasks"])
    gpt2 = save_causal(tmp_path / "gpt2", "gpt2", positions=512)
    queries = load_medlama_queries(medlama_dir, "hard_mc", relations=list(RELATIONS)).limit_per_relation(FIRST)
    out = lm_eval.simple_evaluate(
        model="hf", model_args=f"pretrained={gpt2},dtype=float32", tasks=["medlama_hard_mc"],
        task_manager=TaskManager(include_path=str(tasks), include_defaults=False),
        samples={f"medlama_hard_mc_{r}": list(range(FIRST)) for r in RELATIONS}, batch_size=64, device="cpu",
        log_samples=True)
    settings = LikelihoodSettings(batch_size=256)  # the default reduction: the sum, as lm-eval's log-likelihood
    result = medlama.probe(str(gpt2), data=queries, method="causal-likelihood", settings=settings)
    scores = CausalLikelihoodProber(str(gpt2), settings).scores
    position = 0
    for relation in RELATIONS:
        logged = sorted(out["samples"][f"medlama_hard_mc_{relation}"], key=lambda s: s["doc_id"])
        assert [s["doc"]["id"] for s in logged] == queries.ids[position:position + FIRST]
        for sample in logged:
            choices = queries.choices[position]
            assert sample["doc"]["choices"] == choices and choices[sample["target"]] in queries.gold[position]
            got = np.array([resp[0] for resp in sample["filtered_resps"]])
            expected = scores(one_choice_pool(queries, position))[0]
            terms = max(len(name) for name in choices) + len(queries.texts[position])
            np.testing.assert_allclose(got, expected, rtol=0, atol=fp32_sum_atol(got, expected, terms=terms))
            assert choices[int(np.argmax(got))] == result.predictions[position][0]
            assert sample["acc"] == float(result.hits(1)[position])
            position += 1
    assert 0 < result.acc(1) < 1, "the queries run give no hit or no miss: change FIRST"
    group = out["results"]["medlama_hard_mc"]
    assert group["acc,none"] == pytest.approx(result.acc(1, "micro"), abs=1e-12)
    assert "acc_norm,none" in group
    assert result.data["candidates"]["rule"] == "choices"
    assert result.data["candidates"]["chance_level"] == pytest.approx(0.1)
