"""Scoring context-variance sets: the two rankers against hand computations, rank-change records on figure 1
of the paper, and ``medlama ucm`` end to end on tiny models (JSON, PNG, records), plus bad input.

The sets come from the corpora and tiny MedLAMA folder of ``tests/test_cv_build.py`` (loaded by path).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from medlama.cli import main
from medlama.errors import MedlamaInputError
from medlama.probers.context_rankers import MaskedLMRanker, RetrievalRanker, make_ranker, ranks_from_scores
from medlama.ucm_run import load_sets, sequence_records, ucm

_spec = importlib.util.spec_from_file_location("cv_build_tests", Path(__file__).with_name("test_cv_build.py"))
cvb = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cvb)

POOL = ["wheeze", "cough", "fever", "heartburn", "runny nose", "shortness of breath", "nausea"]
INPUTS = ["asthma may have finding [Y] .",
          "The patient reports wheeze and cough at night. asthma may have finding [Y] .",
          "wheeze, cough, heartburn. asthma may have finding [Y] ."]


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny models run faster on one thread than on busy shared cores; restored afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tiny_mlm(make_tiny_bert) -> Path:
    """A 2-layer BERT with an MLM head and the bundled model's vocabulary."""
    return make_tiny_bert("cv-tiny-mlm", mlm=True)


@pytest.fixture(scope="module")
def tiny_encoder(make_tiny_bert) -> Path:
    """The same architecture without the MLM head (as `medlama rewire` saves encoders)."""
    return make_tiny_bert("cv-tiny-encoder", seed=1)


@pytest.fixture(scope="module")
def sets(tmp_path_factory) -> Path:
    from medlama.datasets.context_variance.builder import CorpusSpec, build_context_variance
    from medlama.datasets.context_variance.kb_adapters import knowledge_base_from_medlama

    root = tmp_path_factory.mktemp("cv-sets")
    kb = knowledge_base_from_medlama(cvb.write_medlama_folder(root / "medlama"), "full")
    notes, pmc = cvb.write_corpora(root / "corpora")
    build_context_variance(kb, [CorpusSpec.make(notes, "mimic"), CorpusSpec.make(pmc, "pmc")], root / "sets",
                           index_root=root / "indexes", progress=False)
    return root / "sets"


# ------------------------------------------------------------------------------------------ rankers
def test_ranks_from_scores_breaks_ties_by_pool_order():
    assert ranks_from_scores(np.array([[1.0, 3.0, 3.0, 0.0], [0.0, 0.0, 0.0, 0.0]])).tolist() == [[3, 1, 2, 4],
                                                                                                 [1, 2, 3, 4]]


def test_retrieval_ranker_equals_numpy_distances(tiny_encoder):
    from transformers import AutoModel, AutoTokenizer

    ranker = RetrievalRanker(tiny_encoder, query_max_length=12)
    long_input = "wheeze " * 30 + "and cough. asthma may have finding [Y] ."  # cut from its start
    inputs = [*INPUTS, long_input, INPUTS[0]]  # a repeated input is scored once
    scores = ranker.scores(inputs, POOL)
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_encoder))
    model = AutoModel.from_pretrained(str(tiny_encoder)).eval()

    def cls(ids):
        with torch.no_grad():
            return model(input_ids=torch.tensor([ids])).last_hidden_state[0, 0].double().numpy()

    names = np.stack([cls(tokenizer(name, truncation=True, max_length=25)["input_ids"]) for name in POOL])
    queries = []
    for text in inputs:  # one at a time, no padding; the left end is cut to 12 tokens
        ids = tokenizer(text.replace("[Y]", "[MASK]"), add_special_tokens=False)["input_ids"][-10:]
        queries.append(cls([tokenizer.cls_token_id, *ids, tokenizer.sep_token_id]))
    distances = ((np.stack(queries)[:, None, :] - names[None]) ** 2).sum(-1)
    assert np.allclose(-scores, distances, rtol=1e-4, atol=1e-5)
    assert (ranker.rank(inputs, POOL) == ranks_from_scores(-distances)).all()
    assert (scores[0] == scores[-1]).all()
    assert ranker.rank(inputs, POOL)[0].tolist() != ranker.rank(inputs, POOL)[2].tolist()
    assert sorted(ranker.rank(inputs, POOL)[1].tolist()) == list(range(1, len(POOL) + 1))
    cosine = RetrievalRanker(tiny_encoder, distance="cosine").scores(INPUTS[:1], POOL)
    unit = lambda x: x / np.linalg.norm(x, axis=-1, keepdims=True)  # noqa: E731
    assert np.allclose(cosine[0], unit(names) @ unit(queries[0]), atol=1e-5)


