"""``top_k``: the predictions a probe keeps per query (``predictions.jsonl``, ``prediction_rows``) are the ones
asked for, whatever the ranking's depth (which is at least the largest k scored, so acc@k never depends on
``top_k``); results record both numbers (``settings.top_k``, ``settings.ranked_top_k``) and the resume
manifest records the depth ranked. A resumed run that would rank deeper is refused, naming ``top_k``; one
that keeps fewer predictions of the same ranking continues it. Through ``medlama probe`` and ``medlama.probe``
with tiny models (fixtures: tests/probers/conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import medlama
from medlama.cli import main
from medlama.core.errors import MedlamaInputError
from medlama.core.resume import WORK_MARKER, work_folder
from shard_calls import RankCalls  # tests/helpers
from medlama.probers.causal.prober import CausalLikelihoodProber
from medlama.probers.query_set import QuerySet
from medlama.runs import resume as sharding
from probe_outputs import predictions

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread (tests/conftest.py)


@pytest.fixture(scope="module")
def encoder(make_tiny_bert) -> Path:
    return make_tiny_bert("top-k-encoder")


def _results(out: Path) -> dict:
    (result,) = json.loads((out / "results.json").read_text())
    return result


def test_the_cli_keeps_top_k_predictions_and_records_them(encoder, medlama_tiny, tmp_path):
    flags = ["probe", "--data", str(medlama_tiny), "--config", "full", "--model", str(encoder), "--batch-size", "4"]
    assert main([*flags, "--out", str(tmp_path / "ten")]) == 0
    assert main([*flags, "--top-k", "3", "--out", str(tmp_path / "three")]) == 0
    ten, three = predictions(tmp_path / "ten"), predictions(tmp_path / "three")
    assert {len(row["predictions"]) for row in ten} == {10} and {len(row["predictions"]) for row in three} == {3}
    assert [row["predictions"][:3] for row in ten] == [row["predictions"] for row in three]
    assert [row["scores"][:3] for row in ten] == [row["scores"] for row in three]
    # the ranking is as deep either way: every hit@k and acc@k is the same
    assert [{k: v for k, v in row.items() if k.startswith("hit@")} for row in ten] == \
        [{k: v for k, v in row.items() if k.startswith("hit@")} for row in three]
    recorded = _results(tmp_path / "three")
    assert recorded["metrics"] == _results(tmp_path / "ten")["metrics"]
    assert recorded["settings"]["top_k"] == 3 == len(three[0]["predictions"])
    assert recorded["settings"]["ranked_top_k"] == 10
    assert _results(tmp_path / "ten")["settings"]["top_k"] == 10


def _pool_queries(size: int = 30) -> QuerySet:
    names = [f"drug {chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(size)]
    return QuerySet(ids=["q1", "q2", "q3"], relations=["may_treat", "may_treat", "may_prevent"],
                    texts=["fever may be treated by [Y] .", "pain may be treated by [Y] .",
                           "flu may be prevented by [Y] ."],
                    gold=[[names[0]], [names[5]], [names[12]]], candidates=names, name="pool30")


def test_the_api_keeps_top_k_beyond_ten_and_ranks_as_deep_as_the_ks_need(encoder, tmp_path):
    queries = _pool_queries()
    deep = medlama.probe(str(encoder), data=queries, top_k=20, settings={"batch_size": 4})
    rows = list(deep.prediction_rows())
    assert {len(row["predictions"]) for row in rows} == {20}
    assert deep.settings["top_k"] == 20 == deep.settings["ranked_top_k"]
    deep.save(tmp_path / "deep")
    assert {len(row["predictions"]) for row in predictions(tmp_path / "deep")} == {20}
    assert _results(tmp_path / "deep")["settings"]["top_k"] == 20

    # acc@20 asked with top_k=3: ranked 20 deep (so acc@20 is acc@20), 3 kept
    shallow = medlama.probe(str(encoder), data=queries, top_k=3, ks=[1, 20], settings={"batch_size": 4})
    in_twenty = [any(g in ranked for g in gold) for ranked, gold in zip(deep.predictions, queries.gold)]
    assert shallow.acc(20) == pytest.approx(sum(in_twenty) / 3) and shallow.settings["ranked_top_k"] == 20
    assert [row["predictions"] for row in shallow.prediction_rows()] == [row["predictions"][:3] for row in rows]
    assert shallow.settings["top_k"] == 3


def test_probe_by_hand_records_the_depth_it_ranked_and_kept(encoder):
    """:func:`medlama.runs.workflow.probe` (a prober made by hand) ranks exactly ``top_k`` deep, and says so; a
    k scored beyond that depth is refused (its acc@k would count only the top ``top_k``)."""
    from medlama.probers.retrieval import RetrievalProber, RetrievalSettings
    from medlama.runs.workflow import probe

    prober = RetrievalProber(str(encoder), RetrievalSettings(batch_size=4))
    with pytest.raises(MedlamaInputError, match=r"top_k 2 ranks fewer predictions than the largest k scored \(10\)"):
        probe(prober, _pool_queries(), top_k=2)
    two = probe(prober, _pool_queries(), top_k=2, ks=(1, 2))
    assert {len(row["predictions"]) for row in two.prediction_rows()} == {2}
    assert two.settings["top_k"] == 2 and two.settings["ranked_top_k"] == 2


def _manifest(out: Path) -> dict:
    return json.loads((work_folder(out) / WORK_MARKER).read_text())["manifest"]


def test_a_resume_that_would_rank_deeper_is_refused_and_one_that_keeps_fewer_continues(
        tiny_gpt2, medlama_tiny, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sharding, "SHARD_QUERIES", 2)  # 4 + 2 queries: 3 shards
    flags = ["probe", "--data", str(medlama_tiny), "--config", "full", "--model", str(tiny_gpt2), "--method",
             "causal-likelihood", "--batch-size", "4"]
    RankCalls(monkeypatch, CausalLikelihoodProber)
    assert main([*flags, "--out", str(tmp_path / "whole")]) == 0

    deep = tmp_path / "deep"  # the manifest records the depth ranked: 20 asked, 20 ranked
    RankCalls(monkeypatch, CausalLikelihoodProber, stop_at=2)
    assert main([*flags, "--top-k", "20", "--out", str(deep)]) == 130
    assert _manifest(deep)["top_k"] == 20

    out = tmp_path / "resumed"
    RankCalls(monkeypatch, CausalLikelihoodProber, stop_at=3)
    assert main([*flags, "--out", str(out)]) == 130
    assert _manifest(out)["top_k"] == 10

    refused = RankCalls(monkeypatch, CausalLikelihoodProber)  # deeper than the shards were ranked: refused, naming top_k, nothing ranked
    capsys.readouterr()
    assert main([*flags, "--top-k", "20", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "top_k: 10 then, 20 now" in err and "--overwrite" in err and refused.count == 0

    rest = RankCalls(monkeypatch, CausalLikelihoodProber)  # fewer kept of the same ranking (10 deep): continued
    assert main([*flags, "--top-k", "3", "--out", str(out)]) == 0
    assert "2 of 3 shards already done" in capsys.readouterr().err and rest.count == 1
    whole, resumed = predictions(tmp_path / "whole"), predictions(out)
    assert [row["predictions"] for row in resumed] == [row["predictions"][:3] for row in whole]
    assert _results(out)["settings"]["top_k"] == 3 and _results(out)["settings"]["ranked_top_k"] == 10
    assert _results(out)["metrics"] == _results(tmp_path / "whole")["metrics"]


def test_compare_reads_runs_that_keep_fewer_than_ten(encoder, make_tiny_bert, medlama_tiny, tmp_path, capsys):
    """``medlama compare`` checks each row's hits against its predictions: a row of a ``--top-k 3`` run holds 3
    names by choice (recorded), so a hit@10 beyond them is the ranking's, not an edited file."""
    other = make_tiny_bert("top-k-other", seed=1)
    out = tmp_path / "three"
    assert main(["probe", "--data", str(medlama_tiny), "--config", "full", "--model", str(encoder), str(other),
                 "--batch-size", "4", "--top-k", "3", "--out", str(out)]) == 0
    rows = predictions(out)
    assert any(row["hit@10"] and not set(row["gold"]) & set(row["predictions"]) for row in rows)  # the case
    capsys.readouterr()
    assert main(["compare", str(out), "--json", "--resamples", "200"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert len(record["leaderboard"]) == 2


def test_the_auto_batch_probe_of_recipe_and_sweep_checks_and_records_its_depth():
    """:func:`medlama.runs.model_probe.probe_model` with ``batch_size="auto"`` refuses a k beyond its depth
    before any model loads, as :func:`medlama.runs.workflow.probe` does."""
    from medlama.probers.retrieval import RetrievalSettings
    from medlama.runs.model_probe import probe_model

    with pytest.raises(MedlamaInputError, match=r"top_k 2 ranks fewer predictions than the largest k scored \(10\)"):
        probe_model("retrieval", "no-such-model", RetrievalSettings(batch_size="auto"), _pool_queries(), label="x",
                    top_k=2)
