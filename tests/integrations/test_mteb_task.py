"""MedLAMA as an MTEB retrieval task: MTEB's own evaluation of ``medlama.mteb_task(...)`` gives the
``sentence-transformers`` preset's acc@k (relation by relation, query by query), and ``medlama export mteb``
writes a folder MTEB's own loader reads back as the same task."""

from __future__ import annotations

import json
import os

import pytest

import medlama
from medlama.cli import main
from medlama.core.defaults import default_model_path
from medlama.core.errors import MedlamaInputError
from medlama.integrations.mteb.data import BLANK, corpus_id, fill_slot, model_mask_token
from medlama.runs.queries import queries_from

try:
    import mteb
except ImportError:  # the optional extra: missing, CI fails (it installs ".[test,mteb]") and elsewhere skips
    if os.environ.get("CI"):
        raise
    pytest.skip("mteb is not installed (pip install 'medlama[mteb]')", allow_module_level=True)

#: The two hard relations with the smallest pools (595 and 713 names), their first 30 queries each.
RELATIONS = ("gene_product_has_biochemical_function", "occurs_after")
LIMIT = 30


def trec_eval_top(scores: dict[str, float], k: int) -> list[str]:
    """The first ``k`` documents as trec_eval ranks them: by score, exact ties by the higher id."""
    return [doc for doc, _ in sorted(scores.items(), key=lambda item: (item[1], item[0]), reverse=True)[:k]]


@pytest.mark.slow
def test_mteb_scores_equal_the_sentence_transformers_preset(medlama_dir, tmp_path, one_thread):
    from sentence_transformers import SentenceTransformer

    task = medlama.mteb_task(data=medlama_dir, relations=RELATIONS, limit=LIMIT)
    assert task.metadata.name == "MedLAMAHardFirst30Retrieval" and task.metadata.main_score == "hit_rate_at_10"
    assert task.metadata.is_filled()  # MTEB's own check that every metadata field is given
    model = SentenceTransformer(str(default_model_path()), device="cpu")
    # the preset's batch size, so that both sides pad the same batches and encode bit for bit alike
    evaluated = mteb.evaluate(model, task, cache=None, encode_kwargs={"batch_size": 128, "show_progress_bar": False},
                              show_progress_bar=False, prediction_folder=tmp_path / "predictions")
    ours = medlama.probe(data=medlama_dir, preset="sentence-transformers", relations=list(RELATIONS), limit=LIMIT,
                         candidates="relation", device="cpu")
    assert task.filled_with == {relation: "[MASK]" for relation in RELATIONS}  # the model's own, as the preset's
    scores = {entry["hf_subset"]: entry for entry in evaluated.task_results[0].scores["test"]}
    assert set(scores) == set(RELATIONS)
    per_relation = ours.per_relation()
    for relation in RELATIONS:
        assert per_relation[relation]["queries"] == LIMIT
        assert scores[relation]["main_score"] == scores[relation]["hit_rate_at_10"]
        for k in (1, 5, 10):  # MTEB rounds to 5 decimals: with 30 queries, one count per value
            assert scores[relation][f"hit_rate_at_{k}"] == round(per_relation[relation][f"acc@{k}"], 5), (relation, k)
    assert 0 < ours.acc(10) < 1  # hits and misses on both sides, so the comparison says something
    # query by query: MTEB's ranking (its saved scores, in trec_eval's order) hits where medlama's does
    predictions = json.loads(task._predictions_path(tmp_path / "predictions").read_text(encoding="utf-8"))
    pools = {relation: task.subsets[relation].names for relation in RELATIONS}
    for k in (1, 5, 10):
        hits = dict(zip(ours.ids, ours.hits(k)))
        for index, query in enumerate(ours.ids):
            relation = ours.relations[index]
            top = [pools[relation][int(doc.removeprefix("name-"))] for doc in
                   trec_eval_top(predictions[relation]["test"][query], k)]
            assert any(name in ours.gold[index] for name in top) == hits[query], (query, k)