def test_masked_lm_ranker_equals_mean_log_probs_by_hand(tiny_mlm):
    from transformers import AutoTokenizer, BertForMaskedLM

    ranker = MaskedLMRanker(tiny_mlm)
    scores = ranker.scores(INPUTS, POOL)
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_mlm))
    model = BertForMaskedLM.from_pretrained(str(tiny_mlm)).eval()
    expected = np.empty((len(INPUTS), len(POOL)))
    for i, text in enumerate(INPUTS):
        left, right = text.split("[Y]")
        prefix = tokenizer(left.rstrip(), add_special_tokens=False)["input_ids"]
        suffix = tokenizer(right, add_special_tokens=False)["input_ids"]
        for j, name in enumerate(POOL):
            ids = tokenizer(name, add_special_tokens=False)["input_ids"]
            row = [tokenizer.cls_token_id, *prefix, *[tokenizer.mask_token_id] * len(ids), *suffix,
                   tokenizer.sep_token_id]
            with torch.no_grad():
                log_probs = model(input_ids=torch.tensor([row])).logits[0].double().log_softmax(-1)
            start = 1 + len(prefix)
            expected[i, j] = np.mean([log_probs[start + t, token].item() for t, token in enumerate(ids)])
    assert np.allclose(scores, expected, atol=1e-4)
    assert (ranker.rank(INPUTS, POOL) == ranks_from_scores(expected)).all()


def test_make_ranker_and_bad_input(tiny_mlm, tiny_encoder):
    assert isinstance(make_ranker("auto", tiny_mlm), MaskedLMRanker)
    assert isinstance(make_ranker("auto", tiny_encoder), RetrievalRanker)
    assert isinstance(make_ranker("retrieval", tiny_mlm, max_tokens=3), RetrievalRanker)
    with pytest.raises(MedlamaInputError, match="no MLM head"):
        make_ranker("mlm", tiny_encoder)
    with pytest.raises(MedlamaInputError, match="unknown ranker"):
        make_ranker("bm25", tiny_encoder)
    ranker = RetrievalRanker(tiny_encoder)
    with pytest.raises(MedlamaInputError, match=r"input 0 has 0 \[Y\] slots"):
        ranker.rank(["no slot here"], POOL)
    with pytest.raises(MedlamaInputError, match="pool is empty"):
        ranker.rank(INPUTS, [])


# ------------------------------------------------------------------------------------------ records
def figure_1_sequence() -> tuple[dict, np.ndarray, dict]:
    """Figure 1 of the paper up to input5 (S1 = the target, then sick feeling, postnasal drip, heartburn,
    nasal stuffiness), with the ranks its table prints for output4 and output5."""
    entities = ["discolored nasal", "nasal stuffiness", "postnasal drip", "sick feeling", "heartburn", "runny nose"]
    column = {entity: i for i, entity in enumerate(entities)}
    row = {"id": "fig1", "triple_id": "nasal polyp|has|discolored nasal", "relation": "has symptom",
           "source": "ehr", "context_type": "real", "negative": False, "center_id": "discolored nasal",
           "target_id": "discolored nasal",
           "correct_ids": ["discolored nasal", "nasal stuffiness", "postnasal drip", "runny nose"],
           "inputs": [f"input{k} [Y]" for k in range(6)],
           "added_entities": [None, "discolored nasal", "sick feeling", "postnasal drip", "heartburn",
                              "nasal stuffiness"],
           "added_is_correct": [None, True, False, True, False, True]}
    ranks = np.array([  # columns as `entities`
        [5, 6, 4, 2, 3, 1],
        [1, 6, 5, 2, 4, 3],
        [2, 6, 5, 1, 4, 3],
        [3, 6, 2, 1, 5, 4],
        [2, 20, 6, 3, 5, 1],  # output4 (figure 1's table)
        [1, 2, 3, 10, 6, 4],  # output5
    ])
    return row, ranks, column


