"""``medlama export lm-eval`` run by lm-evaluation-harness itself: the exported tasks, read by lm-eval's
``TaskManager`` from the folder alone, give medlama's numbers on the same queries of the real MedLAMA hard set,
each relation ranked against its own whole pool.

* Ranking: a tiny GPT-2 scores every candidate of two relations (734 and 914 names) for three queries through
  lm-eval's ``hf`` model; each candidate's log-likelihood equals ``causal-likelihood``'s score (so the prompt,
  the slot's space, the text after the slot and the token boundaries are medlama's), each query's top 10 and
  hits equal ``medlama.probe``'s, and the group's acc@1/acc@10 equal medlama's micro and macro values. The
  queries are chosen so that both a hit and a miss occur and the relations differ in size (micro != macro).
* Few-shot: exported with ``--few-shot 2``, lm-eval's ranking (its ``num_fewshot`` and the tasks' sampler) reads
  each query after the same two filled examples as ``medlama probe --few-shot 2`` with the same seed, and
  gives the same log-likelihoods, top 10s and acc@k; its generation task gives ``causal-generate``'s answers.
* Ties: a flat GPT-2 (every token equally likely) ties every candidate with as many tokens, so the ranking is
  decided by the tie rule alone; lm-eval's top 10 and hits are still medlama's.
* Tokenizers: a Llama-style model (SentencePiece, BOS) gets causal-likelihood's scores too.
* Generation: ``medlama_hard_gen``'s greedy answers are ``causal-generate``'s (greedy, raw) and its acc@1 is
  medlama's with normalised matching.
* The folder: self-contained (its ``utils.py`` imports no medlama), ``utils.normalize_answer`` is the acc@k
  metric's, a user's folder is refused and an earlier export replaced.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import sys
from dataclasses import replace

import numpy as np
import pytest

from lm_eval_extra import require_lm_eval  # tests/helpers (pytest pythonpath)

require_lm_eval()  # the optional extra medlama[harness]; CI installs it

from fp32 import fp32_sum_atol  # tests/helpers (pytest pythonpath)
from tiny_causal import save_causal  # tests/helpers: tiny causal LMs with locally trained tokenizers

from medlama.cli import main

pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.slow]

RELATIONS = ("associated_morphology_of", "disease_has_normal_cell_origin")  # pools of 734 and 914 names
#: Queries (index within the relation, in the folder's order) probed: the tiny GPT-2 below ranks a gold name
#: first for associated_morphology_of #9 and disease_has_normal_cell_origin #15 and none in the top 10 for #0,
#: so the group's micro acc@1 (2/3) and macro acc@1 (3/4) differ.
#: Larger batches than the default: a tiny model on a busy CPU spends its time per batch, not per row.
FAST = {"batch_size": 256}
PICKED = {"associated_morphology_of": [0, 9], "disease_has_normal_cell_origin": [15]}  # ascending, as lm-eval wants
#: The few-shot export's draw: two examples per query, seed 11.
SHOTS = {"few_shot": 2, "few_shot_seed": 11}


@pytest.fixture(scope="module")
def tasks(tmp_path_factory, medlama_dir):
    out = tmp_path_factory.mktemp("lm-eval") / "tasks"
    assert main(["export", "lm-eval", "--data", str(medlama_dir), "--out", str(out), "--relations", *RELATIONS]) == 0
    return out


@pytest.fixture(scope="module")
def few_shot_tasks(tmp_path_factory, medlama_dir):
    out = tmp_path_factory.mktemp("lm-eval-few-shot") / "tasks"
    assert main(["export", "lm-eval", "--data", str(medlama_dir), "--out", str(out), "--relations", *RELATIONS,
                 "--few-shot", str(SHOTS["few_shot"]), "--few-shot-seed", str(SHOTS["few_shot_seed"])]) == 0
    return out


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    return save_causal(tmp_path_factory.mktemp("lm-eval-gpt2"), "gpt2", positions=512)


@pytest.fixture(scope="module")
def flat_gpt2(tmp_path_factory):
    return save_causal(tmp_path_factory.mktemp("lm-eval-flat-gpt2"), "gpt2", positions=512, flat=True)


@pytest.fixture(scope="module")
def picked(medlama_dir):
    """The picked queries as one ``QuerySet``, in relation order, each relation's pool kept (rule ``relation``)."""
    from medlama.runs.queries import load_medlama_queries

    queries = load_medlama_queries(medlama_dir, "hard", relations=list(RELATIONS), candidates="relation")
    start = {relation: queries.relations.index(relation) for relation in RELATIONS}
    order = [start[relation] + i for relation in RELATIONS for i in PICKED[relation]]
    assert all(queries.relations[i] == relation for relation in RELATIONS  # a relation's queries are contiguous
               for i in range(start[relation], start[relation] + max(PICKED[relation]) + 1))
    return queries.subset(order)


