"""``medlama probe --model A B``: every model is checked against its method (and its learned prompts) before any
is ranked, so a ``B`` that does not fit costs nothing of ``A``'s ranking; and a run stopped by an error leaves
nothing that refuses the corrected command, while an interrupted one is still continued by the same command.
Tiny GPT-2 and BERT models on the 6-query MedLAMA-shaped folder (fixtures: tests/probers/conftest.py)."""

from __future__ import annotations

import json

import pytest

from medlama.cli import main
from medlama.core.resume import WORK_MARKER, work_folder
from medlama.runs import resume as sharding
from medlama.probers.causal.prober import CausalLikelihoodProber
from medlama.probers.mask_predict import MaskPredictProber

from shard_calls import RankCalls, shard_files  # tests/helpers

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread (tests/conftest.py)


def test_a_model_that_does_not_fit_the_method_is_refused_before_any_ranking(tiny_gpt2, medlama_tiny, make_tiny_bert,
                                                                           tmp_path, monkeypatch, capsys):
    from tiny_causal import save_causal  # tests/helpers (pytest pythonpath)

    bert = make_tiny_bert("bert-mlm", mlm=True)
    out = tmp_path / "o"
    flags = ["probe", "--data", str(medlama_tiny), "--config", "full", "--method", "causal-likelihood",
             "--out", str(out)]
    ranked = RankCalls(monkeypatch, CausalLikelihoodProber)
    capsys.readouterr()
    assert main([*flags, "--model", str(tiny_gpt2), str(bert)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("medlama: error: ") and str(bert) in err and "encoder-only" in err
    assert ranked.count == 0  # the GPT-2 before it was not ranked
    assert not out.exists() and not work_folder(out).exists()

    # the corrected command into the same --out runs (it is not "a run with other settings")
    other = save_causal(tmp_path / "gpt2-b", "gpt2", seed=1)
    assert main([*flags, "--model", str(tiny_gpt2), str(other)]) == 0
    assert ranked.count == 4 and json.loads((out / "results.json").read_text())


def test_a_model_the_learned_prompts_were_not_trained_for_is_refused_before_any_ranking(tmp_path, monkeypatch,
                                                                                      capsys):
    import medlama
    from tiny_facts import build_fact_folder, train_fact_model  # tests/helpers (pytest pythonpath)

    base, other = train_fact_model(tmp_path / "base", steps=0), train_fact_model(tmp_path / "other", steps=0, seed=1)
    data = build_fact_folder(tmp_path / "facts")
    medlama.optiprompt(base, data, tmp_path / "prompts", epochs=0, batch_size=4, decoding={"max_masks": 1})
    ranked = RankCalls(monkeypatch, MaskPredictProber)
    capsys.readouterr()
    status = main(["probe", "--dataset", "biolama", "--data", str(data), "--method", "mask-predict",
                   "--max-masks", "1", "--prompts", str(tmp_path / "prompts"), "--model", str(base), str(other),
                   "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert status == 2 and err.startswith("medlama: error: ") and "trained for another model" in err
    assert str(other) in err and ranked.count == 0
    assert not work_folder(tmp_path / "run").exists()


def test_a_run_stopped_by_an_error_does_not_refuse_a_rerun_with_other_settings(tiny_gpt2, medlama_tiny, tmp_path,
                                                                               monkeypatch, capsys):
    monkeypatch.setattr(sharding, "SHARD_QUERIES", 2)  # 4 + 2 queries: 3 shards
    flags = ["probe", "--data", str(medlama_tiny), "--config", "full", "--model", str(tiny_gpt2), "--method",
             "causal-likelihood"]
    out = tmp_path / "o"
    RankCalls(monkeypatch, CausalLikelihoodProber, stop_at=3, error=RuntimeError("CUDA out of memory"))
    with pytest.raises(RuntimeError, match="out of memory"):
        main([*flags, "--batch-size", "4", "--out", str(out)])
    assert len(shard_files(out)) == 2
    assert "out of memory" in json.loads((work_folder(out) / WORK_MARKER).read_text())["failed"]

    # the same command continues from the shards (an error is no reason to redo them) ...
    same = tmp_path / "same"
    RankCalls(monkeypatch, CausalLikelihoodProber, stop_at=3, error=RuntimeError("CUDA out of memory"))
    with pytest.raises(RuntimeError):
        main([*flags, "--batch-size", "4", "--out", str(same)])
    rest = RankCalls(monkeypatch, CausalLikelihoodProber)
    assert main([*flags, "--batch-size", "4", "--out", str(same)]) == 0
    assert "2 of 3 shards already done" in capsys.readouterr().err and rest.count == 1

    # ... and the corrected one (a smaller batch) starts over, said so, instead of being refused
    again = RankCalls(monkeypatch, CausalLikelihoodProber)
    assert main([*flags, "--batch-size", "2", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "starting over" in err and "out of memory" in err and again.count == 3
    assert not work_folder(out).exists() and (out / "results.json").is_file()


def test_an_interrupted_run_is_still_protected_and_continued(tiny_gpt2, medlama_tiny, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sharding, "SHARD_QUERIES", 2)
    flags = ["probe", "--data", str(medlama_tiny), "--config", "full", "--model", str(tiny_gpt2), "--method",
             "causal-likelihood", "--batch-size", "4", "--out", str(tmp_path / "o")]
    RankCalls(monkeypatch, CausalLikelihoodProber, stop_at=3, error=KeyboardInterrupt())
    assert main(flags) == 130 and len(shard_files(tmp_path / "o")) == 2
    assert "failed" not in json.loads((work_folder(tmp_path / "o") / WORK_MARKER).read_text())
    capsys.readouterr()
    assert main([*flags[:-2], "--reduction", "mean", "--out", str(tmp_path / "o")]) == 2
    assert "other settings" in capsys.readouterr().err and len(shard_files(tmp_path / "o")) == 2
    rest = RankCalls(monkeypatch, CausalLikelihoodProber)
    assert main(flags) == 0 and rest.count == 1