def test_rank_change_records_on_figure_1():
    row, ranks, column = figure_1_sequence()
    records = sequence_records(row, ranks, column)
    assert [r["k"] for r in records] == [1, 2, 3, 4, 5]
    first = records[0]  # S1 brings the target itself
    assert (first["target_rank_before"], first["target_rank_after"]) == (5, 1)
    assert (first["added_rank_before"], first["added_rank_after"]) == (5, 1) and first["added_is_correct"]
    assert first["correct_ranks_before"] == first["incorrect_ranks_before"] == []
    third = records[2]  # postnasal drip added to input2 (target, sick feeling)
    assert third["incorrect_ranks_before"] == [1] and third["incorrect_ranks_after"] == [1]
    assert third["correct_ranks_before"] == []
    fifth = records[4]
    assert {key: fifth[key] for key in ("target_rank_before", "target_rank_after", "added_is_correct",
                                        "added_rank_before", "added_rank_after", "correct_ranks_before",
                                        "correct_ranks_after", "incorrect_ranks_before", "incorrect_ranks_after")} == {
        "target_rank_before": 2, "target_rank_after": 1, "added_is_correct": True,
        "added_rank_before": 20, "added_rank_after": 2, "correct_ranks_before": [6], "correct_ranks_after": [3],
        "incorrect_ranks_before": [3, 5], "incorrect_ranks_after": [10, 6]}
    change = ucm([fifth])["rank_change"]["added_correct"]
    assert (change["target"], change["added"], change["correct"], change["incorrect"]) == (-1.0, -18.0, -3.0, 4.0)
    result = ucm(records)
    # correct O_a at k = 1, 3, 5: target 5->1, 2->3, 2->1
    assert (result["num_understand"], result["num_confuse"], result["num_misunderstand"]) == (2, 0, 1)
    assert result["per_relation"]["has symptom"]["num_records"] == 5

    # the negative-target counterpart: the centre is an O_incor and O_t counts among the correct objects
    negative = dict(row, negative=True, center_id="sick feeling",
                    added_entities=[None, "sick feeling", "discolored nasal", "heartburn", "postnasal drip",
                                    "nasal stuffiness"], added_is_correct=[None, False, True, False, True, True])
    records = sequence_records(negative, ranks, column)
    assert records[4]["correct_ranks_before"] == [2, 6] and records[4]["incorrect_ranks_before"] == [5]
    assert (records[4]["target_rank_before"], records[4]["target_rank_after"]) == (3, 10)


