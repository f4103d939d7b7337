"""``medlama ucm`` with a decoder-only causal LM: ``--method causal-likelihood`` and ``auto`` (which detects the
causal config) give the same records, whose ranks are the causal ranker's own, with cut inputs counted."""

from __future__ import annotations

import json

from medlama.cli import main
from medlama.datasets.context_variance import with_inputs
from medlama.probers.causal.prober import LikelihoodSettings
from medlama.ucm_eval.causal_ranker import CausalRanker
from medlama.ucm_eval.rankers import make_ranker
from medlama.ucm_eval.sets import load_sets

from tiny_causal import save_causal  # tests/helpers (pytest pythonpath)


def test_ucm_causal_likelihood_end_to_end(sets, tiny_mlm, tmp_path_factory, tmp_path, capsys):
    gpt2 = save_causal(tmp_path_factory.mktemp("ucm-tiny-gpt2"), "gpt2")
    common = ["ucm", "--sets", str(sets), "--model", str(gpt2), "--label", "gpt2", "--records",
              "--include-first-segment", "--batch-size", "8"]
    assert main([*common, "--method", "causal-likelihood", "--reduction", "mean", "--out", str(tmp_path / "a")]) == 0
    assert "gpt2: causal-likelihood ranker" in capsys.readouterr().out
    assert main([*common, "--reduction", "mean", "--out", str(tmp_path / "b")]) == 0  # auto
    (explicit,), (auto,) = (json.loads((tmp_path / n / "results.json").read_text())["models"] for n in "ab")
    assert explicit["settings"]["method"] == auto["settings"]["method"] == "causal-likelihood"
    assert (explicit["settings"]["reduction"], explicit["settings"]["batch_size"]) == ("mean", 8)
    records = [json.loads(line) for line in (tmp_path / "a" / "records.jsonl").read_text().splitlines()]
    assert records == [json.loads(line) for line in (tmp_path / "b" / "records.jsonl").read_text().splitlines()]
    from datasets import concatenate_datasets, load_dataset

    rows = concatenate_datasets([load_dataset(str(sets), s, split="test") for s in ("ehr", "pmc")])
    assert explicit["num_sequences"] == len(rows)
    # every record is kept or counted as cut (the tiny model has 64 positions)
    assert explicit["num_records"] + explicit["num_records_truncated"] == sum(len(i) - 1 for i in rows.with_transform(with_inputs)[:]["inputs"])
    assert len(records) == explicit["num_records"]
    assert make_ranker("auto", tiny_mlm).settings()["method"] == "mask-predict"  # a masked LM: the paper's decoding

    # kept and cut records as the causal ranker sees the inputs (both inputs of a record whole, or cut)
    ranker = CausalRanker(gpt2, LikelihoodSettings(reduction="mean"))
    selected = load_sets(sets)
    kept = cut = 0
    for inputs, pool_id, names in zip(selected.rows.with_transform(with_inputs)[:]["inputs"], selected.rows["pool_id"],
                                      selected.rows["correct_names"]):
        pool = list(selected.pools[pool_id][1]) + [n for n in names if n not in selected.pools[pool_id][1]]
        whole = ranker.whole(inputs, pool)
        for k in range(1, len(inputs)):
            kept, cut = (kept + 1, cut) if whole[k - 1] and whole[k] else (kept, cut + 1)
    assert kept and cut and (explicit["num_records"], explicit["num_records_truncated"]) == (kept, cut)