def lm_eval_run(tasks, model, names, samples):
    import lm_eval
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_path=str(tasks), include_defaults=False)
    return lm_eval.simple_evaluate(model="hf", model_args=f"pretrained={model},dtype=float32", tasks=names,
                                   task_manager=manager, samples=samples, batch_size=64, device="cpu",
                                   log_samples=True)


def ranked(sample, pool) -> list[str]:
    """lm-eval's log-likelihoods of one query as a top 10: higher first, equal scores in pool order."""
    scores = [resp[0] for resp in sample["filtered_resps"]]
    return [pool[i] for i in sorted(range(len(pool)), key=lambda i: (-scores[i], i))[:10]]


def check_ranking(tasks, model, queries, *, check_scores: bool, shots: dict | None = None):
    import medlama
    from medlama.probers.causal.fewshot import with_examples
    from medlama.probers.causal.prober import CausalLikelihoodProber, LikelihoodSettings

    samples = {f"medlama_hard_{relation}": PICKED[relation] for relation in RELATIONS}
    out = lm_eval_run(tasks, model, ["medlama_hard"], samples)
    settings = {**FAST, **(shots or {})}
    result = medlama.probe(str(model), data=queries, method="causal-likelihood", candidates="relation",
                           settings=settings)
    scores = CausalLikelihoodProber(str(model), LikelihoodSettings(**settings)).scores if check_scores else None
    read = with_examples(queries, shots["few_shot"], shots["few_shot_seed"]) if shots else queries
    position = 0
    for relation in RELATIONS:
        pool = queries.pools[relation]
        logged = sorted(out["samples"][f"medlama_hard_{relation}"], key=lambda s: s["doc_id"])
        assert [s["doc_id"] for s in logged] == PICKED[relation]
        assert [s["doc"]["id"] for s in logged] == queries.ids[position:position + len(logged)]
        for sample in logged:
            one = queries.subset([position])
            context, continuation = sample["arguments"][0][:2]
            assert context + continuation == read.texts[position].replace("[Y]", pool[0]), \
                "the rendered prompt is the query (after its examples) with the name in its slot"
            if scores is not None:  # every log-likelihood is causal-likelihood's score (sum) of the same query
                expected = scores(replace(one, candidates=list(pool), rule="evaluated", pools=None))[0]
                got = np.array([resp[0] for resp in sample["filtered_resps"]])
                terms = max(len(name) for name in pool) + len(one.texts[0])  # at least the tokens summed
                np.testing.assert_allclose(got, expected, rtol=0, atol=fp32_sum_atol(got, expected, terms=terms))
            assert ranked(sample, pool) == result.predictions[position]
            for k in (1, 10):
                assert sample[f"acc@{k}"] == float(result.hits(k)[position])
            position += 1
    group = out["results"]["medlama_hard"]
    for k in (1, 10):
        assert group[f"acc@{k},none"] == pytest.approx(result.acc(k, "micro"), abs=1e-12)
        assert group[f"acc@{k}_macro,none"] == pytest.approx(result.acc(k, "macro"), abs=1e-12)
        for relation, row in result.per_relation().items():
            assert out["results"][f"medlama_hard_{relation}"][f"acc@{k},none"] == pytest.approx(row[f"acc@{k}"])
    return result


def test_ranking_equals_causal_likelihood(tasks, gpt2, picked):
    result = check_ranking(tasks, gpt2, picked, check_scores=True)
    assert result.acc(1, "micro") == pytest.approx(2 / 3) and result.acc(1, "macro") == pytest.approx(3 / 4), \
        "the picked queries no longer give a hit and a miss: pick others (see PICKED)"