# ------------------------------------------------------------------------------------------ end to end
def test_medlama_ucm_end_to_end(sets, tiny_mlm, tiny_encoder, tmp_path, capsys):
    out = tmp_path / "ucm"
    status = main(["ucm", "--sets", str(sets), "--model", str(tiny_mlm), str(tiny_encoder), "--label", "mlm", "enc",
                   "--out", str(out), "--records", "--include-first-segment"])
    assert status == 0
    printed = capsys.readouterr().out
    for title in ("Table 1", "Table 2", "Table 3", "UCM_k per relation", "UCM_m by source and context type"):
        assert title in printed
    results = json.loads((out / "results.json").read_text())
    assert (out / "ucm.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    from datasets import concatenate_datasets, load_dataset

    rows = concatenate_datasets([load_dataset(str(sets), s, split="test") for s in ("ehr", "pmc")])
    per_model = sum(len(inputs) - 1 for inputs in rows["inputs"])
    assert len(records) == 2 * per_model
    mlm, enc = results["models"]
    assert (mlm["settings"]["method"], enc["settings"]["method"]) == ("mlm", "retrieval")
    assert mlm["num_sequences"] == len(rows) and mlm["num_records"] == per_model
    for model in results["models"]:
        mine = [r for r in records if r["model"] == model["label"]]
        for side, negative in (("target", False), ("negative", True)):
            chosen = [r for r in mine if r["negative"] == negative and r["added_is_correct"]]
            signs = [np.sign(r["target_rank_after"] - r["target_rank_before"]) for r in chosen]
            shares = [signs.count(-1) / len(signs), signs.count(0) / len(signs), signs.count(1) / len(signs)]
            got = model[side]
            assert [got["understand"], got["confuse"], got["misunderstand"]] == pytest.approx(shares)
            assert got["num_records_correct"] == len(chosen)
        # acc@k without context = O_t in the top k at input0 (the k = 1 record's "before"), with context = at the
        # last input (the last record's "after"), over the O_t-centred sequences
        target = {}
        for r in mine:
            if not r["negative"]:
                target.setdefault(r["sequence_id"], []).append(r)
        for k in (1, 5):
            without = np.mean([seq[0]["target_rank_before"] <= k for seq in target.values()])
            within = np.mean([seq[-1]["target_rank_after"] <= k for seq in target.values()])
            assert model["accuracy"]["target"]["without_context"][f"acc@{k}"] == pytest.approx(without)
            assert model["accuracy"]["target"]["with_context"][f"acc@{k}"] == pytest.approx(within)
        assert set(model["by_context"]) == {f"{s}/{t}" for s in ("ehr", "pmc") for t in
                                            ("real", "knowledge-only", "knowledge-sorted", "knowledge-random")}
        macro = model["ucm_k_macro"]["target"]
        per_relation = [v for v in model["target"]["per_relation"].values() if v["num_records_correct"]]
        assert macro["understand"] == pytest.approx(np.mean([v["understand"] for v in per_relation]))

    # filters, and the default that leaves out S1's record (its added entity is the centre itself)
    assert main(["ucm", "--sets", str(sets), "--model", str(tiny_encoder), "--sources", "pmc", "--context-types",
                 "real", "--no-negative", "--out", str(tmp_path / "small")]) == 0
    small = json.loads((tmp_path / "small" / "results.json").read_text())["models"][0]
    pmc_real = load_dataset(str(sets), "pmc_real", split="test")
    assert small["num_sequences"] == len(pmc_real) and small["negative"] is None
    assert small["settings"]["skip_first_segment"] is True and small["num_records_truncated"] == 0
    assert small["num_records"] == sum(len(inputs) - 2 for inputs in pmc_real["inputs"])


# ------------------------------------------------------------------------------------------ cut inputs
LONG_INPUT = "The patient reports " + "wheeze and cough, " * 40 + "at night. asthma may have finding [Y] ."


def test_rankers_say_which_inputs_they_see_whole(tiny_mlm, tiny_encoder):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_encoder))
    lengths = [len(tokenizer(text.replace("[Y]", "[MASK]"))["input_ids"]) for text in (*INPUTS, LONG_INPUT)]
    assert max(lengths[:3]) < 24 < 128 < lengths[3]
    retrieval = RetrievalRanker(tiny_encoder, query_max_length=24)
    assert retrieval.whole([*INPUTS, LONG_INPUT], POOL).tolist() == [True, True, True, False]
    assert retrieval.whole([LONG_INPUT], POOL).tolist() == [False]
    # the tiny MLM has 128 positions; the longest name needs as many masks as it has tokens
    mlm = MaskedLMRanker(tiny_mlm)
    assert mlm.whole([*INPUTS, LONG_INPUT], POOL).tolist() == [True, True, True, False]
    masks = max(len(tokenizer(name, add_special_tokens=False)["input_ids"]) for name in POOL)
    assert masks == 4  # "shortness of breath"
    left, right = INPUTS[0].split("[Y]")
    inner = len(tokenizer(left.rstrip(), add_special_tokens=False)["input_ids"]) + \
        len(tokenizer(right, add_special_tokens=False)["input_ids"])
    padding = " ".join(["cough"] * (128 - 2 - masks - inner))  # exactly 128 positions with the masks
    assert mlm.whole([padding + " " + INPUTS[0]], POOL).tolist() == [True]
    assert mlm.whole(["cough " + padding + " " + INPUTS[0]], POOL).tolist() == [False]
    assert mlm.whole(["cough " + padding + " " + INPUTS[0]], ["cough"]).tolist() == [True]  # 1 mask fits


