"""A killed ``medlama probe`` continues from its completed shards: the rerun ranks only the shards left and
writes the predictions an uninterrupted run writes (byte for byte); a rerun with other settings is refused,
naming them, and ``--overwrite`` starts over. Tiny GPT-2 (causal-likelihood: blocks of queries) and tiny BERT
(retrieval: one shard per model) on the 6-query MedLAMA-shaped folder (fixtures: tests/probers/conftest.py)."""

from __future__ import annotations

import json

import pytest

from medlama.cli import main
from medlama.core.resume import work_folder
from medlama.runs import resume as sharding
from medlama.probers.causal.prober import CausalLikelihoodProber
from medlama.probers.retrieval import RetrievalProber

from shard_calls import RankCalls as Calls, shard_files  # tests/helpers

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread (tests/conftest.py)


def test_killed_causal_probe_resumes_only_the_remaining_shards(tiny_gpt2, medlama_tiny, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sharding, "SHARD_QUERIES", 2)  # 4 + 2 queries: 3 shards
    flags = ["probe", "--data", str(medlama_tiny), "--config", "full", "--model", str(tiny_gpt2), "--method",
             "causal-likelihood", "--batch-size", "4"]
    whole = Calls(monkeypatch, CausalLikelihoodProber)
    assert main([*flags, "--out", str(tmp_path / "whole")]) == 0
    assert whole.count == 3 and not work_folder(tmp_path / "whole").exists()  # removed once OUT is written

    out = tmp_path / "resumed"
    killed = Calls(monkeypatch, CausalLikelihoodProber, stop_at=3)
    assert main([*flags, "--out", str(out)]) == 130
    assert not out.exists() and len(shard_files(out)) == 2  # the output only appears complete

    # other settings: refused, naming the one that differs; nothing is computed
    refused = Calls(monkeypatch, CausalLikelihoodProber)
    capsys.readouterr()
    assert main([*flags, "--reduction", "mean", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "reduction: 'sum' then, 'mean' now" in err and "--overwrite" in err and refused.count == 0
    assert len(shard_files(out)) == 2

    assert main([*flags, "--batch-size", "3", "--out", str(out)]) == 2  # another batch rounds scores otherwise
    assert "batch_size: 4 then, 3 now" in capsys.readouterr().err and refused.count == 0

    rest = Calls(monkeypatch, CausalLikelihoodProber)
    assert main([*flags, "--out", str(out)]) == 0
    assert "2 of 3 shards already done" in capsys.readouterr().err
    assert rest.count == 1 and killed.count == 3
    assert (out / "predictions.jsonl").read_bytes() == (tmp_path / "whole" / "predictions.jsonl").read_bytes()
    assert not work_folder(out).exists()


def test_overwrite_discards_the_shards(tiny_gpt2, medlama_tiny, tmp_path, monkeypatch):
    flags = ["probe", "--data", str(medlama_tiny), "--config", "full", "--model", str(tiny_gpt2), "--method",
             "causal-likelihood", "--out", str(tmp_path / "o")]
    Calls(monkeypatch, CausalLikelihoodProber, stop_at=2)  # 2 shards (one per relation): the second killed
    assert main(flags) == 130 and len(shard_files(tmp_path / "o")) == 1
    again = Calls(monkeypatch, CausalLikelihoodProber)
    assert main([*flags, "--reduction", "mean", "--overwrite"]) == 0
    assert again.count == 2 and not work_folder(tmp_path / "o").exists()


def test_killed_retrieval_probe_resumes_the_second_model(make_tiny_bert, medlama_tiny, tmp_path, monkeypatch):
    first, second = make_tiny_bert("resume-a", seed=1), make_tiny_bert("resume-b", seed=2)
    flags = ["probe", "--data", str(medlama_tiny), "--config", "full", "--model", str(first), str(second),
             "--label", "a", "b"]
    whole = Calls(monkeypatch, RetrievalProber)
    assert main([*flags, "--out", str(tmp_path / "whole")]) == 0 and whole.count == 2
    Calls(monkeypatch, RetrievalProber, stop_at=2)
    assert main([*flags, "--out", str(tmp_path / "resumed")]) == 130
    rest = Calls(monkeypatch, RetrievalProber)
    assert main([*flags, "--out", str(tmp_path / "resumed")]) == 0 and rest.count == 1
    assert ((tmp_path / "resumed" / "predictions.jsonl").read_bytes()
            == (tmp_path / "whole" / "predictions.jsonl").read_bytes())


def test_a_shard_this_run_did_not_write_or_one_edited_is_refused(tiny_gpt2, medlama_tiny, tmp_path, monkeypatch,
                                                                  capsys):
    """A shard records what produced it (the run's manifest: model content, settings, data, pool) and a checksum:
    a shard copied in from another model's run of the same label, or one edited by hand, is refused, naming it."""
    import shutil

    from tiny_causal import save_causal

    other = save_causal(tmp_path / "other" / tiny_gpt2.name, "gpt2", seed=5)  # same folder name: same label
    flags = ["probe", "--data", str(medlama_tiny), "--config", "full", "--method", "causal-likelihood"]
    Calls(monkeypatch, CausalLikelihoodProber, stop_at=2)  # 2 shards (one per relation): the second killed
    assert main([*flags, "--model", str(other), "--out", str(tmp_path / "theirs")]) == 130
    Calls(monkeypatch, CausalLikelihoodProber, stop_at=2)
    assert main([*flags, "--model", str(tiny_gpt2), "--out", str(tmp_path / "mine")]) == 130
    (theirs,), (mine,) = shard_files(tmp_path / "theirs"), shard_files(tmp_path / "mine")
    assert theirs.name == mine.name  # the same shard of the same label: only what produced it differs
    original = mine.read_bytes()
    shutil.copyfile(theirs, mine)
    Calls(monkeypatch, CausalLikelihoodProber)
    capsys.readouterr()
    assert main([*flags, "--model", str(tiny_gpt2), "--out", str(tmp_path / "mine")]) == 2
    err = capsys.readouterr().err
    assert f"{mine}: a completed shard was not written by this run" in err and "Traceback" not in err
    lines = original.decode().splitlines()
    edited = {**json.loads(lines[1]), "by": "hand"}
    mine.write_text("\n".join([lines[0], json.dumps(edited), *lines[2:]]) + "\n")
    assert main([*flags, "--model", str(tiny_gpt2), "--out", str(tmp_path / "mine")]) == 2
    assert f"{mine}: a completed shard has changed since it was written" in capsys.readouterr().err
    assert not (tmp_path / "mine" / "results.json").exists()
    mine.write_bytes(original)
    assert main([*flags, "--model", str(tiny_gpt2), "--out", str(tmp_path / "mine")]) == 0