def test_few_shot_ranking_equals_causal_likelihood(few_shot_tasks, gpt2, picked):
    """``--few-shot 2``: lm-eval's sampler hands each query the examples medlama draws, so the same prompts,
    log-likelihoods, top 10s and acc@k as ``medlama.probe(..., settings={"few_shot": 2, ...})``."""
    from medlama.probers.causal.fewshot import draw

    docs = [json.loads(line) for relation in RELATIONS
            for line in (few_shot_tasks / "data" / "hard" / f"{relation}.jsonl").read_text().splitlines()]
    fewshot = {doc["id"]: doc["fewshot"] for doc in docs}
    assert [fewshot[i] for i in picked.ids] == [list(ids) for ids in draw(picked, **{
        "shots": SHOTS["few_shot"], "seed": SHOTS["few_shot_seed"]})]
    check_ranking(few_shot_tasks, gpt2, picked, check_scores=True, shots=SHOTS)


def test_ties_are_broken_as_medlama_breaks_them(tasks, flat_gpt2, picked):
    result = check_ranking(tasks, flat_gpt2, picked, check_scores=False)
    assert result.acc(10) > 0  # a gold name among the shortest, ahead of others of its length by pool order


def test_sentencepiece_tokenizer_with_bos_scores_equal(tasks, tmp_path, picked):
    """A Llama-style model (SentencePiece word-start marks, a BOS before every text): lm-eval's log-likelihoods
    are still causal-likelihood's, so the token boundaries agree beyond GPT-2's byte-level BPE."""
    from medlama.probers.causal.prober import CausalLikelihoodProber, LikelihoodSettings

    llama = save_causal(tmp_path / "llama", "llama", positions=512)
    relation = RELATIONS[0]
    out = lm_eval_run(tasks, llama, [f"medlama_hard_{relation}"], {f"medlama_hard_{relation}": PICKED[relation][-1:]})
    (sample,) = out["samples"][f"medlama_hard_{relation}"]
    one = picked.subset([picked.ids.index(sample["doc"]["id"])])
    pool = picked.pools[relation]
    expected = CausalLikelihoodProber(str(llama), LikelihoodSettings(**FAST)).scores(
        type(one)(one.ids, one.relations, one.texts, one.gold, pool))[0]
    got = np.array([resp[0] for resp in sample["filtered_resps"]])
    terms = max(len(name) for name in pool) + len(one.texts[0])
    np.testing.assert_allclose(got, expected, rtol=0, atol=fp32_sum_atol(got, expected, terms=terms))


def test_generation_equals_causal_generate(tasks, gpt2, picked):
    check_generation(tasks, gpt2, picked, {})


def test_few_shot_generation_equals_causal_generate(few_shot_tasks, gpt2, picked):
    """The generation task exported with ``--few-shot 2`` reads the same examples as ``causal-generate``."""
    check_generation(few_shot_tasks, gpt2, picked, SHOTS)


def check_generation(tasks, gpt2, picked, shots: dict):
    import medlama
    from medlama.probers.causal.fewshot import with_examples
    from medlama.probers.causal.prober import CausalGenerateProber, GenerateSettings

    sizes = json.loads((tasks / "medlama_export.json").read_text())["tasks"]
    offset = {item["relation"]: sum(t["queries"] for t in sizes[:n]) for n, item in enumerate(sizes)}
    assert [item["relation"] for item in sizes] == list(RELATIONS)  # the generation task's order
    indices = [offset[relation] + i for relation in RELATIONS for i in PICKED[relation]]
    out = lm_eval_run(tasks, gpt2, ["medlama_hard_gen"], {"medlama_hard_gen": indices})
    logged = sorted(out["samples"]["medlama_hard_gen"], key=lambda s: s["doc_id"])
    assert [s["doc"]["id"] for s in logged] == picked.ids
    read = with_examples(picked, shots["few_shot"], shots["few_shot_seed"]) if shots else picked
    for sample, text in zip(logged, read.texts):  # the prompt: the examples (if any), then the text before [Y]
        assert sample["arguments"][0][0] == text.split("[Y]")[0].rstrip()
    settings = GenerateSettings(num_beams=1, to_candidates=False, **shots)
    answers = CausalGenerateProber(str(gpt2), settings).generate(picked, top_k=1)
    utils = _utils(tasks)
    for sample, (answer,) in zip(logged, answers):
        assert utils.normalize_answer(sample["filtered_resps"][0]) == utils.normalize_answer(answer)
    result = medlama.probe(str(gpt2), data=picked, method="causal-generate", match="normalized",
                           settings={"num_beams": 1, "to_candidates": False, **shots}, candidates="relation")
    assert [s["acc@1"] for s in logged] == [float(hit) for hit in result.hits(1)]
    metrics = out["results"]["medlama_hard_gen"]
    assert metrics["acc@1,none"] == pytest.approx(result.acc(1, "micro"))
    assert metrics["acc@1_macro,none"] == pytest.approx(result.acc(1, "macro"))