def test_records_over_cut_inputs_are_left_out_and_counted(sets, tiny_encoder):
    from transformers import AutoTokenizer

    from medlama.ucm_run import evaluate_model

    selected = load_sets(sets, negative=False)
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_encoder))
    lengths = {text: len(tokenizer(text.replace("[Y]", "[MASK]"))["input_ids"])
               for inputs in selected.rows["inputs"] for text in inputs}
    limit = int(np.median(list(lengths.values())))  # cuts about half of the inputs
    result = evaluate_model(RetrievalRanker(tiny_encoder, query_max_length=limit), selected, label="cut",
                            keep_records=True, skip_first_segment=False, progress=False)
    expected_kept = expected_cut = 0
    for inputs in selected.rows["inputs"]:
        for k in range(1, len(inputs)):
            if lengths[inputs[k - 1]] <= limit and lengths[inputs[k]] <= limit:
                expected_kept += 1
            else:
                expected_cut += 1
    assert expected_kept and expected_cut
    assert (result.num_records, result.num_records_truncated) == (expected_kept, expected_cut)
    assert all(record["whole"] for record in result.records)
    assert result.target["num_records"] == expected_kept


def test_figure_1_records_flag_cut_inputs():
    row, ranks, column = figure_1_sequence()
    records = sequence_records(row, ranks, column, whole=[True, True, True, True, True, False])
    assert [r["whole"] for r in records] == [True, True, True, True, False]
    assert all(r["whole"] for r in sequence_records(row, ranks, column))


def test_load_sets_and_bad_input(sets, tiny_encoder, tmp_path, capsys):
    selected = load_sets(sets, sources=["ehr"], context_types=["knowledge-only"], relations=["may_treat"])
    assert set(selected.rows["relation"]) == {"may_treat"} and set(selected.rows["source"]) == {"ehr"}
    assert main(["ucm", "--sets", str(tmp_path), "--model", str(tiny_encoder)]) == 2
    assert "not a context-variance folder" in capsys.readouterr().err
    assert main(["ucm", "--sets", str(sets), "--model", str(tiny_encoder), "--sources", "lmc",
                 "--out", str(tmp_path / "o")]) == 2
    assert "unknown source(s) ['lmc']" in capsys.readouterr().err
    assert main(["ucm", "--sets", str(sets), "--model", str(tiny_encoder), "--label", "a", "b"]) == 2
    assert "2 --label values for 1 --model values" in capsys.readouterr().err
    assert main(["ucm", "--sets", str(sets), "--model", str(tiny_encoder), "--relations", "may_cure",
                 "--out", str(tmp_path / "o")]) == 2
    assert "unknown relation(s) ['may_cure']" in capsys.readouterr().err
    assert main(["ucm", "--sets", str(sets), "--model", str(tiny_encoder), "--ranker", "mlm",
                 "--out", str(tmp_path / "o")]) == 2
    assert "no MLM head" in capsys.readouterr().err
