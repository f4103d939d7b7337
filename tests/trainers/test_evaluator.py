"""MedLAMAEvaluator: during ``medlama rewire --eval-steps`` its scores land in the trainer state, and they
equal ``medlama probe``'s on the checkpoint saved at the same step, to the last digit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from medlama.cli import main
from medlama.runs.workflow import probe
from medlama.runs.queries import load_medlama_queries
from medlama.probers.retrieval import PRESETS, RetrievalProber
from medlama.trainers.evaluator import MedLAMAEvaluator, mrr_at_k

RELATION = "associated_morphology_of"
LIMIT = 30


@pytest.fixture(scope="module")
def corpus(corpus_head) -> Path:
    return corpus_head(0, 120)


def test_mrr_at_k():
    assert mrr_at_k([["a", "b"], ["c", "d"], ["x"]], [["b"], ["c"], ["y"]], 10) == pytest.approx((0.5 + 1 + 0) / 3)
    assert mrr_at_k([["a", "b"]], [["b"]], 1) == 0.0


def test_rewire_eval_steps_equal_probe_of_each_checkpoint(make_tiny_bert, medlama_dir, corpus, tmp_path, capsys):
    model = make_tiny_bert("eval-tiny-bert")
    out = tmp_path / "rewired"
    status = main(["rewire", "--corpus", str(corpus), "--out", str(out), "--model", str(model), "--steps", "2",
                   "--batch-size", "8", "--save-steps", "1", "--max-length", "32", "--skip-short-lines",
                   "--eval-steps", "1", "--eval-data", str(medlama_dir), "--eval-relations", RELATION,
                   "--eval-limit", str(LIMIT)])
    assert status == 0, capsys.readouterr().err
    checkpoints = out / "checkpoints"
    state = json.loads((checkpoints / "checkpoint-2" / "trainer_state.json").read_text())
    logged = {entry["step"]: entry for entry in state["log_history"] if "eval_medlama_acc@10" in entry}
    assert sorted(logged) == [1, 2]
    queries = load_medlama_queries(medlama_dir, "hard", relations=[RELATION]).limit_per_relation(LIMIT)
    assert len(queries) == LIMIT
    for step, entry in logged.items():
        probed = probe(RetrievalProber(checkpoints / f"checkpoint-{step}", PRESETS["reference"]), queries)
        assert entry["eval_medlama_acc@1"] == probed.acc(1)
        assert entry["eval_medlama_acc@10"] == probed.acc(10)
        assert entry["eval_medlama_mrr@10"] == mrr_at_k(probed.predictions, probed.gold, 10)
    rows = (checkpoints / "eval" / "medlama_results.jsonl").read_text().splitlines()
    assert [json.loads(row)["steps"] for row in rows] == [1, 2]


def test_evaluator_on_a_loaded_model_leaves_it_training(make_tiny_bert, medlama_dir):
    from sentence_transformers import SentenceTransformer

    folder = make_tiny_bert("eval-tiny-bert-2")
    model = SentenceTransformer(str(folder), device="cpu")
    model.train()
    evaluator = MedLAMAEvaluator(data=medlama_dir, relations=[RELATION], limit=10)
    scores = evaluator(model)
    assert set(scores) == {"medlama_acc@1", "medlama_acc@10", "medlama_mrr@10"}
    assert evaluator.primary_metric == "medlama_acc@10"
    assert model.training  # back in training mode after encoding with dropout off
    probed = probe(RetrievalProber(folder), evaluator.queries)
    assert scores["medlama_acc@10"] == probed.acc(10) and scores["medlama_acc@1"] == probed.acc(1)


def test_evaluator_reads_data_as_the_probe_command(medlama_dir):
    """``data`` goes through :func:`medlama.runs.queries.queries_from`, the CLI's route (config names such
    as ``hard_<relation>`` included); the trainers never import the top-level ``medlama.api``."""
    from medlama.runs.queries import QuerySource, load_queries
    from medlama.trainers import evaluator as module

    evaluator = MedLAMAEvaluator(data=medlama_dir, config=f"hard_{RELATION}", limit=5)
    expected = load_queries(QuerySource(data=medlama_dir, config=f"hard_{RELATION}")).limit_per_relation(5)
    assert evaluator.queries.ids == expected.ids and evaluator.queries.info == expected.info
    assert evaluator.queries.info["kind"] == "folder" and evaluator.queries.info["release_commit"]
    assert "medlama.api" not in Path(module.__file__).read_text(encoding="utf-8")


def test_python_api_rewire(make_tiny_bert, corpus, tmp_path):
    import medlama

    result = medlama.rewire(corpus, tmp_path / "api", make_tiny_bert("api-rewire-bert"), preset="demo", steps=1,
                            batch_size=8, max_length=32, save_steps=1, skip_short_lines=True)
    assert result.global_step == 1 and result.record["config"]["steps"] == 1
    from medlama.core.provenance import package_versions  # the record's versions are provenance's
    from medlama.trainers.trainer import RECORD_PACKAGES

    versions = result.record["versions"]
    assert set(versions) >= {"medlama", "torch", "transformers", "sentence-transformers", "datasets"}
    assert versions == {k: v for k, v in package_versions(RECORD_PACKAGES).items() if v is not None}
    assert (tmp_path / "api" / "config.json").is_file()