def _utils(tasks):
    spec = importlib.util.spec_from_file_location("exported_lm_eval_utils", tasks / "utils.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_task_folder_is_self_contained(tasks, picked):
    from medlama.probers.causal.prober import _normalize

    tree = ast.parse((tasks / "utils.py").read_text(encoding="utf-8"))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                 and node.module}
    assert imported <= set(sys.stdlib_module_names) | {"__future__", "datasets", "lm_eval"}
    utils = _utils(tasks)
    names = [name for pool in picked.pools.values() for name in pool] + ["The  Aspirin, (an) ACE-inhibitor."]
    assert [utils.normalize_answer(name) for name in names] == [_normalize(name) for name in names]
    record = json.loads((tasks / "medlama_export.json").read_text())
    assert {t["relation"]: t["pool"] for t in record["tasks"]} == {r: len(picked.pools[r]) for r in RELATIONS}
    readme = (tasks / "README.md").read_text()
    assert "### Citation" in readme and "medlama_hard_associated_morphology_of" in readme


def test_user_folder_refused_and_export_replaced(tmp_path, medlama_dir, capsys):
    user = tmp_path / "mine"
    user.mkdir()
    (user / "notes.txt").write_text("keep")
    args = ["export", "lm-eval", "--data", str(medlama_dir), "--relations", "occurs_after"]
    assert main([*args, "--out", str(user)]) == 2
    assert "not an earlier output" in capsys.readouterr().err
    assert [p.name for p in user.iterdir()] == ["notes.txt"]
    assert main([*args[:-1], "may_treet", "--out", str(tmp_path / "new")]) == 2
    assert "unknown relation(s) 'may_treet' (did you mean 'may_treat'?)" in capsys.readouterr().err
    out = tmp_path / "tasks"
    assert main([*args, "--out", str(out)]) == 0
    assert main([*args[:-1], "may_prevent", "--out", str(out)]) == 0  # an earlier export is replaced
    assert (out / "medlama_hard_may_prevent.yaml").is_file()
    assert not (out / "medlama_hard_occurs_after.yaml").exists()


def test_without_data_the_cached_build_is_exported(tmp_path, tasks, medlama_dir, monkeypatch):
    """``--data`` left out reads the build kept in the cache, as ``probe`` and ``export mteb`` do: the same tasks
    as from that folder named with ``--data``, recorded as the cached build."""
    from medlama.datasets import medlama_folder

    built: list = []

    def cached_build(source=None, cache_dir=None):
        built.append(source)
        return medlama_dir

    monkeypatch.setattr(medlama_folder, "cached_build", cached_build)
    cached = tmp_path / "cached"
    assert main(["export", "lm-eval", "--out", str(cached), "--relations", *RELATIONS]) == 0
    assert built == [None]
    for path in sorted(tasks.rglob("*")):
        # all but the records of where the data came from (and the ownership record listing their hashes)
        if path.is_file() and path.name not in ("medlama_export.json", "README.md") and not path.name.startswith("."):
            assert path.read_bytes() == (cached / path.relative_to(tasks)).read_bytes(), path.name
    record = json.loads((cached / "medlama_export.json").read_text())
    assert record["data"]["kind"] == "build"
    assert json.loads((tasks / "medlama_export.json").read_text())["data"]["kind"] == "folder"
    assert "from `medlama` (build; files SHA-256" in (cached / "README.md").read_text()


def test_without_data_an_unknown_relation_is_refused_before_a_build(tmp_path, monkeypatch, capsys):
    from medlama.datasets import medlama_folder

    def cached_build(source=None, cache_dir=None):
        raise AssertionError("the cached build was made for a refused export")

    monkeypatch.setattr(medlama_folder, "cached_build", cached_build)
    assert main(["export", "lm-eval", "--relations", "may_treet", "--out", str(tmp_path / "tasks")]) == 2
    assert "unknown relation(s) 'may_treet' (did you mean 'may_treat'?)" in capsys.readouterr().err
    assert not (tmp_path / "tasks").exists()