def test_the_export_loads_back_with_mteb_as_the_task(medlama_dir, tmp_path, capsys):
    from mteb.abstasks.retrieval_dataset_loaders import RetrievalDatasetLoader

    out = tmp_path / "mteb"
    assert main(["export", "mteb", "--data", str(medlama_dir), "--out", str(out), "--relations", *RELATIONS]) == 0
    assert "2 MTEB subset(s)" in capsys.readouterr().out
    task = medlama.mteb_task(data=medlama_dir, relations=RELATIONS)
    task.load_data()
    queries = queries_from(medlama_dir, relations=RELATIONS, candidates="relation")
    gold = dict(zip(queries.ids, queries.gold))
    record = json.loads((out / "mteb_export.json").read_text(encoding="utf-8"))
    assert record["filled_with"] == BLANK and record["config"] == "hard" and sorted(record["relations"]) == sorted(RELATIONS)
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "gated: manual" in card and "extra_gated_prompt" in card and "UMLS" in card
    for relation in RELATIONS:
        loaded = RetrievalDatasetLoader(hf_repo=str(out), revision="main", config=relation).load()
        expected = task.dataset[relation]["test"]
        subset = task.subsets[relation]
        assert list(loaded["corpus"]["id"]) == list(expected["corpus"]["id"]) == subset.corpus_ids
        assert list(loaded["corpus"]["text"]) == list(expected["corpus"]["text"]) == subset.names
        assert sorted(loaded["queries"]["id"]) == sorted(subset.query_ids)
        texts = dict(zip(loaded["queries"]["id"], loaded["queries"]["text"]))
        assert texts == {qid: fill_slot(text, BLANK) for qid, text in zip(subset.query_ids, subset.templates)}
        # the task's own data, before any model fills the slot, hold the export's queries
        assert dict(zip(expected["queries"]["id"], expected["queries"]["text"])) == texts
        assert loaded["relevant_docs"] == expected["relevant_docs"]
        assert record["subsets"][relation] == {"corpus": len(subset.names), "queries": len(subset.query_ids),
                                               "qrels": sum(len(docs) for docs in subset.relevant.values())}
        # every gold name of every query is relevant, by its id in the pool, and nothing else
        for qid, docs in loaded["relevant_docs"].items():
            assert {subset.names[int(doc.removeprefix("name-"))] for doc in docs} == set(gold[qid])
            assert set(docs.values()) == {1}
        beir = (out / relation / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()
        assert beir[0] == "query-id\tcorpus-id\tscore" and len(beir) - 1 == record["subsets"][relation]["qrels"]


def test_an_export_replaces_its_own_folder_and_refuses_a_users(medlama_dir, tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    assert main(["export", "mteb", "--data", str(medlama_dir), "--out", str(out), "--relations", RELATIONS[0]]) == 2
    assert "not empty" in capsys.readouterr().err and sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    again = tmp_path / "again"
    for relations in ([RELATIONS[0]], [RELATIONS[1]]):
        assert main(["export", "mteb", "--data", str(medlama_dir), "--out", str(again), "--relations", *relations]) == 0
    assert sorted(p.name for p in again.iterdir() if p.is_dir()) == [RELATIONS[1]]  # the earlier export replaced


def test_bad_arguments_are_refused_before_any_data_is_read(tmp_path):
    missing = tmp_path / "no-such-folder"
    with pytest.raises(MedlamaInputError, match="'hard' or 'full'"):
        medlama.mteb_task(data=missing, config="hard_may_treat")
    with pytest.raises(MedlamaInputError, match="limit"):
        medlama.mteb_task(data=missing, limit=0)
    with pytest.raises(MedlamaInputError, match="mask_token"):
        medlama.mteb_task(data=missing, mask_token=" ")


def test_unknown_relation_is_named(medlama_dir):
    with pytest.raises(MedlamaInputError, match="may_treet"):
        medlama.mteb_task(data=medlama_dir, relations=["may_treet"])


def test_the_slot_is_the_models_mask_token_else_the_blank():
    from mteb.models.sentence_transformer_wrapper import SentenceTransformerEncoderWrapper
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(default_model_path()), device="cpu")
    assert model_mask_token(SentenceTransformerEncoderWrapper(model)) == model_mask_token(model) == "[MASK]"
    model.tokenizer.mask_token = None
    assert model_mask_token(SentenceTransformerEncoderWrapper(model)) is None  # the task then fills in BLANK
    assert corpus_id(0) == "name-000000" and corpus_id(41) < corpus_id(100)  # ids sort in pool order
